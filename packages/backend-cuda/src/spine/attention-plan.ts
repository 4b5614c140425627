/**
 * Launch plans of the attention kernels (kernels/attention_decode.cu, kernels/attention_prefill.cu): pure
 * functions of the shapes and the device's SM count, unit-tested without a GPU.
 */
import { envCount, envSwitch } from '@fastkernels/core';

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
  /**
   * Use the tensor-core decode kernel (fk_paged_decode_mma: per-warp cp.async rings of 16-token K/V tiles) where
   * it applies (bf16/f16, head dim 64 or 128, 16-byte aligned caches); false: the register-streaming kernel.
   */
  decodeMma: true,
  /**
   * Warps per CTA of the mma decode kernel (each streams its own tiles; FASTKERNELS_DECODE_MMA_WARPS for the A/B bench).
   * Run 13 (bs-1 Llama-3-8B step, 128-384 keys, graph for 2176): 8 warps 4.327 ms against 4.337 at 4 (decode_ab.json).
   */
  decodeMmaWarps: envCount('FASTKERNELS_DECODE_MMA_WARPS', 4, 1),
  /**
   * cp.async ring depth per warp in 16-token tiles (0: as many as decodeMmaSmemBytes allows, 2..8;
   * FASTKERNELS_DECODE_MMA_STAGES). 2 since run 14 (H200, paged decode b64x2k, bench-kernels sweeps in
   * paged-decode-sweep-run14.txt): 64 KB a CTA at 4 warps, so three CTAs an SM instead of two; with decodeMmaCtasPerSm 16,
   * 88.3-90.0 us (70-72% of copy) against 99.5-105.2 us for run 13's 3 stages at 32 CTAs an SM. 4 stages (one CTA an
   * SM) 150 us. The bs-1 step is unchanged (4.357 against 4.372 ms, decode_ab-run14-decode.json).
   */
  decodeMmaStages: envCount('FASTKERNELS_DECODE_MMA_STAGES', 2),
  /** Shared memory one mma decode CTA may take for its rings when decodeMmaStages is 0 (96 KB: two CTAs per SM). */
  decodeMmaSmemBytes: 96 * 1024,
  /**
   * Mma decode CTAs (non-empty or not) aimed for per SM when choosing the split size (FASTKERNELS_DECODE_CTAS_PER_SM).
   * 16 since run 14: b64x2k then splits its 2048 keys in 4 of 512 (2048 CTAs) instead of 8 of 256; with 2 stages
   * 88-90 us against 91-109 at 32 (the per-CTA ramp is paid half as often). 8: 98.7 us; 24: 165 us; 48: 95 us (wave
   * quantisation). Batch 1 is unchanged (its splits stay at decodeMmaMinSplitTokens).
   */
  decodeMmaCtasPerSm: envCount('FASTKERNELS_DECODE_CTAS_PER_SM', 16, 1),
  /**
   * Fewest keys per split of the mma decode kernel (FASTKERNELS_DECODE_MIN_SPLIT_TOKENS for the A/B bench), rounded up to
   * one 16-key tile per warp (64 at 4 warps). 64 since run 15 (bs-1 Llama-3-8B step, 128-384 keys, graph for 2176;
   * decode_ab-run15-*.json): 4.276 ms against 4.314 with 128 (twice the CTAs on a short context, each with one tile a
   * warp), 4.251 against 4.277 with the RMSNorm in the GEMV. Run 13: one split of up to 4096 keys at 8 warps 4.310 ms
   * against 4.337 with 128 at 4 warps (no combine launch), but 4.723 at 4 warps; one split makes 8 CTAs stream a long
   * bs-1 context alone. Larger batches take the split from decodeMmaCtasPerSm.
   */
  decodeMmaMinSplitTokens: envCount('FASTKERNELS_DECODE_MIN_SPLIT_TOKENS', 64, 1),
  /**
   * Issue the mma decode kernel's first cache loads before its PDL wait (FK_EARLY_KV): the cache's DRAM latency then
   * overlaps the kernel before (rotary + KV write). Run 14's ablation: decode attention and its combine cost 0.22 ms of
   * the 4.36 ms bs-1 step (7 us a layer, mostly latency). Contract: the kernel just before wrote no row of these caches
   * but the newest key of each sequence (position seqLens[b] - 1), which is loaded after the wait. pagedDecodeAttention
   * takes it only where the backend saw that: the last kernel it launched was the KV-cache write of one token a
   * sequence into these caches (SpineContext.followsKvWrite), as in the engine's decode step. Run 15 (decode_ab-run15.json): 4.360 -> 4.341 ms alone, 4.305 -> 4.290 with the GEMVs' late trigger.
   * FASTKERNELS_DECODE_EARLY_KV=0 turns it off.
   */
  decodeEarlyKv: envSwitch('FASTKERNELS_DECODE_EARLY_KV', true),
  /**
   * Most splits holding keys that fk_paged_decode_combine merges from registers, every load issued at once (FK_COMBINE_UNROLL;
   * more splits: a loop a pass). 0: the loops alone (FASTKERNELS_DECODE_COMBINE_UNROLL, 0-16). The same bits either way. Run 20
   * (H200): the bs-1 Llama-3-8B step 4.190 ms against 4.217 with the loops (decode_ab-run20-norm-combine.json); b64x2k
   * unchanged (89.2-89.8 against 89.6-89.9 us in bench/decode_lab.cu: there the combine's 6 us are its launch).
   */
  decodeCombineUnroll: envCount('FASTKERNELS_DECODE_COMBINE_UNROLL', 8, 0, 16),
  /** Warps per prefill CTA on the mma path (16 query rows each; 8 measured 3-7% faster than 4 on the H200). */
  prefillWarps: 8,
  /** Skip the O rescale of a key tile when no row max of the warp moved (bit-identical; head dim 128; false: always rescale). */
  prefillSkipRescale: true,
  /** Use the tensor-core prefill kernel where it applies (bf16/f16, head dim 64 or 128). */
  prefillMma: true,
  /**
   * On sm_90a at head dim 128, the tensor-core prefill kernel on wgmma (fk_varlen_prefill_wgmma: two warpgroups of 64
   * query rows a CTA) instead of mma.sync. H200, run 19 (S 4096, Llama-3-8B heads, causal bf16): 433-481 us in the kernel
   * bench against the mma kernel's 730-756 (1.16-1.29x SDPA flash), outputs bit-identical to it in bench/prefill_wgmma_lab.cu.
   * FASTKERNELS_PREFILL_WGMMA=0 turns it off.
   */
  prefillWgmma: envSwitch('FASTKERNELS_PREFILL_WGMMA', true),
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
  /** Dtype of q and the caches (the mma kernel takes bf16/f16); absent: not eligible. */
  readonly dtype?: string;
  /** Largest vector (bytes) the caches' addresses and strides allow (cp.async needs 16); absent: vecBytes. */
  readonly cacheVecBytes?: number;
  /** Most dynamic shared memory a block may opt in to on this device (caps the mma kernel's stages); absent: no cap. */
  readonly sharedPerBlockOptin?: number;
}

