import { describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../test/l1-harness.js';
import { describeCompositeContract } from '../../../test/composite-harness.js';
import { baselineRegistry } from '../../index.js';
import { layerKvCache } from '../../engine/forward-context.js';
import { attentionTask } from './L2/attention.js';
import { llamaMlpTask } from './L2/llama_mlp.js';
import { parallelEmbeddingTask } from './L2/parallel_embedding.js';
import { llamaDecoderTask } from './L3/llama_decoder.js';
import { llamaTask } from './L4/llama.js';

describe('the family registers the Llama spine', () => {
  it('has the original task ids at their levels', () => {
    const r = baselineRegistry();
    const ids = r.allTasks().map((t) => t.id);
    for (const id of ['L2/attention', 'L2/llama_mlp', 'L2/parallel_embedding', 'L3/llama_decoder', 'L4/llama']) expect(ids).toContain(id);
  });
});

for (const t of [attentionTask, llamaMlpTask, parallelEmbeddingTask, llamaDecoderTask, llamaTask]) describeCompositeContract(t, cpuBackend);

describe('large steps share one layer of random cache values', () => {
  it('L4 over a 130k-token decode context still matches its dense reference', async () => {
    const { Rng, compareTensors, toHostArray, withContext, TaskCaseSchema } = await import('@fastkernels/core');
    const { tinyLlamaConfig } = await import('./config.js');
    const { SHARED_CACHE_ELEMENTS, taskStepFor } = await import('./task-batch.js');
    const cfg = tinyLlamaConfig({ maxPositionEmbeddings: 131072 });
    const c = TaskCaseSchema.parse({ name: 'long', dtype: 'f32', dims: { T: 2, H: 64, V: 256 }, init: [cfg], options: { prefillLens: [], decodeCtxLens: [130000, 5] } });
    expect(8125 * 16 * 32 * 2).toBeGreaterThan(SHARED_CACHE_ELEMENTS);
    const registry = baselineRegistry();
    const ctx = { backend: cpuBackend(), device: 0, dtype: 'f32' as const, registry };
    const m = registry.createIn(ctx, 'L4/llama', cfg);
    const rng = new Rng(1);
    llamaTask.initParameters!(m, c, rng);
    const inputs = withContext(ctx, () => llamaTask.makeInputs(c, ctx, rng));
    const step = taskStepFor(c);
    expect(layerKvCache(step.forwardContext, 1).kCache === layerKvCache(step.forwardContext, 0).kCache).toBe(false);
    const out = (m as unknown as { forward(...a: unknown[]): import('@fastkernels/core').Tensor }).forward(...inputs);
    const params = new Map(m.namedParameters().map(([k, t]) => [k, toHostArray(t)] as const));
    const ref = llamaTask.reference(inputs.map((t) => (t ? toHostArray(t) : null)), params, c);
    expect(compareTensors(out, ref[0]!, { atol: 1e-5, rtol: 1e-3 }).status).toBe('PASSED');
    m.dispose();
  });

  it('a one-layer case of layer 3 holds no copies of the unread layers\' caches, and matches its reference', async () => {
    const { Rng, compareTensors, toHostArray, withContext, TaskCaseSchema } = await import('@fastkernels/core');
    const { tinyLlamaConfig } = await import('./config.js');
    const { SHARED_CACHE_ELEMENTS, taskStepFor } = await import('./task-batch.js');
    const cfg = tinyLlamaConfig({ numHiddenLayers: 4, maxPositionEmbeddings: 131072 });
    const c = TaskCaseSchema.parse({ name: 'layer3', dtype: 'f32', dims: { T: 5, H: 64 }, init: [cfg, 3], options: { prefillLens: [3], decodeCtxLens: [70000, 9] } });
    expect(4400 * 16 * 32 * 4).toBeGreaterThan(SHARED_CACHE_ELEMENTS);
    const registry = baselineRegistry();
    const ctx = { backend: cpuBackend(), device: 0, dtype: 'f32' as const, registry };
    const m = registry.createIn(ctx, 'L3/llama_decoder', cfg, 3);
    const rng = new Rng(2);
    llamaDecoderTask.initParameters!(m, c, rng);
    const inputs = withContext(ctx, () => llamaDecoderTask.makeInputs(c, ctx, rng));
    const fc = taskStepFor(c).forwardContext;
    expect(fc.kvCaches.length).toBe(4);
    const last = layerKvCache(fc, 3);
    for (const l of [0, 1, 2, 3]) expect(layerKvCache(fc, l).kCache === last.kCache && layerKvCache(fc, l).vCache === last.vCache).toBe(true);
    const outs = (m as unknown as { forward(...a: unknown[]): import('@fastkernels/core').Tensor[] }).forward(...inputs);
    const params = new Map(m.namedParameters().map(([k, t]) => [k, toHostArray(t)] as const));
    const ref = llamaDecoderTask.reference(inputs.map((t) => (t ? toHostArray(t) : null)), params, c);
    outs.forEach((o, i) => expect(compareTensors(o, ref[i]!, { atol: 1e-5, rtol: 1e-3 }).status, `output ${i}`).toBe('PASSED'));
    m.dispose();
  });
});
