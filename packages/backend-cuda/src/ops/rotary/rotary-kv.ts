/**
 * Rotary embedding and the paged KV-cache write in one launch on the CUDA backend (kernels/rotary.cu
 * fk_rotary_store_kv): Ops.rotaryStoreKvcache, exactly rotaryEmbedding (rotary.ts) followed by storeKvcache_
 * (ops/kvcache/kvcache.ts) of the rotated key viewed as [T, nKv, headSize] and the value. The kernel rotates with fk_rotary's
 * device code and finds slots with fk_store_kvcache's, so q, k and both caches get the same bits as the two launches.
 * Declines (null: the caller runs the two ops) while the tuning's rotary.fuseKvStore is off, and where storeKvcache_ would
 * convert or copy: value or caches of another dtype than query, a cache whose head dim is strided, no key heads, one
 * tensor as both caches (a latent cache: storeKvcache_ writes it once).
 * One difference on an error path: with index checks on, an out-of-range position throws after the launch, when the
 * token's slot already holds the zeros the kernel wrote; the two ops throw after the rotary, before any cache write.
 */
import { Tensor } from '@fastkernels/core';
import type { SpineContext } from '../launch/context.js';
import { checkIndexFlag, contiguousOf, disposeAll, hasContiguousLastDim, indexFlag, itemsizeOf, lastDimContiguous, ptr, spineKernel, vecWidth } from '../launch/common.js';
import { kvStoreGeometry } from '../kvcache/kvcache.js';
import { cudaTuning } from '../../tuning/load.js';
import { rotaryGeometry, rotaryLaunchShape, tokenRows } from './rotary.js';

export function rotaryStoreKvcache(
  ctx: SpineContext,
  positions: Tensor,
  query: Tensor,
  key: Tensor,
  value: Tensor,
  cosSinCache: Tensor,
  headSize: number,
  isNeoxStyle: boolean,
  kCache: Tensor,
  vCache: Tensor,
  slotMapping: Tensor,
): [Tensor, Tensor] | null {
  if (!cudaTuning().rotary.fuseKvStore) return null;
  const op = 'rotaryStoreKvcache';
  const { T, maxPos, rot, nq, nk, C, P, Tq } = rotaryGeometry(op, positions, query, key, cosSinCache, headSize);
  const { numBlocks, blockSize, S } = kvStoreGeometry(op, [T, nk, headSize], value, kCache, vCache, slotMapping);
  if (nk === 0 || value.dtype !== query.dtype || kCache.dtype !== query.dtype || !hasContiguousLastDim(kCache) || !hasContiguousLastDim(vCache)) return null;
  // one tensor as both caches (a latent cache): the fused kernel writes K and V through separate __restrict__ pointers
  if (kCache.storage === vCache.storage) return null;
  const qOut = Tensor.empty(query.backend, query.shape, query.dtype, { device: query.device });
  const kOut = Tensor.empty(key.backend, key.shape, key.dtype, { device: key.device });
  if (T === 0) return [qOut, kOut];
  const temps: Tensor[] = [];
  try {
    const pos = contiguousOf(positions, temps);
    const cache = contiguousOf(cosSinCache, temps);
    const slots = contiguousOf(slotMapping, temps);
    const q = tokenRows(query, T, temps);
    const k = tokenRows(key, T, temps);
    const v = lastDimContiguous(value, temps);
    const [vts, vhs] = v.strides as [number, number, number];
    const [kcb, kco, kch] = kCache.strides as [number, number, number, number];
    const [vcb, vco, vch] = vCache.strides as [number, number, number, number];
    const half = rot / 2;
    // FK_VEC: the value copy's vectors, and in neox style the rotation's (as fk_rotary), which then also stores k rows
    // into the cache; GPT-J style rotates element pairs whatever FK_VEC is
    const counts = [headSize, vts, vhs, vcb, vco, vch];
    const ptrs = [ptr(v), ptr(vCache)];
    if (isNeoxStyle) {
      counts.push(half, q.stride, k.stride, kcb, kco, kch);
      ptrs.push(ptr(q.t), ptr(qOut), ptr(k.t), ptr(kOut), ptr(kCache));
    }
    const vec = vecWidth(itemsizeOf(query.dtype), counts, ptrs);
    // fk_rotary's shape; the threads also cover the value copy, and a third row of blocks does it
    const { cvec, threads, grid } = rotaryLaunchShape(ctx, { T, nq, nk, headSize, rot, isNeoxStyle, vec, cache }, (nk * headSize) / vec);
    const flag = indexFlag(ctx, qOut);
    const kern = spineKernel(ctx, 'rotary.cu', 'fk_rotary_store_kv', {
      FK_T: Tq, FK_C: C, FK_POS: P, FK_SLOT: S, FK_NEOX: isNeoxStyle ? 1 : 0, FK_VEC: vec, FK_CVEC: cvec,
    });
    kern.launch([grid, 3], threads, 0, [
      qOut, q.t, q.stride, nq,
      kOut, k.t, k.stride, nk,
      v, vts, vhs,
      kCache, kcb, kco, kch,
      vCache, vcb, vco, vch,
      slots, blockSize, numBlocks * blockSize,
      pos, cache, T, maxPos, headSize, rot, flag,
    ]);
    ctx.noteKvWrite(ptr(kCache), ptr(vCache), T);
    checkIndexFlag(ctx, flag, () => `${op}: a position is out of range for a cache of ${maxPos} positions, or a slot for ${numBlocks} blocks of ${blockSize}`);
    return [qOut, kOut];
  } catch (e) {
    qOut.dispose();
    kOut.dispose();
    throw e;
  } finally {
    disposeAll(temps);
  }
}
