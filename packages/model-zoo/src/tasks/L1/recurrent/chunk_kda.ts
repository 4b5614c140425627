import { F } from '@fastkernels/core';
import { defineL1OpTask } from '../../define-op-task.js';
import { withSequenceDims } from './gla-common.js';
import { DeltaRuleModule, deltaRuleTaskFields, kimiKdaCase } from './delta-rule-common.js';

/**
 * FLA's chunk_kda (fla.ops.kda.chunk; vLLM's fla/ops/kda copy) as a module: Kimi Delta Attention over a prefill, the
 * gated delta rule with a decay per key channel computed chunkwise. The same function as the recurrence, so its
 * reference is the recurrence (the chunked algorithm in float64 is checked against it at every chunk size in
 * delta-rule.test.ts). forward(q, k, v, g, beta, initial_state?) -> [o, final_state]; scale and
 * use_qk_l2norm_in_kernel are constructor arguments (FLA takes them per call; Kimi-Linear passes the l2norm on).
 */
export class ChunkKDA extends DeltaRuleModule {
  protected readonly op = F.chunkKda;
  // its own constructor: the task contract and the candidate loader read the parameters from it
  constructor(scale: number | null = null, useQkL2normInKernel = false) {
    super(scale, useQkL2normInKernel);
  }
}

export const chunkKdaTask = defineL1OpTask('chunk_kda', {
  id: 'L1/chunk_kda',
  className: 'ChunkKDA',
  mirrors: 'fla.ops.kda.chunk_kda',
  description: 'Chunked Kimi Delta Attention (prefill): the gated delta rule with a per-key-channel decay, S = diag(exp(g_t)) S; S += k_t (beta_t (v_t - k_t^T S))^T; o_t = scale q_t S, computed chunkwise; optional in-kernel q/k l2norm; state [B, HV, K, V] f32 in and out.',
  architectures: ['kimi_linear'],
  baseline: ChunkKDA,
  ...deltaRuleTaskFields('channel'),
  cases: {
    ci: withSequenceDims([
      // T past one 64-token chunk with a partial last chunk; the state carried in and out
      { name: 'small-prefill-state-l2norm', dtype: 'f32', dims: { B: 2, T: 70, H: 2, HV: 2, K: 8, V: 12 }, init: [null, true], options: { initial_state: true } },
      { name: 'small-prompt-prenormed-bf16', dtype: 'bf16', dims: { B: 1, T: 23, H: 3, HV: 3, K: 16, V: 8 }, init: [0.5, false] },
    ]),
    production: withSequenceDims([
      kimiKdaCase('kimi-linear-48b-prefill-4096', 1, 4096, false),
      kimiKdaCase('kimi-linear-48b-prefill-16384', 1, 16384, false),
      kimiKdaCase('kimi-linear-48b-prefill-chunk-256-state', 1, 256, true),
      kimiKdaCase('kimi-linear-48b-prefill-8x1024', 8, 1024, false),
    ]),
  },
});
