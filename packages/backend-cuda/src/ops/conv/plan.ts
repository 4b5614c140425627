/**
 * Pure planning of a conv call (CPU-tested in plan.test.ts): its geometry as a 3-d problem (conv1d / conv2d are conv3d
 * with unit leading dims), the memory format PyTorch's cuDNN path would use, the strides the kernels read, and whether
 * cuDNN can take it. One ConvGeometry is reused for every call of a backend (numbers and fixed-size arrays, no per-call
 * allocation); nothing here touches CUDA.
 */
import { stridesLikeChannelsLast } from '@fastkernels/core';

export type Nd = 1 | 2 | 3;
/** 'channels_last': C is the innermost dim (NHWC / NDHWC in memory), the layout PyTorch's channels_last models use. */
export type ConvFormat = 'contiguous' | 'channels_last';
type IntOrTuple = number | readonly number[];

export interface ConvAttrsIn {
  readonly stride: IntOrTuple;
  readonly padding: IntOrTuple | 'same' | 'valid';
  readonly dilation: IntOrTuple;
  readonly groups: number;
}

export class ConvGeometry {
  nd: Nd = 2;
  transposed = false;
  batched = true;
  N = 1;
  /** Input channels (of x) and output channels (of y), both totals over the groups. */
  C = 1;
  K = 1;
  G = 1;
  /** Spatial sizes as (d, h, w): 1 for the dims conv1d / conv2d lack. */
  readonly in = new Int32Array(3);
  readonly out = new Int32Array(3);
  readonly k = new Int32Array(3);
  readonly stride = new Int32Array(3);
  /** Leading padding per dim, and the trailing one ('same' with an odd total pads one more at the end, as torch). */
  readonly pad = new Int32Array(3);
  readonly padEnd = new Int32Array(3);
  readonly dil = new Int32Array(3);

  /** Output pixels N x OD x OH x OW: the rows of the implicit GEMM. */
  get pixels(): number {
    return this.N * this.out[0]! * this.out[1]! * this.out[2]!;
  }
}

function at(v: IntOrTuple, i: number): number {
  return typeof v === 'number' ? v : v[i]!;
}

/**
 * Fill `g` for conv{nd}d (weight [K, C / G, *k]) or conv_transpose{nd}d (weight [C, K / G, *k]) of x [N, C, *sp] or
 * unbatched [C, *sp], given the output shape core inferred. Attrs are validated by core already.
 */
export function fillGeometry(g: ConvGeometry, nd: Nd, transposed: boolean, xShape: readonly number[], wShape: readonly number[], outShape: readonly number[], a: ConvAttrsIn): ConvGeometry {
  g.nd = nd;
  g.transposed = transposed;
  g.batched = xShape.length === nd + 2;
  const b = g.batched ? 1 : 0;
  g.N = g.batched ? xShape[0]! : 1;
  g.C = xShape[b]!;
  g.K = outShape[b]!;
  g.G = a.groups;
  const lead = 3 - nd;
  for (let i = 0; i < 3; i++) {
    const j = i - lead; // index into the op's own spatial dims (negative: a unit leading dim)
    const own = j >= 0;
    g.in[i] = own ? xShape[b + 1 + j]! : 1;
    g.out[i] = own ? outShape[b + 1 + j]! : 1;
    g.k[i] = own ? wShape[2 + j]! : 1;
    g.stride[i] = own ? at(a.stride, j) : 1;
    g.dil[i] = own ? at(a.dilation, j) : 1;
    let p0 = 0;
    let p1 = 0;
    if (own) {
      if (a.padding === 'same') {
        const total = g.dil[i]! * (g.k[i]! - 1);
        p0 = Math.floor(total / 2);
        p1 = total - p0;
      } else if (a.padding !== 'valid') p0 = p1 = at(a.padding, j);
    }
    g.pad[i] = p0;
    g.padEnd[i] = p1;
  }
  return g;
}

/** Whether [N, C, *sp] strides are channels-last (C innermost, then w, h, d, n), ignoring unit dims as torch does. */
export function isChannelsLast(shape: readonly number[], strides: readonly number[]): boolean {
  const r = shape.length;
  if (r !== 4 && r !== 5) return false;
  let expect = 1;
  for (const d of [1, ...Array.from({ length: r - 2 }, (_, i) => r - 1 - i), 0]) {
    if (shape[d]! !== 1 && strides[d]! !== expect) return false;
    expect *= shape[d]!;
  }
  return true;
}

