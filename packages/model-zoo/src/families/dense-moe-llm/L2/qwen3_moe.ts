import { Module, defineTask, hostArray, type Tensor } from '@fastkernels/core';
import { randn } from '../../../common/inputs.js';
import { FAMILY } from '../family.js';
import type { GateLinear } from '../../../tasks/L1/moe/gate_linear.js';
import { MOE_TOKENS, QWEN3_30B_A3B } from '../../../tasks/L1/moe/shapes.js';
import { FusedMoE, initMoeParameters } from '../moe/fused-moe.js';
import { denseMoeBlock } from '../moe/reference.js';
import { moeBlockCase, moeBlockWork } from './mixtral_moe.js';

/**
 * vLLM's Qwen3MoeSparseMoeBlock (vllm/model_executor/models/qwen3_moe.py; the original's class name Qwen3MoE) at
 * tp / ep size 1: gate (L1/gate_linear, mlp.gate.weight) and experts (FusedMoE with renormalize = norm_topk_prob,
 * w13_weight / w2_weight stacked from mlp.experts.N.gate_proj / up_proj / down_proj). Constructor: the config fields
 * vLLM reads (hidden_size, num_experts, num_experts_per_tok, moe_intermediate_size, norm_topk_prob).
 * forward(hiddenStates [T, H]) -> [T, H].
 */
export class Qwen3MoE extends Module {
  private readonly gate: GateLinear;
  readonly experts: FusedMoE;
  constructor(
    readonly hiddenSize: number,
    readonly numExperts: number,
    readonly numExpertsPerTok: number,
    readonly moeIntermediateSize: number,
    readonly normTopkProb = false,
  ) {
    super();
    this.gate = this.createModule('gate', 'L1/gate_linear', hiddenSize, numExperts, false);
    this.experts = this.registerModule('experts', new FusedMoE(numExperts, numExpertsPerTok, hiddenSize, moeIntermediateSize, normTopkProb));
  }

  forward(hiddenStates: Tensor): Tensor {
    const logits = this.gate.forward(hiddenStates);
    try {
      return this.experts.forward(hiddenStates, logits);
    } finally {
      logits.dispose();
    }
  }
}

const Q = QWEN3_30B_A3B;
const qwen3 = (name: string, dtype: 'f32' | 'bf16', T: number, H: number, I: number, E: number, K: number, norm: boolean) => moeBlockCase(name, dtype, T, H, I, E, K, [H, E, K, I, norm]);

export const qwen3MoeTask = defineTask(
  {
    id: 'L2/qwen3_moe',
    level: 2,
    className: 'Qwen3MoE',
    family: [FAMILY],
    architectures: ['qwen3_moe', 'qwen3_vl'],
    mirrors: 'vllm.model_executor.models.qwen3_moe.Qwen3MoeSparseMoeBlock',
    description: "Qwen3-MoE's sparse block: router linear, softmax top-k (renormalised with norm_topk_prob), fused SwiGLU experts.",
    init: [
      { name: 'hiddenSize', type: 'int' },
      { name: 'numExperts', type: 'int' },
      { name: 'numExpertsPerTok', type: 'int' },
      { name: 'moeIntermediateSize', type: 'int' },
      { name: 'normTopkProb', type: 'bool', optional: true, default: false },
    ],
    inputs: [{ name: 'hiddenStates', dtype: 'act', shape: ['T', 'H'] }],
    outputs: [{ name: 'out', dtype: 'act', shape: ['T', 'H'] }],
    tolerance: { bf16: { atol: 3e-2, rtol: 3e-2 } },
    imports: ['L1/gate_linear', 'L1/topk_softmax', 'L2/fused_experts'],
    cases: {
      ci: [
        qwen3('tiny-top4-of-16-norm-f32', 'f32', 9, 32, 24, 16, 4, true),
        qwen3('tiny-top4-of-16-no-norm-f32', 'f32', 5, 32, 24, 16, 4, false),
        qwen3('tiny-top4-of-16-norm-bf16', 'bf16', 6, 32, 24, 16, 4, true),
      ],
      production: MOE_TOKENS.map((T) => qwen3(`${Q.name}-T${T}`, 'bf16', T, Q.hidden, Q.intermediate, Q.numExperts, Q.topK, true)),
    },
  },
  {
    baseline: Qwen3MoE,
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.T!, c.dims.H!], c.dtype)],
    initParameters: (m, _c, rng) => initMoeParameters(m, rng),
    reference: ([x], params, c) => [hostArray(x!.shape, denseMoeBlock(x!.data, x!.shape[0]!, params, '', c.init[2] as number, (c.init[4] as boolean | undefined) ?? false))],
    work: (c) => moeBlockWork(c),
  },
);
