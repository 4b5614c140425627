import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { CaptureIndexSchema, Rng, casesFromCaptures, parseSafetensorsHeader } from '@fastkernels/core';
import { afterAll, describe, expect, it } from 'vitest';
import { cpuBackend } from '../../test/l1-harness.js';
import { baselineRegistry } from '../index.js';
import { captureWorkload } from './capture.js';
import { loadModel } from '../models/load-model.js';
import { parseWorkloadJsonl, resolveWorkload, syntheticWorkload } from './workloads.js';

const FIXTURES = join(import.meta.dirname, '../../fixtures');
const tmp = mkdtempSync(join(tmpdir(), 'fk-capture-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('capture', () => {
  it('records a bf16 model\'s cases in bf16, those fed only integers (embedding, the whole model) too', () => {
    const baseline = baselineRegistry();
    const workload = syntheticWorkload({ numRequests: 2, inputLen: [4, 9], outputLen: [2, 3], seed: 1, vocabSize: 256 });
    const { path } = captureWorkload({
      baseline, workload, outDir: join(tmp, 'bf16'), model: 'tiny-llama', engine: { maxModelLen: 32, maxNumSeqs: 2, maxNumBatchedTokens: 16 },
      load: (registry) => {
        const m = loadModel(join(FIXTURES, 'tiny-llama'), { backend: cpuBackend(), registry, dtype: 'bf16' });
        return { model: m.model, ctx: m.ctx, geometry: m.geometry, dispose: () => m.model.dispose() };
      },
    });
    const index = CaptureIndexSchema.parse(JSON.parse(readFileSync(path, 'utf8')));
    for (const id of ['L1/embedding', 'L4/llama', 'L1/rms_norm', 'L3/llama_decoder']) {
      expect(index.tasks[id]!.forward.map((f) => f.dtype), id).toEqual(index.tasks[id]!.forward.map(() => 'bf16'));
    }
    // the sampler's logits stay f32 (the model casts them before sampling)
    expect(index.tasks['L1/sampler']!.forward.every((f) => f.dtype === 'f32')).toBe(true);
  });

  it('records init args, forward shapes with counts and integer input values, readable by the bench reader', () => {
    const baseline = baselineRegistry();
    const workload = syntheticWorkload({ numRequests: 3, inputLen: [5, 20], outputLen: [3, 5], seed: 0, vocabSize: 256 });
    const { path, outputTokens } = captureWorkload({
      baseline, workload, outDir: tmp, model: 'tiny-llama', engine: { maxModelLen: 64, maxNumSeqs: 4, maxNumBatchedTokens: 16 },
      load: (registry) => {
        const m = loadModel(join(FIXTURES, 'tiny-llama'), { backend: cpuBackend(), registry, dtype: 'f32' });
        return { model: m.model, ctx: m.ctx, geometry: m.geometry, dispose: () => m.model.dispose() };
      },
    });
    expect(outputTokens).toBe(workload.requests.reduce((a, r) => a + r.outputLen, 0));
    const index = CaptureIndexSchema.parse(JSON.parse(readFileSync(path, 'utf8')));
    expect(index.model).toBe('tiny-llama');
    expect(Object.keys(index.tasks)).toEqual(expect.arrayContaining(['L1/linear', 'L1/rms_norm', 'L1/paged_decode_attention', 'L1/varlen_prefill_attention', 'L1/store_kvcache', 'L1/sampler', 'L2/attention', 'L3/llama_decoder', 'L4/llama']));
    // two decoder layers: L3 built twice with different layer indices
    expect(index.tasks['L3/llama_decoder']!.init.length).toBe(2);
    const rms = index.tasks['L1/rms_norm']!;
    expect(rms.forward.every((f) => f.dims.H === 64 && f.dtype === 'f32')).toBe(true);
    // chunked prefill (16-token budget) and decodes give several token counts; counts add up over steps
    expect(new Set(rms.forward.map((f) => f.dims.T)).size).toBeGreaterThan(2);
    const attn = index.tasks['L1/varlen_prefill_attention']!.forward[0]!;
    expect(attn.options).toHaveProperty('qLens');
    expect(attn.values).toHaveProperty('cuSeqlensQ');
    // the values file holds the named tensors
    const file = join(dirname(path), attn.values!.cuSeqlensQ!.file);
    const bytes = readFileSync(file);
    const header = parseSafetensorsHeader(new Uint8Array(bytes), statSync(file).size);
    expect(header.get(attn.values!.cuSeqlensQ!.tensor)?.dtype).toBe('i32');
    // bench's reader turns the capture into cases
    const cases = casesFromCaptures(baseline.task('L1/rms_norm')!, [{ index, resolve: (f) => join(tmp, f), path }]);
    expect(cases.length).toBeGreaterThan(0);
    expect(cases.every((c) => c.count >= 1 && c.init.length === 2)).toBe(true);
    // every captured case of every task builds its inputs with the task's own builder (what bench does)
    const ctx = { backend: cpuBackend(), device: 0, dtype: 'f32' as const, registry: baseline };
    for (const id of Object.keys(index.tasks)) {
      const task = baseline.task(id)!;
      for (const c of casesFromCaptures(task, [{ index, resolve: (f) => join(tmp, f), path }], 3)) {
        const inputs = task.makeInputs(c, ctx, new Rng(1));
        expect(inputs.length, `${id} ${c.name}`).toBe(task.inputs.length);
        for (const t of inputs) t?.dispose();
      }
    }
  });
});

describe('workloads', () => {
  it('synthetic workloads are seeded; JSONL errors name the line; the flag form parses', () => {
    const a = syntheticWorkload({ numRequests: 256, inputLen: [100, 1024], outputLen: [100, 1024], seed: 0, vocabSize: 32000 });
    const b = resolveWorkload('synthetic', 32000);
    expect(b.requests).toEqual(a.requests);
    expect(a.requests.every((r) => r.promptIds.length >= 100 && r.promptIds.length <= 1024 && r.outputLen >= 100 && r.outputLen <= 1024)).toBe(true);
    expect(resolveWorkload('synthetic:4:2-3:5-5:9', 10).requests.map((r) => r.outputLen)).toEqual([5, 5, 5, 5]);
    expect(() => resolveWorkload('synthetic:x', 10)).toThrow(/cannot parse/);
    expect(parseWorkloadJsonl('{"prompt_ids":[1,2],"output_len":3}\n\n{"prompt_ids":[4],"max_tokens":2}\n', 'w.jsonl').requests).toEqual([{ promptIds: [1, 2], outputLen: 3 }, { promptIds: [4], outputLen: 2 }]);
    expect(() => parseWorkloadJsonl('{"prompt_ids":[1],"output_len":3}\n{"prompt_ids":[1]', 'w.jsonl')).toThrow(/line 2: not valid JSON/);
    expect(() => parseWorkloadJsonl('{"prompt_ids":[1]}', 'w.jsonl')).toThrow(/line 1: no output_len/);
    expect(() => parseWorkloadJsonl('{"prompt_ids":[-1],"output_len":1}', 'w.jsonl')).toThrow(/line 1: prompt_ids.0/);
  });
});
