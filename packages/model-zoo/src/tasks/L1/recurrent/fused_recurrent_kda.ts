import { F, Module, type Tensor } from '@fastkernels/core';
import { defineL1OpTask } from '../../define-op-task.js';
import { withSequenceDims } from './gla-common.js';
import { DELTA_OUTPUTS, KDA_FORWARD, deltaL2norm, deltaScale, gatedDeltaRuleReference, kdaWork, kimiKdaCase, makeKdaInputs } from './delta-rule-common.js';

/**
 * FLA's fused_recurrent_kda (fla.ops.kda; vLLM's fla/ops/kda copy) as a module: Kimi Delta Attention token by token,
 * what Kimi-Linear's KDA layers run for decode steps. forward(q, k, v, g, beta, initial_state?) -> [o, final_state];
 * scale and use_qk_l2norm_in_kernel are constructor arguments here (FLA takes them per call; Kimi-Linear passes
 * use_qk_l2norm_in_kernel = True).
 */
export class FusedRecurrentKDA extends Module {
  constructor(
    readonly scale: number | null = null,
    readonly useQkL2normInKernel = false,
  ) {
    super();
  }

  /**
   * The engine's pooled form (vLLM's): initialState is the state pool [slots, HV, K, V] f32, ssmStateIndices [N] picks
   * each sequence's row, updated in place (-1: padding); then only o is returned. cuSeqlens packs N sequences along T
   * of a B = 1 input (FLA's varlen).
   */
  forward(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, initialState: Tensor | null = null, cuSeqlens: Tensor | null = null, ssmStateIndices: Tensor | null = null): Tensor[] {
    return F.fusedRecurrentKda(q, k, v, g, beta, { scale: this.scale, initial_state: initialState, output_final_state: !ssmStateIndices, use_qk_l2norm_in_kernel: this.useQkL2normInKernel, cu_seqlens: cuSeqlens, ssm_state_indices: ssmStateIndices });
  }
}

export const fusedRecurrentKdaTask = defineL1OpTask('fused_recurrent_kda', {
  id: 'L1/fused_recurrent_kda',
  className: 'FusedRecurrentKDA',
  mirrors: 'fla.ops.kda.fused_recurrent_kda',
  description: 'Recurrent Kimi Delta Attention (decode): S = diag(exp(g_t)) S, a decay per key channel; S += k_t (beta_t (v_t - k_t^T S))^T; o_t = scale q_t S; optional in-kernel q/k l2norm; state [B, HV, K, V] f32 in and out.',
  architectures: ['kimi_linear'],
  baseline: FusedRecurrentKDA,
  init: [
    { name: 'scale', type: 'float', optional: true, default: null, doc: 'null: K^-0.5' },
    { name: 'useQkL2normInKernel', type: 'bool', optional: true, default: false },
  ],
  forward: KDA_FORWARD,
  params: {},
  outputs: DELTA_OUTPUTS,
  attrs: (c) => ({ scale: deltaScale(c), output_final_state: true, use_qk_l2norm_in_kernel: deltaL2norm(c) }),
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
  makeInputs: makeKdaInputs,
  reference: ([q, k, v, g, beta, s0], _p, c) => gatedDeltaRuleReference({ q: q!, k: k!, v: v!, g: g!, beta: beta!, s0: s0 ?? null, scale: deltaScale(c), l2norm: deltaL2norm(c) }),
  work: kdaWork,
});
