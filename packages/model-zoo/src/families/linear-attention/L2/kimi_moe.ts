import { DTYPE_INFO, F, Module, defineTask, hostArray, type Tensor } from '@fastkernels/core';
import { bytesOf, randn } from '../../../common/inputs.js';
import type { GateLinear } from '../../../tasks/L1/moe/gate_linear.js';
import type { GroupedTopK } from '../../../tasks/L1/moe/grouped_topk.js';
import type { FusedExperts } from '../../dense-moe-llm/L2/fused_experts.js';
import { FAMILY } from '../family.js';
import type { GLAMLP } from './gla_mlp.js';
import { initKimiParameters, kimiConfigOf } from '../kimi-linear-cases.js';
import { KIMI_LINEAR_48B, tinyKimiLinearConfig, type KimiLinearConfig } from '../kimi-linear-config.js';
import { refKimiMoe } from '../kimi-linear-reference.js';

/**
 * vLLM's FusedMoE with DeepSeek-V3 routing (use_grouped_topk, scoring_func sigmoid / softmax, e_score_correction_bias,
 * routed_scaling_factor) at tp / ep size 1: the stacked expert weights under vLLM's names (w13_weight [E, 2I, D]: each
 * expert's w1 (gate) rows then w3 (up) rows; w2_weight [E, D, I]), the router L1/grouped_topk and L2/fused_experts.
 * Not a task of its own: L2/kimi_moe holds it as `experts`.
 */
export class KimiFusedMoE extends Module {
  readonly w13Weight: Tensor;
  readonly w2Weight: Tensor;
  private readonly router: GroupedTopK;
  private readonly fusedExperts: FusedExperts;
  constructor(readonly config: KimiLinearConfig) {
    super();
    const { numExperts: E, numExpertsPerToken: K, hiddenSize: D, moeIntermediateSize: I } = config;
    this.w13Weight = this.parameter('w13_weight', [E, 2 * I, D]);
    this.w2Weight = this.parameter('w2_weight', [E, D, I]);
    this.router = this.createModule('router', 'L1/grouped_topk', K, config.moeRenormalize, config.numExpertGroup, config.topkGroup, config.moeRouterActivationFunc, config.routedScalingFactor);
    this.fusedExperts = this.createModule('fused_experts', 'L2/fused_experts', E, K, 'silu');
  }

  forward(hiddenStates: Tensor, routerLogits: Tensor, eScoreCorrectionBias: Tensor): Tensor {
    const [weights, ids] = this.router.forward(hiddenStates, routerLogits, eScoreCorrectionBias);
    try {
      return this.fusedExperts.forward(hiddenStates, this.w13Weight, this.w2Weight, weights, ids);
    } finally {
      weights.dispose();
      ids.dispose();
    }
  }
}

/**
 * Kimi-Linear's sparse block (the remote code's KimiSparseMoeBlock; vLLM's KimiMoE) at tp / ep size 1: gate
 * (L1/gate_linear, block_sparse_moe.gate.weight) with its e_score_correction_bias (f32; the checkpoint's
 * block_sparse_moe.gate.e_score_correction_bias), the routed experts (KimiFusedMoE: sigmoid scores, the bias choosing
 * groups and experts, weights the unbiased scores renormalised, times routed_scaling_factor, as vLLM's grouped_topk; the
 * checkpoint's experts.N.w1 / w3 / w2 stacked), plus the shared experts, one SwiGLU MLP of moe_intermediate_size *
 * num_shared_experts (gate_proj / up_proj / down_proj; L2/gla_mlp), unscaled. forward(hiddenStates [T, D]) -> [T, D].
 *
 * Routing weights differ from the remote code's: its KimiMoEGate adds the correction bias to the scores in place
 * through a view, so the released PyTorch code weights the experts by the biased scores; vLLM (what this mirrors) and
 * DeepSeek-V3 weight them by the unbiased scores. Expert choice is the same.
 */
export class KimiMoE extends Module {
  private readonly gate: GateLinear;
  readonly eScoreCorrectionBias: Tensor;
  readonly experts: KimiFusedMoE;
  readonly sharedExperts: GLAMLP | null = null;
  constructor(readonly config: KimiLinearConfig) {
    super();
    const { hiddenSize: D, numExperts: E } = config;
    this.gate = this.createModule('gate', 'L1/gate_linear', D, E, false);
    this.eScoreCorrectionBias = this.parameter('e_score_correction_bias', [E], 'f32');
    this.experts = this.registerModule('experts', new KimiFusedMoE(config));
    if (config.numSharedExperts > 0) this.sharedExperts = this.createModule<GLAMLP>('shared_experts', 'L2/gla_mlp', D, null, config.moeIntermediateSize * config.numSharedExperts, 'swish');
  }

