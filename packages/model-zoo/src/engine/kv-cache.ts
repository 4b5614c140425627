import { DTYPE_INFO, Tensor, currentTensorParallelGroup, qkvLayout, type Backend, type DType } from '@fastkernels/core';
import { KV_BLOCK_SIZE } from '../tasks/L1/kvcache/store_kvcache.js';
import type { LayerKvCache } from './forward-context.js';

/** KV-cache geometry of a model. */
export interface KvCacheSpec {
  readonly numLayers: number;
  readonly numKvHeads: number;
  readonly headDim: number;
  readonly blockSize: number;
  readonly dtype: DType;
}

/** What a KV cache is sized from: the model's geometry (ModelArchitecture.geometry, models/registry.ts). */
export interface KvGeometry {
  readonly numHiddenLayers: number;
  readonly numAttentionHeads: number;
  readonly numKeyValueHeads: number;
  readonly headDim: number;
}

/**
 * The cache one rank holds: every layer, with the kv heads its attention computes. Under tensor parallelism (a group of
 * world W > 1 current) that is QKVParallelLinear's share, numKeyValueHeads / W heads (1 replicated head when
 * W > numKeyValueHeads), so each rank's cache is 1/W of the whole.
 */
export function kvCacheSpecFor(g: KvGeometry, dtype: DType, world = currentTensorParallelGroup().world): KvCacheSpec {
  const numKvHeads = world === 1 ? g.numKeyValueHeads : qkvLayout(g.headDim, g.numAttentionHeads, g.numKeyValueHeads, world).numKvHeads;
  return { numLayers: g.numHiddenLayers, numKvHeads, headDim: g.headDim, blockSize: KV_BLOCK_SIZE, dtype };
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
