/**
 * The server driven by the official `openai` npm client (what users point at it), with the tiny Llama and the
 * byte-level tokenizer fixture: on the CPU backend in CI (openai-client.test.ts) and on the GPU host
 * (openai-client.gpu.test.ts, the same checks on CUDA). Loopback only; every request is bounded by the client's timeout.
 * A *.suite.ts file: shared by tests, never built into the package.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadTokenizer, type TextTokenizer } from '@fastkernels/model-zoo';
import { startServe } from '../commands/serve.js';
import type { Io } from '../io.js';
import type { OpenAIServer } from './server.js';

export interface OpenAIClientSuiteOptions {
  /** A model folder: the tiny Llama's config.json with the tiny-llama-chat tokenizer files. */
  readonly model: string;
  readonly backend: 'cpu' | 'cuda';
  readonly dtype: 'f32' | 'bf16';
  /** Test tags (['gpu'] on the GPU host). */
  readonly tags?: string[];
}

export function openAIClientSuite(o: OpenAIClientSuiteOptions): void {
const MODEL = o.model;
const it_ = (name: string, fn: () => Promise<void>, timeout = 60_000) => it(name, { tags: o.tags ?? [], timeout }, fn);
const KEY = 'test-key';
const logged: string[] = [];
const io: Io = { out: () => {}, err: (l) => void logged.push(l) };
let tok: TextTokenizer;
let stop: () => Promise<void>;
let server: OpenAIServer;
let base = '';
let client: OpenAI;
/** Fields the server adds beyond OpenAI's (vLLM's names). */
type Extra = Record<string, unknown>;

beforeAll(async () => {
  tok = loadTokenizer(MODEL)!;
  const s = await startServe({ model: MODEL, backend: o.backend, dtype: o.dtype, maxNumSeqs: 8, maxNumBatchedTokens: 128, maxModelLen: 256, gpuMemoryUtilization: 0.5, numKvBlocks: 64, graphs: true, host: '127.0.0.1', port: 0, apiKey: KEY, maxWaiting: 4 }, io);
  stop = s.stop;
  server = s.server;
  base = `http://127.0.0.1:${s.address.port}`;
  client = new OpenAI({ baseURL: `${base}/v1`, apiKey: KEY, maxRetries: 0, timeout: 30_000 });
}, 300_000);
afterAll(async () => stop?.());

/** Wait (bounded) until the engine holds no request and no cache block. */
async function engineIdle(): Promise<void> {
  for (let i = 0; i < 200 && (server.loop.inFlight > 0 || server.engine.blockManager.numUsedBlocks > 0 || server.engine.hasUnfinished); i++) await new Promise((r) => setTimeout(r, 10));
  expect(server.loop.inFlight).toBe(0);
  expect(server.engine.hasUnfinished).toBe(false);
  expect(server.engine.blockManager.numUsedBlocks).toBe(0);
}

describe('openai client: completions and chat', () => {
  it_('completes a text prompt: the text is the decode of the token ids, usage counts the BOS-prefixed prompt', async () => {
    const r = await client.completions.create({ model: 'tiny-llama-chat', prompt: 'Hello', max_tokens: 6, temperature: 0, ignore_eos: true } as OpenAI.CompletionCreateParamsNonStreaming & Extra);
    const c = r.choices[0]! as typeof r.choices[0] & { token_ids: number[] };
    expect(c.token_ids).toHaveLength(6);
    expect(c.text).toBe(tok.decode(c.token_ids));
    expect(c.finish_reason).toBe('length');
    expect(r.usage).toEqual({ prompt_tokens: 6, completion_tokens: 6, total_tokens: 12 });
    expect(r.object).toBe('text_completion');
  });

  it_('chats: the prompt is the chat template; streamed deltas add up to the whole answer, usage last when asked', async () => {
    const messages = [{ role: 'system' as const, content: 'Be brief.' }, { role: 'user' as const, content: 'Hi ü' }];
    const whole = await client.chat.completions.create({ model: 'x', messages, max_completion_tokens: 12, temperature: 0, ignore_eos: true } as OpenAI.ChatCompletionCreateParamsNonStreaming & Extra);
    expect(whole.object).toBe('chat.completion');
    expect(whole.choices[0]!.message.role).toBe('assistant');
    expect(whole.usage!.prompt_tokens).toBe(tok.encodeChat(messages).length);
    expect(whole.usage!.completion_tokens).toBe(12);
    const stream = await client.chat.completions.create({ model: 'x', messages, max_completion_tokens: 12, temperature: 0, ignore_eos: true, stream: true, stream_options: { include_usage: true } } as OpenAI.ChatCompletionCreateParamsStreaming & Extra);
    let text = '';
    let finish: string | null = null;
    let usage: OpenAI.CompletionUsage | null | undefined;
    let first = true;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      const ch = chunk.choices[0];
      if (!ch) continue;
      if (first && ch.delta.content !== undefined) {
        expect(ch.delta.role).toBe('assistant');
        first = false;
      }
      expect(ch.delta.content ?? '').not.toMatch(/[\uD800-\uDBFF]$/); // never half of a surrogate pair
      text += ch.delta.content ?? '';
      finish = ch.finish_reason ?? finish;
    }
    expect(text).toBe(whole.choices[0]!.message.content);
    expect(finish).toBe('length');
    expect(usage).toEqual(whole.usage);
  });

  it_('chat without max_tokens generates up to the end of the context (not 16 tokens)', async () => {
    const messages = [{ role: 'user' as const, content: 'Tell me everything.' }];
    const r = await client.chat.completions.create({ model: 'x', messages, temperature: 0, ignore_eos: true } as OpenAI.ChatCompletionCreateParamsNonStreaming & Extra);
    expect(r.usage!.completion_tokens).toBe(256 - tok.encodeChat(messages).length);
    expect(r.choices[0]!.finish_reason).toBe('length');
  });

  it_('n > 1: n choices with their indexes, reproducible with a seed, different draws within a request', async () => {
    const ask = () => client.completions.create({ model: 'x', prompt: [5, 6, 7], n: 3, max_tokens: 8, temperature: 1, seed: 42, ignore_eos: true } as OpenAI.CompletionCreateParamsNonStreaming & Extra);
    const [a, b] = [await ask(), await ask()];
    expect(a.choices.map((c) => c.index)).toEqual([0, 1, 2]);
    const ids = (r: typeof a) => r.choices.map((c) => (c as unknown as { token_ids: number[] }).token_ids.join());
    expect(ids(a)).toEqual(ids(b));
    expect(new Set(ids(a)).size).toBeGreaterThan(1);
    expect(a.usage).toEqual({ prompt_tokens: 3, completion_tokens: 24, total_tokens: 27 });
  });

  it_('stop strings: the text ends before the first match, finish_reason stop, in whole and streamed answers', async () => {
    const full = await client.completions.create({ model: 'x', prompt: 'abc', max_tokens: 16, temperature: 0, ignore_eos: true } as OpenAI.CompletionCreateParamsNonStreaming & Extra);
    const T = full.choices[0]!.text;
    expect(T.length).toBeGreaterThan(6);
    const stopStr = T.slice(4, 6);
    // each answer is checked against its own tokens: greedy on random weights is near-tie, and a repeated prompt may
    // take another path (cached prefix blocks) and flip a token on the GPU, so T itself is not the expectation
    const beforeStop = (ids: readonly number[]) => {
      const text = tok.decode([...ids]);
      const at = text.indexOf(stopStr);
      expect(at, `the stopped answer's own tokens ${JSON.stringify(text)} hold the stop string ${JSON.stringify(stopStr)}`).toBeGreaterThanOrEqual(0);
      return text.slice(0, at);
    };
    const r = await client.completions.create({ model: 'x', prompt: 'abc', max_tokens: 16, temperature: 0, stop: [stopStr, 'never-there'], ignore_eos: true } as OpenAI.CompletionCreateParamsNonStreaming & Extra);
    expect(r.choices[0]!.finish_reason).toBe('stop');
    expect(r.choices[0]!.text).toBe(beforeStop((r.choices[0] as unknown as { token_ids: number[] }).token_ids));
    const s = await client.completions.create({ model: 'x', prompt: 'abc', max_tokens: 16, temperature: 0, stop: stopStr, stream: true, ignore_eos: true } as OpenAI.CompletionCreateParamsStreaming & Extra);
    let text = '';
    const streamedIds: number[] = [];
    for await (const chunk of s) {
      text += chunk.choices[0]?.text ?? '';
      streamedIds.push(...((chunk.choices[0] as unknown as { token_ids?: number[] } | undefined)?.token_ids ?? []));
    }
    expect(text).toBe(beforeStop(streamedIds));
    // without a stop string every token id is streamed (held-back bytes included) and the deltas add up to their text
    const s2 = await client.completions.create({ model: 'x', prompt: 'abc', max_tokens: 16, temperature: 0, stream: true, ignore_eos: true } as OpenAI.CompletionCreateParamsStreaming & Extra);
    const ids: number[] = [];
    let text2 = '';
    for await (const chunk of s2) {
      text2 += chunk.choices[0]?.text ?? '';
      ids.push(...((chunk.choices[0] as unknown as { token_ids?: number[] } | undefined)?.token_ids ?? []));
    }
    expect(ids).toHaveLength(16);
    expect(text2).toBe(tok.decode(ids));
    await engineIdle();
  });

  it_('logprobs: completions (tokens, token_logprobs, top_logprobs) and chat (content entries, streamed too); greedy picks the top', async () => {
    const r = await client.completions.create({ model: 'x', prompt: [5, 6], max_tokens: 5, temperature: 0, logprobs: 2, ignore_eos: true } as OpenAI.CompletionCreateParamsNonStreaming & Extra);
    const lp = r.choices[0]!.logprobs!;
    expect(lp.tokens).toHaveLength(5);
    expect(lp.token_logprobs).toHaveLength(5);
    lp.token_logprobs!.forEach((v, i) => {
      expect(v).toBeLessThanOrEqual(0);
      const top = Object.values(lp.top_logprobs![i]!);
      expect(top.length).toBeGreaterThanOrEqual(1); // two ids may decode to the same text
      expect(v).toBeCloseTo(Math.max(...top), 9);
    });
    const messages = [{ role: 'user' as const, content: 'hi' }];
    const c = await client.chat.completions.create({ model: 'x', messages, max_tokens: 4, temperature: 0, logprobs: true, top_logprobs: 3, ignore_eos: true } as OpenAI.ChatCompletionCreateParamsNonStreaming & Extra);
    const content = c.choices[0]!.logprobs!.content!;
    expect(content).toHaveLength(4);
    for (const e of content) {
      expect(e.top_logprobs).toHaveLength(3);
      expect(e.logprob).toBeCloseTo(e.top_logprobs[0]!.logprob, 9);
      expect(e.bytes).toEqual([...Buffer.from(e.token, 'utf8')]);
    }
    const s = await client.chat.completions.create({ model: 'x', messages, max_tokens: 4, temperature: 0, logprobs: true, ignore_eos: true, stream: true } as OpenAI.ChatCompletionCreateParamsStreaming & Extra);
    const streamed: number[] = [];
    for await (const chunk of s) for (const e of chunk.choices[0]?.logprobs?.content ?? []) streamed.push(e.logprob);
    expect(streamed).toEqual(content.map((e) => e.logprob));
    const bad = await client.chat.completions.create({ model: 'x', messages, top_logprobs: 2 }).catch((x: unknown) => x);
    expect((bad as InstanceType<typeof OpenAI.APIError>).status).toBe(400);
  });

  it_('a client that aborts mid-stream cancels its request: no request and no cache block left, the server goes on', async () => {
    const ac = new AbortController();
    const s = await client.chat.completions.create({ model: 'x', messages: [{ role: 'user', content: 'go' }], max_tokens: 150, temperature: 0, ignore_eos: true, stream: true } as OpenAI.ChatCompletionCreateParamsStreaming & Extra, { signal: ac.signal });
    let chunks = 0;
    // the client ends the iteration (or throws an abort error, depending on timing): either way the connection closes
    await (async () => {
      for await (const _ of s) if (++chunks === 3) ac.abort();
    })().catch((e: unknown) => expect(String(e)).toMatch(/abort/i));
    expect(chunks).toBe(3);
    await engineIdle();
    const metrics = await (await fetch(`${base}/metrics`)).text();
    expect(metrics).toMatch(/^fastkernels:request_aborted_total\{model_name="tiny-llama-chat"\} [1-9]/m);
    const after = await client.completions.create({ model: 'x', prompt: [1, 2], max_tokens: 2, temperature: 0 });
    expect(after.choices).toHaveLength(1);
  });
});

