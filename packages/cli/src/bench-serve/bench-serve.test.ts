import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UserError } from '@fastkernels/core';
import { runBenchServe, type BenchServeArgs } from '../commands/bench-serve.js';
import { startServe } from '../commands/serve.js';
import { arrivals, randomWorkload, shareGptWorkload } from './workload.js';
import { dist, percentile } from './stats.js';

const MODEL = join(resolve(import.meta.dirname, '../../../..'), 'packages/model-zoo/fixtures/tiny-llama-chat');
let stop: () => Promise<void>;
let base = '';
let usedBlocks: () => number;

beforeAll(async () => {
  const s = await startServe({ model: MODEL, backend: 'cpu', dtype: 'f32', maxNumSeqs: 4, maxNumBatchedTokens: 128, maxModelLen: 128, gpuMemoryUtilization: 0.9, graphs: true, host: '127.0.0.1', port: 0 }, { out: () => {}, err: () => {} });
  stop = s.stop;
  base = `http://127.0.0.1:${s.address.port}`;
  usedBlocks = () => s.server.engine.blockManager.numUsedBlocks;
});
afterAll(async () => stop?.());

const args = (o: Partial<BenchServeArgs>): BenchServeArgs => ({ baseUrl: base, dataset: 'random', numPrompts: 6, inputLen: '4:12', outputLen: '3:8', idRange: 200, requestRate: 'inf', warmup: 1, seed: 1, timeout: 30, ...o });

async function bench(o: Partial<BenchServeArgs>) {
  let out = '';
  let err = '';
  await runBenchServe(args(o), { out: (s) => (out += s), err: (s) => (err += s) });
  return { out, err };
}

