/**
 * Kernel argument packing. Arguments are written into one reusable staging buffer shared with the
 * addon (layout in native/addon.cc): a 64-byte header (function, stream, grid, block, shared bytes,
 * argument count), a table of argument offsets, then the argument bytes, each at its natural
 * alignment as the CUDA ABI lays kernel parameters out. `launch()` is then one N-API call with no
 * arguments and no allocation.
 */

export type ScalarArgType = 'ptr' | 'i32' | 'u32' | 'i64' | 'u64' | 'f32' | 'f64' | 'i16' | 'u16' | 'i8' | 'u8';
/** A by-value struct: its size and alignment in bytes (values are Uint8Arrays of that size). */
export interface StructArgType {
  readonly struct: number;
  readonly align: number;
}
export type ArgType = ScalarArgType | StructArgType;

/**
 * A CUtensorMap by value (kernels/fk_tma.cuh FkTensorMap: 128 bytes, alignas(64)), the __grid_constant__ parameter of
 * the TMA kernels: placed at a multiple of 64 in the argument area, as the kernel's parameter layout has it (the argument
 * area itself starts at ARG_BASE, a multiple of 64). Values: the bytes from tensor-map.ts.
 */
export const TENSOR_MAP_ARG: StructArgType = { struct: 128, align: 64 };

const SCALAR_SIZE: Readonly<Record<ScalarArgType, number>> = { ptr: 8, i64: 8, u64: 8, f64: 8, i32: 4, u32: 4, f32: 4, i16: 2, u16: 2, i8: 1, u8: 1 };

export function argSize(t: ArgType): number {
  return typeof t === 'string' ? SCALAR_SIZE[t] : t.struct;
}
export function argAlign(t: ArgType): number {
  return typeof t === 'string' ? SCALAR_SIZE[t] : t.align;
}

export interface ArgLayout {
  readonly types: readonly ArgType[];
  /** Byte offset of each argument in the argument area. */
  readonly offsets: Uint32Array;
  /** Total bytes of the argument area. */
  readonly size: number;
}

/** Offsets of each argument, each aligned to its own alignment (the CUDA kernel-parameter ABI). */
export function layoutArgs(types: readonly ArgType[]): ArgLayout {
  const offsets = new Uint32Array(types.length);
  let off = 0;
  types.forEach((t, i) => {
    const a = argAlign(t);
    if (!Number.isInteger(a) || a <= 0 || (a & (a - 1)) !== 0) throw new RangeError(`argument ${i}: alignment ${a} is not a power of two`);
    off = Math.ceil(off / a) * a;
    offsets[i] = off;
    off += argSize(t);
  });
  return { types, offsets, size: off };
}

/** A device pointer argument: a number, anything with a device address, or a tensor (storage + element offset). */
export interface HasDevicePtr {
  readonly devicePtr: number;
}
export interface TensorLike {
  readonly storage: { readonly devicePtr?: number };
  readonly offset: number;
  readonly itemsize: number;
}
export type ArgValue = number | bigint | Uint8Array | HasDevicePtr | TensorLike;

/** The device address of a pointer argument. */
export function addressOf(v: ArgValue): number | undefined {
  if (typeof v === 'number') return v;
  if (typeof v !== 'object' || v === null) return undefined;
  if ('devicePtr' in v && typeof v.devicePtr === 'number') return v.devicePtr;
  if ('storage' in v && typeof v.storage?.devicePtr === 'number') return v.storage.devicePtr + v.offset * v.itemsize;
  return undefined;
}

export const HEADER_BYTES = 64;
/**
 * Launch flag: programmatic dependent launch (sm_90+). The kernel may start while the previous kernel on the stream
 * is still running (once that kernel's blocks have all executed griddepcontrol.launch_dependents, or ended); it must
 * execute griddepcontrol.wait before it reads anything that kernel wrote, or writes anything it reads.
 */
