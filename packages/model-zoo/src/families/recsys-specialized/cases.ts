/** Shared task-case helpers of the encoder family: padded variable-length batches and parameter init. */
import { Tensor, type ExecutionContext, type Module, type Rng, type TaskCase } from '@fastkernels/core';
import { fromInts } from '../../common/inputs.js';
import type { EncoderConfig } from './config.js';

/** A case's sequence lengths (options.lens), padded to S = max. */
export const caseLens = (c: Pick<TaskCase, 'options'>): number[] => (c.options as { lens: number[] }).lens;

/** Token ids [B, S] (CLS-like id 0 first, then random non-pad ids, pads after each length) and the 0/1 mask. */
export function paddedIds(rng: Rng, lens: readonly number[], cfg: EncoderConfig): { ids: number[]; mask: number[]; S: number } {
  const S = Math.max(...lens);
  const ids: number[] = [];
  const mask: number[] = [];
  for (const n of lens) {
    for (let s = 0; s < S; s++) {
      if (s >= n) {
        ids.push(cfg.padTokenId);
        mask.push(0);
        continue;
      }
      let id = s === 0 ? 0 : rng.int(0, cfg.vocabSize);
      while (s > 0 && id === cfg.padTokenId) id = rng.int(0, cfg.vocabSize);
      ids.push(id);
      mask.push(1);
    }
  }
  return { ids, mask, S };
}

/** The 0/1 mask [B, S] of these lengths as a tensor of `dtype` (bool for the attention task, i64 for the models). */
export function maskTensor(ctx: ExecutionContext, lens: readonly number[], dtype: 'bool' | 'i64'): Tensor {
  const S = Math.max(...lens);
  const m = lens.flatMap((n) => Array.from({ length: S }, (_, s) => (s < n ? 1 : 0)));
  return fromInts(ctx, m, [lens.length, S], dtype);
}

/**
 * Parameters drawn so activations stay O(1) at any width: matrices N(0, 1/K), LayerNorm weights 1 + N(0, 0.01),
 * biases N(0, 0.01), embedding tables N(0, 1).
 */
export function initEncoderParameters(m: Module, rng: Rng): void {
  for (const [name, p] of m.namedParameters()) {
    let v: Float64Array;
    if (name.endsWith('LayerNorm.weight')) v = rng.fillNormal(p.numel, 0.1).map((x) => x + 1);
    else if (name.includes('embeddings.')) v = rng.fillNormal(p.numel, 1);
    else if (name.endsWith('weight') && p.shape.length === 2) v = rng.fillNormal(p.numel, 1 / Math.sqrt(p.shape[1]!));
    else v = rng.fillNormal(p.numel, 0.1);
    const t = Tensor.fromArray(p.backend, v, p.shape, p.dtype, { device: p.device });
    p.copy_(t);
    t.dispose();
  }
}
