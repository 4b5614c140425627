/**
 * Kimi-Linear's paged cache budget: its MLA layers keep one latent tensor each (LayerCacheSpec 'latent'), so a block
 * costs the latent rows once, where the K/V pair it had before cost them twice; the memory plan then fits that many
 * times more blocks in the same memory. The factor is computed from the config (the MLA layer count and latent width).
 */
import { describe, expect, it } from 'vitest';
import { stateSlotBytes, type LayerCacheSpec } from '../../engine/cache-spec.js';
import { kvBlockBytes, kvCacheSpecFor, kvCacheTensorCount } from '../../engine/kv-cache.js';
import { planKvCache } from '../../engine/memory.js';
import { KV_BLOCK_SIZE } from '../../tasks/L1/kvcache/store_kvcache.js';
import { KIMI_LINEAR_48B, tinyKimiLinearConfig, type KimiLinearConfig } from './kimi-linear-config.js';
import { kimiLinearArchitecture } from './kimi-linear-model.js';

/** The geometry as it was before latent caches: every MLA layer a K/V attention layer of the same width. */
const asKvPairs = (layerCaches: readonly LayerCacheSpec[]) => layerCaches.map((s) => (s.kind === 'latent' ? { kind: 'attention' as const } : s));

describe('Kimi-Linear: one latent tensor per MLA layer in the KV budget', () => {
  for (const [name, cfg] of [['Kimi-Linear-48B', KIMI_LINEAR_48B], ['tiny', tinyKimiLinearConfig()]] as [string, KimiLinearConfig][]) {
    it(`${name}: block bytes count the latent rows once, and the plan fits the expected factor more blocks`, () => {
      const geom = kimiLinearArchitecture.geometry(cfg);
      const before = { ...geom, layerCaches: asKvPairs(geom.layerCaches!) };
      const mla = cfg.layerTypes.filter((t) => t === 'mla').length;
      const width = cfg.kvLoraRank + cfg.qkRopeHeadDim;
      const itemsize = 2; // bf16
      const spec = kvCacheSpecFor(geom, 'bf16', 1);
      const old = kvCacheSpecFor(before, 'bf16', 1);
      expect(spec.latentLayerIds).toEqual(cfg.layerTypes.flatMap((t, i) => (t === 'mla' ? [i] : [])));
      expect(kvCacheTensorCount(spec)).toBe(mla);
      expect(kvCacheTensorCount(old)).toBe(2 * mla);
      const bytes = mla * KV_BLOCK_SIZE * width * itemsize;
      expect(kvBlockBytes(spec)).toBe(bytes);
      expect(kvBlockBytes(old)).toBe(2 * bytes);

      // the same memory, limited by memory (not the cap of 8 maximum-length sequences): a state slot for each of the 8
      // sequences first, then blocks from what is left, room for 3 sequences' K/V pairs
      const slot = stateSlotBytes(geom);
      const maxNumSeqs = 8;
      const maxModelLen = 4096;
      const perSeq = maxModelLen / KV_BLOCK_SIZE;
      const totalBytes = maxNumSeqs * slot + 3 * perSeq * 2 * bytes + 12345;
      const args = { totalBytes, utilization: 1, weightsBytes: 0, activationPeakBytes: 0, activationMeasured: true, graphPoolBytes: 0, runnerBytes: 0, maxModelLen, maxNumSeqs, stateSlotBytes: slot };
      const now = planKvCache({ ...args, spec });
      const then = planKvCache({ ...args, spec: old });
      expect([now.limitedBy, then.limitedBy]).toEqual(['memory', 'memory']);
      expect(now.numStateSlots).toBe(then.numStateSlots);
      const left = totalBytes - now.stateBytes;
      const factor = kvBlockBytes(old) / kvBlockBytes(spec); // 2 * mla tensors before, mla now
      expect(factor).toBe(2);
      expect(then.numKvBlocks).toBe(Math.floor(left / (2 * bytes)));
      expect(now.numKvBlocks).toBe(Math.floor(left / bytes));
      expect(now.numKvBlocks).toBeGreaterThanOrEqual(factor * then.numKvBlocks);
      expect(now.numKvBlocks).toBeLessThan(factor * (then.numKvBlocks + 1));
    });
  }
});
