/**
 * How a reduction over some dims of a strided tensor maps onto the generated kernels (pure, CPU-tested). The tensor
 * is viewed with its kept dims first and the reduced dims last; then
 * - rows: the reduced dims are one contiguous run and the kept dims one stride apart -> the row kernel, in place;
 * - columns: the reduced dims collapse to one strided dim and the kept dims to [outer, inner] with inner contiguous ->
 *   the column kernel, in place (a mean over a middle dim reads coalesced across inner);
 * - copy: anything else is copied contiguous (kept dims first) and reduced as rows.
 * Also the launch shape of a row kernel: a warp a row for short rows, a block a row (about 4 vectors a thread) for long.
 */
import { coalesce } from '../strided.js';

export type ReducePlan =
  | { readonly kind: 'rows'; readonly rows: number; readonly D: number; readonly rowStride: number }
  | { readonly kind: 'columns'; readonly outer: number; readonly R: number; readonly inner: number; readonly sOuter: number; readonly sR: number }
  | { readonly kind: 'copy'; readonly rows: number; readonly D: number };

const prod = (xs: readonly number[]) => xs.reduce((a, b) => a * b, 1);

/** dims: the reduced dims, sorted, unique. */
export function planReduce(shape: readonly number[], strides: readonly number[], dims: readonly number[]): ReducePlan {
  const kept = shape.map((_, d) => d).filter((d) => !dims.includes(d));
  const keptShape = kept.map((d) => shape[d]!);
  const redShape = dims.map((d) => shape[d]!);
  const rows = prod(keptShape);
  const D = prod(redShape);
  const red = coalesce(redShape, [dims.map((d) => strides[d]!)]);
  const keep = coalesce(keptShape, [kept.map((d) => strides[d]!)]);
  const redOne = red.shape.length === 1;
  if (redOne && (red.strides[0]![0] === 1 || D === 1) && keep.shape.length === 1) {
    return { kind: 'rows', rows, D, rowStride: rows === 1 ? D : keep.strides[0]![0]! };
  }
  if (redOne && D > 1) {
    const ks = keep.shape;
    const kst = keep.strides[0]!;
    if (ks.length === 1 && kst[0] === 1) return { kind: 'columns', outer: 1, R: D, inner: ks[0]!, sOuter: 0, sR: red.strides[0]![0]! };
    if (ks.length === 2 && kst[1] === 1) return { kind: 'columns', outer: ks[0]!, R: D, inner: ks[1]!, sOuter: kst[0]!, sR: red.strides[0]![0]! };
  }
  return { kind: 'copy', rows, D };
}

export interface RowLaunch {
  readonly vec: number;
  readonly tpr: number;
  readonly block: number;
  readonly grid: number;
}

/** Widest vector <= 16 bytes dividing D, the row stride and the pointers' alignment. */
export function rowVec(itemsize: number, D: number, rowStride: number, ptrs: readonly number[]): number {
  let v = Math.max(1, 16 / itemsize);
  while (v > 1 && (D % v !== 0 || rowStride % v !== 0 || ptrs.some((p) => p % (v * itemsize) !== 0))) v >>= 1;
  return v;
}

/** Threads a row and block size for rows of nv vectors; rows per block = block / tpr. */
export function rowLaunch(rows: number, nv: number, vec: number, sms: number, vectorsPerThread = 4): RowLaunch {
  const tpr = nv <= 32 * vectorsPerThread ? 32 : Math.min(1024, Math.ceil(nv / vectorsPerThread / 32) * 32);
  const block = tpr === 32 ? 256 : tpr;
  const rpb = block / tpr;
  return { vec, tpr, block, grid: Math.max(1, Math.min(Math.ceil(rows / rpb), sms * 64)) };
}

/**
 * Stage-1 pieces a row is cut into when there are too few rows to fill the device (a full reduction, a loss): each
 * row's D contiguous elements become S rows of D / S reduced into partials, then the S partials of each row are
 * reduced again. 1 when the rows fill the device, are short, or are not contiguous.
 */
export function splitRows(rows: number, D: number, rowStride: number, sms: number): number {
  if (rows >= sms || (rowStride !== D && rows > 1)) return 1;
  let best = 1;
  for (let S = 2; S <= 1024; S *= 2) {
    if (D % S !== 0 || D / S < 8192 || rows * S > 4 * sms) break;
    best = S;
  }
  return best;
}
