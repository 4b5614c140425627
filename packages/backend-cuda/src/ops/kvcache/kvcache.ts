/**
 * Paged KV-cache write on the CUDA backend (kernels/kvcache.cu), vLLM reshape_and_cache_flash, in place:
 * key/value [T, nKv, head] into kCache/vCache [numBlocks, blockSize, nKv, head] at slotMapping [T]
 * (slot = block * blockSize + offset; negative = padding, skipped). The block size comes from the cache shape.
 * Strided key/value (e.g. slices of a fused QKV output) and strided caches are addressed in place as long as
 * the head dim is contiguous. Slots past the cache are skipped and, with index checks on (common.ts), throw.
 * A latent cache (MLA: one tensor given as both caches, one tensor as key and value) is written once (FK_KV_PARTS=1):
 * the kernel's pointers are __restrict__, so it never writes one row through both.
 */
import { Tensor, formatShape, shapesEqual } from '@fastkernels/core';
import { cudaTuning } from '../../tuning/load.js';
import type { SpineContext } from '../launch/context.js';
import { asDType, checkIndexFlag, contiguousOf, disposeAll, floatCType, indexCType, lastDimContiguous, indexFlag, itemsizeOf, ptr, roundUp, spineKernel, vecWidth } from '../launch/common.js';

// Tokens a block: the tuning's kvStore.tokensPerBlock (FK_TPB, tuning/*.json); their loads are all in flight before
// the first store.

export function storeKvcache(ctx: SpineContext, key: Tensor, value: Tensor, kCache: Tensor, vCache: Tensor, slotMapping: Tensor): void {
  const op = 'storeKvcache_';
  const { T, nKv, head, numBlocks, blockSize, C, S } = kvStoreGeometry(op, key.shape, value, kCache, vCache, slotMapping);
  if (T === 0 || nKv === 0 || head === 0) return;
  const temps: Tensor[] = [];
  try {
    const src = (t: Tensor) => {
      const c = t.dtype === kCache.dtype ? t : asDType(t, kCache.dtype, temps);
      return lastDimContiguous(c, temps);
    };
    const latent = isLatentWrite(op, key, value, kCache, vCache);
    const k = src(key);
    const v = latent ? k : src(value);
    // A cache whose head dim is strided is written through a contiguous copy, then copied back.
    const kc = lastDimContiguous(kCache, temps);
    const vc = latent ? kc : lastDimContiguous(vCache, temps);
    const slots = contiguousOf(slotMapping, temps);
    const ks = k.strides as number[];
    const vs = v.strides as number[];
    const kcs = kc.strides as number[];
    const vcs = vc.strides as number[];
    const vec = vecWidth(itemsizeOf(kCache.dtype), [head, ks[0]!, ks[1]!, vs[0]!, vs[1]!, kcs[0]!, kcs[1]!, kcs[2]!, vcs[0]!, vcs[1]!, vcs[2]!], [ptr(k), ptr(v), ptr(kc), ptr(vc)]);
    const parts = latent ? 1 : 2;
    const work = (parts * nKv * head) / vec;
    const threads = Math.min(256, Math.max(32, roundUp(work, 32)));
    const flag = indexFlag(ctx, kc);
    const tpb = Math.max(1, Math.floor(cudaTuning().kvStore.tokensPerBlock));
    // The kernel reads every token's key and value rows without waiting for its slot id (a padding token's row is read,
    // not stored), so the slot ids' round trip overlaps the rows'. Run 15 (H200 kernel bench, 3 processes, against
    // waiting for the slot ids): T256 5.9-6.0 -> 5.5-5.6 us, T4096 15.1-15.2 -> 14.1-14.5 us (52% -> 55-56% of copy),
    // T16384 41.6-41.8 -> 39.8-40.7 us (76% -> 78-79%).
    // the K/V build's defines are unchanged (its compiled module too); the latent build adds FK_KV_PARTS=1
    const kern = spineKernel(ctx, 'kvcache.cu', 'fk_store_kvcache', { FK_T: C, FK_VEC: vec, FK_SLOT: S, FK_TPB: tpb, ...(latent ? { FK_KV_PARTS: 1 } : {}) });
    kern.launch(Math.min(Math.ceil(T / tpb), 2 ** 31 - 1), threads, 0, [
      k, latent ? 0 : v, kc, latent ? 0 : vc, slots, T, nKv, head,
      ks[0]!, ks[1]!, vs[0]!, vs[1]!, kcs[0]!, kcs[1]!, kcs[2]!, vcs[0]!, vcs[1]!, vcs[2]!,
      blockSize, numBlocks * blockSize, flag,
    ]);
    ctx.noteKvWrite(ptr(kc), ptr(vc), T);
    if (kc !== kCache) ctx.ops.copy(kCache, kc);
    if (!latent && vc !== vCache) ctx.ops.copy(vCache, vc);
    checkIndexFlag(ctx, flag, () => `${op}: a slot is out of range for ${numBlocks} blocks of ${blockSize}`);
  } finally {
    disposeAll(temps);
  }
}

