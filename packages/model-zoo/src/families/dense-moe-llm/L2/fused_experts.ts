import { DTYPE_INFO, Module, Tensor, defineTask, hostArray, type ExecutionContext, type HostArray, type Rng, type TaskCase } from '@fastkernels/core';
import { bytesOf, fromInts, randn } from '../../../common/inputs.js';
import { FAMILY } from '../family.js';
import type { SiluAndMul } from '../../../tasks/L1/activation/silu_and_mul.js';
import type { MoeAlign } from '../../../tasks/L1/moe/moe_align.js';
import type { MoeGroupedGemm } from '../../../tasks/L1/moe/moe_grouped_gemm.js';
import type { MoeSum } from '../../../tasks/L1/moe/moe_sum.js';
import { MIXTRAL_8X7B, MOE_TOKENS, QWEN3_30B_A3B, randomRouting, type MoeShape } from '../../../tasks/L1/moe/shapes.js';

/**
 * vLLM's fused_experts (vllm/model_executor/layers/fused_moe/fused_moe.py, fused_experts_impl) for unquantised
 * weights and activation 'silu': the routed tokens through their experts' SwiGLU MLPs, weighted and summed.
 * forward(hiddenStates [T, H], w1 [E, 2I, H] (gate | up rows: FusedMoE's w13_weight), w2 [E, H, I] (w2_weight),
 * topkWeights f32 [T, K], topkIds i32 [T, K]) -> [T, H]. The steps are vLLM's, each a registry task:
 * moe_align (block-padded slots), moe_grouped_gemm with w1 (intermediate_cache1 [T, K, 2I]), silu_and_mul
 * (intermediate_cache2 [T*K, I]), moe_grouped_gemm with w2 applying the routed weights (intermediate_cache3
 * [T, K, H]), moe_sum. Constructor: (numExperts, topK, activation, blockSize) where vLLM reads E and K from the
 * tensors and the block size (BLOCK_SIZE_M) from its tuned configs by the call's tokens; blockSize null (the default)
 * chooses it per call the same way (moeBlockSizeFor), a number fixes it.
 */
export class FusedExperts extends Module {
  /** moe_align modules by block size: the fixed one, or one for each size moeBlockSizeFor picks. */
  private readonly aligns = new Map<number, MoeAlign>();
  private readonly gemm1: MoeGroupedGemm;
  private readonly act: SiluAndMul;
  private readonly gemm2: MoeGroupedGemm;
  private readonly sum: MoeSum;
  constructor(
    readonly numExperts: number,
    readonly topK: number,
    readonly activation = 'silu',
    readonly blockSize: number | null = null,
  ) {
    super();
    if (activation !== 'silu') throw new RangeError(`FusedExperts: unsupported activation '${activation}': only silu is supported`);
    for (const bs of blockSize === null ? MOE_BLOCK_SIZES : [blockSize]) {
      this.aligns.set(bs, this.createModule(bs === (blockSize ?? MOE_BLOCK_SIZES[0]) ? 'align' : `align_bs${bs}`, 'L1/moe_align', bs, numExperts));
    }
    this.gemm1 = this.createModule('gemm1', 'L1/moe_grouped_gemm', topK, false);
    this.act = this.createModule('act', 'L1/silu_and_mul');
    this.gemm2 = this.createModule('gemm2', 'L1/moe_grouped_gemm', 1, true);
    this.sum = this.createModule('sum', 'L1/moe_sum');
  }

