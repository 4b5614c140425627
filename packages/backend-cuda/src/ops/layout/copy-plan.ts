/**
 * Which kernel a same-dtype copy between two layouts takes (pure, CPU-tested; CudaOps.copy launches it). Dims are
 * coalesced first (size-1 dims dropped, dims contiguous in both merged), then:
 * - memcpy: both sides dense in the same order (row-major, channels-last to channels-last, any permutation);
 * - rows: both sides contiguous along the same innermost dim (a head permute [B, H, S, D] <-> [B, S, H, D], a slice's
 *   rows): kernels/permute_copy.cu fk_copy_rows, 16-byte vectors along the run where both sides are aligned to them;
 * - transpose: the destination's contiguous dim is another than the source's (NCHW <-> NHWC, a transpose's
 *   .contiguous()): fk_copy_transpose, 64 x 64 tiles through shared memory, 16-byte loads along the source's run and
 *   16-byte stores along the destination's;
 * - generic: anything else (no contiguous dim on a side, a thin transpose, rank past the kernels' limit): fk_copy.
 */
import { coalesce } from '../../strided.js';
import { denseMemoryOrder } from '../elementwise-plan.js';

export interface CopyOperand {
  readonly strides: readonly number[];
  /** Byte address of the first element (only its alignment matters here). */
  readonly ptr: number;
}

/** fk_copy_transpose's tile edge and both kernels' block size (kernels/permute_copy.cu FK_TILE, FK_TILE_THREADS). */
export const COPY_TILE = 64;
export const COPY_THREADS = 256;
/** FK_OUTER_RANK: the dims besides the run (rows) or the two tiled dims (transpose). */
export const COPY_OUTER_RANK = 5;
/** A tiled dim shorter than this leaves most of each tile empty: such copies take the generic kernel. */
export const MIN_TRANSPOSE_DIM = 8;

export interface OuterDims {
  readonly sizes: readonly number[];
  readonly dst: readonly number[];
  readonly src: readonly number[];
}

export type CopyPlan =
  | { readonly kind: 'memcpy' }
  | { readonly kind: 'generic'; readonly why: string }
  | {
      readonly kind: 'rows';
      readonly outer: OuterDims;
      /** Elements per vector: 16 bytes' worth, or 1 where a pointer, stride or the run length is not aligned to it. */
      readonly vec: number;
      readonly runVecs: number;
      readonly total: number;
      readonly index: 'int' | 'long long';
      readonly grid: number;
    }
  | {
      readonly kind: 'transpose';
      readonly outer: OuterDims;
      readonly ni: number;
      readonly nj: number;
      readonly dstJ: number;
      readonly srcI: number;
      readonly tilesI: number;
      readonly tilesJ: number;
      readonly tiles: number;
      readonly vecSrc: boolean;
      readonly vecDst: boolean;
      readonly grid: number;
    };

const prod = (xs: readonly number[]) => xs.reduce((a, b) => a * b, 1);

function outerOf(sizes: readonly number[], dst: readonly number[], src: readonly number[], skip: readonly number[]): OuterDims {
  const keep = sizes.map((_, d) => d).filter((d) => !skip.includes(d));
  return { sizes: keep.map((d) => sizes[d]!), dst: keep.map((d) => dst[d]!), src: keep.map((d) => src[d]!) };
}

/** Pointer and every listed stride aligned to a 16-byte vector of vec elements. */
const aligned = (ptr: number, strides: readonly number[], vec: number) => ptr % 16 === 0 && strides.every((s) => s % vec === 0);

/** Largest element offset |stride| x (size - 1) summed: what 32-bit index math must hold. */
const maxOffset = (sizes: readonly number[], strides: readonly number[]) => sizes.reduce((a, n, d) => a + Math.abs(strides[d]!) * (n - 1), 0);

/** Both sides dense in one order (equal strides on every dim of size > 1): the bytes are the same, one memcpy. */
function sameDenseLayout(shape: readonly number[], a: readonly number[], b: readonly number[]): boolean {
  return shape.every((n, d) => n === 1 || a[d] === b[d]) && denseMemoryOrder(shape, a) !== null;
}

