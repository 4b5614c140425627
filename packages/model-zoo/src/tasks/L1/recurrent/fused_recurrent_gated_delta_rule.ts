import { F } from '@fastkernels/core';
import { defineL1OpTask } from '../../define-op-task.js';
import { withSequenceDims } from './gla-common.js';
import { DeltaRuleModule, deltaRuleTaskFields, qwen3NextDeltaCase } from './delta-rule-common.js';

/**
 * FLA's fused_recurrent_gated_delta_rule (fla.ops.gated_delta_rule; vLLM's fla/ops copy) as a module: the gated delta
 * rule token by token, what Qwen3-Next's gated DeltaNet runs for decode steps. forward(q, k, v, g, beta,
 * initial_state?) -> [o, final_state]; scale and use_qk_l2norm_in_kernel are constructor arguments here (FLA takes them
 * per call; Qwen3-Next passes use_qk_l2norm_in_kernel = True).
 */
export class FusedRecurrentGatedDeltaRule extends DeltaRuleModule {
  protected readonly op = F.fusedRecurrentGatedDeltaRule;
  // its own constructor: the task contract and the candidate loader read the parameters from it
  constructor(scale: number | null = null, useQkL2normInKernel = false) {
    super(scale, useQkL2normInKernel);
  }
}

export const fusedRecurrentGatedDeltaRuleTask = defineL1OpTask('fused_recurrent_gated_delta_rule', {
  id: 'L1/fused_recurrent_gated_delta_rule',
  className: 'FusedRecurrentGatedDeltaRule',
  mirrors: 'fla.ops.gated_delta_rule.fused_recurrent_gated_delta_rule',
  description: 'Recurrent gated delta rule (decode): S = exp(g_t) S; S += k_t (beta_t (v_t - k_t^T S))^T; o_t = scale q_t S; grouped value heads, optional in-kernel q/k l2norm; state [B, HV, K, V] f32 in and out.',
  architectures: ['qwen3_next'],
  baseline: FusedRecurrentGatedDeltaRule,
  ...deltaRuleTaskFields('head'),
  cases: {
    ci: withSequenceDims([
      { name: 'small-decode-state-l2norm', dtype: 'f32', dims: { B: 3, T: 1, H: 2, HV: 4, K: 8, V: 12 }, init: [null, true], options: { initial_state: true } },
      { name: 'small-prompt-prenormed-bf16', dtype: 'bf16', dims: { B: 2, T: 9, H: 2, HV: 2, K: 16, V: 8 }, init: [0.25, false], options: { initial_state: true } },
    ]),
    production: withSequenceDims([
      qwen3NextDeltaCase('qwen3-next-80b-decode-b1', 1, 1, true),
      qwen3NextDeltaCase('qwen3-next-80b-decode-b64', 64, 1, true),
      qwen3NextDeltaCase('qwen3-next-80b-decode-b256', 256, 1, true),
    ]),
  },
});
