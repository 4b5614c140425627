import type { Backend, Tensor } from '@fastkernels/core';
import { siluAndMul } from './activation.js';
import { linear } from './linear.js';
import { fusedAddRmsNorm, rmsNorm } from './norm.js';

/**
 * Ops.rmsNormLinear as its definition: this backend's rmsNorm (fusedAddRmsNorm with a residual), then linear, then
 * siluAndMul for act 'silu'. The reference the fused CUDA GEMV is checked against; never declines.
 */
export function rmsNormLinear(
  backend: Backend,
  x: Tensor,
  residual: Tensor | null,
  normWeight: Tensor,
  eps: number,
  weight: Tensor,
  bias: Tensor | null,
  act: 'silu' | null,
): [Tensor, Tensor | null] {
  const [h, r] = residual ? fusedAddRmsNorm(backend, x, residual, normWeight, eps) : [rmsNorm(backend, x, normWeight, eps), null];
  const temps: Tensor[] = [h];
  try {
    const y = linear(backend, h, weight, bias);
    if (!act) return [y, r];
    temps.push(y);
    return [siluAndMul(backend, y), r];
  } catch (e) {
    r?.dispose();
    throw e;
  } finally {
    for (const t of temps) t.dispose();
  }
}
