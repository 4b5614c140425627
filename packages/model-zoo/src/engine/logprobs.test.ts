import { join } from 'node:path';
import { CpuBackend } from '@fastkernels/backend-cpu';
import { describe, expect, it } from 'vitest';
import { baselineRegistry } from '../index.js';
import { loadModel } from '../models/load-model.js';
import { EmulatedGraphRuntime } from './device-io.js';
import { LLMEngine, type StepOutput } from './engine.js';
import { tokenLogprob, type TokenLogprob } from './logprobs.js';

const FIXTURES = join(import.meta.dirname, '../../fixtures');

describe('tokenLogprob', () => {
  it('is the log-softmax of the row: the sampled token, and the top k most likely first', () => {
    const row = Float32Array.from([1, 3, 2, 0]);
    const lse = Math.log([1, 3, 2, 0].reduce((a, x) => a + Math.exp(x), 0));
    const lp = tokenLogprob(row, 2, 3);
    expect(lp.logprob).toBeCloseTo(2 - lse, 6);
    expect(lp.top.map(([t]) => t)).toEqual([1, 2, 0]);
    expect(lp.top[0]![1]).toBeCloseTo(3 - lse, 6);
    expect(tokenLogprob(row, 0, 0).top).toEqual([]);
  });
});

describe('LLMEngine with logprobs', () => {
  it('returns them for the requests that ask (eager steps), with the same tokens as graph steps without them', () => {
    const run = (withLp: boolean) => {
      const m = loadModel(join(FIXTURES, 'tiny-llama'), { backend: new CpuBackend(), registry: baselineRegistry(), dtype: 'f32' });
      const e = new LLMEngine(m.model, m.ctx, m.geometry, { maxModelLen: 128, maxNumSeqs: 4, maxNumBatchedTokens: 64, numKvBlocks: 32, graphs: new EmulatedGraphRuntime() });
      try {
        const a = e.addRequest([1, 2, 3], { maxTokens: 6, ignoreEos: true, ...(withLp ? { logprobs: 3 } : {}) });
        const b = e.addRequest([7, 8], { maxTokens: 6, ignoreEos: true, temperature: 0.9, seed: 5 });
        const lps = new Map<number, TokenLogprob[]>();
        const toks = new Map<number, number[]>();
        while (e.hasUnfinished) {
          const o: StepOutput = e.step();
          for (const [rid, t] of o.tokens) toks.set(rid, [...(toks.get(rid) ?? []), t]);
          for (const [rid, lp] of o.logprobs ?? []) lps.set(rid, [...(lps.get(rid) ?? []), lp]);
        }
        return { a: toks.get(a)!, b: toks.get(b)!, lpA: lps.get(a) ?? [], lpB: lps.get(b) ?? [] };
      } finally {
        e.dispose();
        m.model.dispose();
      }
    };
    const plain = run(false);
    const withLp = run(true);
    expect(withLp.a).toEqual(plain.a);
    expect(withLp.b).toEqual(plain.b);
    expect(plain.lpA).toEqual([]);
    expect(withLp.lpB).toEqual([]); // only the request that asked
    expect(withLp.lpA.map((x) => x.token)).toEqual(withLp.a);
    for (const lp of withLp.lpA) {
      // greedy: the sampled token is the most likely one
      expect(lp.top).toHaveLength(3);
      expect(lp.top[0]![0]).toBe(lp.token);
      expect(lp.logprob).toBeCloseTo(lp.top[0]![1], 9);
      expect(lp.logprob).toBeLessThanOrEqual(0);
      expect(lp.top[1]![1]).toBeLessThanOrEqual(lp.top[0]![1]);
    }
  });
});
