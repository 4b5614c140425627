/**
 * Per-layer cache specs for a hybrid stack (Qwen3-Next's 3 linear : 1 attention pattern, here 4 layers): the KV cache
 * holds only the attention layers, the state pool only the recurrent ones, both indexed by model layer, and the memory
 * plan reserves the state slots before sizing the KV blocks from what is left. MLA layers keep one latent tensor.
 */
import { describe, expect, it } from 'vitest';
import { cpuBackend } from '../../test/l1-harness.js';
import { hasRecurrentState, latentLayerIds, pagedLayerIds, layerCacheSpecs, stateSlotBytes, type LayerCacheSpec } from './cache-spec.js';
import { layerKvCache, layerLatentCache } from './forward-context.js';
import { KvCache, kvBlockBytes, kvCacheSpecFor, kvCacheTensorCount } from './kv-cache.js';
import { planKvCache } from './memory.js';
import { StateCache } from './state-cache.js';
import { StateSlotManager } from './state-slots.js';
import { DEFAULT_SAMPLING, Sequence } from './sequence.js';

const linear: LayerCacheSpec = { kind: 'recurrent', states: [{ name: 'conv', shape: [8, 3], dtype: 'bf16' }, { name: 'recurrent', shape: [2, 4, 4], dtype: 'f32' }] };
const hybrid = { numHiddenLayers: 4, numAttentionHeads: 4, numKeyValueHeads: 2, headDim: 8, layerCaches: [linear, linear, linear, { kind: 'attention' as const }] };

