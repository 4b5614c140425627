import { DTYPE_INFO, F, Module, Tensor, defineTask, hostArray, type HostArray, type TaskCase } from '@fastkernels/core';
import { bytesOf, fromInts, randn } from '../../../common/inputs.js';
import { DENSE_MOE_LLM } from '../../families.js';
import { moeAlignReference, moeAlignSizes } from './moe_align.js';
import { MIXTRAL_8X7B, MOE_TOKENS, QWEN3_30B_A3B, randomRouting, type MoeShape } from './shapes.js';

/**
 * vLLM's invoke_fused_moe_kernel (the Triton fused_moe_kernel) without quantisation: the grouped GEMM over the slots
 * moe_align sorted and padded. For each entry i of sortedTokenIds below T*topK (the others are padding), with e the
 * expert of its block: C[id] = A[id / topK] @ B[e]^T, times topkWeights.flatten()[id] when mulRoutedWeight.
 * forward(a [M, K], b [E, N, K], topkWeights f32 [M, topK], sortedTokenIds [P], expertIds [NB], numTokensPostPadded [1])
 * -> c [M, topK, N] (vLLM writes its C argument, [M, topK, N], in place). fused_experts runs it twice: w13 with the
 * router's topK, then w2 on the activations [M*topK, I] with topK 1 and the routed weights applied.
 *
 * One registry op, fused_moe_gemm: a float64 kernel on the CPU, the block-tiled tensor-core kernel on CUDA (one
 * launch, the routing read on the device, so it can be captured in a CUDA graph), the gather / grouped_gemm / scatter
 * decomposition elsewhere.
 */
export class MoeGroupedGemm extends Module {
  constructor(
    readonly topK: number,
    readonly mulRoutedWeight = false,
  ) {
    super();
  }

  forward(a: Tensor, b: Tensor, topkWeights: Tensor, sortedTokenIds: Tensor, expertIds: Tensor, numTokensPostPadded: Tensor): Tensor {
    return F.fusedMoeGemm(a, b, topkWeights, sortedTokenIds, expertIds, numTokensPostPadded, { top_k: this.topK, mul_routed_weight: this.mulRoutedWeight });
  }
}

/** Golden float64 grouped GEMM over the aligned slots, in plain loops. */
export function moeGroupedGemmReference(a: HostArray, b: HostArray, topkWeights: HostArray, sorted: HostArray, expertIds: HostArray, topK: number, mulRoutedWeight: boolean): HostArray {
  const [M, K] = a.shape as [number, number];
  const N = b.shape[1]!;
  const bs = sorted.data.length / expertIds.data.length;
  const c = hostArray([M, topK, N]);
  sorted.data.forEach((id, i) => {
    if (id >= M * topK) return;
    const e = expertIds.data[Math.floor(i / bs)]!;
    const row = Math.floor(id / topK);
    const scale = mulRoutedWeight ? topkWeights.data[id]! : 1;
    for (let n = 0; n < N; n++) {
      let acc = 0;
      for (let k = 0; k < K; k++) acc += a.data[row * K + k]! * b.data[(e * N + n) * K + k]!;
      c.data[id * N + n] = acc * scale;
    }
  });
  return c;
}

interface GemmCase {
  T: number;
  K: number;
  N: number;
  E: number;
  topK: number;
  blockSize: number;
  mul: boolean;
}
// the block size is P / NB (moe_align pads P to whole blocks), so a captured case (dims only) gives it too
const gemmOf = (c: Pick<TaskCase, 'dims' | 'init'>): GemmCase => ({
  T: c.dims.M!, K: c.dims.K!, N: c.dims.N!, E: c.dims.E!, topK: c.init[0] as number, blockSize: c.dims.P! / c.dims.NB!, mul: (c.init[1] as boolean | undefined) ?? false,
});

function gemmCase(name: string, dtype: 'f32' | 'bf16', M: number, K: number, N: number, E: number, topK: number, blockSize: number, mul: boolean) {
  const { maxPadded, numBlocks } = moeAlignSizes(M * topK, E, blockSize);
  return { name, dtype, dims: { M, K, N, E, TK: topK, P: maxPadded, NB: numBlocks }, init: [topK, mul] };
}
// the w13 GEMM of a layer (hidden -> 2 * intermediate) at vLLM's block sizes
const prod = (m: MoeShape, T: number) => gemmCase(`${m.name}-w13-T${T}`, 'bf16', T, m.hidden, 2 * m.intermediate, m.numExperts, m.topK, T <= 64 ? 16 : 64, false);

