/**
 * How a Llama-family model splits over a tensor-parallel group (vLLM's llama.py with tp_size W), in one place: the
 * modules build from it and the weight loader cuts checkpoint tensors with it.
 *  - attention: QKVParallelLinear (numHeads / W query heads and max(1, numKvHeads / W) kv heads per rank, kv heads
 *    replicated when W > numKvHeads), attention over the rank's heads (its own KV cache), RowParallelLinear o_proj;
 *  - MLP: MergedColumnParallelLinear gate_up_proj ([I / W, I / W] per rank), RowParallelLinear down_proj;
 *  - embedding: split over the vocabulary (VocabParallelEmbedding: rows [r V / W, (r + 1) V / W) per rank, a masked
 *    gather and an all-reduce), replicated when the vocabulary does not divide by W;
 *  - LM head: split over the vocabulary the same way (ColumnParallelLinear with gatherOutput: every rank ends with the
 *    full logits), replicated when the vocabulary does not divide by W. Tied embeddings: both hold the same rows.
 * At W = 1 the modules build exactly what they built before tensor parallelism (L1/linear everywhere).
 */
import { UserError, currentTensorParallelGroup, qkvLayout, type QkvLayout, type TensorParallelGroup } from '@fastkernels/core';
import type { LlamaConfig } from './config.js';

export interface LlamaTensorParallelPlan {
  readonly rank: number;
  readonly world: number;
  /** Query and kv heads per rank (QKVParallelLinear's arithmetic). */
  readonly heads: QkvLayout;
  /** gate / up rows and down_proj columns per rank. */
  readonly intermediatePerRank: number;
  /** The LM head is split over the vocabulary and all-gathered (else replicated: the vocabulary does not divide). */
  readonly vocabParallelHead: boolean;
  /**
   * The embedding is split over the vocabulary (masked gather + all-reduce; else replicated), by the LM head's rule:
   * the two always agree, so a tied LM head is filled from the same rows of embed_tokens as the embedding.
   */
  readonly vocabParallelEmbedding: boolean;
}

/**
 * Check that a config splits over `world` ranks; a UserError (exit 2) names the config field, the numbers and the
 * tensor-parallel sizes that would work.
 */
export function checkLlamaTensorParallel(cfg: Pick<LlamaConfig, 'numAttentionHeads' | 'numKeyValueHeads' | 'intermediateSize'>, world: number, file = 'config.json'): void {
  if (world === 1) return;
  const { numAttentionHeads: heads, numKeyValueHeads: kv, intermediateSize: inter } = cfg;
  // kv heads are split when there are more than the ranks, replicated (W / kv ranks each) when fewer.
  const kvSplits = (w: number) => (w >= kv ? w % kv === 0 : kv % w === 0);
  const works = (w: number) => heads % w === 0 && kvSplits(w) && inter % w === 0;
  const fail = (message: string, field: string) =>
    new UserError(`${message} (${file}: ${field})`, {
      field: '--tp',
      fix: `use --tp ${[1, 2, 4, 8, 16, 32, 64].filter(works).join(', ')} (sizes that split the attention heads, the kv heads and the MLP)`,
    });
  if (heads % world !== 0) throw fail(`the number of attention heads ${heads} is not divisible by the tensor-parallel size ${world}`, 'num_attention_heads');
  if (!kvSplits(world)) {
    throw fail(
      world > kv
        ? `the tensor-parallel size ${world} is not a multiple of the number of kv heads ${kv} (kv heads are replicated over the ranks when fewer)`
        : `the number of kv heads ${kv} is not divisible by the tensor-parallel size ${world}`,
      'num_key_value_heads',
    );
  }
  if (inter % world !== 0) throw fail(`the MLP intermediate size ${inter} is not divisible by the tensor-parallel size ${world}`, 'intermediate_size');
}

/** The plan for `cfg` in `group` (default: the current tensor-parallel group); UserError when it does not split. */
export function llamaTensorParallelPlan(cfg: LlamaConfig, group: Pick<TensorParallelGroup, 'rank' | 'world'> = currentTensorParallelGroup()): LlamaTensorParallelPlan {
  const { rank, world } = group;
  checkLlamaTensorParallel(cfg, world);
  return {
    rank,
    world,
    heads: qkvLayout(cfg.headDim, cfg.numAttentionHeads, cfg.numKeyValueHeads, world),
    intermediatePerRank: cfg.intermediateSize / world,
    vocabParallelHead: world > 1 && cfg.vocabSize % world === 0,
    vocabParallelEmbedding: world > 1 && cfg.vocabSize % world === 0,
  };
}
