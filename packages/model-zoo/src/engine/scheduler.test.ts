import { join } from 'node:path';
import { Rng } from '@fastkernels/core';
import { afterAll, describe, expect, it } from 'vitest';
import { cpuBackend } from '../../test/l1-harness.js';
import { baselineRegistry } from '../index.js';
import { BlockManager } from './block-manager.js';
import { EmulatedGraphRuntime } from './device-io.js';
import { LLMEngine, chainDecodeDefault, summarizeSteps, type EngineOptions } from './engine.js';
import { generate } from './generate.js';
import { loadModel } from '../models/load-model.js';
import { graphBucketSizes } from './runner.js';
import { Scheduler } from './scheduler.js';
import { DEFAULT_SAMPLING, Sequence } from './sequence.js';

const FIXTURES = join(import.meta.dirname, '../../fixtures');
const loaded = loadModel(join(FIXTURES, 'tiny-llama'), { backend: cpuBackend(), registry: baselineRegistry(), dtype: 'f32' });
afterAll(() => loaded.model.dispose());

/** Prompts of assorted lengths (some cross block boundaries, one is a single token). */
function prompts(n: number, seed = 1): number[][] {
  const rng = new Rng(seed);
  return Array.from({ length: n }, (_, i) => Array.from({ length: i === 0 ? 1 : 3 + Math.floor(rng.uniform() * 40) }, () => Math.floor(rng.uniform() * 256)));
}

function engine(opts: EngineOptions): LLMEngine {
  return new LLMEngine(loaded.model, loaded.ctx, loaded.geometry, { maxModelLen: 128, maxNumSeqs: 8, maxNumBatchedTokens: 256, graphs: false, ...opts });
}

function run(opts: EngineOptions, ps: number[][], maxTokens: (i: number) => number) {
  const e = engine(opts);
  try {
    const out = e.generate(ps.map((p, i) => ({ promptIds: p, params: { maxTokens: maxTokens(i) } })));
    // no block leaks
    expect(e.blockManager.numFreeBlocks).toBe(e.blockManager.numBlocks);
    expect(e.blockManager.numUsedBlocks).toBe(0);
    return { out, records: e.records, engine: e };
  } finally {
    e.dispose();
  }
}

const PS = prompts(10);
const MAXT = (i: number) => 3 + ((i * 7) % 11);
const reference = generate(loaded.model, loaded.ctx, loaded.geometry, PS.map((p, i) => ({ promptIds: p, maxTokens: MAXT(i) }))).outputs.map((o) => o.tokenIds);

