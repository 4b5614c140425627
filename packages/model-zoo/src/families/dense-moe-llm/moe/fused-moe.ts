/**
 * vLLM's FusedMoE layer (vllm/model_executor/layers/fused_moe/layer.py) at tp / ep size 1, unquantised: it owns the
 * stacked expert weights under vLLM's names, w13_weight [E, 2I, H] (each expert's gate rows then up rows) and
 * w2_weight [E, H, I], and forward(hiddenStates, routerLogits) routes (L1/topk_softmax; vLLM's use_grouped_topk path,
 * L1/grouped_topk, is for the DeepSeek-style models that come later) and runs L2/fused_experts. Not a task of its own (the original has none):
 * the MoE blocks (L2/mixtral_moe, L2/qwen3_moe) hold it as `experts`, so the checkpoint's per-expert tensors stack into
 * `...experts.w13_weight` through the family's weight rules, and both its children resolve through the registry, so
 * a candidate for either task runs inside every MoE model.
 */
import { Module, Tensor, type Rng } from '@fastkernels/core';
import { initProjections } from '../L2/attention.js';
import type { TopKSoftmax } from '../../../tasks/L1/moe/topk_softmax.js';
import type { FusedExperts } from '../L2/fused_experts.js';

export class FusedMoE extends Module {
  readonly w13Weight: Tensor;
  readonly w2Weight: Tensor;
  private readonly router: TopKSoftmax;
  private readonly fusedExperts: FusedExperts;
  constructor(
    readonly numExperts: number,
    readonly topK: number,
    readonly hiddenSize: number,
    readonly intermediateSize: number,
    readonly renormalize = true,
  ) {
    super();
    if (topK > numExperts) throw new RangeError(`FusedMoE: top_k ${topK} exceeds the ${numExperts} experts`);
    this.w13Weight = this.parameter('w13_weight', [numExperts, 2 * intermediateSize, hiddenSize]);
    this.w2Weight = this.parameter('w2_weight', [numExperts, hiddenSize, intermediateSize]);
    this.router = this.createModule('router', 'L1/topk_softmax', topK, renormalize);
    this.fusedExperts = this.createModule('fused_experts', 'L2/fused_experts', numExperts, topK, 'silu');
  }

  forward(hiddenStates: Tensor, routerLogits: Tensor): Tensor {
    const [weights, ids] = this.router.forward(routerLogits);
    try {
      return this.fusedExperts.forward(hiddenStates, this.w13Weight, this.w2Weight, weights, ids);
    } finally {
      weights.dispose();
      ids.dispose();
    }
  }
}

/**
 * Task parameters of the MoE modules: the projections as initProjections draws them (weights ~ N(0, 1/fan_in), norms
 * ~ 1 + N(0, 0.01)), the router sharper (std 8/sqrt(H): logit gaps well above the bf16 rounding of its input, so a bf16 run routes as the float64 reference does), and each expert tensor ~ N(0, 1/fan_in).
 */
export function initMoeParameters(m: Module, rng: Rng): void {
  initProjections(m, rng);
  for (const [name, p] of m.namedParameters()) {
    let std: number;
    if (name.endsWith('w13_weight') || name.endsWith('w2_weight')) std = 1 / Math.sqrt(p.shape[2]!);
    else if (name.endsWith('gate.weight')) std = 8 / Math.sqrt(p.shape[1]!);
    else continue;
    const t = Tensor.fromArray(p.backend, rng.fillNormal(p.numel, std), p.shape, p.dtype, { device: p.device });
    p.copy_(t);
    t.dispose();
  }
}
