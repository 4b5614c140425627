import { F, Module, type Tensor } from '@fastkernels/core';
import { defineL1OpTask } from '../../define-op-task.js';
import { withSequenceDims } from './gla-common.js';
import { DELTA_FORWARD, DELTA_OUTPUTS, deltaL2norm, deltaScale, deltaWork, gatedDeltaRuleReference, makeDeltaInputs, qwen3NextDeltaCase } from './delta-rule-common.js';

/**
 * FLA's chunk_gated_delta_rule (fla.ops.gated_delta_rule.chunk; vLLM's fla/ops copy) as a module: the gated delta rule
 * over a prefill, computed in chunks of 64 (the UT transform inside a chunk, the state between chunks). The same function
 * as the recurrence, so its reference is the recurrence (chunkGatedDeltaRuleReference, the chunked algorithm in float64,
 * is checked against it at every chunk size in delta-rule.test.ts). forward(q, k, v, g, beta, initial_state?) ->
 * [o, final_state]; scale and use_qk_l2norm_in_kernel are constructor arguments (FLA takes them per call).
 */
export class ChunkGatedDeltaRule extends Module {
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
    return F.chunkGatedDeltaRule(q, k, v, g, beta, { scale: this.scale, initial_state: initialState, output_final_state: !ssmStateIndices, use_qk_l2norm_in_kernel: this.useQkL2normInKernel, cu_seqlens: cuSeqlens, ssm_state_indices: ssmStateIndices });
  }
}

export const chunkGatedDeltaRuleTask = defineL1OpTask('chunk_gated_delta_rule', {
  id: 'L1/chunk_gated_delta_rule',
  className: 'ChunkGatedDeltaRule',
  mirrors: 'fla.ops.gated_delta_rule.chunk_gated_delta_rule',
  description: 'Chunked gated delta rule (prefill): the recurrence computed chunkwise (UT transform within a chunk, state across chunks); grouped value heads, optional in-kernel q/k l2norm; state [B, HV, K, V] f32 in and out.',
  architectures: ['qwen3_next'],
  baseline: ChunkGatedDeltaRule,
  init: [
    { name: 'scale', type: 'float', optional: true, default: null, doc: 'null: K^-0.5' },
    { name: 'useQkL2normInKernel', type: 'bool', optional: true, default: false },
  ],
  forward: DELTA_FORWARD,
  params: {},
  outputs: DELTA_OUTPUTS,
  attrs: (c) => ({ scale: deltaScale(c), output_final_state: true, use_qk_l2norm_in_kernel: deltaL2norm(c) }),
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
  makeInputs: makeDeltaInputs,
  reference: ([q, k, v, g, beta, s0], _p, c) => gatedDeltaRuleReference({ q: q!, k: k!, v: v!, g: g!, beta: beta!, s0: s0 ?? null, scale: deltaScale(c), l2norm: deltaL2norm(c) }),
  work: deltaWork,
});
