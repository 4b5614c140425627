/** Shared task-case helpers of the family: parameter init that keeps activations O(1) at any width. */
import { Tensor, type Module, type Rng } from '@fastkernels/core';

/**
 * Matrices N(0, 1/K) (so a projection keeps unit variance), norm weights 1 + N(0, 0.01), biases N(0, 0.01), embedding
 * tables N(0, 1), T5's relative position bias N(0, 0.25).
 */
export function initFamilyParameters(m: Module, rng: Rng): void {
  for (const [name, p] of m.namedParameters()) {
    let v: Float64Array;
    const leaf = name.split('.').slice(-2).join('.');
    if (/(norm[^.]*|layer_norm\d?|LayerNorm)\.weight$/.test(leaf) || /norm_(added_)?[qk]\.weight$/.test(name)) v = rng.fillNormal(p.numel, 0.1).map((x) => x + 1);
    else if (/relative_attention_bias\.weight$/.test(name)) v = rng.fillNormal(p.numel, 0.5);
    else if (/(embedding|embed_tokens|shared)\.weight$/.test(name) || /embeddings\.[a-z_]+\.weight$/.test(name)) v = rng.fillNormal(p.numel, 1);
    else if (name.endsWith('weight') && p.shape.length === 2) v = rng.fillNormal(p.numel, 1 / Math.sqrt(p.shape[1]!));
    else v = rng.fillNormal(p.numel, 0.1);
    const t = Tensor.fromArray(p.backend, v, p.shape, p.dtype, { device: p.device });
    p.copy_(t);
    t.dispose();
  }
}