describe('hybrid cache specs', () => {
  it('KV cache for the attention layers only, state pool for the recurrent ones, each indexed by model layer', () => {
    expect(pagedLayerIds(hybrid)).toEqual([3]);
    expect(latentLayerIds(hybrid)).toEqual([]);
    expect(hasRecurrentState(hybrid)).toBe(true);
    expect(hasRecurrentState({ numHiddenLayers: 2 })).toBe(false);
    expect(layerCacheSpecs({ numHiddenLayers: 2 })).toEqual([{ kind: 'attention' }, { kind: 'attention' }]);
    expect(() => layerCacheSpecs({ numHiddenLayers: 3, layerCaches: [linear] })).toThrow(/lists 1 layers, the model has 3/);
    const spec = kvCacheSpecFor(hybrid, 'bf16', 1);
    expect(spec).toMatchObject({ numLayers: 1, layerIds: [3], numKvHeads: 2, headDim: 8 });
    expect(spec.latentLayerIds).toBeUndefined();
    const kv = new KvCache(cpuBackend(), 0, spec, 3);
    const st = new StateCache(cpuBackend(), 0, hybrid, 5);
    try {
      expect(kv.layers.map((l, i) => (l ? i : -1)).filter((i) => i >= 0)).toEqual([3]);
      const l3 = kv.layers[3]!;
      expect('kCache' in l3 && [l3.kCache.shape, l3.vCache.shape]).toEqual([[3, 16, 2, 8], [3, 16, 2, 8]]);
      expect(st.layers.map((l) => l?.states.map((t) => t.shape))).toEqual([0, 1, 2].map(() => [[5, 8, 3], [5, 2, 4, 4]]).concat([undefined as never]));
      expect(st.bytes).toBe(5 * stateSlotBytes(hybrid));
      expect(stateSlotBytes(hybrid)).toBe(3 * (8 * 3 * 2 + 2 * 4 * 4 * 4));
      // reset zeroes the slot's rows in every layer and state, nothing else
      for (const l of st.layers) for (const t of l?.states ?? []) t.fill_(1);
      st.reset([2]);
      const s = st.layers[1]!.states[1]!.toFloat64Array();
      const per = 2 * 4 * 4;
      expect([...s.subarray(2 * per, 3 * per)].every((v) => v === 0)).toBe(true);
      expect([...s.subarray(0, 2 * per), ...s.subarray(3 * per)].every((v) => v === 1)).toBe(true);
    } finally {
      kv.dispose();
      st.dispose();
    }
  });

  it('the memory plan takes a state slot per sequence first, then KV blocks from the rest; fewer slots when short', () => {
    const spec = kvCacheSpecFor(hybrid, 'bf16', 1);
    const slot = stateSlotBytes(hybrid);
    const base = { utilization: 1, weightsBytes: 0, activationPeakBytes: 0, activationMeasured: true, graphPoolBytes: 0, runnerBytes: 0, spec, maxModelLen: 32, maxNumSeqs: 4, stateSlotBytes: slot };
    const block = kvBlockBytes(spec);
    const p = planKvCache({ ...base, totalBytes: 4 * slot + 5 * block });
    expect(p).toMatchObject({ numStateSlots: 4, stateBytes: 4 * slot, numKvBlocks: 5, limitedBy: 'memory' });
    // short of memory: fewer slots, but one 32-position sequence's 2 blocks are kept
    const short = planKvCache({ ...base, totalBytes: 2 * slot + 2 * block });
    expect(short).toMatchObject({ numStateSlots: 2, numKvBlocks: 2 });
    expect(() => planKvCache({ ...base, totalBytes: slot - 1 })).toThrow(/one sequence's recurrent state needs/);
    // no attention layers: blocks cost nothing and only bound positions
    const gla = { numHiddenLayers: 2, numAttentionHeads: 2, numKeyValueHeads: 2, headDim: 4, layerCaches: [linear, linear] };
    const g = planKvCache({ ...base, spec: kvCacheSpecFor(gla, 'bf16', 1), stateSlotBytes: stateSlotBytes(gla), totalBytes: 1 << 20 });
    expect(g).toMatchObject({ kvBlockBytes: 0, numKvBlocks: 4 * 2, limitedBy: 'cap', numStateSlots: 4 });
  });

  it('latent (MLA) layers: one tensor of the latent width each, counted once in the block bytes; K/V layers keep the pair', () => {
    // a DeepSeek-style stack (every layer MLA) and a hybrid one (Kimi-Linear's KDA : MLA pattern, an attention layer too)
    const width = 36; // kv_lora_rank + rope dims
    const latent: LayerCacheSpec = { kind: 'latent' };
    const mla = { numHiddenLayers: 2, numAttentionHeads: 4, numKeyValueHeads: 1, headDim: width, layerCaches: [latent, latent] };
    const mixed = { ...mla, numHiddenLayers: 4, layerCaches: [linear, latent, { kind: 'attention' as const }, latent] };
    expect(pagedLayerIds(mixed)).toEqual([1, 2, 3]);
    expect(latentLayerIds(mixed)).toEqual([1, 3]);
    const spec = kvCacheSpecFor(mixed, 'bf16', 1);
    expect(spec).toMatchObject({ numLayers: 3, layerIds: [1, 2, 3], latentLayerIds: [1, 3], numKvHeads: 1, headDim: width });
    expect(kvCacheTensorCount(spec)).toBe(4);
    expect(kvBlockBytes(spec)).toBe(4 * 16 * width * 2);
    expect(kvBlockBytes(kvCacheSpecFor(mla, 'bf16', 1))).toBe(2 * 16 * width * 2);
    const kv = new KvCache(cpuBackend(), 0, spec, 3);
    try {
      expect(kv.layers[0]).toBeUndefined();
      for (const i of [1, 3]) {
        const l = kv.layers[i]!;
        expect(Object.keys(l)).toEqual(['latentCache']);
        expect('latentCache' in l && l.latentCache.shape).toEqual([3, 16, 1, width]);
      }
      expect(Object.keys(kv.layers[2]!).sort()).toEqual(['kCache', 'vCache']);
      expect(kv.bytes).toBe(3 * kvBlockBytes(spec));
    } finally {
      kv.dispose();
    }
    // the forward context hands each kind to its own reader, and refuses the other
    const fc = { attnMetadata: {} as never, kvCaches: [undefined as never, { latentCache: 'L' as never }, { kCache: 'K' as never, vCache: 'V' as never }] };
    expect(layerLatentCache(fc, 1)).toBe('L');
    expect(layerKvCache(fc, 2)).toEqual({ kCache: 'K', vCache: 'V' });
    expect(() => layerKvCache(fc, 1)).toThrow(/one latent tensor/);
    expect(() => layerLatentCache(fc, 2)).toThrow(/is K and V, not one latent tensor/);
    expect(() => new KvCache(cpuBackend(), 0, { ...spec, latentLayerIds: [0] }, 1)).toThrow(/latent layers 0 are not among the cached layers/);
  });

  it('slots come from a free list, one per sequence, and go back', () => {
    const m = new StateSlotManager(2);
    const seqs = [0, 1, 2].map((i) => new Sequence(i, [1], DEFAULT_SAMPLING));
    m.allocate(seqs[0]!);
    m.allocate(seqs[1]!);
    expect(seqs.map((s) => s.stateSlot)).toEqual([0, 1, -1]);
    expect(() => m.allocate(seqs[2]!)).toThrow(/no free state slot/);
    expect(() => m.allocate(seqs[0]!)).toThrow(/already holds state slot 0/);
    m.deallocate(seqs[0]!);
    m.deallocate(seqs[0]!); // a second release is a no-op
    expect(m.numFreeSlots).toBe(1);
    m.allocate(seqs[2]!);
    expect(seqs[2]!.stateSlot).toBe(0);
  });
});
