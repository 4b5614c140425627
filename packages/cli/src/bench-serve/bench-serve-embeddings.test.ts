/**
 * bench-serve --endpoint embeddings against the real embedding server (the tiny BGE-M3 fixture, random weights, CPU):
 * every request measured with the server's token counts, the token-id file workload (the embed suite's), failures
 * counted with the first error, and the flags that do not apply to embeddings refused.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { UserError } from '@fastkernels/core';
import { runBenchServe, type BenchServeArgs } from '../commands/bench-serve.js';
import { startEmbeddingServe } from '../commands/serve-embeddings.js';
import type { ServeArgs } from '../commands/serve.js';
import type { EmbeddingServer } from '../serve/embedding-server.js';
import { randomWorkload } from './workload.js';

const MODEL = join(resolve(import.meta.dirname, '../../../..'), 'packages/model-zoo/fixtures/tiny-bge-m3');
const tmp = mkdtempSync(join(tmpdir(), 'fk-bench-embed-'));
let stop: () => Promise<void>;
let server: EmbeddingServer;
let base = '';

beforeAll(async () => {
  const argv = { model: MODEL, backend: 'cpu', dtype: 'f32', host: '127.0.0.1', port: 0 } as unknown as ServeArgs;
  const s = await startEmbeddingServe(argv, { out: () => {}, err: () => {} }, 0);
  stop = s.stop;
  server = s.server;
  base = `http://127.0.0.1:${s.address.port}`;
});
afterAll(async () => stop?.());

const args = (o: Partial<BenchServeArgs>): BenchServeArgs => ({
  baseUrl: base, endpoint: 'embeddings', dataset: 'random', numPrompts: 12, inputLen: '3:20', outputLen: '1', idRange: 60,
  requestRate: 'inf', warmup: 1, seed: 2, timeout: 30, ...o,
});

async function bench(o: Partial<BenchServeArgs>) {
  let out = '';
  let err = '';
  await runBenchServe(args(o), { out: (s) => (out += s), err: (s) => (err += s) });
  return { out, err };
}

describe('bench-serve --endpoint embeddings against the CPU embedding server', () => {
  it('random ids, 4 clients: every request measured, input tokens as sent, requests/s, tokens/s and latency percentiles in the JSON', async () => {
    const file = join(tmp, 'embed-serving.json');
    const { out, err } = await bench({ maxConcurrency: 4, jsonOut: file, goodput: ['e2el:60000'] });
    const j = JSON.parse(readFileSync(file, 'utf8')) as Record<string, any>;
    const sent = randomWorkload({ num: 13, inMin: 3, inMax: 20, outMin: 1, outMax: 1, idRange: 60, seed: 2 }).slice(1);
    expect(j).toMatchObject({ endpoint: 'embeddings', completed: 12, failed: 0, model: 'tiny-bge-m3', max_concurrency: 4, encoding_format: 'float', first_error: null });
    expect(j.totalInputTokens).toBe(sent.reduce((a, r) => a + r.promptLen, 0));
    expect(j.inputThroughput).toBeCloseTo(j.totalInputTokens / j.durationS, 6);
    expect(j.requestThroughput).toBeCloseTo(12 / j.durationS, 6);
    expect(j.goodput).toBeCloseTo(j.requestThroughput, 6);
    expect(j.e2eMs.p50).toBeGreaterThan(0);
    expect(j.e2eMs.p99).toBeGreaterThanOrEqual(j.e2eMs.p50);
    expect(j).not.toHaveProperty('ttftMs');
    expect(out).toMatch(/Input token throughput \(tok\/s\)\s+\d/);
    expect(out).toMatch(/Latency mean \/ p50 \/ p90 \/ p99 \(ms\)/);
    expect(err).toMatch(/12 \/v1\/embeddings requests/);
    expect(server.batcher.inFlight).toBe(0);
  }, 60_000);

  it('a token-id file (the embed suite\'s workload): its first N documents in order, base64; too-long inputs fail, counted, the first error kept', async () => {
    const docs = [[0, 5, 6, 2], [0, 7, 2], [0, 9, 9, 9, 9, 2], [0, 11, 2]];
    const file = join(tmp, 'docs.jsonl');
    writeFileSync(file, docs.map((d, i) => JSON.stringify(i % 2 ? { input_ids: d } : d)).join('\n') + '\n');
    const { out } = await bench({ dataset: 'token-ids', datasetPath: file, numPrompts: 3, warmup: 2, encodingFormat: 'base64', maxConcurrency: 64, json: true });
    expect(JSON.parse(out)).toMatchObject({ completed: 3, failed: 0, totalInputTokens: 13, encoding_format: 'base64' });
    // the tiny model takes 38 tokens: 50-token inputs answer 400
    const { out: bad, err } = await bench({ inputLen: '50', numPrompts: 2, warmup: 0, json: true });
    expect(JSON.parse(bad)).toMatchObject({ completed: 0, failed: 2 });
    expect(JSON.parse(bad).first_error).toMatch(/HTTP 400/);
    expect(err).toMatch(/2 requests failed; the first: HTTP 400/);
    const e = (o: Partial<BenchServeArgs>) => bench(o).then(() => null, (x: unknown) => x as UserError);
    expect((await e({ dataset: 'token-ids', datasetPath: file, numPrompts: 5 }))!.details.field).toBe('--num-prompts');
    expect((await e({ dataset: 'token-ids' }))!.details.field).toBe('--dataset-path');
  }, 60_000);

  it('refuses what does not apply to embeddings: disconnects, ttft / tpot SLOs; an unknown endpoint', async () => {
    const e = (o: Partial<BenchServeArgs>) => bench(o).then(() => null, (x: unknown) => x as UserError);
    expect((await e({ disconnectFraction: 0.5 }))!.details.field).toBe('--disconnect-fraction');
    expect((await e({ goodput: ['ttft:10'] }))!.details.field).toBe('--goodput');
    expect((await e({ endpoint: 'rerank' }))!.details.field).toBe('--endpoint');
    expect((await e({ encodingFormat: 'int8' }))!.details.field).toBe('--encoding-format');
  });
});
