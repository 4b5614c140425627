import type { Backend, Tensor } from '@fastkernels/core';
import { storeKvcache_ } from './kvcache.js';
import { rotaryEmbedding } from './rotary.js';

/**
 * Ops.rotaryStoreKvcache as its definition: this backend's rotaryEmbedding, then storeKvcache_ of the rotated key
 * viewed as [T, nKv, headSize] and the value. The reference the fused CUDA kernel is checked against; never declines.
 */
export function rotaryStoreKvcache(
  backend: Backend,
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
): [Tensor, Tensor] {
  const [q, k] = rotaryEmbedding(backend, positions, query, key, cosSinCache, headSize, isNeoxStyle);
  const T = positions.numel;
  const k3 = k!.view(T, T === 0 ? 0 : k!.numel / T / headSize, headSize);
  try {
    storeKvcache_(k3, value, kCache, vCache, slotMapping);
  } catch (e) {
    q.dispose();
    k!.dispose();
    throw e;
  } finally {
    k3.dispose();
  }
  return [q, k!];
}
