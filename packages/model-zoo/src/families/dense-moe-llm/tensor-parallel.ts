/**
 * How a Llama-family model splits over a tensor-parallel group (vLLM's llama.py with tp_size W), in one place: the
 * modules build from it and the weight loader cuts checkpoint tensors with it.
 *  - attention: QKVParallelLinear (numHeads / W query heads and max(1, numKvHeads / W) kv heads per rank, kv heads
 *    replicated when W > numKvHeads), attention over the rank's heads (its own KV cache), RowParallelLinear o_proj;
 *  - MLP: MergedColumnParallelLinear gate_up_proj ([I / W, I / W] per rank), RowParallelLinear down_proj;
 *  - embedding: replicated (see embeddingReplicated);
 *  - LM head: split over the vocabulary (ColumnParallelLinear with gatherOutput: every rank ends with the full
 *    logits), replicated when the vocabulary does not divide by W.
 * At W = 1 the modules build exactly what they built before tensor parallelism (L1/linear everywhere).
 */
import { UserError, currentTensorParallelGroup, qkvLayout, type QkvLayout, type TensorParallelGroup } from '@fastkernels/core';
import type { LlamaConfig } from './config.js';

/**
 * The embedding is replicated, not vocab-parallel: a lookup reads one row per token, so splitting the table saves only
 * memory (1 GiB of bf16 for Llama-3-8B, small beside an H200's 141 GB) and costs an all-reduce of [T, H] per step,
 * a latency that bs-1 decode feels; a replicated lookup is also exactly the W = 1 result.
 */
export const embeddingReplicated = true;

export interface LlamaTensorParallelPlan {
  readonly rank: number;
  readonly world: number;
  /** Query and kv heads per rank (QKVParallelLinear's arithmetic). */
  readonly heads: QkvLayout;
  /** gate / up rows and down_proj columns per rank. */
  readonly intermediatePerRank: number;
  /** The LM head is split over the vocabulary and all-gathered (else replicated: the vocabulary does not divide). */
  readonly vocabParallelHead: boolean;
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
  };
}
