/**
 * Softmax on the CUDA backend (kernels/softmax.cu): fp32 accumulation, result in x's dtype. The reduced dim is
 * made last and contiguous (row-contiguous views are read in place; other layouts and dims are copied first,
 * and the result copied back into x's shape), then one block per row with an online max/sum; rows of more than
 * 2048 vectors (e.g. vocab logits) go to a cluster of 8 CTAs per row that merge their (max, sum) through
 * distributed shared memory (the row read once, written once).
 */
import { Tensor, normalizeDim } from '@fastkernels/core';
import type { SpineContext } from './context.js';
import { disposeAll, floatCType, itemsizeOf, ptr, roundUp, rowsOf, spineKernel, vecWidth } from './common.js';

const NPT = 4;
/** CTAs per row (a portable thread-block cluster) for rows of more than CLUSTER_MIN_VECTORS vectors. */
const CLUSTER = 8;
const CLUSTER_MIN_VECTORS = 2048;

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
    const nv = D / vec;
    // Measured on the H200 (bench/results/h200/kernels.json): the cluster path wins when there are fewer rows
    // than SMs (B=1: 22 -> 9.3 us, B=32: 23 -> 19 us) and loses when rows alone fill the GPU (B=256: 60 -> 83 us).
    if (nv > CLUSTER_MIN_VECTORS && xr.rows < ctx.multiprocessors && xr.rows * CLUSTER <= 2 ** 31 - 1) {
      // long rows (vocab logits): a cluster of CLUSTER CTAs per row, each holding a slice in registers
      const per = Math.ceil(nv / CLUSTER);
      const threads = Math.min(1024, Math.max(32, roundUp(Math.ceil(per / NPT), 32)));
      const k = spineKernel(ctx, 'softmax.cu', 'fk_softmax_cluster', { FK_T: T, FK_VEC: vec, FK_CS: CLUSTER });
      k.launch(xr.rows * CLUSTER, threads, 0, [out, xr.t, xr.rows, D, xr.rowStride]);
      return;
    }
    const threads = Math.min(1024, Math.max(32, roundUp(Math.ceil(nv / NPT), 32)));
    const k = spineKernel(ctx, 'softmax.cu', 'fk_softmax', { FK_T: T, FK_VEC: vec });
    k.launch(xr.rows, threads, 0, [out, xr.t, xr.rows, D, xr.rowStride]);
  } finally {
    disposeAll(temps);
  }
}
