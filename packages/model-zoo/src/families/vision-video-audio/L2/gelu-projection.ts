/**
 * FLUX's MLP up-projections (FeedForward's net.0, the single block's proj_mlp) followed by GELU(tanh): one linear
 * with the gelu_tanh epilogue (cuBLASLt's GELU_BIAS on CUDA: the [T, 4D] output is written once, not written, read
 * and written again) while both modules are ours (runsOwnForward: a candidate for L1/linear or L1/gelu, or a capture's
 * wrapped module, must see its call); else the two forwards.
 */
import { F, type Tensor } from '@fastkernels/core';
import { runsOwnForward } from '../../../common/fusion.js';
import { GELU } from '../../../layers/activation.js';
import { Linear } from '../../../tasks/L1/linear/linear.js';

/** Whether proj then act run as one linear with the gelu_tanh epilogue. */
export function fusesGeluProjection(proj: Linear, act: GELU): boolean {
  return runsOwnForward(proj, Linear) && runsOwnForward(act, GELU) && act.approximate === 'tanh';
}

/** act(proj(x)) for GELU(tanh): fused where fusesGeluProjection says so. */
export function geluProjection(proj: Linear, act: GELU, x: Tensor): Tensor {
  if (fusesGeluProjection(proj, act)) return F.linear(x, proj.weight, proj.bias, { activation: 'gelu_tanh' });
  const h = proj.forward(x);
  try {
    return act.forward(h);
  } finally {
    h.dispose();
  }
}
