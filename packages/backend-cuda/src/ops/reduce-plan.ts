/**
 * How a reduction over some dims of a strided tensor maps onto the generated kernels (pure, CPU-tested). The tensor
 * is viewed with its kept dims first and the reduced dims last; then
 * - rows: the reduced dims are one contiguous run and the kept dims one stride apart -> the row kernel, in place;
 * - columns: the reduced dims collapse to one strided dim and the kept dims to [outer, inner] with inner contiguous ->
 *   the column kernel, in place (a mean over a middle dim reads coalesced across inner);
 * - copy: anything else is copied contiguous (kept dims first) and reduced as rows.
 * Also the launch shapes: a row kernel's (a warp a row for short rows, a block a row of about 4 vectors a thread for
 * long), and a column kernel's (planColumns: a tile of TX vectors along inner x TY rows along R a CTA, over outer x
 * inner; narrower tiles before R is cut across CTAs, so a mean over tokens or a global pool runs in one pass).
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

/** Widest vector of at most `most` elements and 16 bytes dividing every extent and the pointers' alignment. */
function widestVec(itemsize: number, extents: readonly number[], ptrs: readonly number[], most = 16): number {
  let v = Math.max(1, Math.min(most, 16 / itemsize));
  while (v > 1 && (extents.some((e) => e % v !== 0) || ptrs.some((p) => p % (v * itemsize) !== 0))) v >>= 1;
  return v;
}

