import { Rng, compareTensors, toHostArray, type Module, type ModuleRegistry, type Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { getForwardContext, layerKvCache } from '../../../engine/forward-context.js';
import { blamingRegistry, instrumentRegistry } from '../../../engine/instrument.js';
import { baselineRegistry } from '../../../index.js';
import { RecordingBackend, type FusedMode } from '../../../../test/recording-backend.js';
import { Llama3RotaryEmbedding, RotaryEmbedding } from '../../../tasks/L1/rotary/rotary_emb.js';
import type { StoreKVCache } from '../../../tasks/L1/kvcache/store_kvcache.js';
import { attentionTask } from './attention.js';

const WATCHED = ['rotaryEmbedding', 'storeKvcache_', 'rotaryStoreKvcache'] as const;
/** The CPU backend logging its rotary / KV-store calls; rotaryStoreKvcache composes, declines (null) or is absent. */
const recording = (mode: FusedMode) => new RecordingBackend(['rotaryEmbedding', 'storeKvcache_'], 'rotaryStoreKvcache', mode);

/** LlamaAttention's children the tests reach (private fields, read at run time). */
interface AttentionParts {
  rotaryEmb: RotaryEmbedding;
  kvStore: StoreKVCache;
  forward(positions: Tensor, hidden: Tensor): Tensor;
}

/**
 * One forward of a CI case of L2/attention (seeded: the same weights, inputs and starting caches every run) on `backend`;
 * `patch` may change the built layer first. The output and the layer's caches after the call, on the host.
 */
function runAttention(backend: RecordingBackend, caseName: string, registry: ModuleRegistry = baselineRegistry(), patch?: (m: AttentionParts) => void) {
  const c = attentionTask.cases.ci.find((x) => x.name === caseName)!;
  const ctx = { backend, device: 0, dtype: c.dtype, registry };
  const m = registry.createIn<AttentionParts & Module>(ctx, 'L2/attention', ...c.init);
  const rng = new Rng(5);
  attentionTask.initParameters!(m, c, rng);
  const [positions, hidden] = attentionTask.makeInputs(c, ctx, rng) as [Tensor, Tensor];
  patch?.(m);
  const out = m.forward(positions, hidden);
  const { kCache, vCache } = layerKvCache(getForwardContext(), 0);
  const host = { out: toHostArray(out), kCache: toHostArray(kCache), vCache: toHostArray(vCache) };
  const params = new Map(m.namedParameters().map(([k, t]) => [k, toHostArray(t)] as const));
  const expected = attentionTask.reference([toHostArray(positions), toHostArray(hidden)], params, c)[0]!;
  expect(compareTensors(out, expected, { atol: 1e-5, rtol: 1e-3 }).status).toBe('PASSED');
  out.dispose();
  m.dispose();
  return { ...host, calls: backend.calls.filter((x) => (WATCHED as readonly string[]).includes(x)) };
}

describe('LlamaAttention: rotary + KV-cache write as one op (Ops.rotaryStoreKvcache)', () => {
  for (const caseName of ['mixed-gqa-f32', 'llama3-scaled-head32-decode-f32', 'linear-scaled-prefill-f32']) {
    it(`${caseName}: the fused op when the backend has it, the two ops when it declines or lacks it, the same results`, () => {
      const fused = runAttention(recording('composes'), caseName);
      expect(fused.calls).toEqual(['rotaryStoreKvcache']);
      const declined = runAttention(recording('declines'), caseName);
      expect(declined.calls).toEqual(['rotaryStoreKvcache', 'rotaryEmbedding', 'storeKvcache_']);
      const absent = runAttention(recording('absent'), caseName);
      expect(absent.calls).toEqual(['rotaryEmbedding', 'storeKvcache_']);
      for (const other of [declined, absent]) {
        expect(Array.from(other.out.data)).toEqual(Array.from(fused.out.data));
        expect(Array.from(other.kCache.data)).toEqual(Array.from(fused.kCache.data));
        expect(Array.from(other.vCache.data)).toEqual(Array.from(fused.vCache.data));
      }
    });
  }

  it('Llama3RotaryEmbedding keeps the baseline forward (so llama3-scaled models fuse too)', () => {
    expect(Llama3RotaryEmbedding.prototype.forward).toBe(RotaryEmbedding.prototype.forward);
  });

  it('not when rotary_emb or kv_store has a forward of its own (an instance wrapper): that forward runs', () => {
    for (const child of ['rotaryEmb', 'kvStore'] as const) {
      let wrapped = 0;
      const r = runAttention(recording('composes'), 'mixed-gqa-f32', baselineRegistry(), (m) => {
        const module = m[child] as { forward(...a: unknown[]): unknown };
        const inner = module.forward.bind(module);
        module.forward = (...a: unknown[]) => {
          wrapped++;
          return inner(...a);
        };
      });
      expect(wrapped).toBe(1);
      expect(r.calls).toEqual(['rotaryEmbedding', 'storeKvcache_']);
    }
  });

  it('not under an instrumented registry (the capture tool): both children see their calls', () => {
    const seen: string[] = [];
    const registry = instrumentRegistry(baselineRegistry(), { onForward: (id, _m, _a, run) => (seen.push(id), run()) });
    const r = runAttention(recording('composes'), 'mixed-gqa-f32', registry);
    expect(r.calls).toEqual(['rotaryEmbedding', 'storeKvcache_']);
    expect(seen).toContain('L1/rotary_emb');
    expect(seen).toContain('L1/store_kvcache');
  });

  it('under e2e\'s blaming registry for a candidate elsewhere (L1/rms_norm): still fused, so candidate runs are timed against the same fusions as the baseline', () => {
    const r = runAttention(recording('composes'), 'mixed-gqa-f32', blamingRegistry(baselineRegistry(), new Set(['L1/rms_norm'])));
    expect(r.calls).toEqual(['rotaryStoreKvcache']);
    const suspect = runAttention(recording('composes'), 'mixed-gqa-f32', blamingRegistry(baselineRegistry(), new Set(['L1/rotary_emb'])));
    expect(suspect.calls).toEqual(['rotaryEmbedding', 'storeKvcache_']); // the suspect's own forward runs (and can be blamed)
  });
});
