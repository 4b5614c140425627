/**
 * The GLA decode batches the GPU test (gla.gpu.test.ts) runs and the emulated test (gla-emulated.test.ts) replays with
 * the same plan: the state pool's size and each row's slot (the gated-delta-rule and KDA tests take them too); and the
 * case shapes the recurrent kernels' GPU and emulated tests share.
 */

/** GLA-2.7B's heads: 5 heads of K 256 / V 512 (families/linear-attention/config.ts). */
export const GLA27 = { H: 5, K: 256, V: 512 } as const;

/** The decode batch sizes of the GPU test: one CTA tile each way of the decode plan (BV 16 at 1, BV 32 past it). */
export const GLA_DECODE_BATCHES = [1, 7, 64] as const;

const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));

/**
 * A decode batch of D rows over a pool of D + 3 slots: row 1 is padding (-1) when D > 1, the others scattered over the
 * pool by a stride coprime to its size, so no two rows share a slot. Sequences on one slot would race on the GPU (CTAs
 * of both read and write it in place; vLLM gives each live sequence its own slot), and the float64 CPU op, which
 * gathers every row before it writes any, cannot say which order the GPU took.
 */
export function glaDecodeSlots(D: number): { idx: number[]; slots: number } {
  const slots = D + 3;
  let stride = 5;
  while (gcd(stride, slots) !== 1) stride++;
  const idx = Array.from({ length: D }, (_, i) => (D > 1 && i === 1 ? -1 : (i * stride + 2) % slots));
  const live = idx.filter((s) => s >= 0);
  if (new Set(live).size !== live.length) throw new Error(`glaDecodeSlots(${D}): slots [${idx.join(', ')}] repeat`);
  return { idx, slots };
}

/** The shape fields every recurrent kernel test case has (gla / gdn / kda, GPU and emulated). */
export interface RecurrentCaseShape {
  readonly B: number;
  readonly T: number;
  readonly H: number;
  readonly K: number;
  readonly V: number;
  /** cu_seqlens: packed sequences along T of batch row 0. */
  readonly cu?: number[];
  /** Pool slots (ssm_state_indices, -1 padding) and the pool's size; else an initial state when `init`. */
  readonly idx?: number[];
  readonly slots?: number;
  readonly init?: boolean;
  readonly final?: boolean;
  readonly scale?: number;
}

/** The fields every causal conv test case has (causal_conv1d, causal_conv1d_update; GPU and emulated). */
export interface ConvCaseShape {
  /** causal_conv1d: x [B, D, L] (packed when cu), its pool / initial state; causal_conv1d_update: decode rows. */
  readonly op: 'causal_conv1d' | 'causal_conv1d_update';
  readonly B: number;
  readonly D: number;
  readonly L: number;
  readonly W: number;
  readonly cu?: number[];
  readonly idx?: number[];
  readonly slots?: number;
  /** State columns (the pool's or the update's state). */
  readonly S?: number;
  readonly his?: number[];
  readonly init?: boolean;
  readonly bias?: boolean;
  /** x stored [B, L, D] and seen transposed (the engine's view). */
  readonly transposed?: boolean;
}