  /** The router logits [T, E] (L1/gate_linear). */
  gateLogits(hiddenStates: Tensor): Tensor {
    return this.gate.forward(hiddenStates);
  }

  forward(hiddenStates: Tensor): Tensor {
    const temps: Tensor[] = [];
    const t = (x: Tensor) => (temps.push(x), x);
    try {
      const logits = t(this.gateLogits(hiddenStates));
      const routed = this.experts.forward(hiddenStates, logits, this.eScoreCorrectionBias);
      if (!this.sharedExperts) return routed;
      t(routed);
      return F.add(routed, t(this.sharedExperts.forward(hiddenStates)));
    } finally {
      for (const x of temps) x.dispose();
    }
  }
}

const moeCase = (name: string, dtype: 'f32' | 'bf16', cfg: KimiLinearConfig, T: number) => ({ name, dtype, dims: { T, H: cfg.hiddenSize }, init: [cfg] });

export const kimiMoeTask = defineTask(
  {
    id: 'L2/kimi_moe',
    level: 2,
    className: 'KimiMoE',
    family: [FAMILY],
    architectures: ['kimi_linear'],
    mirrors: 'vllm.model_executor.models.kimi_linear.KimiMoE',
    description: "Kimi-Linear's sparse block: router linear, DeepSeek-V3 grouped top-k over sigmoid scores with e_score_correction_bias (weights the unbiased scores, renormalised, times routed_scaling_factor), fused SwiGLU experts, plus the shared SwiGLU experts.",
    init: [{ name: 'config', type: 'object', doc: 'the parsed Kimi-Linear config (KimiLinearConfig)' }],
    inputs: [{ name: 'hiddenStates', dtype: 'act', shape: ['T', 'H'] }],
    outputs: [{ name: 'out', dtype: 'act', shape: ['T', 'H'] }],
    tolerance: { bf16: { atol: 3e-2, rtol: 3e-2 } },
    imports: ['L1/gate_linear', 'L1/grouped_topk', 'L2/fused_experts', 'L2/gla_mlp'],
    cases: {
      ci: [
        moeCase('tiny-top2-of-8-2-groups-f32', 'f32', tinyKimiLinearConfig(), 9),
        moeCase('tiny-top2-of-8-softmax-no-renorm-f32', 'f32', tinyKimiLinearConfig({ moe_router_activation_func: 'softmax', moe_renormalize: false, num_expert_group: 1, num_shared_experts: 2 }), 5),
        moeCase('tiny-top2-of-8-bf16', 'bf16', tinyKimiLinearConfig(), 6),
      ],
      production: [1, 64, 4096].map((T) => moeCase(`kimi-linear-48b-T${T}`, 'bf16', KIMI_LINEAR_48B, T)),
    },
  },
  {
    baseline: KimiMoE,
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.T!, c.dims.H!], c.dtype)],
    initParameters: (m, _c, rng) => initKimiParameters(m, rng),
    reference: ([x], params, c) => [hostArray(x!.shape, refKimiMoe(x!.data, x!.shape[0]!, params, '', kimiConfigOf(c)))],
    work: (c) => kimiMoeWork(kimiConfigOf(c), c.dims.T!, c.dtype),
  },
);

/** The experts a step can hit, the shared experts and the router; SwiGLU flops of top-k routed + the shared width per token. */
export function kimiMoeWork(cfg: KimiLinearConfig, T: number, dtype: keyof typeof DTYPE_INFO) {
  const it = DTYPE_INFO[dtype].itemsize;
  const { hiddenSize: D, numExperts: E, numExpertsPerToken: K, moeIntermediateSize: I, numSharedExperts: S } = cfg;
  return {
    bytes: Math.min(E, T * K) * bytesOf([3 * I, D], it) + bytesOf([3 * S * I + E, D], it) + E * 4 + 2 * bytesOf([T, D], it) + bytesOf([T * K, 3 * I + D], it),
    flops: 6 * T * D * I * (K + S) + 2 * T * D * E,
  };
}
