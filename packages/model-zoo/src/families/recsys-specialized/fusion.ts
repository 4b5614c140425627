/**
 * The encoder layers' fusions (issue 35), each taken only while the modules it fuses are our own (runsOwnForward): a
 * candidate for L1/linear, L1/gelu or L1/layer_norm, or a module wrapped by `fastkernels capture` / `profile`, runs as
 * it is, and the layer then runs the unfused sequence.
 */
import { F, shapesEqual, type Tensor } from '@fastkernels/core';
import { runsOwnForward } from '../../common/fusion.js';
import { GELU } from '../../layers/activation.js';
import { LayerNorm } from '../../layers/norm.js';
import { Linear } from '../../tasks/L1/linear/linear.js';

/**
 * HF's post-LN residual, LayerNorm(x + residual), as one add_layer_norm (one pass over both operands on CUDA instead of
 * an add writing the sum and a layer_norm reading it back; the sum is rounded to the dtype as the add stores it, so the
 * result is the unfused one). The add then the module where the norm is not ours or the operands differ in shape / dtype.
 */
export function residualLayerNorm(norm: LayerNorm, x: Tensor, residual: Tensor): Tensor {
  if (runsOwnForward(norm, LayerNorm) && x.dtype === residual.dtype && shapesEqual(x.shape, residual.shape)) {
    return F.addLayerNorm(x, residual, norm.normalizedShape, norm.weight, norm.bias, norm.eps);
  }
  const sum = F.add(x, residual);
  try {
    return norm.forward(sum);
  } finally {
    sum.dispose();
  }
}

/**
 * act(dense(x)) for the FFN up-projection as linear's activation epilogue: cuBLASLt's GELU_BIAS for the tanh form
 * (gelu_new); for XLM-R / BERT's exact erf GELU cuBLASLt has no epilogue, so the backend keeps the bias in the GEMM and
 * runs the one generated GELU pass (the same kernels as dense then act). dense then act where either is not ours.
 */
export function linearGelu(dense: Linear, act: GELU, x: Tensor): Tensor {
  if (runsOwnForward(dense, Linear) && runsOwnForward(act, GELU)) {
    return F.linear(x, dense.weight, dense.bias, { activation: act.approximate === 'tanh' ? 'gelu_tanh' : 'gelu' });
  }
  const h = dense.forward(x);
  try {
    return act.forward(h);
  } finally {
    h.dispose();
  }
}
