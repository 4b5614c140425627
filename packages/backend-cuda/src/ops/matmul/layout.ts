/**
 * Planning a strided-batched GEMM from tensor layouts (pure: shapes and strides in, numbers out; no CUDA).
 *
 * out[..., M, N] = a[..., M, K] @ b[..., K, N], the batch dims of a and b broadcasting to out's. cuBLASLt reads one
 * matrix per operand per batch at `base + i * batchStride` with a leading dimension, row-major or transposed (see
 * blaslt.ts matrixLayout: a row-major [K, N] view with strides [1, K] is the transposed operand, no copy). So an operand
 * is read in place when (1) its last two dims are addressable that way (the same rule, written here without allocating) and (2) its batch dims, flattened in out's batch
 * order, advance by one stride: every broadcast (size-1 or missing) dim gives stride 0, so a fully broadcast operand is
 * batch stride 0. Anything else is materialised (a copy) first. The planner writes into caller-owned objects: the
 * launch path allocates nothing here.
 */

/** One GEMM operand as cuBLASLt reads it; `copy`: not addressable, materialise it first. */
export interface OperandPlan {
  trans: boolean;
  ld: number;
  /** Batch stride in elements (0: one matrix for every batch). */
  stride: number;
  copy: boolean;
  /** The batch stride alone fails (dims that do not flatten to one stride): the copy must expand to out's batch. */
  expand: boolean;
}

export interface GemmPlan {
  m: number;
  n: number;
  k: number;
  batch: number;
  a: OperandPlan;
  b: OperandPlan;
  /** Output leading dimension and batch stride (the output is row-major [.., M, N] with unit column stride). */
  ldc: number;
  strideC: number;
  /** The batch was folded into M (b is shared by every batch and a's rows run on across batches): one plain GEMM. */
  folded: boolean;
}

export const newOperandPlan = (): OperandPlan => ({ trans: false, ld: 0, stride: 0, copy: false, expand: false });
export const newGemmPlan = (): GemmPlan => ({ m: 0, n: 0, k: 0, batch: 1, a: newOperandPlan(), b: newOperandPlan(), ldc: 0, strideC: 0, folded: false });

/**
 * The one batch stride of an operand's batch dims (all but its last two, right-aligned to out's batch dims
 * `outShape[0 .. outShape.length - 2)`), walked from the innermost batch dim out: size-1 out dims are skipped, a
 * broadcast dim reads stride 0, and each further dim must advance by the previous stride times the previous span.
 * -1 when they do not flatten (e.g. a [1, H] operand under a [B, H] batch: strides 0 then K*N).
 */
export function flatBatchStride(shape: readonly number[], strides: readonly number[], outShape: readonly number[]): number {
  const nb = outShape.length - 2;
  const lead = nb - (shape.length - 2);
  let seen = false;
  let base = 0;
  let span = 1;
  for (let d = nb - 1; d >= 0; d--) {
    const s = outShape[d]!;
    if (s === 1) continue;
    const od = d - lead;
    const st = od >= 0 && shape[od] !== 1 ? strides[od]! : 0;
    if (st < 0) return -1;
    if (!seen) {
      seen = true;
      base = st;
      span = s;
    } else {
      if (st !== base * span) return -1;
      span *= s;
    }
  }
  return base;
}

/**
 * blaslt.ts matrixLayout into `p` (trans, ld): row-major with leading dimension ld, or transposed storage; false when
 * neither fits.
 */
export function matrixInto(rows: number, cols: number, strideRow: number, strideCol: number, p: OperandPlan): boolean {
  if (strideCol === 1 || cols === 1) {
    const ld = rows === 1 ? Math.max(cols, 1) : strideRow;
    if (ld >= Math.max(cols, 1)) {
      p.trans = false;
      p.ld = ld;
      return true;
    }
  }
  if (strideRow === 1 || rows === 1) {
    const ld = cols === 1 ? Math.max(rows, 1) : strideCol;
    if (ld >= Math.max(rows, 1)) {
      p.trans = true;
      p.ld = ld;
      return true;
    }
  }
  p.trans = false;
  p.ld = cols;
  return false;
}

