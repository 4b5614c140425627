/**
 * Softmax on the CUDA backend (kernels/softmax.cu): fp32 accumulation, result in x's dtype. The reduced dim is
 * made last and contiguous (row-contiguous views are read in place; other layouts and dims are copied first,
 * and the result copied back into x's shape), then one block per row with an online max/sum; rows of more than
 * 2048 vectors (e.g. vocab logits) go to a cluster of CTAs per row (8 by default) that merge their (max, sum) through
 * distributed shared memory (the row read once, written once). softmaxPlan has the launch choices.
 */
import { Tensor, normalizeDim } from '@fastkernels/core';
import { cudaTuning } from '../../tuning/load.js';
import type { SoftmaxTuning } from '../../tuning/schema.js';
import type { SpineContext } from '../launch/context.js';
import { disposeAll, floatCType, itemsizeOf, ptr, roundUp, rowsOf, spineKernel, vecWidth } from '../launch/common.js';

/**
 * Vectors a thread folds per block width: threads = ceil(vectors / FOLD_NPT) rounded up to a warp, at most 1024.
 * Which vectors a thread folds (so the result bits) follows from the threads alone; keep it.
 */
const FOLD_NPT = 4;
/** Rows of more than this many vectors may take the cluster path (the tuning's softmax.clusterMaxRows). */
const CLUSTER_MIN_VECTORS = 2048;

// The knobs are the tuning's softmax section (tuning/*.json, docs/tuning.md); none changes the result bits but the
// cluster path's (clusterMaxRows, clusterSize: it folds other vectors per thread, within the float64 reference's
// tolerance). The kernels keep their vectors raw and convert again at the write, so 8 a thread fit in 40 registers.

export interface SoftmaxPlan {
  entry: 'fk_softmax' | 'fk_softmax_cluster';
  /** CTAs (rows, or rows * cluster). */
  grid: number;
  /** FK_CS: CTAs a row on the cluster path (0 on one block a row). */
  cluster: number;
  threads: number;
  /** FK_NPT: vectors a thread keeps in registers (the rest is read again for the write). */
  npt: number;
}

const threadsFor = (vectors: number) => Math.min(1024, Math.max(32, roundUp(Math.ceil(vectors / FOLD_NPT), 32)));

/** Launch plan for `rows` rows of `nv` vectors of `itemsize`-byte elements on `sms` SMs (pure: CPU-tested). */
export function softmaxPlan(rows: number, nv: number, itemsize: number, sms: number, tuning: SoftmaxTuning = cudaTuning().softmax): SoftmaxPlan {
  const clusterRows = tuning.clusterMaxRows > 0 ? rows <= tuning.clusterMaxRows : rows < sms;
  const cluster = tuning.clusterSize;
  if (nv > CLUSTER_MIN_VECTORS && clusterRows && rows * cluster <= 2 ** 31 - 1) {
    // long rows (vocab logits): a cluster of `cluster` CTAs per row, each holding a slice in registers
    return { entry: 'fk_softmax_cluster', grid: rows * cluster, cluster, threads: threadsFor(Math.ceil(nv / cluster)), npt: FOLD_NPT };
  }
  const threads = threadsFor(nv);
  // f32 keeps 4: its 4-vector build takes 32 registers (2 blocks of 1024 an SM), 8 would cost one of them
  const npt = itemsize < 4 && nv > FOLD_NPT * threads ? tuning.longRowVectors : FOLD_NPT;
  return { entry: 'fk_softmax', grid: rows, cluster: 0, threads, npt };
}

export function softmax(ctx: SpineContext, x: Tensor, dim: number): Tensor {
  const T = floatCType(x, 'softmax', 'x');
  if (x.rank === 0) throw new RangeError('softmax: x needs rank >= 1');
  const d = normalizeDim(dim, x.rank);
  const last = x.rank - 1;
  if (d === last) {
    const out = Tensor.empty(x.backend, x.shape, x.dtype, { device: x.device });
    if (out.numel === 0) return out;
    lastDim(ctx, T, out, x);
    return out;
  }
  // Move the dim last, run on a contiguous copy, then write back in x's layout.
  const moved = x.transpose(d, last);
  const temps: Tensor[] = [moved];
  try {
    const tmp = Tensor.empty(x.backend, moved.shape, x.dtype, { device: x.device });
    temps.push(tmp);
    const out = Tensor.empty(x.backend, x.shape, x.dtype, { device: x.device });
    if (out.numel === 0) return out;
    lastDim(ctx, T, tmp, moved);
    const back = tmp.transpose(d, last);
    temps.push(back);
    ctx.ops.copy(out, back);
    return out;
  } finally {
    disposeAll(temps);
  }
}

/** out (contiguous, x's shape) = softmax of x over its last dim. */
function lastDim(ctx: SpineContext, T: string, out: Tensor, x: Tensor): void {
  const temps: Tensor[] = [];
  try {
    const xr = rowsOf(x, temps);
    const D = xr.last;
    const vec = vecWidth(itemsizeOf(x.dtype), [D, xr.rowStride], [ptr(out), ptr(xr.t)]);
    const p = softmaxPlan(xr.rows, D / vec, itemsizeOf(x.dtype), ctx.multiprocessors);
    const defines = { FK_T: T, FK_VEC: vec, FK_NPT: p.npt, ...(p.cluster ? { FK_CS: p.cluster } : {}) };
    spineKernel(ctx, 'softmax.cu', p.entry, defines).launch(p.grid, p.threads, 0, [out, xr.t, xr.rows, D, xr.rowStride]);
  } finally {
    disposeAll(temps);
  }
}
