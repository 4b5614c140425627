/**
 * Inputs of the attention-bearing tasks (L2 attention, L3 llama_decoder, L4 llama): one step of a mixed
 * batch, prefills then decodes, with a valid paged KV cache and the forward context set (as the model
 * runner would), plus the dense description of the same step that the float64 references read.
 *
 * The harness calls makeInputs, then forward (baseline, then candidate) without a wrapper, then the
 * reference: so makeInputs sets the forward context until the next makeInputs, and keeps the dense step
 * for the reference keyed by the case object.
 */
import { Tensor, roundToDType, type DType, type ExecutionContext, type Rng, type TaskCase } from '@fastkernels/core';
import { fromInts } from '../../common/inputs.js';
import { disposeAttentionMetadata, setForwardContext, type AttentionMetadata, type ForwardContext, type LayerPagedCache } from '../../engine/forward-context.js';
import type { DenseSeq } from './reference.js';
import { KV_BLOCK_SIZE } from '../../tasks/L1/kvcache/store_kvcache.js';

/** A step's shape: prompt lengths of the prefills, cached context lengths of the decodes. */
export interface StepSpec {
  readonly prefillLens: readonly number[];
  readonly decodeCtxLens: readonly number[];
}

export interface TaskStep {
  readonly positions: number[];
  readonly seqs: DenseSeq[];
  readonly forwardContext: ForwardContext;
}

export function stepSpec(c: Pick<TaskCase, 'name' | 'options'>): StepSpec {
  const prefillLens = (c.options.prefillLens as number[] | undefined) ?? [];
  const decodeCtxLens = (c.options.decodeCtxLens as number[] | undefined) ?? [];
  if (prefillLens.length + decodeCtxLens.length === 0) throw new Error(`case '${c.name}': options.prefillLens / decodeCtxLens are both empty`);
  if (prefillLens.some((n) => !Number.isInteger(n) || n < 1) || decodeCtxLens.some((n) => !Number.isInteger(n) || n < 1)) {
    throw new Error(`case '${c.name}': lengths must be positive integers`);
  }
  return { prefillLens, decodeCtxLens };
}

/** Tokens of a step. */
export const stepTokens = (s: StepSpec): number => s.prefillLens.reduce((a, b) => a + b, 0) + s.decodeCtxLens.length;

/** (query, key) pairs the step's attention computes (for work counts). */
export function stepAttentionPairs(s: StepSpec, window: number): number {
  let pairs = 0;
  const seen = (pos: number) => (window > 0 ? Math.min(pos + 1, window) : pos + 1);
  for (const n of s.prefillLens) for (let p = 0; p < n; p++) pairs += seen(p);
  for (const ctx of s.decodeCtxLens) pairs += seen(ctx);
  return pairs;
}

/** Cached tokens a step reads (decode contexts). */
export const stepCachedTokens = (s: StepSpec): number => s.decodeCtxLens.reduce((a, b) => a + b, 0);

/** Above this many cache elements over all layers, layers share one layer's random values. */
export const SHARED_CACHE_ELEMENTS = 8_000_000;

const steps = new WeakMap<object, TaskStep>();
let lastContext: ForwardContext | null = null;

/** The step the latest makeInputs built for this case (what the reference reads). */
export function taskStepFor(c: TaskCase): TaskStep {
  const s = steps.get(c);
  if (!s) throw new Error(`case '${c.name}': no step recorded (makeInputs must run before the reference)`);
  return s;
}

export interface StepGeometry {
  readonly numLayers: number;
  readonly numKvHeads: number;
  readonly headDim: number;
  /**
   * The case runs one layer, the last (L2 attention, L3 decoder at their layerIdx): when the layers share values
   * (large steps), the caches before it are the same tensors, never read, instead of device copies (a layer-31 case
   * of a production capture would otherwise hold 31 unread copies, GBs each).
   */
  readonly lastLayerOnly?: boolean;
  /**
   * Each layer's cache is one latent tensor (MLA, LayerCacheSpec 'latent'), filled with the keys' random values (the
   * values' are still drawn, so the random stream is the K/V step's); absent: K and V.
   */
  readonly latent?: boolean;
}

/**
 * Build a step: random distinct cache blocks per sequence (shuffled, so neighbours in a table are not
 * neighbours in memory), caches full of random values (so a wrong read shows), decode contexts filled with
 * random keys/values rounded to the cache dtype, the attention metadata, and the forward context set.
 */
