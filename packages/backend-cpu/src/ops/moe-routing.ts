/**
 * topk_softmax (vLLM's MoE routing, core's spec) in float64: each row's softmax, its k largest probabilities (ties: the
 * lower expert id first) and their ids, renormalised to sum to 1 when asked; weights rounded once to f32.
 */
import type { Backend, Tensor, TopkSoftmaxAttrs } from '@fastkernels/core';
import { gather, output } from '../strided.js';

export function topkSoftmax(backend: Backend, gatingOutput: Tensor, attrs: TopkSoftmaxAttrs): [Tensor, Tensor] {
  const what = 'topk_softmax';
  const [T, E] = gatingOutput.shape as [number, number];
  const { k, renormalize } = attrs;
  const X = gather(gatingOutput, what);
  const weights = new Float64Array(T * k);
  const ids = new Float64Array(T * k);
  const p = new Float64Array(E);
  const taken = new Uint8Array(E);
  for (let t = 0; t < T; t++) {
    const row = t * E;
    let max = -Infinity;
    for (let e = 0; e < E; e++) max = Math.max(max, X[row + e]!);
    let sum = 0;
    for (let e = 0; e < E; e++) sum += p[e] = Math.exp(X[row + e]! - max);
    taken.fill(0);
    let kept = 0;
    for (let j = 0; j < k; j++) {
      let best = -1;
      for (let e = 0; e < E; e++) if (!taken[e] && (best < 0 || p[e]! > p[best]!)) best = e; // strict: the lower id keeps a tie
      taken[best] = 1;
      ids[t * k + j] = best;
      kept += weights[t * k + j] = p[best]! / sum;
    }
    if (renormalize) for (let j = 0; j < k; j++) weights[t * k + j]! /= kept;
  }
  return [output(backend, [T, k], 'f32', weights, what), output(backend, [T, k], 'i32', ids, what)];
}
