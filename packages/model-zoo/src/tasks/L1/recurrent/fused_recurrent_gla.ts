import { F, Module, type Tensor } from '@fastkernels/core';
import { defineL1OpTask } from '../../define-op-task.js';
import { GLA_2_7B_HEADS, GLA_OUTPUTS, caseScale, glaForward, withSequenceDims, glaRecurrenceReference, glaWork, makeGlaInputs } from './gla-common.js';

/**
 * FLA's fused_recurrent_gla (fla.ops.gla.fused_recurrent_gla) as a module: the token-by-token recurrence, what
 * GatedLinearAttention runs for T <= 64 (decode steps, short prompts). forward(q, k, v, gk, initial_state?) ->
 * [o, final_state]; scale is a constructor argument (FLA takes it per call).
 */
export class FusedRecurrentGLA extends Module {
  constructor(readonly scale: number | null = null) {
    super();
  }

  /**
   * The engine calls it with a state pool (vLLM's fused_recurrent_gated_delta_rule form): initialState is the pool
   * [slots, H, K, V] f32, ssmStateIndices [N] picks each sequence's row, which is updated in place; then only o is
   * returned. cuSeqlens packs N sequences along T of a B = 1 input (FLA's varlen).
   */
  forward(q: Tensor, k: Tensor, v: Tensor, gk: Tensor, initialState: Tensor | null = null, cuSeqlens: Tensor | null = null, ssmStateIndices: Tensor | null = null): Tensor[] {
    return F.fusedRecurrentGla(q, k, v, gk, { scale: this.scale, initial_state: initialState, output_final_state: !ssmStateIndices, cu_seqlens: cuSeqlens, ssm_state_indices: ssmStateIndices });
  }
}

const { H, K, V } = GLA_2_7B_HEADS;
const decode = (B: number) => ({ name: `gla-2.7b-decode-b${B}`, dtype: 'bf16' as const, dims: { B, T: 1, H, K, V }, init: [], options: { initial_state: true } });

export const fusedRecurrentGlaTask = defineL1OpTask('fused_recurrent_gla', {
  id: 'L1/fused_recurrent_gla',
  className: 'FusedRecurrentGLA',
  mirrors: 'fla.ops.gla.fused_recurrent_gla',
  description: 'Recurrent gated linear attention (decode): S = diag(exp(gk_t)) S + k_t^T v_t, o_t = scale q_t S, state [B, H, K, V] f32 in and out.',
  architectures: ['gla', 'retnet'],
  baseline: FusedRecurrentGLA,
  init: [{ name: 'scale', type: 'float', optional: true, default: null, doc: 'null: K^-0.5' }],
  forward: glaForward('gk', true),
  params: {},
  outputs: GLA_OUTPUTS,
  attrs: (c) => ({ scale: caseScale(c), output_final_state: true }),
  cases: {
    ci: withSequenceDims([
      { name: 'small-decode-state', dtype: 'f32', dims: { B: 3, T: 1, H: 2, K: 8, V: 12 }, init: [], options: { initial_state: true, gateNormalizer: 4 } },
      { name: 'small-prompt-bf16', dtype: 'bf16', dims: { B: 2, T: 9, H: 2, K: 16, V: 8 }, init: [0.25], options: { initial_state: true, gateNormalizer: 2 } },
    ]),
    production: withSequenceDims([decode(1), decode(64), decode(256), { name: 'gla-2.7b-prompt-64', dtype: 'bf16', dims: { B: 1, T: 64, H, K, V }, init: [] }]),
  },
  makeInputs: makeGlaInputs,
  reference: ([q, k, v, g, s0], _p, c) => glaRecurrenceReference(q!, k!, v!, g!, s0 ?? null, caseScale(c)),
  work: glaWork,
});
