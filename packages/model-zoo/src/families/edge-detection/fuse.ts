/**
 * ultralytics' fuse_conv_and_bn on the device: a BatchNorm in eval mode after a convolution is an affine per output
 * channel, so it folds into the conv's weight and bias (W' = W * g / sqrt(var + eps), b' = (b - mean) * g /
 * sqrt(var + eps) + beta), computed in float32 (float64 for f64 models) and rounded once to the weight's dtype.
 */
import { F, OpScope, type Tensor } from '@fastkernels/core';

export interface BatchNormStats {
  readonly runningMean: Tensor;
  readonly runningVar: Tensor;
  readonly weight: Tensor | null;
  readonly bias: Tensor | null;
  readonly eps: number;
}

/** The folded weight [O, ...] and bias [O] of conv(weight, bias) followed by `bn`. */
export function foldBatchNorm(weight: Tensor, bias: Tensor | null, bn: BatchNormStats): { weight: Tensor; bias: Tensor } {
  const s = new OpScope();
  const wide = weight.dtype === 'f64' ? 'f64' : 'f32';
  const f = (t: Tensor) => s.op('to', [t], { dtype: wide });
  const inv = s.op('rsqrt', [s.op('add', [f(bn.runningVar), bn.eps])]);
  const scale = bn.weight ? s.op('mul', [inv, f(bn.weight)]) : inv;
  const perOut = [weight.shape[0]!, ...weight.shape.slice(1).map(() => 1)];
  const w = s.op('mul', [f(weight), s.op('reshape', [scale], { shape: perOut })]);
  const centred = bias ? s.op('sub', [f(bias), f(bn.runningMean)]) : s.op('neg', [f(bn.runningMean)]);
  let b = s.op('mul', [centred, scale]);
  if (bn.bias) b = s.op('add', [b, f(bn.bias)]);
  const out = { weight: s.own(F.to(w, weight.dtype)), bias: s.own(F.to(b, weight.dtype)) };
  s.keep([out.weight, out.bias]);
  return out;
}
