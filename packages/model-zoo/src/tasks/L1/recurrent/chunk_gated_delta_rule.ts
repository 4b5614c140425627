import { F } from '@fastkernels/core';
import { defineL1OpTask } from '../../define-op-task.js';
import { withSequenceDims } from './gla-common.js';
import { DeltaRuleModule, deltaRuleTaskFields, qwen3NextDeltaCase } from './delta-rule-common.js';

/**
 * FLA's chunk_gated_delta_rule (fla.ops.gated_delta_rule.chunk; vLLM's fla/ops copy) as a module: the gated delta rule
 * over a prefill, computed in chunks of 64 (the UT transform inside a chunk, the state between chunks). The same function
 * as the recurrence, so its reference is the recurrence (chunkGatedDeltaRuleReference, the chunked algorithm in float64,
 * is checked against it at every chunk size in delta-rule.test.ts). forward(q, k, v, g, beta, initial_state?) ->
 * [o, final_state]; scale and use_qk_l2norm_in_kernel are constructor arguments (FLA takes them per call).
 */
export class ChunkGatedDeltaRule extends DeltaRuleModule {
  protected readonly op = F.chunkGatedDeltaRule;
  // its own constructor: the task contract and the candidate loader read the parameters from it
  constructor(scale: number | null = null, useQkL2normInKernel = false) {
    super(scale, useQkL2normInKernel);
  }
}

export const chunkGatedDeltaRuleTask = defineL1OpTask('chunk_gated_delta_rule', {
  id: 'L1/chunk_gated_delta_rule',
  className: 'ChunkGatedDeltaRule',
  mirrors: 'fla.ops.gated_delta_rule.chunk_gated_delta_rule',
  description: 'Chunked gated delta rule (prefill): the recurrence computed chunkwise (UT transform within a chunk, state across chunks); grouped value heads, optional in-kernel q/k l2norm; state [B, HV, K, V] f32 in and out.',
  architectures: ['qwen3_next'],
  baseline: ChunkGatedDeltaRule,
  ...deltaRuleTaskFields('head'),
  cases: {
    ci: withSequenceDims([
      // T past one 64-token chunk with a partial last chunk; the state carried in and out
      { name: 'small-prefill-state-l2norm', dtype: 'f32', dims: { B: 2, T: 70, H: 2, HV: 4, K: 8, V: 12 }, init: [null, true], options: { initial_state: true } },
      { name: 'small-prompt-prenormed-bf16', dtype: 'bf16', dims: { B: 1, T: 23, H: 3, HV: 3, K: 16, V: 8 }, init: [0.5, false] },
    ]),
    production: withSequenceDims([
      qwen3NextDeltaCase('qwen3-next-80b-prefill-4096', 1, 4096, false),
      qwen3NextDeltaCase('qwen3-next-80b-prefill-16384', 1, 16384, false),
      qwen3NextDeltaCase('qwen3-next-80b-prefill-chunk-256-state', 1, 256, true),
      qwen3NextDeltaCase('qwen3-next-80b-prefill-8x1024', 8, 1024, false),
    ]),
  },
});
