/**
 * Linear on the CUDA backend: y = x W^T + b through cuBLASLt (ctx.ops.gemmInto with transB and the bias
 * epilogue; fp32 accumulation). x [..., K] is flattened to [M, K] (a strided 2-D x is read in place when cuBLAS
 * can address it; other layouts are copied), weight [N, K], bias [N] or null; the result is [..., N] in x's dtype.
 * A weight or bias of another dtype is converted to x's dtype first (one copy per call).
 */
import { Tensor, formatShape } from '@fastkernels/core';
import { matrixLayout } from '../blaslt.js';
import type { SpineContext } from './context.js';
import { asDType, contiguousOf, disposeAll, floatCType } from './common.js';

export function linear(ctx: SpineContext, x: Tensor, weight: Tensor, bias: Tensor | null): Tensor {
  const op = 'linear';
  floatCType(x, op, 'x');
  if (weight.rank !== 2) throw new RangeError(`${op}: weight ${formatShape(weight.shape)} must be [N, K]`);
  const [N, K] = weight.shape as [number, number];
  if (x.rank < 1 || x.shape[x.rank - 1] !== K) throw new RangeError(`${op}: x ${formatShape(x.shape)} has last dim != K = ${K} of weight ${formatShape(weight.shape)}`);
  if (bias && (bias.rank !== 1 || bias.shape[0] !== N)) throw new RangeError(`${op}: bias ${formatShape(bias.shape)} must be [${N}]`);
  const lead = x.shape.slice(0, -1);
  const M = lead.reduce((a, b) => a * b, 1);
  const out = Tensor.empty(x.backend, [...lead, N], x.dtype, { device: x.device });
  if (out.numel === 0) return out;
  const temps: Tensor[] = [];
  try {
    const b = bias ? asDType(bias, x.dtype, temps) : null;
    if (K === 0) {
      // no products: y = bias (or 0)
      if (b) ctx.ops.copy(out, b.expand([...lead, N]));
      else ctx.ops.fill(out, 0);
      return out;
    }
    let w = weight.dtype === x.dtype ? weight : asDType(weight, x.dtype, temps);
    if (!addressable(w)) w = contiguousOf(w, temps);
    let a: Tensor;
    if (x.rank === 2 && addressable(x)) a = x;
    else if (x.isContiguous()) {
      a = x.view([M, K]);
      temps.push(a);
    } else {
      const c = contiguousOf(x, temps);
      a = c.view([M, K]);
      temps.push(a);
    }
    const o2 = out.view([M, N]);
    temps.push(o2);
    ctx.ops.gemmInto(o2, a, w, { transB: true, bias: b });
    return out;
  } finally {
    disposeAll(temps);
  }
}

function addressable(t: Tensor): boolean {
  return matrixLayout(t.shape[0]!, t.shape[1]!, t.strides[0]!, t.strides[1]!) !== undefined;
}