  forward(hiddenStates: Tensor, w1: Tensor, w2: Tensor, topkWeights: Tensor, topkIds: Tensor): Tensor {
    const [T, H] = hiddenStates.shape as [number, number];
    const K = topkIds.shape[1]!;
    if (K !== this.topK) throw new RangeError(`FusedExperts: topkIds has ${K} experts per token, built for ${this.topK}`);
    // numExperts routing buckets: the weights hold all of them, or all but the last under expert parallelism (the
    // bucket of other ranks' experts, whose slots fused_moe_gemm writes as zero rows)
    const held = w1.shape[0]!;
    if (w2.shape[0] !== held || (held !== this.numExperts && held !== this.numExperts - 1)) throw new RangeError(`FusedExperts: weights hold ${w1.shape[0]} / ${w2.shape[0]} experts, built for ${this.numExperts}`);
    const I = w2.shape[2]!;
    const owned: Tensor[] = [];
    try {
      const align = this.aligns.get(this.blockSize ?? moeBlockSizeFor(T, K, this.numExperts))!;
      const [sorted, experts, post] = align.forward(topkIds);
      owned.push(sorted, experts, post);
      const c1 = this.gemm1.forward(hiddenStates, w1, topkWeights, sorted, experts, post);
      const c1f = c1.view(T * K, 2 * I);
      owned.push(c1, c1f);
      const a = this.act.forward(c1f);
      const wFlat = topkWeights.view(T * K, 1);
      owned.push(a, wFlat);
      const c3 = this.gemm2.forward(a, w2, wFlat, sorted, experts, post);
      const c3v = c3.view(T, K, H);
      owned.push(c3, c3v);
      return this.sum.forward(c3v);
    } finally {
      for (const t of owned) t.dispose();
    }
  }
}

/** The block sizes moeBlockSizeFor chooses from. */
const MOE_BLOCK_SIZES = [16, 64, 128] as const;

/**
 * moe_align's block size for a call (vLLM's BLOCK_SIZE_M, which its tuned H100 / H200 configs raise with the tokens):
 * 16 while an expert gets at most 16 rows (decode), 64 past that, 128 past 64 rows an expert, so the fused GEMM can take
 * its 64- and 128-row tiles (a tile's rows sit in one block). At T 4096 the 128-row tile ran Mixtral's w13 in 7.0 ms
 * against 8.7 ms at 64 (bench/results/h100/ops.json); with blocks of 16 a prefill ran the 16-row decode tiles.
 */
export function moeBlockSizeFor(tokens: number, topK: number, numExperts: number): number {
  const perExpert = (tokens * topK) / Math.max(1, numExperts);
  return perExpert > 64 ? 128 : perExpert > 16 ? 64 : 16;
}

/** Golden float64 MoE: per token, sum over its k experts of weight * w2[e] (silu(w1_gate[e] x) * w1_up[e] x). */
export function fusedExpertsReference(x: HostArray, w1: HostArray, w2: HostArray, topkWeights: HostArray, topkIds: HostArray): HostArray {
  const [T, H] = x.shape as [number, number];
  const I = w2.shape[2]!;
  const K = topkIds.shape[1]!;
  const out = hostArray([T, H]);
  const act = new Float64Array(I);
  for (let t = 0; t < T; t++) {
    for (let k = 0; k < K; k++) {
      const e = topkIds.data[t * K + k]!;
      const wt = topkWeights.data[t * K + k]!;
      for (let i = 0; i < I; i++) {
        let g = 0;
        let u = 0;
        for (let h = 0; h < H; h++) {
          g += w1.data[(e * 2 * I + i) * H + h]! * x.data[t * H + h]!;
          u += w1.data[(e * 2 * I + I + i) * H + h]! * x.data[t * H + h]!;
        }
        act[i] = (g / (1 + Math.exp(-g))) * u;
      }
      for (let h = 0; h < H; h++) {
        let y = 0;
        for (let i = 0; i < I; i++) y += w2.data[(e * H + h) * I + i]! * act[i]!;
        out.data[t * H + h]! += wt * y;
      }
    }
  }
  return out;
}

function expertsCase(name: string, dtype: 'f32' | 'bf16', T: number, H: number, I: number, E: number, K: number, blockSize: number | null = 16) {
  return { name, dtype, dims: { T, H, I, E, K, GU: 2 * I }, init: [E, K, 'silu', blockSize] };
}
// production shapes take the block size the engine does (by the tokens: moeBlockSizeFor)
const prod = (m: MoeShape, T: number) => expertsCase(`${m.name}-T${T}`, 'bf16', T, m.hidden, m.intermediate, m.numExperts, m.topK, null);