describe('LLMEngine (continuous batching) on the CPU backend', () => {
  it('greedy outputs equal the straightforward prefill-then-decode loop', () => {
    const { out, records } = run({}, PS, MAXT);
    expect(out.map((o) => o.tokenIds)).toEqual(reference);
    expect(out.every((o) => o.finishReason === 'length')).toBe(true);
    // requests finish at different times, so later steps are decodes over fewer sequences
    expect(new Set(records.filter((r) => r.kind === 'decode').map((r) => r.numSeqs)).size).toBeGreaterThan(2);
  });

  it('chunked prefill (8 tokens a step, mixed prefill + decode steps) equals unchunked', () => {
    const { out, records } = run({ maxNumBatchedTokens: 8, maxNumSeqs: 4 }, PS, MAXT);
    expect(out.map((o) => o.tokenIds)).toEqual(reference);
    expect(records.some((r) => r.kind === 'mixed')).toBe(true);
    for (const r of records) {
      expect(r.numTokens).toBeLessThanOrEqual(8);
      expect(r.numSeqs).toBeLessThanOrEqual(4);
    }
  });

  it('recompute preemption when blocks run out gives the same greedy tokens, and frees every block', () => {
    // 12 blocks of 16 tokens for 10 requests of up to ~56 tokens each: sequences get preempted and recomputed
    const { out } = run({ numKvBlocks: 12, maxNumSeqs: 8 }, PS, MAXT);
    expect(out.map((o) => o.tokenIds)).toEqual(reference);
    expect(out.reduce((a, o) => a + o.numPreemptions, 0)).toBeGreaterThan(0);
  });

  it('preemption with chunked recompute (small budget, few blocks)', () => {
    const { out } = run({ numKvBlocks: 9, maxNumSeqs: 6, maxNumBatchedTokens: 16 }, PS, MAXT);
    expect(out.map((o) => o.tokenIds)).toEqual(reference);
    expect(out.reduce((a, o) => a + o.numPreemptions, 0)).toBeGreaterThan(0);
  });

  it('bucketed graph decode (emulated graphs on the CPU) pads batches and matches eager', () => {
    const g = new EmulatedGraphRuntime();
    // chainDecode off: the plain graph path, whose steady steps are prestaged (chained decode, the default, is below)
    const { out, records, engine: e } = run({ graphs: g, maxNumSeqs: 8, chainDecode: false }, PS, MAXT);
    expect(out.map((o) => o.tokenIds)).toEqual(reference);
    expect(e.runner.graphBuckets).toEqual([1, 2, 4, 8]);
    expect(g.captures).toBe(4);
    expect(g.replays).toBeGreaterThan(0);
    const dec = summarizeSteps(records);
    expect(dec.graphFraction).toBe(1);
    // the steady decode steps after the last admission were prestaged while the previous step ran
    expect(e.runner.stats.prestagedSteps).toBeGreaterThan(0);
  });

  it('chained decode is the default for graph decode at world size 1 (the host schedules while the device runs)', () => {
    const { engine: e } = run({ graphs: new EmulatedGraphRuntime(), maxNumSeqs: 8 }, PS, MAXT);
    expect(e.runner.chainsDecode).toBe(true);
    expect(e.chainStats.used).toBeGreaterThan(0);
  });
  it("the default follows the backend's engine tuning (the CUDA backend's engine.chainDecode), else on", () => {
    const cpu = cpuBackend();
    const backend = (engineTuning?: object): typeof cpu => Object.assign(Object.create(cpu) as typeof cpu, engineTuning ? { engineTuning } : {});
    expect(chainDecodeDefault(backend())).toBe(true);
    expect(chainDecodeDefault(backend({ chainDecode: false }))).toBe(false);
    expect(chainDecodeDefault(backend({ chainDecode: true }))).toBe(true);
  });
  it('chained decode (each decode step launched before the tokens of the one before are read) equals eager, no leaks', () => {
    const g = new EmulatedGraphRuntime();
    const { out, records, engine: e } = run({ graphs: g, maxNumSeqs: 8, chainDecode: true }, PS, MAXT);
    expect(out.map((o) => o.tokenIds)).toEqual(reference);
    // the steady decode steps ran launched ahead; a step launched ahead and then scheduled otherwise was dropped
    expect(e.runner.stats.chainedSteps).toBeGreaterThan(0);
    expect(e.chainStats.used).toBeGreaterThan(0);
    expect(e.chainStats.used + e.chainStats.dropped).toBe(e.runner.stats.chainedSteps);
    expect(summarizeSteps(records).graphFraction).toBe(1);
  });

  it('chained decode with EOS, stop ids, seeded sampling and a request added mid-run matches the plain engine', () => {
    const p = PS[3]!;
    const free = reference[3]!;
    const reqs = [
      { promptIds: p, params: { maxTokens: MAXT(3) } },
      { promptIds: p, params: { maxTokens: MAXT(3), ignoreEos: true } },
      { promptIds: p, params: { maxTokens: MAXT(3), ignoreEos: true, stopTokenIds: [free[1]!] } },
      { promptIds: PS[5]!, params: { maxTokens: 9, temperature: 0.8, seed: 7 } },
      { promptIds: PS[6]!, params: { maxTokens: 12, temperature: 1.1, topK: 20, seed: 3 } },
    ];
    const outputs = (chainDecode: boolean, graphs = true) => {
      const e = engine({ eosTokenId: free[2]!, graphs: graphs ? new EmulatedGraphRuntime() : undefined, maxNumSeqs: 8, chainDecode });
      try {
        const ids = reqs.map((r) => e.addRequest(r.promptIds, r.params));
        const done = new Map<number, { tokenIds: number[]; finishReason: string }>();
        let steps = 0;
        while (e.hasUnfinished) {
          // a late arrival: the step launched ahead no longer matches the scheduled batch
          if (steps++ === 6) ids.push(e.addRequest(PS[7]!, { maxTokens: 5 }));
          for (const f of e.step().finished) done.set(f.requestId, f);
        }
        expect(e.blockManager.numUsedBlocks).toBe(0);
        return { out: ids.map((id) => done.get(id)!), chain: { ...e.chainStats } };
      } finally {
        e.dispose();
      }
    };
    const plain = outputs(false);
    const chained = outputs(true);
    // the seeds of prestaged and chained rows are staged a token ahead: the sampled tokens must be the eager engine's
    expect(plain.out).toEqual(outputs(false, false).out);
    expect(chained.out).toEqual(plain.out);
    expect(chained.out[0]!.finishReason).toBe('eos');
    expect(chained.out[2]!.finishReason).toBe('stop');
    expect(chained.chain.used).toBeGreaterThan(0);
    expect(chained.chain.dropped).toBeGreaterThan(0); // EOS / stop / the late arrival
    expect(plain.chain).toEqual({ used: 0, dropped: 0 });
  });

  it('chained decode never follows an eager decode step (a batch above the largest graph bucket), nor outlives an abort', () => {
    // 5 sequences, graph buckets 1 and 2: decodes of 3+ sequences run eagerly; as sequences reach max_tokens the rest
    // fits a bucket. A step chained behind an eager one would overwrite the tokens the eager step has not read yet.
    const ps = PS.slice(0, 5);
    const maxT = (i: number) => 12 + i;
    const want = generate(loaded.model, loaded.ctx, loaded.geometry, ps.map((p, i) => ({ promptIds: p, maxTokens: maxT(i) }))).outputs.map((o) => o.tokenIds);
    const { out, engine: e } = run({ graphs: new EmulatedGraphRuntime(), maxGraphBatch: 2, chainDecode: true }, ps, maxT);
    expect(out.map((o) => o.tokenIds)).toEqual(want);
    expect(e.chainStats.used).toBeGreaterThan(0);
    // a request aborted while a step launched ahead holds it: the step is dropped at once
    const a = engine({ graphs: new EmulatedGraphRuntime(), chainDecode: true });
    try {
      const id = a.addRequest(PS[1]!, { maxTokens: 20 });
      for (let i = 0; i < 4; i++) a.step();
      expect(a.runner.stats.chainedSteps).toBeGreaterThan(0);
      expect(a.abortRequest(id)).toBe(true);
      expect(a.hasUnfinished).toBe(false);
      expect(a.chainStats.used + a.chainStats.dropped).toBe(a.runner.stats.chainedSteps);
      expect(a.blockManager.numUsedBlocks).toBe(0);
    } finally {
      a.dispose();
    }
  });

  it('stops on EOS unless ignored, and on stop ids; seeded sampling is reproducible', () => {
    const p = PS[3]!;
    const free = reference[3]!;
    const e = engine({ eosTokenId: free[2]! });
    try {
      const [a, b, c] = e.generate([
        { promptIds: p, params: { maxTokens: MAXT(3) } },
        { promptIds: p, params: { maxTokens: MAXT(3), ignoreEos: true } },
        { promptIds: p, params: { maxTokens: MAXT(3), ignoreEos: true, stopTokenIds: [free[1]!] } },
      ]);
      expect(a!.finishReason).toBe('eos');
      expect(a!.tokenIds).toEqual(free.slice(0, free.indexOf(free[2]!) + 1));
      expect(b!.tokenIds).toEqual(free);
      expect(c!.finishReason).toBe('stop');
      expect(c!.tokenIds).toEqual(free.slice(0, free.indexOf(free[1]!) + 1));
      const s1 = e.generate([{ promptIds: p, params: { maxTokens: 6, temperature: 0.8, seed: 7 } }]);
      const s2 = e.generate([{ promptIds: p, params: { maxTokens: 6, temperature: 0.8, seed: 7 } }]);
      expect(s1[0]!.tokenIds).toEqual(s2[0]!.tokenIds);
    } finally {
      e.dispose();
    }
  });

  it('prints a memory budget and refuses a model that does not fit', () => {
    const lines: string[] = [];
    const e = engine({ log: (l) => lines.push(l), numKvBlocks: 20 });
    e.dispose();
    expect(lines.join('\n')).toMatch(/memory budget:.*\n.*weights .* activation peak .* \(estimated\)[\s\S]*KV cache .*20 blocks × 16 tokens/);
    expect(() => engine({ gpuMemoryUtilization: 1e-9 })).toThrow(/the model does not fit/);
    expect(() => engine({}).addRequest(new Array(120).fill(1), { maxTokens: 20 })).toThrow(/exceed max-model-len 128/);
  });
});

