import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Io } from '../io.js';
import { startServe } from './serve.js';

const TINY = join(resolve(import.meta.dirname, '../../../..'), 'packages/model-zoo/fixtures/tiny-llama');
const io: Io = { out: () => {}, err: () => {} };
let stop: () => Promise<void>;
let url = '';

beforeAll(async () => {
  const s = await startServe({ model: TINY, backend: 'cpu', dtype: 'f32', maxNumSeqs: 8, maxNumBatchedTokens: 64, maxModelLen: 128, gpuMemoryUtilization: 0.9, graphs: true, host: '127.0.0.1', port: 0 }, io);
  stop = s.stop;
  url = `http://127.0.0.1:${s.address.port}`;
});
afterAll(async () => stop?.());

const post = (body: unknown) => fetch(`${url}/v1/completions`, { method: 'POST', body: JSON.stringify(body), signal: AbortSignal.timeout(20_000) });

describe('serve (loopback only)', () => {
  it('answers completions with token ids; concurrent requests batch and equal their single-request answers', async () => {
    const one = await (await post({ prompt: [1, 2, 3, 4], max_tokens: 5, temperature: 0 })).json() as { choices: { token_ids: number[]; finish_reason: string }[]; usage: { prompt_tokens: number; completion_tokens: number } };
    expect(one.choices[0]!.token_ids.length).toBe(5);
    expect(one.choices[0]!.finish_reason).toBe('length');
    expect(one.usage).toMatchObject({ prompt_tokens: 4, completion_tokens: 5 });
    const [a, b] = await Promise.all([
      post({ prompt: [1, 2, 3, 4], max_tokens: 5, temperature: 0 }).then((r) => r.json() as Promise<typeof one>),
      post({ prompt: [[9, 8, 7], [1, 2, 3, 4]], max_tokens: 3, temperature: 0 }).then((r) => r.json() as Promise<typeof one>),
    ]);
    expect(a.choices[0]!.token_ids).toEqual(one.choices[0]!.token_ids);
    expect(b.choices.length).toBe(2);
    expect(b.choices[1]!.token_ids).toEqual(one.choices[0]!.token_ids.slice(0, 3));
  });

  it('streams server-sent events ending in [DONE]', async () => {
    const r = await post({ prompt: [5, 6, 7], max_tokens: 4, temperature: 0, stream: true });
    expect(r.headers.get('content-type')).toMatch(/text\/event-stream/);
    const text = await r.text();
    const events = text.split('\n\n').filter(Boolean);
    expect(events[events.length - 1]).toBe('data: [DONE]');
    const tokens = events.slice(0, -1).flatMap((e) => (JSON.parse(e.slice(6)) as { choices: { token_ids: number[] }[] }).choices[0]!.token_ids);
    expect(tokens.length).toBe(4);
  });

  it('rejects bad requests with 400 and unknown routes with 404; lists the model', async () => {
    for (const body of [{ prompt: 'hello' }, { prompt: [1, 999] }, { prompt: [1], max_tokens: 1000 }, { prompt: [] }]) {
      const r = await post(body);
      expect(r.status).toBe(400);
      expect(((await r.json()) as { error: { message: string } }).error.message.length).toBeGreaterThan(5);
    }
    expect((await fetch(`${url}/nope`)).status).toBe(404);
    expect(((await (await fetch(`${url}/v1/models`)).json()) as { data: { id: string }[] }).data[0]!.id).toBe('tiny-llama');
  });
});

describe('serve on a folder with safetensors', () => {
  it('serves the checkpoint (the tokens of generate on the same folder), not random weights', async () => {
    const { mkdtempSync, readFileSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { baselineRegistry, writeRandomModelCheckpoint } = await import('@fastkernels/model-zoo');
    const { runGenerate } = await import('./generate.js');
    const dir = join(mkdtempSync(join(tmpdir(), 'fk-serve-ckpt-')), 'tiny-llama');
    const raw = JSON.parse(readFileSync(join(TINY, 'config.json'), 'utf8')) as Record<string, unknown>;
    // a seed no random init would pick (serve used to draw seed-0 random weights whatever the folder held)
    writeRandomModelCheckpoint(dir, raw, { registry: baselineRegistry(), seed: 11, dtype: 'f32' });
    let out = '';
    await runGenerate({ model: dir, promptIds: '3,1,4,1,5', maxTokens: 6, temperature: 0, topK: 0, topP: 1, seed: 0, backend: 'cpu', dtype: 'f32', json: true, initSeed: 0 }, { out: (s) => (out += s), err: () => {} }, []);
    const expected = (JSON.parse(out) as { outputs: { token_ids: number[] }[] }).outputs[0]!.token_ids;
    const s = await startServe({ model: dir, backend: 'cpu', dtype: 'f32', maxNumSeqs: 4, maxNumBatchedTokens: 64, maxModelLen: 128, gpuMemoryUtilization: 0.9, graphs: true, host: '127.0.0.1', port: 0 }, io);
    try {
      const r = await fetch(`http://127.0.0.1:${s.address.port}/v1/completions`, { method: 'POST', body: JSON.stringify({ prompt: [3, 1, 4, 1, 5], max_tokens: 6, temperature: 0 }), signal: AbortSignal.timeout(20_000) });
      expect(((await r.json()) as { choices: { token_ids: number[] }[] }).choices[0]!.token_ids).toEqual(expected);
    } finally {
      await s.stop();
    }
  });
});
