/**
 * Which class of generated elementwise kernel a call takes, and its geometry (pure, CPU-tested):
 * - contig: the output and every input contiguous over the same elements (an input may differ by size-1 dims), with
 *   the widest vector every pointer is aligned to;
 * - strided: dims coalesced (size-1 dims dropped, dims contiguous in every operand merged), then vectors along the
 *   innermost dim where the output is contiguous in it, every input is contiguous in it or broadcast along it, and
 *   sizes, strides and pointers line up on the vector.
 */
import { broadcastStrides, coalesce } from '../strided.js';
import { MAX_EW_RANK, maxVec, type EwClass } from './elementwise-source.js';
import type { GenDType } from './ctypes.js';
import { GEN_ITEMSIZE } from './ctypes.js';

export interface EwOperand {
  readonly shape: readonly number[];
  readonly strides: readonly number[];
  /** Byte address of the first element (only its alignment matters here). */
  readonly ptr: number;
  readonly dtype: GenDType;
}

export type EwPlan =
  | { readonly cls: Extract<EwClass, { kind: 'contig' }>; readonly n: number }
  | {
      readonly cls: Extract<EwClass, { kind: 'strided' }>;
      /** Positions the kernel walks (elements / vec). */
      readonly n: number;
      /** Coalesced sizes, the innermost in vectors. */
      readonly sizes: readonly number[];
      /** Element strides per operand (output first), the innermost scaled by vec. */
      readonly strides: readonly (readonly number[])[];
    };

/** Contiguous over its own shape (size-1 dims ignored): the layout numel elements in a row have. */
export function denseLayout(shape: readonly number[], strides: readonly number[]): boolean {
  let expect = 1;
  for (let d = shape.length - 1; d >= 0; d--) {
    const n = shape[d]!;
    if (n === 1) continue;
    if (strides[d] !== expect) return false;
    expect *= n;
  }
  return true;
}

function numelOf(shape: readonly number[]): number {
  let n = 1;
  for (const s of shape) n *= s;
  return n;
}

/** The widest vector (elements) <= `start` that every pointer is aligned to. */
function alignedVec(start: number, ops: readonly EwOperand[]): number {
  let v = start;
  while (v > 1 && ops.some((o) => o.ptr % (v * GEN_ITEMSIZE[o.dtype]) !== 0)) v >>= 1;
  return v;
}

/** Whether the contiguous class applies (no allocation: the launch path asks this every call). */
export function contigClass(out: EwOperand, ins: readonly EwOperand[]): boolean {
  if (!denseLayout(out.shape, out.strides)) return false;
  const n = numelOf(out.shape);
  for (const x of ins) if (numelOf(x.shape) !== n || !denseLayout(x.shape, x.strides)) return false;
  return true;
}

export function planElementwise(out: EwOperand, ins: readonly EwOperand[]): EwPlan {
  const all = [out, ...ins];
  const widest = maxVec(all.map((o) => o.dtype));
  const n = numelOf(out.shape);
  if (contigClass(out, ins)) return { cls: { kind: 'contig', vec: alignedVec(widest, all) }, n };

  const c = coalesce(out.shape, [out.strides, ...ins.map((x) => broadcastStrides(x.shape, x.strides, out.shape))]);
  const R = c.shape.length;
  if (R > MAX_EW_RANK) throw new RangeError(`elementwise: rank ${R} after coalescing exceeds the generated kernels' limit of ${MAX_EW_RANK}`);
  const inner = c.shape[R - 1]!;
  const innerContig = ins.map((_, k) => c.strides[k + 1]![R - 1] !== 0);
  let vec = 1;
  const innerOk = c.strides[0]![R - 1] === 1 && ins.every((_, k) => c.strides[k + 1]![R - 1] === 0 || c.strides[k + 1]![R - 1] === 1);
  if (innerOk) {
    const vectorOps = all.filter((_, k) => k === 0 || innerContig[k - 1]);
    vec = alignedVec(widest, vectorOps);
    const outerOk = (v: number) => inner % v === 0 && c.strides.every((s, k) => (k > 0 && !innerContig[k - 1]) || s.every((x, d) => d === R - 1 || x % v === 0));
    while (vec > 1 && !outerOk(vec)) vec >>= 1;
  }
  const sizes = c.shape.map((s, d) => (d === R - 1 ? s / vec : s));
  const strides = c.strides.map((s) => s.map((x, d) => (d === R - 1 ? x * vec : x)));
  const positions = n / vec;
  // 32-bit index math when positions (plus a grid stride) and every operand's largest offset fit
  const maxOffset = Math.max(...strides.map((s) => s.reduce((acc, x, d) => acc + Math.abs(x) * (sizes[d]! - 1), 0)));
  const index = positions + 2 ** 24 < 2 ** 31 && maxOffset + 16 < 2 ** 31 ? 'i32' : 'i64';
  return { cls: { kind: 'strided', rank: R, vec, innerContig: vec > 1 ? innerContig : ins.map(() => true), index }, n: positions, sizes, strides };
}

/** Write the strided geometry struct (sizes, then strides per operand) into `out` (reused between launches). */
export function encodeGeometry(out: Uint8Array, sizes: readonly number[], strides: readonly (readonly number[])[], index: 'i32' | 'i64'): Uint8Array {
  const v = new DataView(out.buffer, out.byteOffset, out.byteLength);
  const w = index === 'i32' ? 4 : 8;
  const put = (slot: number, x: number) => {
    if (w === 4) v.setInt32(slot * 4, x, true);
    else {
      const hi = Math.floor(x / 4294967296); // two's complement halves, no BigInt
      v.setUint32(slot * 8, (x - hi * 4294967296) >>> 0, true);
      v.setInt32(slot * 8 + 4, hi, true);
    }
  };
  const R = sizes.length;
  sizes.forEach((s, d) => put(d, s));
  strides.forEach((s, k) => s.forEach((x, d) => put(R * (k + 1) + d, x)));
  return out;
}
