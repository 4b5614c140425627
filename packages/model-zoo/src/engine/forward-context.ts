import type { Tensor } from '@fastkernels/core';

/**
 * vLLM's forward context (vllm.forward_context: set_forward_context / get_forward_context; nano-vllm's
 * utils/context.py): the per-step attention metadata and the KV caches, set by the model runner around
 * model.forward so module signatures stay vLLM's (LlamaAttention.forward(positions, hiddenStates)).
 *
 * Token layout of a step (a mixed batch is allowed): the prefill tokens come first, sequence by sequence,
 * then one token per decoding sequence.
 *   tokens [0, numPrefillTokens)                  prefills: q/k/v of the whole new chunk; attention over it (varlen)
 *   tokens [numPrefillTokens, numPrefillTokens + numDecodes)  decodes: one query per sequence; attention over the paged cache
 * Every token's key and value are written to the cache at slotMapping[t] before attention runs.
 * A prefill chunk may continue a sequence whose first tokens are already cached (chunked prefill, or a
 * recompute after preemption split in chunks): then cuSeqlensK counts context + chunk per prefill and
 * prefillKvSlots lists the cache slots of all those keys, in order; attention gathers them from the cache
 * (after this step's write) and runs varlen attention with bottom-right causal alignment.
 */
export interface AttentionMetadata {
  readonly numPrefills: number;
  readonly numPrefillTokens: number;
  readonly numDecodes: number;
  /** [T] i64: cache slot (block * blockSize + offset) of every token; -1 skips the write (padding). */
  readonly slotMapping: Tensor;
  /** [numPrefills + 1] i32 prefix sums of the prefill lengths (null without prefills). */
  readonly cuSeqlensQ: Tensor | null;
  /** [numPrefills + 1] i32 prefix sums of the key lengths (cached context + chunk); equal to cuSeqlensQ without context. */
  readonly cuSeqlensK: Tensor | null;
  /**
   * [cuSeqlensK[numPrefills]] i64: cache slots of every key of the prefills (context then chunk, per sequence), or
   * null/absent when no prefill has cached context (keys are then the step's own k/v).
   */
  readonly prefillKvSlots?: Tensor | null;
  readonly maxSeqlenQ: number;
  readonly maxSeqlenK: number;
  /** [numDecodes, maxBlocks] i32 block ids per decoding sequence (entries past its length are 0); null without decodes. */
  readonly blockTables: Tensor | null;
  /** [numDecodes] i32 tokens in the cache per decoding sequence, the new one included; null without decodes. */
  readonly seqLens: Tensor | null;
  /**
   * [numPrefills + numDecodes] i32: the state-pool slot of each sequence, prefills then decodes (vLLM's
   * state_indices_tensor; -1 = a padding row, PAD_SLOT_ID). Set only for models with recurrent layers.
   */
  readonly stateIndices?: Tensor | null;
}

/** One attention layer's paged cache: [numBlocks, blockSize, numKvHeads, headDim] each. */
export interface LayerKvCache {
  readonly kCache: Tensor;
  readonly vCache: Tensor;
}

/**
 * One MLA layer's paged cache (LayerCacheSpec 'latent'): the latent rows [numBlocks, blockSize, 1, width], one tensor that
 * the layer writes once and reads as both its keys and its values.
 */
export interface LayerLatentCache {
  readonly latentCache: Tensor;
}

/** A layer's paged cache, either kind. */
export type LayerPagedCache = LayerKvCache | LayerLatentCache;

/** One recurrent layer's states in the pool, each [numSlots, ...shape] (StateCache; vLLM's mamba layer kv_cache tuple). */
export interface LayerStateCache {
  readonly states: readonly Tensor[];
}

export interface ForwardContext {
  readonly attnMetadata: AttentionMetadata;
  /** By layer index (vLLM binds kv_cache[layer] to each Attention layer; here attention looks it up by its layerIdx). */
  readonly kvCaches: readonly LayerPagedCache[];
  /** By layer index, the recurrent layers' state pools (absent for models without recurrent layers; holes at attention layers). */
  readonly stateCaches?: readonly (LayerStateCache | undefined)[];
}

let current: ForwardContext | null = null;

/** Run fn with ctx as the forward context (what the model runner does around model.forward). */
export function withForwardContext<T>(ctx: ForwardContext, fn: () => T): T {
  const prev = current;
  current = ctx;
  try {
    return fn();
  } finally {
    current = prev;
  }
}

/**
 * Set the forward context until the next call (returns the previous one). For the task harness, whose
 * makeInputs prepares a step and whose forward calls come later without a wrapper; the runner uses withForwardContext.
 */
export function setForwardContext(ctx: ForwardContext | null): ForwardContext | null {
  const prev = current;
  current = ctx;
  return prev;
}

export function getForwardContext(): ForwardContext {
  if (!current) {
    throw new Error('no forward context: attention layers run inside withForwardContext() (the model runner sets it; task inputs set it in makeInputs)');
  }
  return current;
}

export function hasForwardContext(): boolean {
  return current !== null;
}

function pagedCache(ctx: ForwardContext, layerIdx: number): LayerPagedCache {
  const c = ctx.kvCaches[layerIdx];
  if (!c) throw new Error(`forward context has KV caches for ${ctx.kvCaches.length} layers, none for layer ${layerIdx}`);
  return c;
}

/** The K/V cache of one attention layer, with a clear error when the context lacks it or holds a latent cache there. */
export function layerKvCache(ctx: ForwardContext, layerIdx: number): LayerKvCache {
  const c = pagedCache(ctx, layerIdx);
  if ('latentCache' in c) throw new Error(`layer ${layerIdx}'s cache is one latent tensor (an MLA layer's), not K and V`);
  return c;
}

/** The latent cache of one MLA layer, with a clear error when the context lacks it or holds K and V there. */
export function layerLatentCache(ctx: ForwardContext, layerIdx: number): Tensor {
  const c = pagedCache(ctx, layerIdx);
  if (!('latentCache' in c)) throw new Error(`layer ${layerIdx}'s cache is K and V, not one latent tensor: the model's geometry declares its MLA layers' caches as { kind: 'latent' }`);
  return c.latentCache;
}

/**
 * The state pool of a recurrent layer when the engine runs it (the forward context holds the layer's StateCache entry
 * and the step's state indices), else null: the layer is called on its own with the state as an argument.
 */
export function layerStateCache(layerIdx: number): { cache: LayerStateCache; metadata: AttentionMetadata; stateIndices: Tensor } | null {
  const ctx = current;
  const cache = ctx?.stateCaches?.[layerIdx];
  if (!ctx || !cache) return null;
  const idx = ctx.attnMetadata.stateIndices;
  if (!idx) throw new Error(`forward context has a state cache for layer ${layerIdx} but no stateIndices in its metadata`);
  return { cache, metadata: ctx.attnMetadata, stateIndices: idx };
}

/** Release the context's metadata tensors (the caches belong to whoever allocated them). */
export function disposeAttentionMetadata(m: AttentionMetadata): void {
  for (const t of [m.slotMapping, m.cuSeqlensQ, m.cuSeqlensK, m.blockTables, m.seqLens, m.prefillKvSlots, m.stateIndices]) t?.dispose();
}
