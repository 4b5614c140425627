import { F, Module, type Tensor } from '@fastkernels/core';
import { defineL1OpTask } from '../../define-op-task.js';
import { withSequenceDims } from './gla-common.js';
import { DELTA_OUTPUTS, KDA_FORWARD, deltaL2norm, deltaScale, gatedDeltaRuleReference, kdaWork, kimiKdaCase, makeKdaInputs } from './delta-rule-common.js';

/**
 * FLA's chunk_kda (fla.ops.kda.chunk; vLLM's fla/ops/kda copy) as a module: Kimi Delta Attention over a prefill, the
 * gated delta rule with a decay per key channel computed chunkwise. The same function as the recurrence, so its
 * reference is the recurrence (the chunked algorithm in float64 is checked against it at every chunk size in
 * delta-rule.test.ts). forward(q, k, v, g, beta, initial_state?) -> [o, final_state]; scale and
 * use_qk_l2norm_in_kernel are constructor arguments (FLA takes them per call; Kimi-Linear passes the l2norm on).
 */
export class ChunkKDA extends Module {
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
    return F.chunkKda(q, k, v, g, beta, { scale: this.scale, initial_state: initialState, output_final_state: !ssmStateIndices, use_qk_l2norm_in_kernel: this.useQkL2normInKernel, cu_seqlens: cuSeqlens, ssm_state_indices: ssmStateIndices });
  }
}

export const chunkKdaTask = defineL1OpTask('chunk_kda', {
  id: 'L1/chunk_kda',
  className: 'ChunkKDA',
  mirrors: 'fla.ops.kda.chunk_kda',
  description: 'Chunked Kimi Delta Attention (prefill): the gated delta rule with a per-key-channel decay, S = diag(exp(g_t)) S; S += k_t (beta_t (v_t - k_t^T S))^T; o_t = scale q_t S, computed chunkwise; optional in-kernel q/k l2norm; state [B, HV, K, V] f32 in and out.',
  architectures: ['kimi_linear'],
  baseline: ChunkKDA,
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
  makeInputs: makeKdaInputs,
  reference: ([q, k, v, g, beta, s0], _p, c) => gatedDeltaRuleReference({ q: q!, k: k!, v: v!, g: g!, beta: beta!, s0: s0 ?? null, scale: deltaScale(c), l2norm: deltaL2norm(c) }),
  work: kdaWork,
});
