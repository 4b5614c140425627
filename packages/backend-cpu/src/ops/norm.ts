import { formatShape, normalizeDim, roundToDType, shapesEqual, type Backend, type Tensor } from '@fastkernels/core';
import { expectFloat, gather, output } from '../strided.js';

function checkWeight(x: Tensor, weight: Tensor, what: string): number {
  expectFloat(x, what, 'x');
  const H = x.shape[x.rank - 1];
  if (x.rank < 1 || H === undefined) throw new RangeError(`${what}: x needs rank >= 1, got ${formatShape(x.shape)}`);
  if (weight.rank !== 1 || weight.shape[0] !== H) throw new RangeError(`${what}: weight ${formatShape(weight.shape)} must be [${H}] (the last dim of x ${formatShape(x.shape)})`);
  return H;
}

/** y = x / sqrt(mean(x^2) + eps) * w per row of length H, all in float64, rounded once at the store. */
function normalizeRows(X: Float64Array, W: Float64Array, H: number, eps: number): Float64Array {
  const Y = new Float64Array(X.length);
  for (let r = 0; r * H < X.length; r++) {
    const base = r * H;
    let ss = 0;
    for (let j = 0; j < H; j++) ss += X[base + j]! * X[base + j]!;
    const inv = 1 / Math.sqrt(ss / H + eps);
    for (let j = 0; j < H; j++) Y[base + j] = X[base + j]! * inv * W[j]!;
  }
  return Y;
}

export function rmsNorm(backend: Backend, x: Tensor, weight: Tensor, eps: number): Tensor {
  const H = checkWeight(x, weight, 'rmsNorm');
  const Y = normalizeRows(gather(x, 'rmsNorm x'), gather(weight, 'rmsNorm weight'), H, eps);
  return output(backend, x.shape, x.dtype, Y, 'rmsNorm');
}

/**
 * vLLM fused_add_rms_norm: residual' = x + residual is stored in x's dtype and the norm reads
 * that stored (rounded) value back, exactly as the CUDA kernel does. Returns [y, residual'].
 */
export function fusedAddRmsNorm(backend: Backend, x: Tensor, residual: Tensor, weight: Tensor, eps: number): [Tensor, Tensor] {
  const H = checkWeight(x, weight, 'fusedAddRmsNorm');
  if (!shapesEqual(x.shape, residual.shape)) throw new RangeError(`fusedAddRmsNorm: residual ${formatShape(residual.shape)} does not match x ${formatShape(x.shape)}`);
  const S = gather(x, 'fusedAddRmsNorm x');
  const R = gather(residual, 'fusedAddRmsNorm residual');
  for (let i = 0; i < S.length; i++) S[i] = roundToDType(S[i]! + R[i]!, x.dtype);
  const Y = normalizeRows(S, gather(weight, 'fusedAddRmsNorm weight'), H, eps);
  const y = output(backend, x.shape, x.dtype, Y, 'fusedAddRmsNorm');
  return [y, output(backend, x.shape, x.dtype, S, 'fusedAddRmsNorm')];
}

/** Max-subtracted softmax over `dim`, float64 throughout, result in x's dtype. */
export function softmax(backend: Backend, x: Tensor, dim: number): Tensor {
  expectFloat(x, 'softmax', 'x');
  const d = normalizeDim(dim, x.rank);
  const D = x.shape[d]!;
  const inner = x.shape.slice(d + 1).reduce((a, b) => a * b, 1);
  const outer = x.shape.slice(0, d).reduce((a, b) => a * b, 1);
  const X = gather(x, 'softmax');
  const Y = new Float64Array(X.length);
  for (let o = 0; o < outer; o++) {
    for (let i = 0; i < inner; i++) {
      const base = o * D * inner + i;
      let max = -Infinity;
      for (let k = 0; k < D; k++) max = Math.max(max, X[base + k * inner]!);
      let sum = 0;
      for (let k = 0; k < D; k++) {
        const e = Math.exp(X[base + k * inner]! - max);
        Y[base + k * inner] = e;
        sum += e;
      }
      for (let k = 0; k < D; k++) Y[base + k * inner]! /= sum;
    }
  }
  return output(backend, x.shape, x.dtype, Y, 'softmax');
}