/**
 * Whether a cache write is a latent one: kCache and vCache are the same memory (one tensor given twice). Its rows are the
 * keys and the values, so key and value must be one tensor too (else one of them would be lost).
 */
export function isLatentWrite(op: string, key: Tensor, value: Tensor, kCache: Tensor, vCache: Tensor): boolean {
  const same = (a: Tensor, b: Tensor) => a === b || (a.storage === b.storage && a.offset === b.offset && shapesEqual(a.strides, b.strides));
  if (!same(kCache, vCache)) return false;
  if (!same(key, value)) throw new RangeError(`${op}: kCache and vCache are one tensor (a latent cache) but key and value differ`);
  return true;
}

/** A KV-cache write's checked arguments: T tokens of nKv heads of `head`, the cache's blocks, the C++ types. */
export interface KvStoreGeometry {
  readonly T: number;
  readonly nKv: number;
  readonly head: number;
  readonly numBlocks: number;
  readonly blockSize: number;
  /** C++ types of the caches and the slot mapping */
  readonly C: string;
  readonly S: 'int' | 'long long';
}

/** Checks KV-cache write arguments the way storeKvcache_ does (errors name `op`), the key given by its shape. */
export function kvStoreGeometry(op: string, keyShape: readonly number[], value: Tensor, kCache: Tensor, vCache: Tensor, slotMapping: Tensor): KvStoreGeometry {
  if (keyShape.length !== 3 || value.rank !== 3) throw new RangeError(`${op}: key ${formatShape(keyShape)} and value ${formatShape(value.shape)} must be [T, nKv, head]`);
  if (kCache.rank !== 4 || vCache.rank !== 4) throw new RangeError(`${op}: caches must be [numBlocks, blockSize, nKv, head]`);
  const [T, nKv, head] = keyShape as [number, number, number];
  const [numBlocks, blockSize] = kCache.shape as [number, number];
  if (!shapesEqual(value.shape, keyShape)) throw new RangeError(`${op}: value ${formatShape(value.shape)} does not match key ${formatShape(keyShape)}`);
  if (!shapesEqual(kCache.shape, vCache.shape)) throw new RangeError(`${op}: vCache ${formatShape(vCache.shape)} does not match kCache ${formatShape(kCache.shape)}`);
  if (kCache.shape[2] !== nKv || kCache.shape[3] !== head) throw new RangeError(`${op}: cache ${formatShape(kCache.shape)} does not hold [${nKv}, ${head}] per slot`);
  if (slotMapping.numel !== T) throw new RangeError(`${op}: slotMapping has ${slotMapping.numel} entries for ${T} tokens`);
  if (kCache.dtype !== vCache.dtype) throw new TypeError(`${op}: kCache ${kCache.dtype} and vCache ${vCache.dtype} differ`);
  const C = floatCType(kCache, op, 'kCache');
  const S = indexCType(slotMapping, op, 'slotMapping');
  return { T, nKv, head, numBlocks, blockSize, C, S };
}