/** Keys per tile of the mma decode kernel (kernels/attention_decode.cu fkdm::BN). */
export const DECODE_MMA_TILE = 16;

export interface DecodePlan {
  /** The tensor-core kernel (fk_paged_decode_mma); the fields below up to tokensPerIter describe the other one. */
  readonly mma: boolean;
  /** Mma kernel: cp.async stages per warp and dynamic shared bytes per CTA (0 for the other kernel). */
  readonly stages: number;
  readonly sharedBytes: number;
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
  const mmaOk =
    tuning.decodeMma && (p.dtype === 'bf16' || p.dtype === 'f16') && p.itemsize === 2 && (p.headDim === 64 || p.headDim === 128) && (p.cacheVecBytes ?? p.vecBytes) === 16;
  if (mmaOk) return planDecodeMma(p, group, tuning);
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
    mma: false, stages: 0, sharedBytes: 0, vecBytes: p.vecBytes, headsPerCta, unroll, warps, lanesPerRow: lpr, rows, tokensPerIter, chunk, splits,
    grid: [splits, headGroups, p.batch],
  };
}

function planDecodeMma(p: DecodePlanInput, group: number, tuning: typeof ATTENTION_TUNING): DecodePlan {
  const headsPerCta = largestDivisorAtMost(group, 16); // the 16 rows of one mma tile
  const warps = Math.max(1, Math.min(8, Math.floor(tuning.decodeMmaWarps)));
  const stageBytes = 2 * DECODE_MMA_TILE * p.headDim * p.itemsize; // K and V of one tile
  // a forced depth is capped by what the device lets one block have (run 14: 8 stages at 4 warps asked for 256 KB of 227)
  const fits = p.sharedPerBlockOptin ? Math.floor(p.sharedPerBlockOptin / (warps * stageBytes)) : 8;
  const stages = Math.max(
    2,
    Math.min(8, fits, Math.floor(tuning.decodeMmaStages > 0 ? tuning.decodeMmaStages : tuning.decodeMmaSmemBytes / (warps * stageBytes))),
  );
  const sharedBytes = warps * stages * stageBytes;
  const unit = DECODE_MMA_TILE * warps; // one tile per warp
  const headGroups = p.qHeads / headsPerCta;
  let maxCtx = p.maxBlocks * p.blockSize;
  if (p.slidingWindow > 0) maxCtx = Math.min(maxCtx, p.slidingWindow);
  let chunk: number;
  if (tuning.decodeSplitTokens > 0) {
    chunk = ceilDiv(tuning.decodeSplitTokens, unit) * unit;
  } else {
    const base = Math.max(1, p.batch * headGroups);
    const target = Math.max(1, p.multiprocessors * tuning.decodeMmaCtasPerSm);
    const least = ceilDiv(Math.max(1, tuning.decodeMmaMinSplitTokens), unit) * unit;
    chunk = Math.max(least, ceilDiv(ceilDiv(Math.max(1, maxCtx) * base, target), unit) * unit);
  }
  const splits = Math.max(1, ceilDiv(maxCtx, chunk));
  return {
    mma: true, stages, sharedBytes, vecBytes: 16, headsPerCta, unroll: 1, warps, lanesPerRow: 0, rows: 0, tokensPerIter: unit, chunk, splits,
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
  /** The kernel: fk_varlen_prefill_wgmma, fk_varlen_prefill (mma.sync) or fk_varlen_prefill_simple. */
  readonly kernel: 'wgmma' | 'mma' | 'simple';
  /** A tensor-core kernel (wgmma or mma): 16-byte aligned rows, query tiles on the grid's y. */
  readonly mma: boolean;
  /** Tensor-core kernels: skip the O rescale when no row max moved (-DFK_SKIP_RESCALE). */
  readonly skipRescale: boolean;
  readonly warps: number;
  readonly rowsPerCta: number;
  readonly grid: readonly [number, number, number];
  readonly block: number;
  readonly sharedBytes: number;
}

/** The tensor-core kernels' tile of keys (kernels/attention_prefill.cu BN). */
export const PREFILL_BN = 64;
/** fk_varlen_prefill_wgmma's dynamic shared memory (WGMMA_SMEM_BYTES): Q 2 x 16 KB, K and V 2 stages x 16 KB, 1 KB to align. */
export const PREFILL_WGMMA_SMEM_BYTES = 6 * 64 * 128 * 2 + 1024;

/** `arch`: the device's SASS target (DeviceProperties.arch); the wgmma kernel needs sm_90a. */
export function planPrefill(
  p: { totalQ: number; qHeads: number; headDim: number; dtype: string; numSeqs: number; arch?: string },
  tuning = ATTENTION_TUNING,
): PrefillPlan {
  const mma = tuning.prefillMma && (p.dtype === 'bf16' || p.dtype === 'f16') && (p.headDim === 64 || p.headDim === 128);
  // Upper bound on the tiles of bm rows over all sequences (sum of ceil(lq / bm) <= ceil(Tq / bm) + B); spare CTAs exit
  // or zero the rows no sequence covers.
  const tiles = (bm: number) => ceilDiv(p.totalQ, bm) + p.numSeqs;
  // (at head dim 64 ptxas drops the mma kernel to 128 registers and it spills with the skip branch: D 128 only)
  const skipRescale = tuning.prefillSkipRescale && p.headDim === 128;
  if (mma && tuning.prefillWgmma && p.arch === 'sm_90a' && p.headDim === 128) {
    return { kernel: 'wgmma', mma, skipRescale, warps: 8, rowsPerCta: 128, grid: [p.qHeads, tiles(128), 1], block: 256, sharedBytes: PREFILL_WGMMA_SMEM_BYTES };
  }
  if (mma) {
    const warps = tuning.prefillWarps;
    const bm = 16 * warps;
    const sharedBytes = (bm * p.headDim + 4 * PREFILL_BN * p.headDim) * 2;
    return { kernel: 'mma', mma, skipRescale, warps, rowsPerCta: bm, grid: [p.qHeads, tiles(bm), 1], block: warps * 32, sharedBytes };
  }
  const warps = 4;
  return { kernel: 'simple', mma, skipRescale: false, warps, rowsPerCta: warps, grid: [ceilDiv(p.totalQ, warps), p.qHeads, 1], block: warps * 32, sharedBytes: 0 };
}