/** Fill `p` for an operand whose matrix is [rows, cols] (its last two dims) under out's batch. */
export function planOperand(shape: readonly number[], strides: readonly number[], outShape: readonly number[], p: OperandPlan): OperandPlan {
  const r = shape.length;
  const rows = shape[r - 2]!;
  const cols = shape[r - 1]!;
  const stride = flatBatchStride(shape, strides, outShape);
  const addressable = matrixInto(rows, cols, strides[r - 2]!, strides[r - 1]!, p);
  p.expand = stride < 0;
  p.copy = p.expand || !addressable;
  p.stride = stride < 0 ? 0 : stride;
  return p;
}

/**
 * The output's addressing: unit column stride, leading dimension >= N, one batch stride (a fresh contiguous output
 * always is; a strided view of a bigger output, as einsum writes, may be). False: compute into a contiguous temporary.
 */
export function planOutput(shape: readonly number[], strides: readonly number[], g: GemmPlan): boolean {
  const r = shape.length;
  const M = shape[r - 2]!;
  const N = shape[r - 1]!;
  if (N > 1 && strides[r - 1] !== 1) return false;
  const ld = M === 1 ? Math.max(N, 1) : strides[r - 2]!;
  if (ld < Math.max(N, 1)) return false;
  const stride = flatBatchStride(shape, strides, shape);
  if (stride < 0 || (stride === 0 && g.batch > 1)) return false;
  g.ldc = ld;
  g.strideC = stride;
  return true;
}

/**
 * Plan out = a @ b (shapes already checked by the op's infer): sizes, each operand's addressing, and the fold of a
 * shared-b batch into M (torch.matmul does the same: [B, M, K] @ [K, N] is one [B*M, K] @ [K, N] GEMM), which gives
 * cuBLASLt one bigger problem instead of B small ones. False when the output cannot be written in place.
 */
export function planGemm(
  aShape: readonly number[], aStrides: readonly number[], bShape: readonly number[], bStrides: readonly number[],
  outShape: readonly number[], outStrides: readonly number[], g: GemmPlan,
): boolean {
  const r = outShape.length;
  g.m = outShape[r - 2]!;
  g.n = outShape[r - 1]!;
  g.k = aShape[aShape.length - 1]!;
  let batch = 1;
  for (let d = 0; d < r - 2; d++) batch *= outShape[d]!;
  g.batch = batch;
  g.folded = false;
  planOperand(aShape, aStrides, outShape, g.a);
  planOperand(bShape, bStrides, outShape, g.b);
  if (!planOutput(outShape, outStrides, g)) return false;
  // fold: b shared (stride 0), a row-major with its rows running on across batches, out likewise (for M = 1 the batch
  // stride is the row pitch)
  if (batch > 1 && !g.b.copy && g.b.stride === 0 && !g.a.copy && !g.a.trans) {
    const aRow = g.m === 1 ? g.a.stride : g.a.ld;
    const cRow = g.m === 1 ? g.strideC : g.ldc;
    if (g.a.stride === g.m * aRow && g.strideC === g.m * cRow && aRow >= g.k && cRow >= g.n) {
      g.a.ld = aRow;
      g.ldc = cRow;
      g.m *= batch;
      g.batch = 1;
      g.a.stride = 0;
      g.strideC = 0;
      g.folded = true;
    }
  }
  return true;
}

/**
 * baddbmm's input as cuBLASLt's C read in place (out-of-place D = alpha·AB + beta·C): `shape` / `strides` are the
 * input expanded to out's [B, M, N]; it must have unit column stride, rows >= N apart (not broadcast along M unless M is
 * 1) and one batch stride (0 when broadcast over the batch); written into `c`. False: copy the input into the output first.
 */
export function planC(shape: readonly number[], strides: readonly number[], c: { ld: number; stride: number }): boolean {
  const r = shape.length;
  const M = shape[r - 2]!;
  const N = shape[r - 1]!;
  if (N > 1 && strides[r - 1] !== 1) return false;
  const ld = M === 1 ? Math.max(N, 1) : strides[r - 2]!;
  if (ld < Math.max(N, 1)) return false;
  const stride = flatBatchStride(shape, strides, shape);
  if (stride < 0) return false;
  c.ld = ld;
  c.stride = stride;
  return true;
}

/** Whether a baddbmm input of `shape` is one row vector for every batch and row ([N], [1, N], [1, 1, N]): a bias epilogue. */
export function isRowBias(shape: readonly number[]): boolean {
  for (let d = 0; d < shape.length - 1; d++) if (shape[d] !== 1) return false;
  return shape.length >= 1;
}