export function isContiguous(shape: readonly number[], strides: readonly number[]): boolean {
  let expect = 1;
  for (let d = shape.length - 1; d >= 0; d--) {
    if (shape[d]! !== 1 && strides[d]! !== expect) return false;
    expect *= shape[d]!;
  }
  return true;
}

/**
 * The memory format of the output and of what cuDNN is given, as PyTorch's cudnn_conv_suggest_memory_format picks it:
 * channels-last when the batched 2-d / 3-d input's or the weight's suggest_memory_format is (strides ordered
 * channels-last and not plainly contiguous; a channel slice of a channels-last tensor, as C2f's split gives the
 * bottlenecks, counts: it is then packed for cuDNN as torch packs it, rather than taking the NCHW path), else
 * contiguous. conv1d and unbatched inputs are always contiguous.
 */
export function convFormat(nd: Nd, batched: boolean, x: { shape: readonly number[]; strides: readonly number[] }, w: { shape: readonly number[]; strides: readonly number[] }): ConvFormat {
  if (nd === 1 || !batched) return 'contiguous';
  const cl = (t: { shape: readonly number[]; strides: readonly number[] }) => !isContiguous(t.shape, t.strides) && stridesLikeChannelsLast(t.shape, t.strides);
  return cl(x) || cl(w) ? 'channels_last' : 'contiguous';
}

const TO_CL: Readonly<Record<number, readonly number[]>> = { 3: [0, 2, 1], 4: [0, 2, 3, 1], 5: [0, 2, 3, 4, 1] };
const FROM_CL: Readonly<Record<number, readonly number[]>> = { 3: [0, 2, 1], 4: [0, 3, 1, 2], 5: [0, 4, 1, 2, 3] };
/** The permutation from [N, C, *sp] to its channels-last memory order [N, *sp, C], and back (rank 3 to 5). */
export function toChannelsLastOrder(rank: number): readonly number[] {
  return TO_CL[rank]!;
}
export function fromChannelsLastOrder(rank: number): readonly number[] {
  return FROM_CL[rank]!;
}

/**
 * Strides (n, c, d, h, w) in elements of a tensor of the op's own rank, into `out` (5 entries): the unit dims conv1d /
 * conv2d lack get the stride a packed tensor would have there (cuDNN checks packedness on them); an unbatched tensor's
 * n stride is its element count.
 */
export function strides5(out: Float64Array | number[], offset: number, nd: Nd, batched: boolean, shape: readonly number[], strides: readonly number[]): void {
  const b = batched ? 1 : 0;
  const sc = strides[b]!;
  out[offset + 1] = sc;
  // spatial strides w, h, d from the innermost outwards; a missing dim repeats the extent of the dim inside it
  let inner = strides[shape.length - 1]! * shape[shape.length - 1]!;
  for (let i = 2; i >= 0; i--) {
    const j = i - (3 - nd);
    if (j >= 0) {
      const d = b + 1 + j;
      out[offset + 2 + i] = strides[d]!;
      inner = strides[d]! * shape[d]!;
    } else out[offset + 2 + i] = inner;
  }
  let numel = 1;
  for (const s of shape) numel *= s;
  out[offset] = batched ? strides[0]! : Math.max(numel, 1);
}

const INT32_MAX = 2 ** 31 - 1;

/** Why cuDNN cannot take this geometry (true when it can): its descriptors hold int dims and symmetric padding. */
export function cudnnEligible(g: ConvGeometry, xNumel: number, wNumel: number, yNumel: number): true | string {
  for (let i = 0; i < 3; i++) if (g.pad[i] !== g.padEnd[i]) return 'asymmetric padding (padding="same" with an even kernel extent)';
  if (xNumel > INT32_MAX || wNumel > INT32_MAX || yNumel > INT32_MAX) return 'a tensor of 2^31 elements or more';
  return true;
}

/** Why the fallback kernel cannot take this geometry (true when it can): its grid and 32-bit pixel index. */
export function fallbackEligible(g: ConvGeometry): true | string {
  if (g.pixels > INT32_MAX) return `${g.pixels} output pixels (the fallback indexes them in 32 bits)`;
  if (g.G > 65535) return `${g.G} groups (a grid dim a group, at most 65535)`;
  if (Math.ceil(g.K / g.G / 64) > 65535) return 'too many output channels a group';
  return true;
}
