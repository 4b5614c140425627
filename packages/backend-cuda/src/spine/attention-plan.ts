/**
 * Launch plans of the attention kernels (kernels/attention_decode.cu, kernels/attention_prefill.cu): pure
 * functions of the shapes and the device's SM count, unit-tested without a GPU.
 */

/** Knobs for the GPU tuning runs (the defaults are the shipped choice). */
export const ATTENTION_TUNING = {
  /** Warps per decode CTA. */
  decodeWarps: 4,
  /** Most query heads of one kv group a decode CTA takes (registers grow with it: 4 -> 128 regs at D 128 bf16). */
  decodeMaxHeadsPerCta: 4,
  /** Tokens per lane row loaded before first use (0: 4, or 2 when heads x elements per lane > 32). */
  decodeUnroll: 0,
  /** Decode CTAs aimed for per SM when choosing the KV split (empty splits exit at once). */
  decodeCtasPerSm: 8,
  /** Fewest keys per split (partials cost 2 x heads x D x 4 bytes per split). */
  decodeMinSplitTokens: 256,
  /** Force a split size in tokens (0: automatic). */
  decodeSplitTokens: 0,
  /** Warps per prefill CTA on the mma path (16 query rows each). */
  prefillWarps: 4,
  /** Use the tensor-core prefill kernel where it applies (bf16/f16, head dim 64 or 128). */
  prefillMma: true,
};

export interface DecodePlanInput {
  readonly batch: number;
  readonly qHeads: number;
  readonly kvHeads: number;
  readonly headDim: number;
  readonly itemsize: number;
  /** Largest vector (bytes) every address and stride allows (16, 8, 4 or 2). */
  readonly vecBytes: number;
  readonly blockSize: number;
  readonly maxBlocks: number;
  readonly slidingWindow: number;
  readonly multiprocessors: number;
}

export interface DecodePlan {
  readonly vecBytes: number;
  readonly headsPerCta: number;
  readonly unroll: number;
  readonly warps: number;
  /** Lanes per token row, token rows per CTA, tokens per CTA iteration. */
  readonly lanesPerRow: number;
  readonly rows: number;
  readonly tokensPerIter: number;
  /** Keys per split and number of splits (1: no combine kernel). */
  readonly chunk: number;
  readonly splits: number;
  readonly grid: readonly [number, number, number];
}

const ceilDiv = (a: number, b: number) => Math.ceil(a / b);

/** Largest divisor of n that is <= cap. */
export function largestDivisorAtMost(n: number, cap: number): number {
  for (let d = Math.min(n, cap); d > 1; d--) if (n % d === 0) return d;
  return 1;
}

/** Lanes that read one head row of `vectors` vectors (a power of two <= 32), as the kernel computes it. */
export function lanesPerRow(vectors: number): number {
  let t = 1;
  while (t < vectors && t < 32) t *= 2;
  return t;
}

export function planDecode(p: DecodePlanInput, tuning = ATTENTION_TUNING): DecodePlan {
  const group = p.qHeads / p.kvHeads;
  const headsPerCta = largestDivisorAtMost(group, Math.max(1, tuning.decodeMaxHeadsPerCta));
  const vec = p.vecBytes / p.itemsize;
  const vectors = p.headDim / vec;
  const lpr = lanesPerRow(vectors);
  const perLane = Math.ceil(vectors / lpr) * vec;
  const unroll = tuning.decodeUnroll > 0 ? tuning.decodeUnroll : headsPerCta * perLane > 32 ? 2 : 4;
  const warps = tuning.decodeWarps;
  const rows = warps * (32 / lpr);
  const tokensPerIter = rows * unroll;
  const headGroups = p.qHeads / headsPerCta;
  let maxCtx = p.maxBlocks * p.blockSize;
  if (p.slidingWindow > 0) maxCtx = Math.min(maxCtx, p.slidingWindow);
  let chunk: number;
  if (tuning.decodeSplitTokens > 0) {
    chunk = ceilDiv(tuning.decodeSplitTokens, tokensPerIter) * tokensPerIter;
  } else {
    const base = Math.max(1, p.batch * headGroups);
    const want = ceilDiv(p.multiprocessors * tuning.decodeCtasPerSm, base);
    const most = Math.max(1, ceilDiv(maxCtx, tuning.decodeMinSplitTokens));
    const splits0 = Math.min(Math.max(1, want), most);
    chunk = ceilDiv(Math.max(1, ceilDiv(maxCtx, splits0)), tokensPerIter) * tokensPerIter;
  }
  const splits = Math.max(1, ceilDiv(maxCtx, chunk));
  return {
    vecBytes: p.vecBytes, headsPerCta, unroll, warps, lanesPerRow: lpr, rows, tokensPerIter, chunk, splits,
    grid: [splits, headGroups, p.batch],
  };
}

/** Largest of 16, 8, 4, 2 bytes (not below the item size) dividing every byte offset and stride given. */
export function vectorBytes(itemsize: number, byteQuantities: readonly number[]): number {
  for (const vb of [16, 8, 4, 2]) {
    if (vb < itemsize) break;
    if (byteQuantities.every((x) => x % vb === 0)) return vb;
  }
  return itemsize;
}

export interface PrefillPlan {
  readonly mma: boolean;
  readonly warps: number;
  readonly rowsPerCta: number;
  readonly grid: readonly [number, number, number];
  readonly block: number;
  readonly sharedBytes: number;
}

/** The mma kernel's tile of keys (kernels/attention_prefill.cu BN). */
export const PREFILL_BN = 64;

export function planPrefill(p: { totalQ: number; qHeads: number; headDim: number; dtype: string; numSeqs: number }, tuning = ATTENTION_TUNING): PrefillPlan {
  const mma = tuning.prefillMma && (p.dtype === 'bf16' || p.dtype === 'f16') && (p.headDim === 64 || p.headDim === 128);
  if (mma) {
    const warps = tuning.prefillWarps;
    const bm = 16 * warps;
    // Upper bound on the tiles over all sequences (sum of ceil(lq / BM) <= ceil(Tq / BM) + B); spare CTAs exit
    // or zero the rows no sequence covers.
    const tiles = ceilDiv(p.totalQ, bm) + p.numSeqs;
    const sharedBytes = (bm * p.headDim + 4 * PREFILL_BN * p.headDim) * 2;
    return { mma, warps, rowsPerCta: bm, grid: [p.qHeads, tiles, 1], block: warps * 32, sharedBytes };
  }
  const warps = 4;
  return { mma, warps, rowsPerCta: warps, grid: [ceilDiv(p.totalQ, warps), p.qHeads, 1], block: warps * 32, sharedBytes: 0 };
}