/** Widest vector <= 16 bytes dividing D, the row stride and the pointers' alignment. */
export function rowVec(itemsize: number, D: number, rowStride: number, ptrs: readonly number[]): number {
  return widestVec(itemsize, [D, rowStride], ptrs);
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

/**
 * Column kernel vector: the widest <= 16 bytes (and <= 8 elements: a thread keeps one accumulator an element, and the
 * CTA's partials sit in static shared memory) dividing inner, both strides and the pointers' alignment.
 */
export function columnVec(itemsize: number, inner: number, sOuter: number, sR: number, ptrs: readonly number[]): number {
  return widestVec(itemsize, [inner, sOuter, sR], ptrs, 8);
}

export interface ColumnLaunch {
  readonly vec: number;
  /** Threads along inner (consecutive vectors, coalesced) and along R (each walks every ty-th row). */
  readonly tx: number;
  readonly ty: number;
  /** tx * ty: 256, fewer only for tensors too small to fill it. */
  readonly block: number;
  /** Tiles of tx * vec inner elements a row of outer, and tiles in all (outer * colTiles). */
  readonly colTiles: number;
  readonly tiles: number;
  /** CTAs along x: the tiles, grid-strided past sms * 64. */
  readonly grid: number;
}

/**
 * Threads a column kernel's CTA is, and their tiles, for [outer, R, inner] with inner a multiple of vec: at most `widest`
 * threads along inner (a power of two; 32: a warp's 512-byte row segment), the rest of the CTA along R, but no more
 * rows than R has (a short R gives the threads back to inner). The tiles are outer x colTiles: every row of outer is
 * its own tiles, so the outer dim adds CTAs as inner does.
 */
export function columnLaunch(outer: number, R: number, inner: number, vec: number, sms: number, threads = 256, widest = 32): ColumnLaunch {
  const pow2 = (n: number) => 2 ** Math.ceil(Math.log2(Math.max(1, n)));
  const nv = inner / vec;
  const ty = Math.min(threads / Math.min(widest, pow2(nv)), pow2(R));
  const tx = Math.min(threads / ty, pow2(nv));
  const colTiles = Math.ceil(nv / tx);
  const tiles = outer * colTiles;
  return { vec, tx, ty, block: tx * ty, colTiles, tiles, grid: Math.max(1, Math.min(tiles, sms * 64)) };
}

/**
 * CTAs an SM the tiles must make for a pass that is not cut along R: 4 (256 threads each, 4 loads of up to 16 bytes in
 * flight a thread: 64 KB an SM).
 */
const FILL_PER_SM = 4;
/** Bytes a row segment of a tile keeps at least when tiles narrow: a whole 128-byte line, every sector of it used. */
const MIN_SEGMENT_BYTES = 128;

export interface ColumnSplit {
  /** Slices R is cut into (CTAs along y); 1: no split. */
  readonly S: number;
  /** Rows a slice (the last may have fewer). */
  readonly rChunk: number;
}

/**
 * R cut across CTAs when the tiles alone cannot fill the device (a mean over the tokens of a few sequences, over dim 0
 * of a square matrix): below 4 CTAs an SM, the slices make about 16 CTAs an SM in all (several waves of ~6 resident
 * CTAs at 40 registers, so the last wave's tail is short), each slice at least max(32, 4 ty) rows (its f32 partial,
 * written and read back, costs at most 8 / 64 of a bf16 input's traffic). Stage 1 writes [S, outer * inner] partials,
 * stage 2 folds them in order (a column reduction with R = S). A long slice is rounded up to a multiple of ty, so every
 * thread walks as many rows.
 */
export function splitColumns(tiles: number, R: number, ty: number, sms: number): ColumnSplit {
  if (tiles >= FILL_PER_SM * sms) return { S: 1, rChunk: R };
  const want = Math.ceil((16 * sms) / tiles);
  const most = Math.floor(R / Math.max(32, 4 * ty));
  const S = Math.min(want, most, 65535);
  if (S < 2) return { S: 1, rChunk: R };
  let rChunk = Math.ceil(R / S);
  if (rChunk > 4 * ty) rChunk = Math.ceil(rChunk / ty) * ty;
  return { S: Math.ceil(R / rChunk), rChunk };
}

export interface ColumnPlan {
  readonly launch: ColumnLaunch;
  /** S = 1: one pass, no partials. */
  readonly split: ColumnSplit;
}

/**
 * The column kernel's launch for [outer, R, inner] (inner a multiple of vec, `itemsize`-byte elements) on `sms` SMs:
 * - wide tiles (32 vectors along inner) when they make >= 4 CTAs an SM;
 * - else tiles narrowed (16, then 8 threads along inner, TY growing to 16, 32; rows no shorter than 128 bytes) until
 *   they do: a mean over the tokens of [64, 512, 1024] bf16 is 1024 CTAs of 8 x 32 threads, one pass;
 * - still short, R is cut across CTAs (splitColumns, partials folded in order by a second pass) only when R is long
 *   enough to cut even under the narrowest tiles' TY (>= 2 slices of max(32, 4 TY) rows); the cut then takes the wide
 *   tiles, as measured on the H100 (mean over dim 0 of 8192 x 8192: 32 x 64 CTAs). A short R stays one pass on the
 *   narrow tiles: the channels-last pool [32, 144, 1024] f16 is 512 CTAs of 8 x 32 threads, 4 or 5 rows a thread,
 *   where a cut would add a launch and a partial round trip and shorten nothing.
 * `split: false` (the second stage of a split) never cuts.
 */
export function planColumns(outer: number, R: number, inner: number, vec: number, itemsize: number, sms: number, opts: { split?: boolean } = {}): ColumnPlan {
  const fill = FILL_PER_SM * sms;
  const whole = { S: 1, rChunk: R };
  const wide = columnLaunch(outer, R, inner, vec, sms);
  if (wide.tiles >= fill) return { launch: wide, split: whole };
  const narrowest = Math.max(1, MIN_SEGMENT_BYTES / (vec * itemsize));
  let narrow = wide;
  for (let widest = wide.tx / 2; widest >= narrowest && narrow.tiles < fill; widest /= 2) {
    const l = columnLaunch(outer, R, inner, vec, sms, 256, widest);
    if (l.tiles <= narrow.tiles) break; // R too short to take the threads off inner
    narrow = l;
  }
  if (narrow.tiles >= fill || opts.split === false || splitColumns(narrow.tiles, R, narrow.ty, sms).S === 1) return { launch: narrow, split: whole };
  return { launch: wide, split: splitColumns(wide.tiles, R, wide.ty, sms) };
}
