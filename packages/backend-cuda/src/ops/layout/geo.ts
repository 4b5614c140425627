/**
 * The by-value geometry struct of the layout kernels: `struct FkGeo { long long v[NI]; double f[NF]; }` (sizes,
 * strides, pads; scales), written little-endian into a Uint8Array kept with the kernel, so a launch allocates nothing.
 * Layout ops take up to MAX_LAYOUT_RANK dims (PyTorch tensors in practice have fewer).
 */
import type { StructArgType } from '../../args.js';

export const MAX_LAYOUT_RANK = 8;

export class Geo {
  readonly bytes: Uint8Array;
  readonly type: StructArgType;
  private readonly view: DataView;

  constructor(
    readonly ni: number,
    readonly nf = 0,
  ) {
    this.bytes = new Uint8Array(8 * (ni + nf));
    this.view = new DataView(this.bytes.buffer);
    this.type = { struct: this.bytes.byteLength, align: 8 };
  }

  /** v[k] = x (an integer below 2^53 in magnitude; two's complement halves, no BigInt). */
  i(k: number, x: number): void {
    const hi = Math.floor(x / 4294967296);
    this.view.setUint32(8 * k, (x - hi * 4294967296) >>> 0, true);
    this.view.setInt32(8 * k + 4, hi, true);
  }

  /** f[k] = x */
  f(k: number, x: number): void {
    this.view.setFloat64(8 * (this.ni + k), x, true);
  }
}

/** The CUDA declaration of a Geo of ni / nf slots. */
export function geoStruct(ni: number, nf = 0): string {
  return `struct FkGeo { long long v[${ni}];${nf > 0 ? ` double f[${nf}];` : ''} };`;
}

/** Unsigned integer type moving `itemsize` bytes (the layout kernels that only move values are dtype-blind). */
export function bitsType(itemsize: number): string {
  const t = { 1: 'unsigned char', 2: 'unsigned short', 4: 'unsigned int', 8: 'unsigned long long' }[itemsize];
  if (!t) throw new RangeError(`no ${itemsize}-byte element type`);
  return t;
}

/**
 * Device lines that split linear position `p` of a row-major shape held in v[sizeAt .. sizeAt + R) into coordinates,
 * accumulating `Σ c_d * v[strideAt_k + d]` into each named offset (`offs[k]`, declared long long = 0 by the caller).
 * The loop is unrolled (R compile-time), so the struct is read with constant indices.
 */
export function unravelLines(R: number, sizeAt: number, offs: readonly [string, number][], indent = '    ', coord?: (d: number) => string): string[] {
  const lines = [`${indent}long long rem = p;`];
  for (let d = R - 1; d >= 0; d--) {
    lines.push(`${indent}{ const long long c = rem % g.v[${sizeAt + d}]; rem /= g.v[${sizeAt + d}];${coord ? ` ${coord(d)}` : ''}`);
    for (const [name, at] of offs) lines.push(`${indent}  ${name} += c * g.v[${at + d}];`);
    lines.push(`${indent}}`);
  }
  return lines;
}