export const LAUNCH_PDL = 1;
export const MAX_ARGS = 256;
export const ARG_BASE = HEADER_BYTES + 4 * MAX_ARGS;
export const MAX_ARG_BYTES = 32764; // CUDA 12.1+ limit on kernel parameter bytes (Volta and newer)

/** The staging buffer and typed views over it. One per process (one JS thread). */
export class LaunchBuffer {
  readonly buffer = new ArrayBuffer(ARG_BASE + MAX_ARG_BYTES + 4);
  readonly f64 = new Float64Array(this.buffer, 0, 2);
  readonly u32 = new Uint32Array(this.buffer, 16, 8);
  /** Launch flags (byte 48): bit 0 = programmatic dependent launch (LAUNCH_PDL). */
  readonly flags = new Uint32Array(this.buffer, 48, 1);
  readonly offsets = new Uint32Array(this.buffer, HEADER_BYTES, MAX_ARGS);
  readonly view = new DataView(this.buffer, ARG_BASE);
  readonly bytes = new Uint8Array(this.buffer, ARG_BASE);
  private lastLayout: ArgLayout | undefined;

  /** Write one launch: the header and every argument. */
  packDims(func: number, stream: number, g0: number, g1: number, g2: number, b0: number, b1: number, b2: number, sharedBytes: number, layout: ArgLayout, values: readonly ArgValue[], flags = 0): void {
    const n = layout.types.length;
    if (values.length !== n) throw new RangeError(`kernel expects ${n} arguments, got ${values.length}`);
    this.f64[0] = func;
    this.f64[1] = stream;
    const u = this.u32;
    u[0] = g0;
    u[1] = g1;
    u[2] = g2;
    u[3] = b0;
    u[4] = b1;
    u[5] = b2;
    u[6] = sharedBytes;
    u[7] = n;
    this.flags[0] = flags;
    if (this.lastLayout !== layout) {
      if (n > MAX_ARGS) throw new RangeError(`at most ${MAX_ARGS} kernel arguments`);
      if (layout.size > MAX_ARG_BYTES) throw new RangeError(`kernel arguments take ${layout.size} bytes, the limit is ${MAX_ARG_BYTES}`);
      this.offsets.set(layout.offsets);
      this.lastLayout = layout;
    }
    writeArgs(this.view, this.bytes, layout, values);
  }
}

/** Write argument values at their offsets (little-endian). Exported for tests. */
export function writeArgs(view: DataView, bytes: Uint8Array, layout: ArgLayout, values: readonly ArgValue[]): void {
  const { types, offsets } = layout;
  for (let i = 0; i < types.length; i++) {
    const t = types[i]!;
    const o = offsets[i]!;
    const v = values[i]!;
    switch (t) {
      case 'ptr':
      case 'u64':
      case 'i64': {
        if (typeof v === 'bigint') {
          view.setBigUint64(o, BigInt.asUintN(64, v), true);
          break;
        }
        const x = addressOf(v);
        if (x === undefined) throw new TypeError(`argument ${i} (${t}): expected a number${t === 'ptr' ? ' or a tensor' : ''}, got ${describe(v)}`);
        // Exact for |x| < 2^53 (every address and size we pass); negative i64 in two's complement.
        const hi = Math.floor(x / 4294967296);
        view.setUint32(o, (x - hi * 4294967296) >>> 0, true);
        view.setUint32(o + 4, hi >>> 0, true);
        break;
      }
      case 'i32':
        view.setInt32(o, num(v, i, t), true);
        break;
      case 'u32':
        view.setUint32(o, num(v, i, t), true);
        break;
      case 'f32':
        view.setFloat32(o, num(v, i, t), true);
        break;
      case 'f64':
        view.setFloat64(o, num(v, i, t), true);
        break;
      case 'i16':
        view.setInt16(o, num(v, i, t), true);
        break;
      case 'u16':
        view.setUint16(o, num(v, i, t), true);
        break;
      case 'i8':
        view.setInt8(o, num(v, i, t));
        break;
      case 'u8':
        view.setUint8(o, num(v, i, t));
        break;
      default: {
        if (!(v instanceof Uint8Array) || v.byteLength !== t.struct) throw new TypeError(`argument ${i}: expected a Uint8Array of ${t.struct} bytes (by-value struct), got ${describe(v)}`);
        bytes.set(v, o);
      }
    }
  }
}