export const moeGroupedGemmTask = defineTask(
  {
    id: 'L1/moe_grouped_gemm',
    level: 1,
    className: 'MoeGroupedGemm',
    family: [DENSE_MOE_LLM],
    architectures: ['deepseek', 'gemma4', 'glm', 'jamba', 'kimi_linear', 'mixtral', 'qwen3_moe', 'qwen3_next', 'qwen3_vl'],
    mirrors: 'vllm.model_executor.layers.fused_moe.fused_moe.invoke_fused_moe_kernel',
    description: "The MoE expert GEMM over moe_align's sorted, block-padded slots: each block of rows times its expert's weight, optionally scaled by the routed weight.",
    init: [
      { name: 'topK', type: 'int', doc: 'slots per row of a (1 for the w2 GEMM, whose rows are already the slots)' },
      { name: 'mulRoutedWeight', type: 'bool', optional: true, default: false },
    ],
    inputs: [
      { name: 'a', dtype: 'act', shape: ['M', 'K'] },
      { name: 'b', dtype: 'act', shape: ['E', 'N', 'K'], doc: "the experts' weights (w13_weight / w2_weight)" },
      { name: 'topkWeights', dtype: 'f32', shape: ['M', 'TK'] },
      { name: 'sortedTokenIds', dtype: 'i32', shape: ['P'], doc: 'from moe_align (data-dependent)' },
      { name: 'expertIds', dtype: 'i32', shape: ['NB'] },
      { name: 'numTokensPostPadded', dtype: 'i32', shape: [1] },
    ],
    outputs: [{ name: 'c', dtype: 'act', shape: ['M', 'TK', 'N'] }],
    cases: {
      ci: [
        gemmCase('w13-top2-of-8-f32', 'f32', 11, 32, 48, 8, 2, 4, false),
        gemmCase('w2-weighted-f32', 'f32', 14, 24, 32, 8, 1, 4, true),
        gemmCase('w13-top4-of-16-bf16', 'bf16', 6, 32, 40, 16, 4, 8, false),
      ],
      production: [
        ...MOE_TOKENS.map((T) => prod(MIXTRAL_8X7B, T)),
        ...MOE_TOKENS.map((T) => prod(QWEN3_30B_A3B, T)),
        gemmCase(`${MIXTRAL_8X7B.name}-w2-T32`, 'bf16', 32 * 2, MIXTRAL_8X7B.intermediate, MIXTRAL_8X7B.hidden, 8, 1, 16, true),
      ],
    },
  },
  {
    baseline: MoeGroupedGemm,
    makeInputs: (c, ctx, rng) => {
      const g = gemmOf(c);
      const ids = randomRouting(rng, g.T, g.E, g.topK);
      const [sorted, experts, post] = moeAlignReference({ shape: [g.T, g.topK], data: Float64Array.from(ids) }, g.blockSize, g.E);
      const weights = rng.fillNormal(g.T * g.topK).map((x) => Math.abs(x));
      return [
        randn(ctx, rng, [g.T, g.K], c.dtype),
        randn(ctx, rng, [g.E, g.N, g.K], c.dtype, 1 / Math.sqrt(g.K)),
        Tensor.fromArray(ctx.backend, weights, [g.T, g.topK], 'f32', { device: ctx.device }),
        fromInts(ctx, [...sorted.data], [sorted.data.length], 'i32'),
        fromInts(ctx, [...experts.data], [experts.data.length], 'i32'),
        fromInts(ctx, [...post.data], [1], 'i32'),
      ];
    },
    reference: ([a, b, w, sorted, experts], _p, c) => {
      const g = gemmOf(c);
      return [moeGroupedGemmReference(a!, b!, w!, sorted!, experts!, g.topK, g.mul)];
    },
    work: (c) => {
      const g = gemmOf(c);
      const it = DTYPE_INFO[c.dtype].itemsize;
      const hit = Math.min(g.E, g.T * g.topK);
      return { bytes: hit * bytesOf([g.N, g.K], it) + bytesOf([g.T, g.K], it) + bytesOf([g.T * g.topK, g.N], it), flops: 2 * g.T * g.topK * g.N * g.K };
    },
  },
);