export function planCopy(shape: readonly number[], itemsize: number, dst: CopyOperand, src: CopyOperand, multiprocessors: number): CopyPlan {
  if (sameDenseLayout(shape, dst.strides, src.strides)) return { kind: 'memcpy' };
  const c = coalesce(shape, [dst.strides, src.strides]);
  const [ds, ss] = [c.strides[0]!, c.strides[1]!];
  const R = c.shape.length;
  const vecOf = 16 / itemsize;
  const i = ds.lastIndexOf(1); // the destination's contiguous dim
  const j = ss.lastIndexOf(1); // the source's
  if (i >= 0 && i === j) {
    if (R - 1 > COPY_OUTER_RANK) return { kind: 'generic', why: `rank ${R} after coalescing` };
    const outer = outerOf(c.shape, ds, ss, [i]);
    const run = c.shape[i]!;
    const vec = run % vecOf === 0 && aligned(dst.ptr, outer.dst, vecOf) && aligned(src.ptr, outer.src, vecOf) ? vecOf : 1;
    const total = prod(c.shape) / vec;
    const grid = Math.max(1, Math.min(Math.ceil(total / COPY_THREADS), multiprocessors * 32));
    // 32-bit index math when positions plus a grid stride and every offset fit
    const fits = total + grid * COPY_THREADS < 2 ** 31 && maxOffset(c.shape, ds) + vec < 2 ** 31 && maxOffset(c.shape, ss) + vec < 2 ** 31;
    return { kind: 'rows', outer, vec, runVecs: run / vec, total, index: fits ? 'int' : 'long long', grid };
  }
  if (i < 0 || j < 0) return { kind: 'generic', why: `no contiguous dim in the ${i < 0 ? 'destination' : 'source'}` };
  if (R - 2 > COPY_OUTER_RANK) return { kind: 'generic', why: `rank ${R} after coalescing` };
  const [ni, nj] = [c.shape[i]!, c.shape[j]!];
  if (Math.min(ni, nj) < MIN_TRANSPOSE_DIM) return { kind: 'generic', why: `a thin transpose (${ni} x ${nj})` };
  const outer = outerOf(c.shape, ds, ss, [i, j]);
  const [dstJ, srcI] = [ds[j]!, ss[i]!];
  const tilesI = Math.ceil(ni / COPY_TILE);
  const tilesJ = Math.ceil(nj / COPY_TILE);
  const tiles = tilesI * tilesJ * prod(outer.sizes);
  return {
    kind: 'transpose', outer, ni, nj, dstJ, srcI, tilesI, tilesJ, tiles,
    vecSrc: aligned(src.ptr, [...outer.src, srcI], vecOf),
    vecDst: aligned(dst.ptr, [...outer.dst, dstJ], vecOf),
    grid: Math.max(1, Math.min(tiles, multiprocessors * 32)),
  };
}

/** Bytes of kernels/permute_copy.cu's FkOuterDims, FkRowsGeo and FkTransposeGeo (8-byte aligned). */
export const OUTER_DIMS_BYTES = 128;
export const ROWS_GEO_BYTES = OUTER_DIMS_BYTES + 24;
export const TRANSPOSE_GEO_BYTES = OUTER_DIMS_BYTES + 64;

function putI64(v: DataView, off: number, x: number): void {
  const hi = Math.floor(x / 4294967296); // two's complement halves, no BigInt
  v.setUint32(off, (x - hi * 4294967296) >>> 0, true);
  v.setInt32(off + 4, hi, true);
}

function putOuter(v: DataView, o: OuterDims): void {
  o.sizes.forEach((x, d) => putI64(v, d * 8, x));
  o.dst.forEach((x, d) => putI64(v, 40 + d * 8, x));
  o.src.forEach((x, d) => putI64(v, 80 + d * 8, x));
  v.setInt32(120, o.sizes.length, true);
}

/** The kernel's geometry struct for a rows or transpose plan, written into `out` (reused between launches). */
export function encodeCopyGeometry(out: Uint8Array, p: Extract<CopyPlan, { kind: 'rows' | 'transpose' }>): Uint8Array {
  out.fill(0);
  const v = new DataView(out.buffer, out.byteOffset, out.byteLength);
  putOuter(v, p.outer);
  const at = OUTER_DIMS_BYTES;
  if (p.kind === 'rows') {
    putI64(v, at, p.runVecs);
    putI64(v, at + 8, p.total);
    v.setInt32(at + 16, p.vec, true);
  } else {
    [p.ni, p.nj, p.dstJ, p.srcI, p.tilesI, p.tilesJ, p.tiles].forEach((x, k) => putI64(v, at + 8 * k, x));
    v.setInt32(at + 56, p.vecSrc ? 1 : 0, true);
    v.setInt32(at + 60, p.vecDst ? 1 : 0, true);
  }
  return out;
}
