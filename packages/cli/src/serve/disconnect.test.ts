/**
 * Many streaming clients at once, some going away mid-stream (the 1,000-client check, scaled to the CPU
 * backend): every other request completes, no cache block is left, the server stays up and /metrics agrees.
 */
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServe } from '../commands/serve.js';
import type { OpenAIServer } from './server.js';

const MODEL = join(resolve(import.meta.dirname, '../../../..'), 'packages/model-zoo/fixtures/tiny-llama-chat');
let stop: () => Promise<void>;
let server: OpenAIServer;
let base = '';

beforeAll(async () => {
  // few blocks for the load: admission waits and preemption happen while clients leave
  const s = await startServe({ model: MODEL, backend: 'cpu', dtype: 'f32', maxNumSeqs: 8, maxNumBatchedTokens: 128, maxModelLen: 128, gpuMemoryUtilization: 0.9, numKvBlocks: 20, graphs: true, host: '127.0.0.1', port: 0 }, { out: () => {}, err: () => {} });
  stop = s.stop;
  server = s.server;
  base = `http://127.0.0.1:${s.address.port}`;
});
afterAll(async () => stop?.());

/** One streamed completion; `leaveAfter` chunks, the client disconnects. Returns the finish reason, or 'left'. */
async function client(i: number, leaveAfter: number | null): Promise<string> {
  const ac = new AbortController();
  const r = await fetch(`${base}/v1/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, signal: AbortSignal.any([ac.signal, AbortSignal.timeout(60_000)]),
    body: JSON.stringify({ prompt: [1, 10 + (i % 50), 20, 30], max_tokens: 20 + (i % 7), temperature: 0.7, seed: i, ignore_eos: true, stream: true }),
  });
  expect(r.status).toBe(200);
  const reader = r.body!.getReader();
  let chunks = 0;
  let finish = '';
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return finish;
    buf += new TextDecoder().decode(value);
    let k: number;
    while ((k = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(6, k);
      buf = buf.slice(k + 2);
      if (ev === '[DONE]') continue;
      const c = (JSON.parse(ev) as { choices: { finish_reason: string | null }[] }).choices[0]!;
      if (c.finish_reason) finish = c.finish_reason;
      if (leaveAfter !== null && ++chunks >= leaveAfter) {
        ac.abort();
        await reader.cancel().catch(() => {});
        return 'left';
      }
    }
  }
}

const metric = (text: string, name: string) => [...text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'gm'))].reduce((a, m) => a + Number(m[1]), 0);

describe('serve under many streaming clients, 10% leaving mid-stream', () => {
  it('the others complete; no block leaks; the server answers after; /metrics is consistent', async () => {
    const N = 40;
    const outcomes = await Promise.all(Array.from({ length: N }, (_, i) => client(i, i % 10 === 3 ? 2 + (i % 3) : null)));
    expect(outcomes.filter((o) => o === 'left')).toHaveLength(4);
    expect(outcomes.filter((o) => o === 'length')).toHaveLength(N - 4);
    for (let i = 0; i < 200 && (server.loop.inFlight || server.engine.hasUnfinished); i++) await new Promise((r) => setTimeout(r, 10));
    expect(server.engine.hasUnfinished).toBe(false);
    expect(server.engine.blockManager.numUsedBlocks).toBe(0);
    const m = await (await fetch(`${base}/metrics`)).text();
    expect(metric(m, 'vllm:request_success_total')).toBe(N - 4);
    expect(metric(m, 'fastkernels:request_aborted_total')).toBe(4);
    expect(metric(m, 'vllm:num_requests_running')).toBe(0);
    expect(metric(m, 'vllm:num_requests_waiting')).toBe(0);
    expect(metric(m, 'vllm:kv_cache_usage_perc')).toBe(0);
    expect(metric(m, 'vllm:e2e_request_latency_seconds_count')).toBe(N - 4);
    expect(await (await fetch(`${base}/health`)).json()).toEqual({ status: 'ok' });
  }, 120_000);
});