export function buildTaskStep(c: TaskCase, ctx: ExecutionContext, rng: Rng, geom: StepGeometry, dtype: DType = c.dtype): TaskStep {
  const spec = stepSpec(c);
  const { numLayers, numKvHeads: nk, headDim: D } = geom;
  const row = nk * D;
  const lens = [...spec.prefillLens.map((n) => ({ ctx: 0, n })), ...spec.decodeCtxLens.map((ctxLen) => ({ ctx: ctxLen, n: 1 }))];
  const blocksOf = lens.map((s) => Math.ceil((s.ctx + s.n) / KV_BLOCK_SIZE));
  const numBlocks = blocksOf.reduce((a, b) => a + b, 0) + 2;
  const pool = rng.permutation(numBlocks);
  let next = 0;
  const tables = blocksOf.map((nb) => pool.slice(next, (next += nb)));
  const slotOf = (s: number, pos: number) => tables[s]![Math.floor(pos / KV_BLOCK_SIZE)]! * KV_BLOCK_SIZE + (pos % KV_BLOCK_SIZE);

  // Large steps (production shapes): one layer's values, cloned on the device for the others (host generation
  // of every layer's cache would take minutes); small ones get distinct values per layer.
  const shared = numLayers > 1 && numBlocks * KV_BLOCK_SIZE * row * numLayers > SHARED_CACHE_ELEMENTS;
  const hostLayers = shared ? 1 : numLayers;
  const cacheHost = Array.from({ length: hostLayers }, () => [rng.fillNormal(numBlocks * KV_BLOCK_SIZE * row), rng.fillNormal(numBlocks * KV_BLOCK_SIZE * row)] as const);
  const positions: number[] = [];
  const slots: number[] = [];
  const seqs: DenseSeq[] = [];
  lens.forEach((s, i) => {
    const prefixK: Float64Array[] = [];
    const prefixV: Float64Array[] = [];
    for (let l = 0; l < hostLayers; l++) {
      const pk = rng.fillNormal(s.ctx * row).map((x) => roundToDType(x, dtype));
      const pv = rng.fillNormal(s.ctx * row).map((x) => roundToDType(x, dtype));
      for (let p = 0; p < s.ctx; p++) {
        cacheHost[l]![0].set(pk.subarray(p * row, (p + 1) * row), slotOf(i, p) * row);
        cacheHost[l]![1].set(pv.subarray(p * row, (p + 1) * row), slotOf(i, p) * row);
      }
      prefixK.push(pk);
      prefixV.push(pv);
    }
    while (prefixK.length < numLayers) {
      prefixK.push(prefixK[0]!);
      prefixV.push(prefixV[0]!);
    }
    seqs.push({ start: positions.length, n: s.n, ctx: s.ctx, prefixK, prefixV });
    for (let p = s.ctx; p < s.ctx + s.n; p++) {
      positions.push(p);
      slots.push(slotOf(i, p));
    }
  });

  const cacheShape = [numBlocks, KV_BLOCK_SIZE, nk, D];
  const toDevice = (h: Float64Array) => Tensor.fromArray(ctx.backend, h, cacheShape, dtype, { device: ctx.device });
  const kvCaches: LayerPagedCache[] = cacheHost.map(([k, v]) => (geom.latent ? { latentCache: toDevice(k) } : { kCache: toDevice(k), vCache: toDevice(v) }));
  const cloneOf = (l: LayerPagedCache): LayerPagedCache => ('latentCache' in l ? { latentCache: l.latentCache.clone() } : { kCache: l.kCache.clone(), vCache: l.vCache.clone() });
  while (kvCaches.length < numLayers) kvCaches.push(geom.lastLayerOnly ? kvCaches[0]! : cloneOf(kvCaches[0]!));
  const P = spec.prefillLens.length;
  const Dn = spec.decodeCtxLens.length;
  const cu = [0];
  for (const n of spec.prefillLens) cu.push(cu[cu.length - 1]! + n);
  const maxBlocks = Math.max(1, ...blocksOf.slice(P));
  const table = new Array<number>(Dn * maxBlocks).fill(0);
  tables.slice(P).forEach((t, d) => t.forEach((b, j) => (table[d * maxBlocks + j] = b)));
  const attnMetadata: AttentionMetadata = {
    numPrefills: P,
    numPrefillTokens: cu[P]!,
    numDecodes: Dn,
    slotMapping: fromInts(ctx, slots, [slots.length], 'i64'),
    cuSeqlensQ: P ? fromInts(ctx, cu, [P + 1], 'i32') : null,
    cuSeqlensK: P ? fromInts(ctx, cu, [P + 1], 'i32') : null,
    maxSeqlenQ: Math.max(0, ...spec.prefillLens),
    maxSeqlenK: Math.max(0, ...spec.prefillLens),
    blockTables: Dn ? fromInts(ctx, table, [Dn, maxBlocks], 'i32') : null,
    seqLens: Dn ? fromInts(ctx, spec.decodeCtxLens.map((n) => n + 1), [Dn], 'i32') : null,
  };
  const forwardContext: ForwardContext = { attnMetadata, kvCaches };
  // The previous step's tensors are no longer reachable by any forward call: release them (a shared one's second
  // dispose does nothing).
  if (lastContext) {
    disposeAttentionMetadata(lastContext.attnMetadata);
    for (const kv of lastContext.kvCaches) {
      if ('latentCache' in kv) kv.latentCache.dispose();
      else {
        kv.kCache.dispose();
        kv.vCache.dispose();
      }
    }
  }
  lastContext = forwardContext;
  setForwardContext(forwardContext);
  const step = { positions, seqs, forwardContext };
  steps.set(c, step);
  return step;
}
