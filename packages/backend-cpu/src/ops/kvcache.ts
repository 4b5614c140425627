import { formatShape, type Tensor } from '@fastkernels/core';
import { encoderFor, expectRank, gather, gatherInts, StridedView } from '../strided.js';

/**
 * vLLM reshape_and_cache_flash: key/value [T, nKv, head] written in place into
 * kCache/vCache [numBlocks, blockSize, nKv, head] (any strides) at slotMapping[t]
 * (= block * blockSize + offset; negative slots are padding and skipped). Values convert to the cache dtype.
 * One tensor given as both caches (a latent cache, MLA) with one tensor as key and value is written once.
 */
export function storeKvcache_(key: Tensor, value: Tensor, kCache: Tensor, vCache: Tensor, slotMapping: Tensor): void {
  const what = 'storeKvcache_';
  expectRank(key, 3, what, 'key [T, nKv, head]');
  expectRank(value, 3, what, 'value [T, nKv, head]');
  expectRank(kCache, 4, what, 'kCache [numBlocks, blockSize, nKv, head]');
  expectRank(vCache, 4, what, 'vCache [numBlocks, blockSize, nKv, head]');
  const [T, nKv, head] = key.shape as [number, number, number];
  const [numBlocks, blockSize] = kCache.shape as [number, number];
  const same = (a: readonly number[], b: readonly number[]) => a.length === b.length && a.every((d, i) => d === b[i]);
  if (!same(value.shape, key.shape)) throw new RangeError(`${what}: value ${formatShape(value.shape)} does not match key ${formatShape(key.shape)}`);
  if (!same(kCache.shape, vCache.shape)) throw new RangeError(`${what}: vCache ${formatShape(vCache.shape)} does not match kCache ${formatShape(kCache.shape)}`);
  if (kCache.shape[2] !== nKv || kCache.shape[3] !== head) throw new RangeError(`${what}: cache ${formatShape(kCache.shape)} does not hold [${nKv}, ${head}] per slot`);
  if (slotMapping.numel !== T) throw new RangeError(`${what}: slotMapping has ${slotMapping.numel} entries for ${T} tokens`);
  const slots = gatherInts(slotMapping, `${what} slotMapping`);
  const capacity = numBlocks * blockSize;
  for (let t = 0; t < T; t++) {
    if (slots[t]! >= capacity) throw new RangeError(`${what}: slot ${slots[t]} (token ${t}) out of range for ${numBlocks} blocks of ${blockSize}`);
  }
  const write = (src: Tensor, cache: Tensor, name: string) => {
    const S = gather(src, `${what} ${name}`);
    const C = new StridedView(cache, `${what} ${name} cache`);
    const enc = encoderFor(cache.dtype);
    const [, , s2, s3] = C.strides as [number, number, number, number];
    for (let t = 0; t < T; t++) {
      const slot = slots[t]!;
      if (slot < 0) continue;
      const base = C.at(Math.floor(slot / blockSize), slot % blockSize);
      for (let h = 0; h < nKv; h++) {
        for (let d = 0; d < head; d++) C.acc.set(base + h * s2 + d * s3, enc(S[(t * nKv + h) * head + d]!));
      }
    }
  };
  const latent = latentWrite(what, key, value, kCache, vCache);
  write(key, kCache, 'key');
  if (!latent) write(value, vCache, 'value');
}

/**
 * Whether a cache write is a latent one (MLA: one tensor as both caches, its rows the keys and the values): then the
 * value is the key and the cache is written once. One cache with a different value would lose one of them: an error.
 */
function latentWrite(what: string, key: Tensor, value: Tensor, kCache: Tensor, vCache: Tensor): boolean {
  const same = (a: Tensor, b: Tensor) => a === b || (a.storage === b.storage && a.offset === b.offset && a.strides.every((s, i) => s === b.strides[i]));
  if (!same(kCache, vCache)) return false;
  if (!same(key, value)) throw new RangeError(`${what}: kCache and vCache are one tensor (a latent cache) but key and value differ`);
  return true;
}