describe('openai client: errors in OpenAI\'s shape', () => {
  const bad: [string, Record<string, unknown>, number, RegExp][] = [
    ['top_p out of range', { prompt: 'a', top_p: 5 }, 400, /top_p/],
    ['negative max_tokens', { prompt: 'a', max_tokens: -1 }, 400, /max_tokens/],
    ['huge max_tokens', { prompt: 'a', max_tokens: 1e9 }, 400, /max-model-len|max_tokens/],
    ['an unknown field', { prompt: 'a', max_token: 3 }, 400, /max_token/],
    ['ids beyond the vocabulary', { prompt: [1, 999] }, 400, /vocabulary/],
    ['logprobs over 20', { prompt: 'a', logprobs: 21 }, 400, /logprobs/],
    ['n over 16', { prompt: 'a', n: 17 }, 400, /n/],
  ];
  for (const [what, body, status, msg] of bad) {
    it_(`${what}: ${status}`, async () => {
      const e = await client.completions.create({ model: 'x', ...body } as unknown as OpenAI.CompletionCreateParamsNonStreaming).catch((x: unknown) => x);
      expect(e).toBeInstanceOf(OpenAI.APIError);
      const a = e as InstanceType<typeof OpenAI.APIError>;
      expect(a.status).toBe(status);
      expect(a.type).toBe('invalid_request_error');
      expect(a.message).toMatch(msg);
    });
  }

  it_('a chat whose messages are malformed, a wrong API key (401), embeddings of a decoder-only model, the queue limit (429)', async () => {
    const chat = await client.chat.completions.create({ model: 'x', messages: [{ role: 'wizard', content: 'x' }] } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming).catch((x: unknown) => x);
    expect((chat as InstanceType<typeof OpenAI.APIError>).status).toBe(400);
    expect((chat as InstanceType<typeof OpenAI.APIError>).message).toMatch(/messages\.0\.role/);
    const wrong = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'nope', maxRetries: 0, timeout: 10_000 });
    const auth = await wrong.models.list().catch((x: unknown) => x);
    expect(auth).toBeInstanceOf(OpenAI.AuthenticationError);
    const emb = await client.embeddings.create({ model: 'x', input: 'hi' }).catch((x: unknown) => x);
    expect((emb as InstanceType<typeof OpenAI.APIError>).status).toBe(400);
    expect((emb as InstanceType<typeof OpenAI.APIError>).message).toMatch(/decoder-only/);
    const full = await client.completions.create({ model: 'x', prompt: 'a', n: 5 }).catch((x: unknown) => x);
    expect(full).toBeInstanceOf(OpenAI.RateLimitError);
    expect((await client.models.list()).data[0]!.id).toBe('tiny-llama-chat');
  });
});

