/**
 * The projections of the Llama modules, built through the registry: L1/linear (world 1) returns the output tensor,
 * vLLM's parallel layers (world > 1: L2/qkv_parallel_linear, L2/row_parallel_linear, ...) return [output, outputBias]
 * as vLLM's do. project() takes the output of either. A candidate for L1/linear therefore runs in these projections
 * at world 1 only; at world > 1 candidates for the L2 parallel-linear tasks (and L1/allreduce) take its place.
 */
import { Tensor, type Module, type Ops } from '@fastkernels/core';
import { runsOwnForward } from '../../common/fusion.js';
import { Linear } from '../../tasks/L1/linear/linear.js';
import { RMSNorm } from '../../tasks/L1/norm/rms_norm.js';

export interface Projection extends Module {
  forward(x: Tensor): Tensor | readonly [Tensor, Tensor | null];
}

export function project(p: Projection, x: Tensor): Tensor {
  const r = p.forward(x);
  return r instanceof Tensor ? r : r[0];
}

/**
 * `norm` (adding `residual` first when given) then the projection `p` (then silu-and-mul for act 'silu') as one backend
 * op (Ops.rmsNormLinear: at bs-1 decode on CUDA, the norm inside the GEMV). Only when the backend has the op and both
 * modules run their own forward (runsOwnForward: a candidate or an instrumented module must see its own calls):
 * [output, the new residual (null without one)]; null when not, or when the backend declines (nothing was computed).
 */
export function normedProject(ops: Ops, norm: RMSNorm, p: Projection, x: Tensor, residual: Tensor | null, act: 'silu' | null): [Tensor, Tensor | null] | null {
  if (!ops.rmsNormLinear || !runsOwnForward(norm, RMSNorm) || !(p instanceof Linear) || !runsOwnForward(p, Linear)) return null;
  return ops.rmsNormLinear(x, residual, norm.weight, norm.eps, p.weight, p.bias, act);
}
