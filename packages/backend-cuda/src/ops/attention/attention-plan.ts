/**
 * Launch plans of the attention kernels (kernels/attention_decode.cu, kernels/attention_prefill.cu): pure
 * functions of the shapes and the device's SM count, unit-tested without a GPU.
 */
import { cudaTuning } from '../../tuning/load.js';
import type { AttentionTuning } from '../../tuning/schema.js';

// The knobs are the tuning's attention section (tuning/*.json, docs/tuning.md). Why the mma decode defaults: short
// rings (2 stages) fit three CTAs an SM; 16 CTAs an SM halves how often the per-CTA ramp is paid at large batch; 64-key
// splits give a short bs-1 context enough CTAs; loading the first cache tiles before the PDL wait hides their DRAM
// latency behind the kernel before. Figures: docs/experiments.md.

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

export function planDecode(p: DecodePlanInput, tuning: AttentionTuning = cudaTuning().attention): DecodePlan {
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

function planDecodeMma(p: DecodePlanInput, group: number, tuning: AttentionTuning): DecodePlan {
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
  tuning: AttentionTuning = cudaTuning().attention,
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
