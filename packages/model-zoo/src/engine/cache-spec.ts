/**
 * Per-layer cache specs (vLLM v1's KVCacheSpec per layer: FullAttentionSpec / MambaSpec): what each decoder layer keeps
 * per sequence between steps. An attention layer keeps paged keys and values (KvCache, blocks from the BlockManager);
 * a multi-latent attention layer (MLA: DeepSeek-V2/V3, Kimi-Linear) keeps one paged latent row per token instead, which
 * its absorbed attention reads as both key and value (vLLM's MLAAttentionSpec: one tensor, half the bytes); a recurrent layer (linear attention, SSM) keeps fixed-size states, one slot per running sequence (StateCache, slots
 * from the StateSlotManager). A model may mix them (Qwen3-Next: 3 gated-DeltaNet layers to 1 attention layer; Kimi-Linear:
 * KDA and MLA): each kind is allocated only for its own layers, from one memory budget (memory.ts).
 */
import { DTYPE_INFO, type DType } from '@fastkernels/core';

/** One state tensor a recurrent layer keeps per sequence (vLLM MambaBase.get_state_shape / get_state_dtype). */
export interface StateShape {
  /** What it holds, for logs ('recurrent', 'conv'). */
  readonly name: string;
  /** Per sequence, e.g. [H, K, V] for GLA's recurrent state (this rank's share under tensor parallelism). */
  readonly shape: readonly number[];
  readonly dtype: DType;
}

export type LayerCacheSpec =
  /** Paged K/V with the geometry's kv heads and head dim, in the model dtype. */
  | { readonly kind: 'attention' }
  /**
   * Paged latent rows (MLA): one tensor of the geometry's kv heads (1) and head dim (kv_lora_rank + qk_rope_head_dim),
   * no separate values: the layer reads the row as its key and its value.
   */
  | { readonly kind: 'latent' }
  /** Fixed-size states per sequence (MambaSpec): GLA has one ([H, K, V] f32); gated DeltaNet / KDA add a conv state. */
  | { readonly kind: 'recurrent'; readonly states: readonly StateShape[] };

/** What a model says of its layers' caches; absent: every layer is attention (the Llama path). */
export interface CacheGeometry {
  readonly numHiddenLayers: number;
  readonly layerCaches?: readonly LayerCacheSpec[];
}

/** The spec of every layer (checked against numHiddenLayers). */
export function layerCacheSpecs(g: CacheGeometry): readonly LayerCacheSpec[] {
  if (!g.layerCaches) return Array.from({ length: g.numHiddenLayers }, () => ({ kind: 'attention' as const }));
  if (g.layerCaches.length !== g.numHiddenLayers) throw new Error(`layerCaches lists ${g.layerCaches.length} layers, the model has ${g.numHiddenLayers}`);
  return g.layerCaches;
}

/** Indices of the layers with a paged cache (K/V or latent): the layers the KvCache allocates. */
export function pagedLayerIds(g: CacheGeometry): number[] {
  return layerCacheSpecs(g).flatMap((s, i) => (s.kind === 'recurrent' ? [] : [i]));
}

/** Indices of the layers whose paged cache is one latent tensor (MLA). */
export function latentLayerIds(g: CacheGeometry): number[] {
  return layerCacheSpecs(g).flatMap((s, i) => (s.kind === 'latent' ? [i] : []));
}

/** Whether any layer keeps a recurrent state (the engine then runs a state pool beside the KV cache). */
export function hasRecurrentState(g: CacheGeometry): boolean {
  return layerCacheSpecs(g).some((s) => s.kind === 'recurrent');
}

/** Bytes one sequence's states take over all recurrent layers (one slot of the pool). */
export function stateSlotBytes(g: CacheGeometry): number {
  let bytes = 0;
  for (const s of layerCacheSpecs(g)) {
    if (s.kind !== 'recurrent') continue;
    for (const st of s.states) bytes += st.shape.reduce((a, b) => a * b, 1) * DTYPE_INFO[st.dtype].itemsize;
  }
  return bytes;
}
