import { DTYPE_INFO, Tensor, type Backend, type DType } from '@fastkernels/core';
import type { LayerKvCache } from './forward-context.js';

/** KV-cache geometry of a model. */
export interface KvCacheSpec {
  readonly numLayers: number;
  readonly numKvHeads: number;
  readonly headDim: number;
  readonly blockSize: number;
  readonly dtype: DType;
}

/** Bytes of one block over all layers (keys and values). */
export const kvBlockBytes = (s: KvCacheSpec): number => 2 * s.numLayers * s.blockSize * s.numKvHeads * s.headDim * DTYPE_INFO[s.dtype].itemsize;

/**
 * The paged cache (nano-vllm's ModelRunner.allocate_kv_cache): per layer kCache / vCache
 * [numBlocks, blockSize, numKvHeads, headDim] in the model dtype.
 */
export class KvCache {
  readonly layers: LayerKvCache[];
  constructor(
    readonly backend: Backend,
    readonly device: number,
    readonly spec: KvCacheSpec,
    readonly numBlocks: number,
  ) {
    const shape = [numBlocks, spec.blockSize, spec.numKvHeads, spec.headDim];
    this.layers = Array.from({ length: spec.numLayers }, () => ({
      kCache: Tensor.zeros(backend, shape, spec.dtype, { device }),
      vCache: Tensor.zeros(backend, shape, spec.dtype, { device }),
    }));
  }

  get bytes(): number {
    return this.numBlocks * kvBlockBytes(this.spec);
  }

  dispose(): void {
    for (const l of this.layers) {
      l.kCache.dispose();
      l.vCache.dispose();
    }
  }
}
