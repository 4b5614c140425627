/**
 * Which class of generated elementwise kernel a call takes, and its geometry (pure, CPU-tested):
 * - contig: the output and every input contiguous over the same elements (an input may differ by size-1 dims), or
 *   all in one dense permuted layout (channels-last), with the widest vector every pointer is aligned to;
 * - strided: dims coalesced (size-1 dims dropped, dims contiguous in every operand merged), then vectors along the
 *   innermost dim where the output is contiguous in it, every input is contiguous in it or broadcast along it, and
 *   sizes, strides and pointers line up on the vector.
 */
import { CHANNELS_LAST_ORDER, stridesLikeChannelsLast } from '@fastkernels/core';
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

/**
 * The order of the dims in memory, outermost first, when the tensor is non-overlapping and dense (its elements fill
 * numel consecutive slots in some order of its dims: row-major, channels-last, any permutation); null otherwise.
 * Size-1 dims come first (their strides are arbitrary).
 */
export function denseMemoryOrder(shape: readonly number[], strides: readonly number[]): number[] | null {
  const unit: number[] = [];
  const dims: number[] = [];
  for (let d = 0; d < shape.length; d++) (shape[d] === 1 ? unit : dims).push(d);
  dims.sort((a, b) => strides[b]! - strides[a]! || a - b);
  let expect = 1;
  for (let i = dims.length - 1; i >= 0; i--) {
    const d = dims[i]!;
    if (strides[d] !== expect) return null;
    expect *= shape[d]!;
  }
  return [...unit, ...dims];
}

/**
 * The memory order of a fresh elementwise output (outermost first), as PyTorch lays it out for channels-last operands:
 * the first input of the output's shape decides, and a 4-d / 5-d one whose strides are channels-last (a conv output on
 * the channels-last path, or a channel slice of one: C2f's split) gives a channels-last output, so a conv net stays
 * channels-last through its activations and residual adds instead of falling back to NCHW at the first one. null:
 * plainly contiguous (a row-major first input, any other layout, or no input of that shape). TensorIterator would keep
 * any dense permutation; only channels-last is kept here, so a transposed view's elementwise result stays contiguous as
 * the ops around it expect.
 */
export function outputMemoryOrder(shape: readonly number[], ins: readonly { readonly shape: readonly number[]; readonly strides: readonly number[] }[]): readonly number[] | null {
  for (const x of ins) {
    if (x.shape.length !== shape.length || x.shape.some((s, d) => s !== shape[d])) continue;
    if (denseLayout(x.shape, x.strides)) return null; // the common case, nothing to work out
    return stridesLikeChannelsLast(x.shape, x.strides) ? CHANNELS_LAST_ORDER[shape.length]! : null;
  }
  return null;
}

/** Same shape and the same strides on every dim of size > 1: element i sits at the same offset in both. */
function sameLayout(a: EwOperand, b: EwOperand): boolean {
  if (a.shape.length !== b.shape.length) return false;
  for (let d = 0; d < a.shape.length; d++) if (a.shape[d] !== b.shape[d] || (a.shape[d] !== 1 && a.strides[d] !== b.strides[d])) return false;
  return true;
}

/**
 * Whether the contiguous class applies: every operand row-major dense over the same elements, or the output dense in
 * another order (channels-last) with every input in that same layout. The first test allocates nothing (the launch
 * path asks this every call); the second runs only for a permuted output.
 */
export function contigClass(out: EwOperand, ins: readonly EwOperand[]): boolean {
  if (!denseLayout(out.shape, out.strides)) {
    if (!denseMemoryOrder(out.shape, out.strides)) return false;
    for (const x of ins) if (!sameLayout(out, x)) return false;
    return true;
  }
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
