import { DTYPE_INFO, F, Module, defineTask, hostArray, type HostArray, type Tensor } from '@fastkernels/core';
import { bytesOf, randn } from '../../../common/inputs.js';
import { DENSE_MOE_LLM } from '../../families.js';
import { MIXTRAL_8X7B, MOE_TOKENS, QWEN3_30B_A3B, type MoeShape } from './shapes.js';

/**
 * vLLM's topk_softmax (torch.ops._moe_C.topk_softmax, called by fused_topk): softmax over each token's router logits
 * in float32, the top-k probabilities and their expert ids (descending; ties: the lower expert id first), renormalised
 * to sum to 1 when `renormalize` (Mixtral always; Qwen3-MoE with norm_topk_prob; gpt-oss, whose softmax over the k
 * largest logits is the same thing). forward(gatingOutput [T, E]) -> [topkWeights f32 [T, K], topkIds i32 [T, K]], as
 * fused_topk returns them (its token_expert_indices are not kept): core's topk_softmax op.
 */
export class TopKSoftmax extends Module {
  constructor(
    readonly topk: number,
    readonly renormalize = false,
  ) {
    super();
    if (!Number.isInteger(topk) || topk < 1) throw new RangeError(`TopKSoftmax: topk must be a positive integer, got ${topk}`);
  }

  forward(gatingOutput: Tensor): [Tensor, Tensor] {
    const E = gatingOutput.shape[1]!;
    if (this.topk > E) throw new RangeError(`TopKSoftmax: topk ${this.topk} exceeds the ${E} experts`);
    // one registry op (one launch where a backend has the kernel; its decomposition elsewhere)
    return F.topkSoftmax(gatingOutput, this.topk, { renormalize: this.renormalize });
  }
}

/**
 * Golden float64 routing of one token: softmax of the logits, the k largest (ties: lower index first), renormalised
 * when asked. Returns [weights [T, K], ids [T, K]].
 */
export function topkSoftmaxReference(logits: HostArray, k: number, renormalize: boolean): [HostArray, HostArray] {
  const [T, E] = logits.shape as [number, number];
  const weights = hostArray([T, k]);
  const ids = hostArray([T, k]);
  for (let t = 0; t < T; t++) {
    const row = logits.data.subarray(t * E, (t + 1) * E);
    let max = -Infinity;
    for (let e = 0; e < E; e++) max = Math.max(max, row[e]!);
    let sum = 0;
    const p = new Float64Array(E);
    for (let e = 0; e < E; e++) sum += p[e] = Math.exp(row[e]! - max);
    for (let e = 0; e < E; e++) p[e]! /= sum;
    const taken = new Uint8Array(E);
    let kept = 0;
    for (let j = 0; j < k; j++) {
      let best = -1;
      for (let e = 0; e < E; e++) if (!taken[e] && (best < 0 || p[e]! > p[best]!)) best = e;
      taken[best] = 1;
      ids.data[t * k + j] = best;
      weights.data[t * k + j] = p[best]!;
      kept += p[best]!;
    }
    if (renormalize) for (let j = 0; j < k; j++) weights.data[t * k + j]! /= kept;
  }
  return [weights, ids];
}

const prod = (m: MoeShape, T: number) => ({ name: `${m.name}-T${T}`, dtype: 'bf16' as const, dims: { T, E: m.numExperts, K: m.topK }, init: [m.topK, m.renormalize] });

export const topkSoftmaxTask = defineTask(
  {
    id: 'L1/topk_softmax',
    level: 1,
    className: 'TopKSoftmax',
    family: [DENSE_MOE_LLM],
    architectures: ['jamba', 'mixtral', 'qwen3_moe', 'qwen3_vl'],
    mirrors: 'vllm.model_executor.layers.fused_moe.fused_moe.fused_topk',
    description: 'MoE routing: float32 softmax over the router logits, top-k weights and expert ids (optionally renormalised).',
    init: [
      { name: 'topk', type: 'int' },
      { name: 'renormalize', type: 'bool', optional: true, default: false, doc: 'Mixtral: always; Qwen3-MoE: norm_topk_prob' },
    ],
    inputs: [{ name: 'gatingOutput', dtype: 'act', shape: ['T', 'E'], doc: 'router logits (data-dependent: captured from real runs)' }],
    outputs: [
      { name: 'topkWeights', dtype: 'f32', shape: ['T', 'K'] },
      { name: 'topkIds', dtype: 'i32', shape: ['T', 'K'] },
    ],
    cases: {
      ci: [
        { name: 'mixtral-like-f32', dtype: 'f32', dims: { T: 13, E: 8, K: 2 }, init: [2, true] },
        { name: 'qwen3-like-no-renorm-f32', dtype: 'f32', dims: { T: 7, E: 64, K: 8 }, init: [8, false] },
        { name: 'mixtral-like-bf16', dtype: 'bf16', dims: { T: 9, E: 8, K: 2 }, init: [2, true] },
      ],
      production: [...MOE_TOKENS.map((T) => prod(MIXTRAL_8X7B, T)), ...MOE_TOKENS.map((T) => prod(QWEN3_30B_A3B, T))],
    },
  },
  {
    baseline: TopKSoftmax,
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.T!, c.dims.E!], c.dtype, 2)],
    reference: ([logits], _p, c) => topkSoftmaxReference(logits!, c.init[0] as number, (c.init[1] as boolean | undefined) ?? false),
    work: (c) => {
      const { T, E, K } = c.dims as { T: number; E: number; K: number };
      return { bytes: bytesOf([T, E], DTYPE_INFO[c.dtype].itemsize) + T * K * 8, flops: 5 * T * E + T * E * Math.log2(Math.max(2, K)) };
    },
  },
);