/** Weights ~ N(0, 1/fan_in), routing: distinct experts per token with positive weights summing to 1. */
export function makeExpertsInputs(c: Pick<TaskCase, 'dims' | 'dtype'>, ctx: ExecutionContext, rng: Rng): Tensor[] {
  const { T, H, I, E, K } = c.dims as { T: number; H: number; I: number; E: number; K: number };
  const ids = randomRouting(rng, T, E, K);
  const raw = Array.from({ length: T * K }, () => 0.1 + rng.uniform());
  const weights = raw.map((v, j) => v / raw.slice(Math.floor(j / K) * K, Math.floor(j / K) * K + K).reduce((a, b) => a + b, 0));
  return [
    randn(ctx, rng, [T, H], c.dtype),
    randn(ctx, rng, [E, 2 * I, H], c.dtype, 1 / Math.sqrt(H)),
    randn(ctx, rng, [E, H, I], c.dtype, 1 / Math.sqrt(I)),
    Tensor.fromArray(ctx.backend, weights, [T, K], 'f32', { device: ctx.device }),
    fromInts(ctx, ids, [T, K], 'i32'),
  ];
}

/** Bytes and FLOPs of the experts a step hits (at most min(E, T*K) expert weights read). */
export function expertsWork(c: Pick<TaskCase, 'dims' | 'dtype'>): { bytes: number; flops: number } {
  const { T, H, I, E, K } = c.dims as { T: number; H: number; I: number; E: number; K: number };
  const it = DTYPE_INFO[c.dtype].itemsize;
  const hit = Math.min(E, T * K);
  return {
    bytes: hit * bytesOf([3 * I, H], it) + 2 * bytesOf([T, H], it) + bytesOf([T * K, 3 * I + H], it) + T * K * 8,
    flops: 6 * T * K * H * I + 4 * T * K * I + T * K * H,
  };
}

export const fusedExpertsTask = defineTask(
  {
    id: 'L2/fused_experts',
    level: 2,
    className: 'FusedExperts',
    family: [FAMILY],
    architectures: ['deepseek', 'gemma4', 'glm', 'jamba', 'kimi_linear', 'mixtral', 'qwen3_moe', 'qwen3_next', 'qwen3_vl'],
    mirrors: 'vllm.model_executor.layers.fused_moe.fused_moe.fused_experts',
    description: 'Routed tokens through their experts (SwiGLU): align, grouped GEMM w13, silu_and_mul, grouped GEMM w2 with the routed weights, sum over the top-k.',
    init: [
      { name: 'numExperts', type: 'int' },
      { name: 'topK', type: 'int' },
      { name: 'activation', type: 'string', optional: true, default: 'silu' },
      { name: 'blockSize', type: 'int', optional: true, default: null, doc: "moe_align's block (vLLM's BLOCK_SIZE_M); null: by the call's tokens, as vLLM's tuned configs (16 / 64 / 128)" },
    ],
    inputs: [
      { name: 'hiddenStates', dtype: 'act', shape: ['T', 'H'] },
      { name: 'w1', dtype: 'act', shape: ['E', 'GU', 'H'], doc: 'w13_weight: gate rows then up rows per expert' },
      { name: 'w2', dtype: 'act', shape: ['E', 'H', 'I'] },
      { name: 'topkWeights', dtype: 'f32', shape: ['T', 'K'], doc: 'data-dependent (the router)' },
      { name: 'topkIds', dtype: 'i32', shape: ['T', 'K'], doc: 'data-dependent (the router)' },
    ],
    outputs: [{ name: 'out', dtype: 'act', shape: ['T', 'H'] }],
    tolerance: { bf16: { atol: 3e-2, rtol: 3e-2 } },
    imports: ['L1/moe_align', 'L1/moe_grouped_gemm', 'L1/silu_and_mul', 'L1/moe_sum'],
    cases: {
      ci: [
        expertsCase('top2-of-8-f32', 'f32', 9, 32, 48, 8, 2, 4),
        expertsCase('top4-of-16-decode-f32', 'f32', 1, 32, 24, 16, 4),
        expertsCase('top2-of-8-bf16', 'bf16', 7, 32, 40, 8, 2, 4),
      ],
      production: [...MOE_TOKENS.map((T) => prod(MIXTRAL_8X7B, T)), ...MOE_TOKENS.map((T) => prod(QWEN3_30B_A3B, T))],
    },
  },
  {
    baseline: FusedExperts,
    makeInputs: (c, ctx, rng) => makeExpertsInputs(c, ctx, rng),
    initParameters: () => {},
    reference: ([x, w1, w2, w, ids]) => [fusedExpertsReference(x!, w1!, w2!, w!, ids!)],
    work: (c) => expertsWork(c),
  },
);
