import { F } from '@fastkernels/core';
import { defineL1OpTask } from '../../define-op-task.js';
import { withSequenceDims } from './gla-common.js';
import { DeltaRuleModule, deltaRuleTaskFields, kimiKdaCase } from './delta-rule-common.js';

/**
 * FLA's fused_recurrent_kda (fla.ops.kda; vLLM's fla/ops/kda copy) as a module: Kimi Delta Attention token by token,
 * what Kimi-Linear's KDA layers run for decode steps. forward(q, k, v, g, beta, initial_state?) -> [o, final_state];
 * scale and use_qk_l2norm_in_kernel are constructor arguments here (FLA takes them per call; Kimi-Linear passes
 * use_qk_l2norm_in_kernel = True).
 */
export class FusedRecurrentKDA extends DeltaRuleModule {
  protected readonly op = F.fusedRecurrentKda;
  // its own constructor: the task contract and the candidate loader read the parameters from it
  constructor(scale: number | null = null, useQkL2normInKernel = false) {
    super(scale, useQkL2normInKernel);
  }
}

export const fusedRecurrentKdaTask = defineL1OpTask('fused_recurrent_kda', {
  id: 'L1/fused_recurrent_kda',
  className: 'FusedRecurrentKDA',
  mirrors: 'fla.ops.kda.fused_recurrent_kda',
  description: 'Recurrent Kimi Delta Attention (decode): S = diag(exp(g_t)) S, a decay per key channel; S += k_t (beta_t (v_t - k_t^T S))^T; o_t = scale q_t S; optional in-kernel q/k l2norm; state [B, HV, K, V] f32 in and out.',
  architectures: ['kimi_linear'],
  baseline: FusedRecurrentKDA,
  ...deltaRuleTaskFields('channel'),
  cases: {
    ci: withSequenceDims([
      { name: 'small-decode-state-l2norm', dtype: 'f32', dims: { B: 3, T: 1, H: 2, HV: 4, K: 8, V: 12 }, init: [null, true], options: { initial_state: true } },
      { name: 'small-prompt-prenormed-bf16', dtype: 'bf16', dims: { B: 2, T: 9, H: 2, HV: 2, K: 16, V: 8 }, init: [0.25, false], options: { initial_state: true } },
    ]),
    production: withSequenceDims([
      kimiKdaCase('kimi-linear-48b-decode-b1', 1, 1, true),
      kimiKdaCase('kimi-linear-48b-decode-b64', 64, 1, true),
      kimiKdaCase('kimi-linear-48b-decode-b256', 256, 1, true),
    ]),
  },
});
