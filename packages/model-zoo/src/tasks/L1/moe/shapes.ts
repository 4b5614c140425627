/**
 * The MoE shapes of the real configs the L1 / L2 MoE tasks take their production cases from (HF config.json values):
 * Mixtral-8x7B (8 experts, top-2, hidden 4096, expert intermediate 14336) and Qwen3-30B-A3B (128 experts, top-8,
 * hidden 2048, moe_intermediate_size 768, norm_topk_prob), plus DeepSeek-V3's group-limited routing for grouped_topk.
 */
export interface MoeShape {
  readonly name: string;
  readonly numExperts: number;
  readonly topK: number;
  readonly hidden: number;
  readonly intermediate: number;
  readonly renormalize: boolean;
}

export const MIXTRAL_8X7B: MoeShape = { name: 'mixtral-8x7b', numExperts: 8, topK: 2, hidden: 4096, intermediate: 14336, renormalize: true };
export const QWEN3_30B_A3B: MoeShape = { name: 'qwen3-30b-a3b', numExperts: 128, topK: 8, hidden: 2048, intermediate: 768, renormalize: true };
/** DeepSeek-V3: 256 routed experts in 8 groups, top-4 groups, top-8 experts, sigmoid scores with a correction bias, scale 2.5. */
export const DEEPSEEK_V3_ROUTING = { name: 'deepseek-v3', numExperts: 256, topK: 8, hidden: 7168, numExpertGroup: 8, topkGroup: 4, routedScalingFactor: 2.5 } as const;

/** Token counts of the production cases: bs-1 and batched decode, a prefill chunk. */
export const MOE_TOKENS = [1, 32, 4096] as const;

/** Distinct random expert ids per token (what a router gives): [T, K] row-major. */
export function randomRouting(rng: { int(lo: number, hi: number): number }, T: number, E: number, K: number): number[] {
  const ids: number[] = [];
  for (let t = 0; t < T; t++) {
    const row = new Set<number>();
    while (row.size < K) row.add(rng.int(0, E));
    ids.push(...row);
  }
  return ids;
}
