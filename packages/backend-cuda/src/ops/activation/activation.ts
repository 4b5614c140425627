/**
 * Gated activations on the CUDA backend (kernels/activation.cu): x [..., 2d] -> act(x[..., :d]) * x[..., d:],
 * silu or gelu (exact erf / tanh approximation). Row-contiguous views are read in place, others copied first.
 */
import { Tensor, formatShape } from '@fastkernels/core';
import type { SpineContext } from '../launch/context.js';
import { disposeAll, floatCType, itemsizeOf, ptr, rowsOf, spineKernel, vecWidth } from '../launch/common.js';

const THREADS = 256;

export function siluAndMul(ctx: SpineContext, x: Tensor): Tensor {
  return gated(ctx, 'siluAndMul', x, 0);
}

export function geluAndMul(ctx: SpineContext, x: Tensor, approximate: 'none' | 'tanh'): Tensor {
  if (approximate !== 'none' && approximate !== 'tanh') throw new RangeError(`geluAndMul: approximate must be 'none' or 'tanh', got '${String(approximate)}'`);
  return gated(ctx, 'geluAndMul', x, approximate === 'none' ? 1 : 2);
}

function gated(ctx: SpineContext, op: string, x: Tensor, act: 0 | 1 | 2): Tensor {
  const T = floatCType(x, op, 'x');
  const two = x.shape[x.rank - 1];
  if (x.rank < 1 || two === undefined || two % 2 !== 0) throw new RangeError(`${op}: x ${formatShape(x.shape)} needs an even last dim [..., 2d]`);
  const d = two / 2;
  const out = Tensor.empty(x.backend, [...x.shape.slice(0, -1), d], x.dtype, { device: x.device });
  if (out.numel === 0) return out;
  const temps: Tensor[] = [];
  try {
    const xr = rowsOf(x, temps);
    const vec = vecWidth(itemsizeOf(x.dtype), [d, xr.rowStride], [ptr(out), ptr(xr.t)]);
    const nv = d / vec;
    const gx = Math.min(Math.ceil(nv / THREADS), 65535);
    const gy = Math.min(xr.rows, 65535);
    const k = spineKernel(ctx, 'activation.cu', 'fk_act_and_mul', { FK_T: T, FK_VEC: vec, FK_ACT: act });
    k.launch([gx, gy], THREADS, 0, [out, xr.t, xr.rows, d, xr.rowStride]);
    return out;
  } finally {
    disposeAll(temps);
  }
}
