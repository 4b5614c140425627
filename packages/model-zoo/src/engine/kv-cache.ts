import { DTYPE_INFO, Tensor, currentTensorParallelGroup, qkvLayout, type Backend, type DType } from '@fastkernels/core';
import { KV_BLOCK_SIZE } from '../tasks/L1/kvcache/store_kvcache.js';
import { latentLayerIds, pagedLayerIds, type LayerCacheSpec } from './cache-spec.js';
import type { LayerPagedCache } from './forward-context.js';

/** KV-cache geometry of a model. */
export interface KvCacheSpec {
  /** Layers with a paged cache (all of them, but for hybrid stacks: see layerIds). */
  readonly numLayers: number;
  /** The model layer index of each cached layer when not every layer attends (hybrid stacks); absent: 0 .. numLayers - 1. */
  readonly layerIds?: readonly number[];
  /**
   * The cached layers (model layer indices) that keep one latent tensor instead of K and V (MLA, LayerCacheSpec
   * 'latent'); absent: none, every cached layer keeps K and V.
   */
  readonly latentLayerIds?: readonly number[];
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
  /** Per-layer cache kinds (cache-spec.ts); absent: every layer attends. */
  readonly layerCaches?: readonly LayerCacheSpec[];
}

/**
 * The cache one rank holds: every layer, with the kv heads its attention computes. Under tensor parallelism (a group of
 * world W > 1 current) that is QKVParallelLinear's share, numKeyValueHeads / W heads (1 replicated head when
 * W > numKeyValueHeads), so each rank's cache is 1/W of the whole.
 */
export function kvCacheSpecFor(g: KvGeometry, dtype: DType, world = currentTensorParallelGroup().world): KvCacheSpec {
  const numKvHeads = world === 1 ? g.numKeyValueHeads : qkvLayout(g.headDim, g.numAttentionHeads, g.numKeyValueHeads, world).numKvHeads;
  if (!g.layerCaches) return { numLayers: g.numHiddenLayers, numKvHeads, headDim: g.headDim, blockSize: KV_BLOCK_SIZE, dtype };
  const layerIds = pagedLayerIds(g);
  const latent = latentLayerIds(g);
  return { numLayers: layerIds.length, layerIds, ...(latent.length ? { latentLayerIds: latent } : {}), numKvHeads, headDim: g.headDim, blockSize: KV_BLOCK_SIZE, dtype };
}

/** Cache tensors over all cached layers: K and V for an attention layer, one for a latent (MLA) layer. */
export const kvCacheTensorCount = (s: KvCacheSpec): number => 2 * s.numLayers - (s.latentLayerIds?.length ?? 0);

/** Bytes of one block over all layers (keys and values, or the latent rows). */
export const kvBlockBytes = (s: KvCacheSpec): number => kvCacheTensorCount(s) * s.blockSize * s.numKvHeads * s.headDim * DTYPE_INFO[s.dtype].itemsize;

/**
 * The paged cache (nano-vllm's ModelRunner.allocate_kv_cache): per layer kCache / vCache
 * [numBlocks, blockSize, numKvHeads, headDim] in the model dtype, or for a latent (MLA) layer one latentCache of that
 * shape (vLLM's MLA backends keep one tensor too). `layers` is indexed by model layer; in a hybrid stack the recurrent
 * layers' entries are empty (their state is in the StateCache).
 */
export class KvCache {
  readonly layers: LayerPagedCache[];
  constructor(
    readonly backend: Backend,
    readonly device: number,
    readonly spec: KvCacheSpec,
    readonly numBlocks: number,
  ) {
    const shape = [numBlocks, spec.blockSize, spec.numKvHeads, spec.headDim];
    const zeros = () => Tensor.zeros(backend, shape, spec.dtype, { device });
    const latent = new Set(spec.latentLayerIds ?? []);
    const alloc = (i: number): LayerPagedCache => (latent.has(i) ? { latentCache: zeros() } : { kCache: zeros(), vCache: zeros() });
    const ids = spec.layerIds ?? Array.from({ length: spec.numLayers }, (_, i) => i);
    const unknown = [...latent].filter((i) => !ids.includes(i));
    if (unknown.length) throw new RangeError(`KvCache: latent layers ${unknown.join(', ')} are not among the cached layers ${ids.join(', ')}`);
    this.layers = [];
    for (const i of ids) this.layers[i] = alloc(i);
  }

  get bytes(): number {
    return this.numBlocks * kvBlockBytes(this.spec);
  }

  dispose(): void {
    for (const l of this.layers) {
      if (!l) continue;
      if ('latentCache' in l) l.latentCache.dispose();
      else {
        l.kCache.dispose();
        l.vCache.dispose();
      }
    }
  }
}
