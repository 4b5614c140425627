/**
 * MLA's absorbed decode on CUDA (kernels/attention_mla_decode.cu): paged decode attention over one latent "kv head"
 * whose cached rows are both the keys and the values (k_cache and v_cache one tensor), at head sizes past the paged
 * decode kernels' 256: Kimi-Linear-48B's and DeepSeek-V3's 576-wide rows (kv_lora_rank 512 + rope 64), 32 query heads
 * on each row. All the query heads of a sequence share a CTA, so each row is read from memory once for all of them.
 * pagedDecodeAttention (attention.ts) routes such calls here with the op's value width (v_head_dim: Kimi-Linear passes
 * kv_lora_rank, so only those columns are computed and written; absent, the whole row).
 */
import { formatShape, Tensor, type DType } from '@fastkernels/core';
import { cudaTuning } from '../../tuning/load.js';
import { vectorBytes } from './attention-plan.js';
import { fileKernel, hasContiguousLastDim, lastDimContiguous, ptr } from '../launch/common.js';
import type { SpineContext } from '../launch/context.js';
import { MLA_THREADS, mlaDecodeDecline, planMlaDecode, type MlaDecodePlan } from './mla-decode-plan.js';

const CTYPE: Partial<Record<DType, string>> = { f16: '__half', bf16: '__nv_bfloat16' };

/** Strides of dims 0..rank-2 of t (elements), 0 for a dim of one. */
function outerStrides(t: Tensor): number[] {
  return t.strides.slice(0, -1).map((s, i) => (t.shape[i] === 1 ? 0 : s));
}

/** An int32 contiguous copy of an index tensor unless it is one (into temps). */
function int32Contiguous(t: Tensor, temps: Tensor[]): Tensor {
  if (t.dtype === 'i32' && t.isContiguous()) return t;
  const c = t.dtype === 'i32' ? t.contiguous() : t.to('i32');
  temps.push(c);
  return c;
}

/** The -D options of one specialisation (the nvcc test builds the same). */
export function mlaDecodeDefines(dtype: 'bf16' | 'f16', headDim: number, valueDim: number, plan: Pick<MlaDecodePlan, 'headTiles' | 'stages'>, blockSize: number, cacheVecBytes: number): string[] {
  return [
    `-DFK_T=${CTYPE[dtype]}`, `-DFK_MLA_D=${headDim}`, `-DFK_MLA_DV=${valueDim}`, `-DFK_MLA_MT=${plan.headTiles}`, `-DFK_STAGES=${plan.stages}`,
    `-DFK_BS=${blockSize}`, `-DFK_MLA_CB=${Math.min(16, cacheVecBytes)}`,
  ];
}

/** The cache's chunk size: the largest of 16, 8, 4, 2 bytes dividing a row, its address and its block / token strides. */
export function mlaCacheVecBytes(cache: Tensor): number {
  const it = cache.itemsize;
  const [sblk, stok] = outerStrides(cache) as [number, number];
  return vectorBytes(it, [cache.shape[3]! * it, ptr(cache), sblk * it, stok * it]);
}

/** Why pagedDecodeAttention's call cannot run here, or null (the caller has checked the shapes against each other). */
export function mlaRouteDecline(query: Tensor, kCache: Tensor, vCache: Tensor, sinks: Tensor | null, slidingWindow: number): string | null {
  const sharedCache = ptr(kCache) === ptr(vCache) && kCache.strides.every((s, i) => s === vCache.strides[i]);
  return mlaDecodeDecline({
    dtype: query.dtype, kvHeads: kCache.shape[2]!, headDim: query.shape[2]!, sharedCache, sinks: sinks !== null, slidingWindow: Math.max(0, slidingWindow),
    cacheVecBytes: kCache.dtype === query.dtype ? mlaCacheVecBytes(kCache) : 0,
  });
}

/**
 * out [B, nQ, valueDim] = softmax(scale q K^T) V per sequence, K the cached latent rows [numBlocks, blockSize, 1, D] of
 * the sequence's blocks (blockTables [B, maxBlocks], seqLens [B]), V their first valueDim dims. One main launch, plus
 * attention_decode.cu's combine when the plan splits the keys. No host sync: capturable.
 */