describe('the new-user findings, over raw HTTP', () => {
  const post = (body: string | null, headers: Record<string, string> = {}) =>
    fetch(`${base}/v1/completions`, { method: 'POST', body, headers: { authorization: `Bearer ${KEY}`, ...headers }, signal: AbortSignal.timeout(20_000) });
  const shape = async (r: Response) => (await r.json()) as { error: { message: string; type: string; param: string | null } };

  it_('a body over 16 MiB is answered 413 (not a connection reset)', async () => {
    const r = await post(JSON.stringify({ prompt: 'x'.repeat(17 << 20) }), { 'content-type': 'application/json' });
    expect(r.status).toBe(413);
    expect((await shape(r)).error.message).toMatch(/larger than the server's limit/);
  });

  it_('a null body (and a non-object one) is a 400 saying so, not a TypeError', async () => {
    for (const [body, what] of [['null', 'null'], ['[1]', 'an array'], ['3', 'number']] as const) {
      const r = await post(body, { 'content-type': 'application/json' });
      expect(r.status).toBe(400);
      const e = await shape(r);
      expect(e.error.message).toBe(`the request body must be a JSON object, got ${what}`);
      expect(e.error.type).toBe('invalid_request_error');
    }
  });

  it_('bad JSON is 400; curl -d\'s form content type is read as JSON; another media type is 415; unknown routes 404', async () => {
    expect((await post('{"prompt": ', { 'content-type': 'application/json' })).status).toBe(400);
    const curl = await post(JSON.stringify({ prompt: [1, 2], max_tokens: 1 }), { 'content-type': 'application/x-www-form-urlencoded' });
    expect(curl.status).toBe(200);
    const xml = await post('<a/>', { 'content-type': 'application/xml' });
    expect(xml.status).toBe(415);
    expect((await shape(xml)).error.type).toBe('invalid_request_error');
    const nf = await fetch(`${base}/v1/nope`, { headers: { authorization: `Bearer ${KEY}` } });
    expect(nf.status).toBe(404);
    expect((await shape(nf)).error.message).toMatch(/no route GET \/v1\/nope/);
  });

  it_('/health and /metrics need no key; metrics carry vLLM\'s names and the cache is empty when idle', async () => {
    expect(await (await fetch(`${base}/health`)).json()).toEqual({ status: 'ok' });
    const m = await (await fetch(`${base}/metrics`)).text();
    for (const name of ['vllm:num_requests_running', 'vllm:num_requests_waiting', 'vllm:kv_cache_usage_perc', 'vllm:time_to_first_token_seconds_bucket', 'vllm:e2e_request_latency_seconds_count', 'vllm:prompt_tokens_total', 'vllm:generation_tokens_total', 'vllm:request_success_total']) expect(m).toContain(name);
    expect(m).toMatch(/^vllm:kv_cache_usage_perc\{model_name="tiny-llama-chat"\} 0$/m);
  });
});

describe('the server log', () => {
  it_('holds no error line after all the bad requests above (client errors are not crashes)', async () => {
    expect(logged.join('')).toMatch(/serving tiny-llama-chat on http:\/\/127\.0\.0\.1:\d+\/v1/);
    expect(logged.filter((l) => /error|TypeError|^\s+at .+:\d+:\d+/m.test(l))).toEqual([]);
  });
});
}
