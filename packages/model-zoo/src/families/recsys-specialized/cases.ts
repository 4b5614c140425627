/**
 * Shared task-case helpers of the encoder family: packed variable-length batches (tokens of every sequence back to
 * back, no padding, as vLLM / TEI run encoders) and parameter init.
 */
import { Tensor, type ExecutionContext, type Module, type Rng, type TaskCase } from '@fastkernels/core';
import { fromInts } from '../../common/inputs.js';
import type { EncoderConfig } from './config.js';

/** A case's sequence lengths (options.lens). */
export const caseLens = (c: Pick<TaskCase, 'options'>): number[] => (c.options as { lens: number[] }).lens;

/** cu_seqlens [B + 1]: 0, then the running total of the lengths (flash_attn_varlen_func's offsets). */
export function cuSeqlensOf(lens: readonly number[]): number[] {
  const cu = [0];
  for (const n of lens) cu.push(cu[cu.length - 1]! + n);
  return cu;
}

/** vLLM's encoder positions: 0..n-1 restarting at every sequence (RoBERTa's offset is the embeddings' business). */
export function positionsOf(lens: readonly number[]): number[] {
  return lens.flatMap((n) => Array.from({ length: n }, (_, p) => p));
}

/** Packed token ids [T]: each sequence a CLS-like first id (XLM-R's <s> 0; 1 where 0 is the pad), then random non-pad ids. */
export function packedIds(rng: Rng, lens: readonly number[], cfg: EncoderConfig): number[] {
  const cls = cfg.padTokenId === 0 ? 1 : 0;
  const ids: number[] = [];
  for (const n of lens) {
    for (let s = 0; s < n; s++) {
      let id = s === 0 ? cls : rng.int(0, cfg.vocabSize);
      while (id === cfg.padTokenId) id = rng.int(0, cfg.vocabSize);
      ids.push(id);
    }
  }
  return ids;
}

/** cu_seqlens of these lengths as the i32 tensor flash_attn_varlen takes. */
export function cuSeqlensTensor(ctx: ExecutionContext, lens: readonly number[]): Tensor {
  const cu = cuSeqlensOf(lens);
  return fromInts(ctx, cu, [cu.length], 'i32');
}

/** A packed case's dims: T tokens, B1 = B + 1 offsets, plus the rest. */
export function packedDims(lens: readonly number[], rest: Record<string, number>): Record<string, number> {
  return { T: lens.reduce((a, n) => a + n, 0), B: lens.length, B1: lens.length + 1, ...rest };
}

/**
 * Parameters drawn so activations stay O(1) at any width: matrices N(0, 1/K), LayerNorm weights 1 + N(0, 0.1^2),
 * biases N(0, 0.1^2), embedding tables N(0, 1).
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
