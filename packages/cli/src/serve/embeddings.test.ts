/**
 * /v1/embeddings on an encoder model (the tiny BGE-M3 fixture, random weights, CPU) driven by the official `openai`
 * client: token-id inputs, base64 encoding, requests sent together batched into one forward with the same vectors as
 * alone, the refusals (text without tokenizer.json, dimensions, generation routes).
 */
import { join, resolve } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmbeddingServe } from '../commands/serve-embeddings.js';
import type { ServeArgs } from '../commands/serve.js';
import type { EmbeddingServer } from './embedding-server.js';

const MODEL = join(resolve(import.meta.dirname, '../../../..'), 'packages/model-zoo/fixtures/tiny-bge-m3');
let client: OpenAI;
let server: EmbeddingServer;
let base: string;
let stop: () => Promise<void>;

beforeAll(async () => {
  const argv = { model: MODEL, backend: 'cpu', dtype: 'f32', host: '127.0.0.1', port: 0, apiKey: 'k' } as unknown as ServeArgs;
  const s = await startEmbeddingServe(argv, { out: () => {}, err: () => {} }, 0);
  server = s.server;
  stop = s.stop;
  base = `http://127.0.0.1:${s.address.port}/v1`;
  client = new OpenAI({ baseURL: base, apiKey: 'k', timeout: 30_000, maxRetries: 0 });
});
afterAll(async () => stop?.());

describe('/v1/embeddings on an encoder model (openai client)', () => {
  it('token ids in, unit vectors out, in order, with usage; base64 decodes to the same floats', async () => {
    const r = await client.embeddings.create({ model: 'tiny-bge-m3', input: [[0, 5, 9, 2], [0, 33, 2]], encoding_format: 'float' });
    expect(r.object).toBe('list');
    expect(r.data.map((d) => d.index)).toEqual([0, 1]);
    expect(r.usage).toEqual({ prompt_tokens: 7, total_tokens: 7 });
    for (const d of r.data) {
      expect(d.embedding.length).toBe(32);
      expect(Math.hypot(...d.embedding)).toBeCloseTo(1, 4);
    }
    const b = await fetch(`${base}/embeddings`, { method: 'POST', headers: { authorization: 'Bearer k', 'content-type': 'application/json' }, body: JSON.stringify({ input: [0, 33, 2], encoding_format: 'base64' }) });
    const body = (await b.json()) as { data: { embedding: string }[] };
    const bytes = Buffer.from(body.data[0]!.embedding, 'base64');
    const floats = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
    [...floats].forEach((v, j) => expect(v).toBeCloseTo(r.data[1]!.embedding[j]!, 6));
  });

  it('concurrent requests share forwards and get the vectors they get alone', async () => {
    const inputs = [[0, 7, 7, 40, 12, 2], [0, 5, 2], [0, 63, 21, 8, 9, 10, 11, 2]];
    const alone: number[][] = [];
    for (const input of inputs) alone.push((await client.embeddings.create({ model: 'm', input })).data[0]!.embedding);
    const before = server.runner.stats.batches;
    const together = await Promise.all(inputs.map((input) => client.embeddings.create({ model: 'm', input })));
    expect(server.runner.stats.batches - before).toBeLessThan(inputs.length);
    together.forEach((r, i) => r.data[0]!.embedding.forEach((v, j) => expect(v).toBeCloseTo(alone[i]![j]!, 5)));
  });

  it('refuses text without tokenizer.json, other dimensions, a wrong key, and generation, each with its status', async () => {
    const text = await client.embeddings.create({ model: 'm', input: 'hello' }).catch((x: unknown) => x);
    expect((text as { status: number }).status).toBe(400);
    expect(String((text as Error).message)).toMatch(/no tokenizer\.json: send token ids/);
    const dims = await client.embeddings.create({ model: 'm', input: [0, 2], dimensions: 8 }).catch((x: unknown) => x);
    expect((dims as { status: number }).status).toBe(400);
    expect(String((dims as Error).message)).toMatch(/32-dimensional embeddings; dimensions 8 is not supported/);
    const key = await new OpenAI({ baseURL: base, apiKey: 'wrong', maxRetries: 0 }).embeddings.create({ model: 'm', input: [0, 2] }).catch((x: unknown) => x);
    expect((key as { status: number }).status).toBe(401);
    const gen = await client.completions.create({ model: 'm', prompt: [0, 2] }).catch((x: unknown) => x);
    expect((gen as { status: number }).status).toBe(400);
    expect(String((gen as Error).message)).toMatch(/is an encoder \(embedding\) model: it does not generate text/);
    const long = await client.embeddings.create({ model: 'm', input: new Array(39).fill(5) }).catch((x: unknown) => x);
    expect((long as { status: number }).status).toBe(400);
  });
});

describe('/v1/embeddings with text (tokenizer.json in the folder)', () => {
  it('a string and a list of strings embed as their token ids do', async () => {
    const s = await startEmbeddingServe({ model: MODEL + '-text', backend: 'cpu', dtype: 'f32', host: '127.0.0.1', port: 0 } as unknown as ServeArgs, { out: () => {}, err: () => {} }, 0);
    try {
      const c = new OpenAI({ baseURL: `http://127.0.0.1:${s.address.port}/v1`, apiKey: 'none', maxRetries: 0 });
      const text = await c.embeddings.create({ model: 'm', input: ['Hi', 'Hello world'] });
      expect(text.usage.prompt_tokens).toBe(4 + 13);
      const ids = await c.embeddings.create({ model: 'm', input: [0, 72, 105, 2] });
      text.data[0]!.embedding.forEach((v, j) => expect(v).toBeCloseTo(ids.data[0]!.embedding[j]!, 6));
    } finally {
      await s.stop();
    }
  });
});