describe('bench-serve against the CPU server', () => {
  it('fixed concurrency: every request measured, output tokens as asked (ignore_eos), JSON with vLLM\'s metrics', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fk-bench-serve-'));
    const file = join(dir, 'serving.json');
    const { out, err } = await bench({ maxConcurrency: 2, jsonOut: file, goodput: ['ttft:60000', 'tpot:60000'] });
    const j = JSON.parse(readFileSync(file, 'utf8')) as Record<string, any>;
    const expected = randomWorkload({ num: 7, inMin: 4, inMax: 12, outMin: 3, outMax: 8, idRange: 200, seed: 1 }).slice(1);
    expect(j).toMatchObject({ completed: 6, failed: 0, model: 'tiny-llama-chat', max_concurrency: 2, first_error: null });
    expect(j.totalOutputTokens).toBe(expected.reduce((a, r) => a + r.outputLen, 0));
    expect(j.totalInputTokens).toBe(expected.reduce((a, r) => a + r.promptLen, 0));
    expect(j.goodput).toBeCloseTo(j.requestThroughput, 6); // generous SLOs: every request is good
    for (const k of ['ttftMs', 'tpotMs', 'itlMs', 'e2eMs']) {
      expect(j[k].p50).toBeGreaterThan(0);
      expect(j[k].p99).toBeGreaterThanOrEqual(j[k].p50);
    }
    expect(j.e2eMs.p50).toBeGreaterThanOrEqual(j.ttftMs.p50);
    expect(out).toMatch(/Output token throughput \(tok\/s\)\s+\d/);
    expect(out).toMatch(/TTFT mean \/ p50 \/ p90 \/ p99 \(ms\)/);
    expect(err).toMatch(/6\/6 done/);
    expect(usedBlocks()).toBe(0);
  }, 60_000);

  it('Poisson arrivals and a ShareGPT file; an unmeetable SLO gives zero goodput', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fk-bench-serve-'));
    const file = join(dir, 'sg.json');
    const conv = (q: string, a: string) => ({ conversations: [{ from: 'human', value: q }, { from: 'gpt', value: a }] });
    writeFileSync(file, JSON.stringify([conv('Hello there', 'General Kenobi!'), conv('What is 2+2?', 'Four.'), conv('only one turn', 'x'), { conversations: [{ from: 'human', value: 'alone' }] }]));
    const { out } = await bench({ dataset: 'sharegpt', datasetPath: file, numPrompts: 2, warmup: 1, outputLen: '5', requestRate: 50, json: true, goodput: ['ttft:0.0001'] });
    const j = JSON.parse(out) as Record<string, any>;
    expect(j).toMatchObject({ completed: 2, failed: 0, totalOutputTokens: 10, request_rate: 50, goodput: 0 });
    // with the model's tokenizer: exact prompt lengths (one token a byte here), and vLLM's filters (>= 4 tokens each)
    const counted = shareGptWorkload(file, { num: 2, seed: 0, countTokens: (t) => Buffer.byteLength(t) });
    expect(counted.map((r) => [r.promptLen, r.outputLen]).sort()).toEqual([[11, 15], [12, 5]].sort());
    const { out: out2 } = await bench({ dataset: 'sharegpt', datasetPath: file, numPrompts: 1, warmup: 0, outputLen: '3', tokenizer: MODEL, json: true });
    expect(JSON.parse(out2)).toMatchObject({ completed: 1, failed: 0, totalOutputTokens: 3 });
    expect(((await bench({ dataset: 'sharegpt', datasetPath: file, numPrompts: 1, tokenizer: '/nonexistent' }).catch((x: unknown) => x)) as UserError).details.field).toBe('--tokenizer');
  }, 60_000);

  it('--disconnect-fraction: those clients leave mid-stream, the rest complete, the server frees every block', async () => {
    const { out } = await bench({ numPrompts: 10, outputLen: '20:30', maxConcurrency: 4, disconnectFraction: 0.4, seed: 3, json: true });
    const j = JSON.parse(out) as Record<string, any>;
    expect(j.disconnected, JSON.stringify(j)).toBeGreaterThan(0);
    expect(j.completed + j.disconnected).toBe(10);
    expect(j.failed).toBe(0);
    for (let i = 0; i < 200 && usedBlocks() > 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(usedBlocks()).toBe(0);
  }, 60_000);

  it('flag errors name the flag and the fix; an unreachable server is a clear error', async () => {
    const e = (o: Partial<BenchServeArgs>) => bench(o).then(() => null, (x: unknown) => x as UserError);
    expect((await e({ inputLen: '9:3' }))!.details.field).toBe('--input-len');
    expect((await e({ requestRate: '-1' }))!.details.field).toBe('--request-rate');
    expect((await e({ goodput: ['latency:5'] }))!.details.field).toBe('--goodput');
    expect((await e({ dataset: 'sharegpt' }))!.details.field).toBe('--dataset-path');
    expect((await e({ disconnectFraction: 2 }))!.details.field).toBe('--disconnect-fraction');
    const down = await e({ baseUrl: 'http://127.0.0.1:1' });
    expect(down).toBeInstanceOf(UserError);
    expect(down!.describe()).toMatch(/cannot reach http:\/\/127\.0\.0\.1:1\/v1\/models[\s\S]*fix: start the server/);
  });
});

describe('workload and statistics', () => {
  it('random workloads are seeded; Poisson gaps average 1/rate; percentiles interpolate', () => {
    expect(randomWorkload({ num: 3, inMin: 2, inMax: 5, outMin: 1, outMax: 2, idRange: 10, seed: 7 })).toEqual(randomWorkload({ num: 3, inMin: 2, inMax: 5, outMin: 1, outMax: 2, idRange: 10, seed: 7 }));
    const t = arrivals(4000, 4, 3);
    expect(t[0]).toBe(0);
    expect(t[t.length - 1]! / (t.length - 1)).toBeGreaterThan(225);
    expect(t[t.length - 1]! / (t.length - 1)).toBeLessThan(275);
    expect(arrivals(3, Infinity, 0)).toEqual([0, 0, 0]);
    expect(percentile([1, 2, 3, 4], 50)).toBe(2.5);
    expect(dist([10, 0, 5]).p90).toBeCloseTo(9, 9);
    expect(() => shareGptWorkload('/nonexistent.json', { num: 1, seed: 0 })).toThrow(/cannot read/);
  });
});