describe('Scheduler', () => {
  it('keeps the token budget and sequence cap, chunks the first prompt that does not fit, preempts the newest', () => {
    const bm = new BlockManager(6);
    const s = new Scheduler({ maxNumBatchedTokens: 20, maxNumSeqs: 2 }, bm);
    const seqs = [30, 10, 5].map((n, i) => new Sequence(i, new Array(n).fill(1), { ...DEFAULT_SAMPLING, maxTokens: 8 }));
    seqs.forEach((q) => s.add(q));
    const b1 = s.schedule();
    expect(b1.prefills.map((p) => [p.seq.seqId, p.start, p.numTokens, p.samples])).toEqual([[0, 0, 20, false]]);
    s.postprocess(b1, []);
    const b2 = s.schedule();
    expect(b2.prefills.map((p) => [p.seq.seqId, p.start, p.numTokens, p.samples])).toEqual([[0, 20, 10, true], [1, 0, 10, true]]);
    s.postprocess(b2, [5, 6]);
    expect(s.waiting.length).toBe(1); // cap of 2 running
    // blocks: seq0 has 31 tokens (2 blocks), seq1 11 tokens (1 block); 3 free
    const b3 = s.schedule();
    expect(b3.decodes.map((q) => q.seqId)).toEqual([0, 1]);
    expect(b3.numTokens).toBe(2);
    s.postprocess(b3, [1, 1]);
    expect(() => s.postprocess(b3, [1])).toThrow(/1 sampled tokens for 2/);
  });

  it('bucket sizes follow nano-vllm (1, 2, 4, 8, 16, 32 …) up to the cap', () => {
    expect(graphBucketSizes(256)).toEqual([1, 2, 4, 8, ...Array.from({ length: 16 }, (_, i) => 16 * (i + 1))]);
    expect(graphBucketSizes(5)).toEqual([1, 2, 4, 5]);
    expect(graphBucketSizes(20)).toEqual([1, 2, 4, 8, 16, 20]);
  });
});
