/**
 * Launch planning of moe_align on CUDA (kernels/moe_align.cu): one CTA of 1024 threads, whose first W warps each own a
 * contiguous chunk of the slots and a row of per-expert counts in shared memory; W is as large as the counts leave room
 * for in the default 48 KiB (at most 32; one warp still runs any slot count, more slowly). Pure: unit-tested on the CPU.
 */

/** Shared memory a CTA may use without opting in. */
export const MOE_ALIGN_SMEM_LIMIT = 48 * 1024;
export const MOE_ALIGN_THREADS = 1024;
const MAX_WARPS = MOE_ALIGN_THREADS / 32;

export interface MoeAlignPlan {
  /** warps owning a chunk of the slots and a row of counts */
  readonly countWarps: number;
  /** dynamic shared memory: (countWarps E + 2 E + 1) ints (per-warp counts [W][E], totals [E], starts [E + 1]) */
  readonly smemBytes: number;
}

const smemOf = (warps: number, E: number) => (warps * E + 2 * E + 1) * 4;

/** The plan for E experts, or null where even one warp's counts do not fit (E past ~6000). */
export function planMoeAlign(E: number): MoeAlignPlan | null {
  let warps = MAX_WARPS;
  while (warps > 1 && smemOf(warps, E) > MOE_ALIGN_SMEM_LIMIT) warps--;
  if (smemOf(warps, E) > MOE_ALIGN_SMEM_LIMIT) return null;
  return { countWarps: warps, smemBytes: smemOf(warps, E) };
}
