/**
 * vLLM's Attention layer task (L2/attention_impl) against its float64 reference through the composite contract, and on
 * hand values: a one-token prefill attends to itself only (its value per query head's kv group), and the key / value
 * land in the layer's cache at the step's slot.
 */
import { Rng, Tensor, withContext, type Module } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../test/l1-harness.js';
import { disposeAndFindLeaks, leakSnapshot } from '../../../test/leak-check.js';
import { describeCompositeContract } from '../../../test/composite-harness.js';
import { baselineRegistry } from '../../index.js';
import { getForwardContext, layerKvCache } from '../../engine/forward-context.js';
import { attentionImplTask } from './L2/attention_impl.js';
import { buildTaskStep } from './task-batch.js';

describeCompositeContract(attentionImplTask, cpuBackend);

describe('Attention (vLLM layer)', () => {
  it('a one-token prefill sees only itself; its key and value are written to the cache', () => {
    const registry = baselineRegistry();
    const ctx = { backend: cpuBackend(), device: 0, dtype: 'f32' as const, registry };
    const c = { ...attentionImplTask.cases.ci[0]!, dims: { T: 1, QD: 8, KVD: 4 }, options: { prefillLens: [1], decodeCtxLens: [] } };
    const m = registry.createIn<Module & { forward(q: Tensor, k: Tensor, v: Tensor): Tensor }>(ctx, 'L2/attention_impl', 2, 4, 0.5, 1);
    withContext(ctx, () => buildTaskStep(c, ctx, new Rng(3), { numLayers: 1, numKvHeads: 1, headDim: 4 }));
    const q = Tensor.fromArray(ctx.backend, [1, 2, 3, 4, 5, 6, 7, 8], [1, 8], 'f32');
    const k = Tensor.fromArray(ctx.backend, [1, 0, 0, 1], [1, 4], 'f32');
    const v = Tensor.fromArray(ctx.backend, [9, 8, 7, 6], [1, 4], 'f32');
    const out = m.forward(q, k, v);
    expect([...out.toFloat64Array()]).toEqual([9, 8, 7, 6, 9, 8, 7, 6]);
    const fc = getForwardContext();
    const slot = fc.attnMetadata.slotMapping.toFloat64Array()[0]!;
    expect([...layerKvCache(fc, 0).kCache.toFloat64Array().slice(slot * 4, slot * 4 + 4)]).toEqual([1, 0, 0, 1]);
    expect([...layerKvCache(fc, 0).vCache.toFloat64Array().slice(slot * 4, slot * 4 + 4)]).toEqual([9, 8, 7, 6]);
    m.dispose();
  });
});

describe('Attention (vLLM layer) leaks', () => {
  it('forward leaves nothing allocated beyond its output on any CI case', () => {
    const registry = baselineRegistry();
    for (const c of attentionImplTask.cases.ci) {
      const backend = cpuBackend();
      const ctx = { backend, device: 0, dtype: c.dtype, registry };
      const m = registry.createIn<Module & { forward(q: Tensor, k: Tensor, v: Tensor): Tensor }>(ctx, attentionImplTask.id, ...c.init);
      const rng = new Rng(7);
      attentionImplTask.initParameters!(m, c, rng);
      const [q, k, v] = withContext(ctx, () => attentionImplTask.makeInputs(c, ctx, rng)) as [Tensor, Tensor, Tensor];
      const snap = leakSnapshot(backend, [q, k, v], m)!;
      const out = withContext(ctx, () => m.forward(q, k, v));
      expect(disposeAndFindLeaks(snap, out, [out], m), c.name).toEqual([]);
      for (const t of [q, k, v]) t.dispose();
    }
  });
});
