/**
 * Softmax on the CUDA backend (kernels/softmax.cu): fp32 accumulation, result in x's dtype. The reduced dim is
 * made last and contiguous (row-contiguous views are read in place; other layouts and dims are copied first,
 * and the result copied back into x's shape), then one block per row with an online max/sum.
 */
import { Tensor, normalizeDim } from '@fastkernels/core';
import type { SpineContext } from './context.js';
import { disposeAll, floatCType, itemsizeOf, ptr, roundUp, rowsOf, spineKernel, vecWidth } from './common.js';

const NPT = 4;

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
    const threads = Math.min(1024, Math.max(32, roundUp(Math.ceil(nv / NPT), 32)));
    const k = spineKernel(ctx, 'softmax.cu', 'fk_softmax', { FK_T: T, FK_VEC: vec });
    k.launch(xr.rows, threads, 0, [out, xr.t, xr.rows, D, xr.rowStride]);
  } finally {
    disposeAll(temps);
  }
}
