/**
 * vLLM's FusedMoE layer (vllm/model_executor/layers/fused_moe/layer.py), unquantised, at ep size 1 or W: it owns the
 * stacked expert weights under vLLM's names, w13_weight [E, 2I, H] (each expert's gate rows then up rows) and
 * w2_weight [E, H, I], and forward(hiddenStates, routerLogits) routes (L1/topk_softmax; vLLM's use_grouped_topk path,
 * L1/grouped_topk, is for the DeepSeek-style models that come later) and runs L2/fused_experts. Not a task of its own (the original has none):
 * the MoE blocks (L2/mixtral_moe, L2/qwen3_moe) hold it as `experts`, so the checkpoint's per-expert tensors stack into
 * `...experts.w13_weight` through the family's weight rules, and both its children resolve through the registry, so
 * a candidate for either task runs inside every MoE model.
 *
 * Expert parallelism (layers/parallel/expert-parallel.ts on, a tensor-parallel group of world W > 1): the layer holds
 * only its rank's E / W experts. Its input is replicated (attention's o_proj all-reduce leaves every rank the same
 * hidden states, and the router is replicated), so each rank routes every token, computes its own experts' part of
 * every token and the parts are summed by one all-reduce: vLLM's naive EP dispatch / combine, with no all-to-all and
 * every shape fixed by T alone (CUDA-graph capturable). Another rank's experts are remapped to one extra routing
 * bucket (id E / W) whose blocks the grouped GEMM writes as zero rows (fused_moe_gemm's expert >= E), so a rank does
 * the GEMM work of its own experts only.
 */
import { Module, OpScope, Tensor, currentTensorParallelGroup, type Rng, type TensorParallelGroup } from '@fastkernels/core';
import { currentExpertParallel, expertParallelRange } from '../../../layers/parallel/expert-parallel.js';
import { initProjections } from '../L2/attention.js';
import type { TopKSoftmax } from '../../../tasks/L1/moe/topk_softmax.js';
import type { FusedExperts } from '../L2/fused_experts.js';

export class FusedMoE extends Module {
  readonly w13Weight: Tensor;
  readonly w2Weight: Tensor;
  private readonly router: TopKSoftmax;
  private readonly fusedExperts: FusedExperts;
  /** Expert parallelism: the group the parts are summed over and this rank's first expert (null: every expert here). */
  private readonly ep: { readonly group: TensorParallelGroup; readonly start: number; readonly count: number } | null;
  constructor(
    readonly numExperts: number,
    readonly topK: number,
    readonly hiddenSize: number,
    readonly intermediateSize: number,
    readonly renormalize = true,
  ) {
    super();
    if (topK > numExperts) throw new RangeError(`FusedMoE: top_k ${topK} exceeds the ${numExperts} experts`);
    const group = currentTensorParallelGroup();
    this.ep = currentExpertParallel() && group.world > 1 ? { group, ...expertParallelRange(numExperts, group.rank, group.world) } : null;
    const local = this.ep?.count ?? numExperts;
    this.w13Weight = this.parameter('w13_weight', [local, 2 * intermediateSize, hiddenSize]);
    this.w2Weight = this.parameter('w2_weight', [local, hiddenSize, intermediateSize]);
    this.router = this.createModule('router', 'L1/topk_softmax', topK, renormalize);
    // under EP one more routing bucket than local experts: the slots of other ranks' experts (zero rows)
    this.fusedExperts = this.createModule('fused_experts', 'L2/fused_experts', this.ep ? local + 1 : numExperts, topK, 'silu');
  }

  /** The experts this layer holds: [start, start + count) of numExperts. */
  get localExperts(): { start: number; count: number } {
    return this.ep ? { start: this.ep.start, count: this.ep.count } : { start: 0, count: this.numExperts };
  }

  forward(hiddenStates: Tensor, routerLogits: Tensor): Tensor {
    const [weights, ids] = this.router.forward(routerLogits);
    try {
      if (!this.ep) return this.fusedExperts.forward(hiddenStates, this.w13Weight, this.w2Weight, weights, ids);
      const localIds = this.localExpertIds(ids);
      let out: Tensor;
      try {
        out = this.fusedExperts.forward(hiddenStates, this.w13Weight, this.w2Weight, weights, localIds);
      } finally {
        localIds.dispose();
      }
      return this.ep.group.allReduce_(out); // the combine: every rank's experts' parts, summed
    } finally {
      weights.dispose();
      ids.dispose();
    }
  }

  /** Global expert ids -> this rank's (id - start), another rank's expert -> the extra bucket `count` (vLLM's expert_map). */
  private localExpertIds(ids: Tensor): Tensor {
    const { start, count } = this.ep!;
    const s = new OpScope();
    try {
      const shifted = s.op('sub', [ids, start]);
      const mine = s.op('logical_and', [s.op('ge', [shifted, 0]), s.op('lt', [shifted, count])]);
      return s.keep([s.op('to', [s.op('where', [mine, shifted, count])], { dtype: 'i32' })])[0]!;
    } catch (e) {
      s.dispose();
      throw e;
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