function num(v: ArgValue, i: number, t: string): number {
  if (typeof v !== 'number') throw new TypeError(`argument ${i} (${t}): expected a number, got ${describe(v)}`);
  return v;
}
function describe(v: unknown): string {
  return v === null ? 'null' : typeof v === 'object' ? (v.constructor?.name ?? 'object') : typeof v;
}

/**
 * Parse the parameter list of an `extern "C" __global__` entry to argument types, so candidates can
 * call `cudaKernel({ source, entry })` without spelling a signature. Pointers become 'ptr'; the common
 * scalar spellings map to their types; anything else (a struct by value) needs an explicit signature. A parameter
 * declared under a preprocessor condition counts in every build (attention's FK_SINKS pointer).
 */
export function parseSignature(source: string, entry: string): ArgType[] {
  // comments and preprocessor lines dropped: a parameter under `#if` (declared in some builds only) is in the signature
  // of every build, and the launcher always passes it (the driver reads only the parameters the compiled kernel has)
  const clean = source.replace(/\/\*[\s\S]*?\*\//g, ' ').replace(/\/\/.*$/gm, ' ').replace(/^[ \t]*#.*$/gm, ' ');
  const re = new RegExp(`__global__[^;{]*?\\b${entry.replace(/[$]/g, '\\$')}\\s*\\(([^)]*)\\)`, 'm');
  const m = re.exec(clean);
  if (!m) throw new Error(`cannot find the __global__ entry '${entry}' in the source to infer its signature: pass signature explicitly`);
  const params = m[1]!.trim();
  if (params === '' || params === 'void') return [];
  return params.split(',').map((p, i) => {
    const s = p.replace(/\b(const|volatile|__restrict__|__restrict|restrict)\b/g, ' ').replace(/__grid_constant__/g, ' ').replace(/\s+/g, ' ').trim();
    if (s.includes('*')) return 'ptr';
    const type = s.replace(/\s+[A-Za-z_]\w*$/, '').trim(); // drop the parameter name
    const st = STRUCT_SPELLINGS[type];
    if (st) return st;
    const t = SCALAR_SPELLINGS[type];
    if (!t) throw new Error(`parameter ${i} of '${entry}' has type '${type}', which cannot be inferred: pass signature explicitly (e.g. { struct: 48, align: 8 })`);
    return t;
  });
}

/** By-value structs the kernels declare (their size and alignment known here). */
const STRUCT_SPELLINGS: Readonly<Record<string, StructArgType>> = { FkTensorMap: TENSOR_MAP_ARG };

const SCALAR_SPELLINGS: Readonly<Record<string, ScalarArgType>> = {
  int: 'i32', int32_t: 'i32', 'signed int': 'i32', unsigned: 'u32', 'unsigned int': 'u32', uint32_t: 'u32',
  'long long': 'i64', 'long long int': 'i64', int64_t: 'i64', long: 'i64', ptrdiff_t: 'i64',
  'unsigned long long': 'u64', 'unsigned long': 'u64', uint64_t: 'u64', size_t: 'u64',
  float: 'f32', double: 'f64', short: 'i16', int16_t: 'i16', 'unsigned short': 'u16', uint16_t: 'u16',
  __half: 'u16', half: 'u16', __nv_bfloat16: 'u16', char: 'i8', int8_t: 'i8', 'signed char': 'i8',
  'unsigned char': 'u8', uint8_t: 'u8', bool: 'u8',
};
