import { DTYPE_INFO, F, Module, defineTask, hostArray, type Tensor } from '@fastkernels/core';
import { bytesOf, randn } from '../../../common/inputs.js';
import type { GateLinear } from '../../../tasks/L1/moe/gate_linear.js';
import type { Linear } from '../../../tasks/L1/linear/linear.js';
import { FusedMoE } from '../../dense-moe-llm/moe/fused-moe.js';
import { FAMILY } from '../family.js';
import type { GLAMLP } from './gla_mlp.js';
import { initQwen3NextParameters, qnConfigOf } from '../qwen3-next-cases.js';
import { QWEN3_NEXT_80B, tinyQwen3NextConfig, type Qwen3NextConfig } from '../qwen3-next-config.js';
import { refSharedExpertMoe } from '../qwen3-next-reference.js';

/**
 * HF's Qwen3NextSparseMoeBlock (vLLM's Qwen3NextSparseMoeBlock; the original's SharedExpertMoE) at tp / ep size 1: gate
 * (L1/gate_linear, mlp.gate.weight), the routed experts (vLLM's FusedMoE: softmax top-k renormalised with norm_topk_prob,
 * experts.w13_weight / w2_weight stacked from the checkpoint's experts.N.gate_proj / up_proj / down_proj), plus the
 * shared expert, a SwiGLU MLP of shared_expert_intermediate_size with the checkpoint's gate_proj / up_proj / down_proj
 * (the same module as FLA's GatedMLP: L2/gla_mlp), scaled per token by sigmoid(shared_expert_gate(x)) (a [1, D]
 * linear). forward(hiddenStates [T, D]) -> [T, D].
 */
export class SharedExpertMoE extends Module {
  private readonly gate: GateLinear;
  readonly experts: FusedMoE;
  readonly sharedExpert: GLAMLP;
  readonly sharedExpertGate: Linear;
  constructor(readonly config: Qwen3NextConfig) {
    super();
    const { hiddenSize: D, numExperts: E, numExpertsPerTok: K, moeIntermediateSize: I, normTopkProb } = config;
    this.gate = this.createModule('gate', 'L1/gate_linear', D, E, false);
    this.experts = this.registerModule('experts', new FusedMoE(E, K, D, I, normTopkProb));
    this.sharedExpert = this.createModule('shared_expert', 'L2/gla_mlp', D, null, config.sharedExpertIntermediateSize, 'swish');
    this.sharedExpertGate = this.createModule('shared_expert_gate', 'L1/linear', D, 1, false);
  }

  forward(hiddenStates: Tensor): Tensor {
    const temps: Tensor[] = [];
    const t = (x: Tensor) => (temps.push(x), x);
    try {
      const logits = t(this.gate.forward(hiddenStates));
      const routed = t(this.experts.forward(hiddenStates, logits));
      const shared = t(this.sharedExpert.forward(hiddenStates));
      const scale = t(F.sigmoid(t(this.sharedExpertGate.forward(hiddenStates))));
      return F.add(routed, t(F.mul(shared, scale)));
    } finally {
      for (const x of temps) x.dispose();
    }
  }
}

const moeCase = (name: string, dtype: 'f32' | 'bf16', cfg: Qwen3NextConfig, T: number) => ({ name, dtype, dims: { T, H: cfg.hiddenSize }, init: [cfg] });

export const sharedExpertMoeTask = defineTask(
  {
    id: 'L2/shared_expert_moe',
    level: 2,
    className: 'SharedExpertMoE',
    family: [FAMILY],
    architectures: ['qwen3_next'],
    mirrors: 'transformers.models.qwen3_next.modeling_qwen3_next.Qwen3NextSparseMoeBlock',
    description: "Qwen3-Next's sparse block: router linear, softmax top-k (renormalised), fused SwiGLU experts, plus a shared SwiGLU expert scaled by sigmoid(shared_expert_gate(x)).",
    init: [{ name: 'config', type: 'object', doc: 'the parsed Qwen3-Next config (Qwen3NextConfig)' }],
    inputs: [{ name: 'hiddenStates', dtype: 'act', shape: ['T', 'H'] }],
    outputs: [{ name: 'out', dtype: 'act', shape: ['T', 'H'] }],
    tolerance: { bf16: { atol: 3e-2, rtol: 3e-2 } },
    imports: ['L1/gate_linear', 'L1/topk_softmax', 'L2/fused_experts', 'L2/gla_mlp', 'L1/linear'],
    cases: {
      ci: [
        moeCase('tiny-top2-of-8-f32', 'f32', tinyQwen3NextConfig(), 9),
        moeCase('tiny-top2-of-8-no-norm-f32', 'f32', tinyQwen3NextConfig({ norm_topk_prob: false }), 5),
        moeCase('tiny-top2-of-8-bf16', 'bf16', tinyQwen3NextConfig(), 6),
      ],
      production: [1, 64, 4096].map((T) => moeCase(`qwen3-next-80b-T${T}`, 'bf16', QWEN3_NEXT_80B, T)),
    },
  },
  {
    baseline: SharedExpertMoE,
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.T!, c.dims.H!], c.dtype)],
    initParameters: (m, _c, rng) => initQwen3NextParameters(m, rng),
    reference: ([x], params, c) => [hostArray(x!.shape, refSharedExpertMoe(x!.data, x!.shape[0]!, params, '', qnConfigOf(c)))],
    work: (c) => sharedExpertMoeWork(qnConfigOf(c), c.dims.T!, c.dtype),
  },
);

/** The experts a step can hit, the shared expert, router and shared gate; SwiGLU flops of top-k + 1 experts per token. */
export function sharedExpertMoeWork(cfg: Qwen3NextConfig, T: number, dtype: keyof typeof DTYPE_INFO) {
  const it = DTYPE_INFO[dtype].itemsize;
  const { hiddenSize: D, numExperts: E, numExpertsPerTok: K, moeIntermediateSize: I, sharedExpertIntermediateSize: S } = cfg;
  return {
    bytes: Math.min(E, T * K) * bytesOf([3 * I, D], it) + bytesOf([3 * S + E + 1, D], it) + 2 * bytesOf([T, D], it) + bytesOf([T * K, 3 * I + D], it),
    flops: 6 * T * D * (K * I + S) + 2 * T * D * (E + 1),
  };
}
