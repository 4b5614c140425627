import { formatShape, type Backend, type Tensor } from '@fastkernels/core';
import { geluErf, geluTanh, silu } from '../math.js';
import { expectFloat, gather, output } from '../strided.js';
import { linear } from './linear.js';

/** x [..., 2d] -> act(x[..., :d]) * x[..., d:] (vLLM's *AndMul activations). */
function gatedActivation(backend: Backend, x: Tensor, act: (v: number) => number, what: string): Tensor {
  expectFloat(x, what, 'x');
  const two = x.shape[x.rank - 1];
  if (x.rank < 1 || two === undefined || two % 2 !== 0) throw new RangeError(`${what}: x ${formatShape(x.shape)} needs an even last dim [..., 2d]`);
  const d = two / 2;
  const X = gather(x, what);
  const rows = two === 0 ? 0 : X.length / two;
  const Y = new Float64Array(rows * d);
  for (let r = 0; r < rows; r++) {
    for (let i = 0; i < d; i++) Y[r * d + i] = act(X[r * two + i]!) * X[r * two + d + i]!;
  }
  return output(backend, [...x.shape.slice(0, -1), d], x.dtype, Y, what);
}

export function siluAndMul(backend: Backend, x: Tensor): Tensor {
  return gatedActivation(backend, x, silu, 'siluAndMul');
}

export function geluAndMul(backend: Backend, x: Tensor, approximate: 'none' | 'tanh'): Tensor {
  if (approximate !== 'none' && approximate !== 'tanh') throw new RangeError(`geluAndMul: approximate must be 'none' or 'tanh', got '${String(approximate)}'`);
  return gatedActivation(backend, x, approximate === 'tanh' ? geluTanh : geluErf, 'geluAndMul');
}

/**
 * Ops.linearSiluAndMul as its definition: linear, then siluAndMul (the CUDA backend runs it as one GEMV launch); never
 * declines, so CPU models take the call the GPU takes by default.
 */
export function linearSiluAndMul(backend: Backend, x: Tensor, weight: Tensor, bias: Tensor | null): Tensor {
  const g = linear(backend, x, weight, bias);
  try {
    return siluAndMul(backend, g);
  } finally {
    g.dispose();
  }
}
