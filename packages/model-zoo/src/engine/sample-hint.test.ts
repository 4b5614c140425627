// The engine tells ops.sample how many rows draw (SampleHint.sampledRows: rows with temperature > 0), counted on
// the host: the CUDA sampler picks its path from it without a device sync. Checked on the CPU backend by wrapping
// ops.sample of a backend of this file's own.
import { join } from 'node:path';
import { CpuBackend } from '@fastkernels/backend-cpu';
import type { SampleHint, Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { baselineRegistry } from '../index.js';
import { BlockManager } from './block-manager.js';
import { EmulatedGraphRuntime } from './device-io.js';
import { LLMEngine } from './engine.js';
import { KvCache } from './kv-cache.js';
import { loadModel } from '../models/load-model.js';
import { ModelRunner } from './model-runner.js';
import { DEFAULT_SAMPLING, Sequence, type SamplingParams } from './sequence.js';

const FIXTURES = join(import.meta.dirname, '../../fixtures');

interface SampleCall {
  rows: number;
  /** rows of the temperature tensor that are > 0 (what the hint must say) */
  drawing: number;
  hint: SampleHint | undefined;
}

/**
 * A CPU backend whose ops.sample records its calls (the tokens are the CPU backend's own); with `paths`, its ops also
 * report two sampler launch paths ('split' from 2 drawing rows, else 'one'), as the CUDA backend's samplePath does.
 */
function recordingBackend(paths = false): { backend: CpuBackend; calls: SampleCall[] } {
  const backend = new CpuBackend();
  const calls: SampleCall[] = [];
  const ops = backend.ops; // frozen: replaced by a copy with a recording sample
  const sample = (logits: Tensor, temperature: Tensor, topK: Tensor, topP: Tensor, seeds: Tensor, hint?: SampleHint): Tensor => {
    const t = temperature.toFloat64Array();
    calls.push({ rows: logits.shape[0]!, drawing: t.filter((x) => x > 0).length, hint });
    return ops.sample(logits, temperature, topK, topP, seeds, hint);
  };
  const samplePath = (_B: number, _V: number, hint?: SampleHint) => ((hint?.sampledRows ?? 0) >= 2 ? 'split' : 'one');
  Object.defineProperty(backend, 'ops', { value: Object.freeze({ ...ops, sample, ...(paths ? { samplePath } : {}) }) });
  return { backend, calls };
}

const sampled = (maxTokens: number, seed: number): SamplingParams => ({ ...DEFAULT_SAMPLING, temperature: 0.8, topK: 20, topP: 0.9, maxTokens, seed });
const greedy = (maxTokens: number): SamplingParams => ({ ...DEFAULT_SAMPLING, maxTokens });

describe('SampleHint from the engine', () => {
  it('ModelRunner: a batch mixing greedy and sampled requests passes sampledRows = rows with temperature > 0', () => {
    const { backend, calls } = recordingBackend();
    const m = loadModel(join(FIXTURES, 'tiny-mistral'), { backend, registry: baselineRegistry(), dtype: 'f32' });
    const cache = new KvCache(backend, 0, { numLayers: 2, numKvHeads: 2, headDim: 16, blockSize: 16, dtype: 'f32' }, 8);
    const bm = new BlockManager(8);
    const runner = new ModelRunner(m.model, m.ctx, cache, bm);
    try {
      const seqs = [new Sequence(0, [3, 1, 4, 1, 5], greedy(4)), new Sequence(1, [9, 2, 6], sampled(4, 7)), new Sequence(2, [5, 3, 5, 8], greedy(4)), new Sequence(3, [9, 7], sampled(4, 11))];
      for (const s of seqs) bm.allocate(s);
      const first = runner.run(seqs, []).tokens; // prefill of all four
      expect(calls).toEqual([{ rows: 4, drawing: 2, hint: { sampledRows: 2 } }]);
      seqs.forEach((s, i) => s.appendToken(first[i]!));
      for (const s of seqs) bm.mayAppend(s);
      const second = runner.run([], seqs).tokens; // decode of all four
      expect(calls[1]).toEqual({ rows: 4, drawing: 2, hint: { sampledRows: 2 } });
      seqs.forEach((s, i) => s.appendToken(second[i]!));
      for (const s of seqs) bm.mayAppend(s);
      runner.run([], [seqs[0]!, seqs[2]!, seqs[3]!]); // one drawing row among greedy ones
      expect(calls[2]).toEqual({ rows: 3, drawing: 1, hint: { sampledRows: 1 } });
      runner.run([], [seqs[0]!, seqs[2]!]); // all greedy
      expect(calls[3]).toEqual({ rows: 2, drawing: 0, hint: { sampledRows: 0 } });
    } finally {
      runner.dispose();
      cache.dispose();
      m.model.dispose();
    }
  });

  it('LLMEngine (eager steps): every sample call carries the count of its drawing rows', () => {
    const { backend, calls } = recordingBackend();
    const m = loadModel(join(FIXTURES, 'tiny-llama'), { backend, registry: baselineRegistry(), dtype: 'f32' });
    const e = new LLMEngine(m.model, m.ctx, m.geometry, { maxModelLen: 128, maxNumSeqs: 8, maxNumBatchedTokens: 256, graphs: false });
    try {
      const reqs = Array.from({ length: 6 }, (_, i) => ({
        promptIds: Array.from({ length: 2 + i }, (_, j) => (i * 31 + j * 7) % 200),
        params: i % 3 === 0 ? greedy(2 + i) : sampled(2 + i, 100 + i),
      }));
      const out = e.generate(reqs);
      expect(out.length).toBe(6);
      expect(calls.length).toBeGreaterThan(2);
      for (const c of calls) expect(c.hint).toEqual({ sampledRows: c.drawing });
      // the batches really mixed greedy and drawing rows
      expect(calls.some((c) => c.drawing > 0 && c.drawing < c.rows)).toBe(true);
      expect(calls[0]).toEqual({ rows: 6, drawing: 4, hint: { sampledRows: 4 } });
    } finally {
      e.dispose();
      m.model.dispose();
    }
  });

  it('CUDA-graph decode: one graph per sampler path and bucket; each replay runs the variant its drawing rows pick; tokens as eager', () => {
    const reqs = Array.from({ length: 6 }, (_, i) => ({
      promptIds: Array.from({ length: 2 + i }, (_, j) => (i * 17 + j * 5) % 200),
      // four short drawing requests, then two long greedy ones: the steps go from 4 drawing rows to none
      params: i < 4 ? sampled(3 + i, 200 + i) : greedy(10 + 2 * i),
    }));
    const run = (graphs: false | EmulatedGraphRuntime) => {
      const { backend, calls } = recordingBackend(true);
      const m = loadModel(join(FIXTURES, 'tiny-llama'), { backend, registry: baselineRegistry(), dtype: 'f32' });
      const e = new LLMEngine(m.model, m.ctx, m.geometry, { maxModelLen: 128, maxNumSeqs: 8, maxNumBatchedTokens: 256, graphs });
      try {
        calls.length = 0; // warm-up and capture done: from here, the steps
        const out = e.generate(reqs).map((o) => o.tokenIds);
        return { out, calls, graphSteps: e.runner.stats.graphSteps };
      } finally {
        e.dispose();
        m.model.dispose();
      }
    };
    const rt = new EmulatedGraphRuntime();
    const g = run(rt);
    // buckets 1, 2, 4, 8: bucket 1 has one path (at most 1 drawing row), the others two
    expect(rt.captures).toBe(1 + 2 + 2 + 2);
    expect(g.graphSteps).toBeGreaterThan(0);
    // every call (eager with the exact count, or a replayed variant with its representative) took the path of its
    // real drawing rows
    for (const c of g.calls) expect((c.hint?.sampledRows ?? 0) >= 2, JSON.stringify(c)).toBe(c.drawing >= 2);
    const replayed = g.calls.filter((c) => c.rows > 1 && [2, 4, 8].includes(c.rows));
    expect(replayed.some((c) => c.drawing >= 2)).toBe(true);
    expect(replayed.some((c) => c.drawing < 2)).toBe(true);
    expect(g.out).toEqual(run(false).out);
  });
});