export function pagedMlaDecode(
  ctx: SpineContext, query: Tensor, cache: Tensor, blockTables: Tensor, seqLens: Tensor, scale: number, valueDim = query.shape[2]!,
): Tensor {
  const what = 'pagedMlaDecode';
  if (query.rank !== 3 || cache.rank !== 4 || blockTables.rank !== 2) {
    throw new RangeError(`${what}: query [B, nQ, D], cache [numBlocks, blockSize, 1, D] and blockTables [B, maxBlocks] expected, got ${formatShape(query.shape)}, ${formatShape(cache.shape)}, ${formatShape(blockTables.shape)}`);
  }
  const [B, nQ, D] = query.shape as [number, number, number];
  const [, blockSize] = cache.shape as [number, number, number, number];
  if (cache.shape[2] !== 1 || cache.shape[3] !== D) throw new RangeError(`${what}: cache ${formatShape(cache.shape)} must be [numBlocks, blockSize, 1, ${D}]`);
  if (!(valueDim >= 1 && valueDim <= D)) throw new RangeError(`${what}: value width ${valueDim} must be in 1..${D}`);
  if (blockTables.shape[0] !== B || seqLens.numel !== B) throw new RangeError(`${what}: blockTables ${formatShape(blockTables.shape)} and seqLens ${formatShape(seqLens.shape)} must have ${B} rows`);
  if (B > 65535) throw new RangeError(`${what}: batch ${B} > 65535`);
  if (cache.dtype !== query.dtype) throw new TypeError(`${what}: the cache (${cache.dtype}) must have the query's dtype ${query.dtype}`);
  if (!hasContiguousLastDim(cache)) throw new RangeError(`${what}: the cache's rows must be contiguous`);
  const reason = mlaDecodeDecline({
    dtype: query.dtype, kvHeads: 1, headDim: D, sharedCache: true, sinks: false, slidingWindow: 0, cacheVecBytes: mlaCacheVecBytes(cache),
  });
  if (reason !== null) throw new RangeError(`${what}: ${reason}`);
  const dtype = query.dtype as 'bf16' | 'f16';
  const plan = planMlaDecode({
    batch: B, qHeads: nQ, headDim: D, blockSize, maxBlocks: blockTables.shape[1]!, multiprocessors: ctx.multiprocessors,
    sharedPerBlockOptin: ctx.runtime.properties().sharedPerBlockOptin,
  });
  if (plan === null) throw new RangeError(`${what}: head size ${D} needs more shared memory than a block may have on this device`);
  if (plan.grid[1] > 65535) throw new RangeError(`${what}: ${nQ} query heads make ${plan.grid[1]} head groups`);

  const out = Tensor.empty(query.backend, [B, nQ, valueDim], query.dtype, { device: query.device });
  if (B === 0 || nQ === 0) return out;
  const temps: Tensor[] = [];
  try {
    const q = lastDimContiguous(query, temps);
    const bt = int32Contiguous(blockTables, temps);
    const lens = int32Contiguous(seqLens, temps);
    const maxBlocks = bt.shape[1]!;
    const [qsb, qsh] = outerStrides(q) as [number, number];
    const [csblk, cstok] = outerStrides(cache) as [number, number];
    const main = fileKernel(ctx, 'attention_mla_decode.cu', 'fk_paged_mla_decode', mlaDecodeDefines(dtype, D, valueDim, plan, blockSize, mlaCacheVecBytes(cache)));
    let partAcc: Tensor | undefined;
    let partMl: Tensor | undefined;
    if (plan.splits > 1) {
      partAcc = Tensor.empty(query.backend, [B * nQ * plan.splits * valueDim], 'f32', { device: query.device });
      partMl = Tensor.empty(query.backend, [B * nQ * plan.splits * 2], 'f32', { device: query.device });
      temps.push(partAcc, partMl);
    }
    main.launch(plan.grid, MLA_THREADS, plan.sharedBytes, [
      ptr(out), partAcc ? ptr(partAcc) : 0, partMl ? ptr(partMl) : 0,
      ptr(q), qsb, qsh,
      ptr(cache), csblk, cstok,
      ptr(bt), outerStrides(bt)[0]!, maxBlocks,
      ptr(lens), nQ, scale * Math.LOG2E, plan.chunk, plan.splits,
    ]);
    if (plan.splits > 1) {
      // attention_decode.cu's combine with the options the paged decode passes (one compiled module for both); it skips
      // the sequences whose keys fit one split (the MLA kernel wrote them)
      const combine = fileKernel(ctx, 'attention_decode.cu', 'fk_paged_decode_combine', [`-DFK_T=${CTYPE[dtype]}`, `-DFK_COMBINE_UNROLL=${cudaTuning().attention.decodeCombineUnroll}`]);
      combine.launch([nQ, B, 1], Math.min(256, Math.ceil(valueDim / 32) * 32), 0, [
        ptr(out), ptr(partAcc!), ptr(partMl!), ptr(lens), maxBlocks * blockSize, nQ, valueDim, 0, plan.chunk, plan.splits, 1, 0,
      ]);
    }
  } finally {
    for (const t of temps) t.dispose();
  }
  return out;
}
