import { randomInt } from 'node:crypto';
import type { SamplingParams, TextTokenizer, TokenLogprob } from '@fastkernels/model-zoo';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import { ApiError, errorBody, fromZod, sendError } from './errors.js';
import { Choice, Generation, type GenerationListener } from './generation.js';
import { chatRequest, completionRequest, type ChatRequest, type CompletionRequest } from './schemas.js';
import type { ServerState } from './state.js';

function parse<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new ApiError(400, `the request body must be a JSON object, got ${body === null ? 'null' : Array.isArray(body) ? 'an array' : typeof body}`);
  const r = schema.safeParse(body);
  if (!r.success) throw fromZod(r.error);
  return r.data;
}

/** The sampling parameters of a request's choice `j` (of n): OpenAI's defaults (temperature 1), seeds per choice. */
function samplingOf(b: CompletionRequest | ChatRequest, maxTokens: number, j: number, seed: number, eos: readonly number[], logprobs: number | undefined): Partial<SamplingParams> {
  return {
    ...(logprobs !== undefined ? { logprobs } : {}),
    maxTokens, temperature: b.temperature ?? 1, topP: b.top_p ?? 1, topK: b.top_k ?? 0,
    // n choices of one prompt differ by their seed (each a distinct draw), and are reproducible when `seed` is given
    seed: seed + j,
    ignoreEos: b.ignore_eos === true,
    ...(b.stop_token_ids?.length || eos.length ? { stopTokenIds: [...(b.stop_token_ids ?? []), ...(b.ignore_eos ? [] : eos)] } : {}),
  };
}

const stopsOf = (s: string | string[] | null | undefined): string[] => (s == null ? [] : typeof s === 'string' ? [s] : s);

function needTokenizer(state: ServerState, what: string): TextTokenizer {
  if (!state.tokenizer) throw new ApiError(400, `${what} needs a tokenizer, and the model folder has no tokenizer.json: send token ids ("prompt": [1, 2, 3]) to /v1/completions, or add the model's tokenizer.json`, 'prompt', 'no_tokenizer');
  return state.tokenizer;
}

/** Refuse before the engine sees the request: shutting down (503), too many waiting (429), unsupported fields. */
function admit(state: ServerState, count: number): void {
  if (state.draining || state.loop.fatal) {
    state.metrics.rejected.inc({ ...state.metrics.labels, reason: 'unavailable' });
    throw new ApiError(503, state.loop.fatal ? `the server failed: ${state.loop.fatal}` : 'the server is shutting down');
  }
  const waiting = state.loop.engine.scheduler.waiting.length;
  if (waiting + count > state.maxWaiting) {
    state.metrics.rejected.inc({ ...state.metrics.labels, reason: 'queue_full' });
    throw new ApiError(429, `the server is at its queue limit (${waiting} requests waiting, --max-waiting ${state.maxWaiting}): retry later`, null, 'queue_full');
  }
}

/** The output format of one endpoint (completions or chat), streamed or whole. */
interface Format {
  readonly id: string;
  chunk(c: Choice, text: string, ids: readonly number[], finish: string | null, first: boolean, lps: readonly TokenLogprob[]): unknown;
  whole(g: Generation): unknown;
  usageChunk(g: Generation): unknown;
}

/** Run a generation and answer: SSE chunks as tokens come (`stream`), else one JSON body at the end. */
async function respond(state: ServerState, reply: FastifyReply, choices: Choice[], format: Format, stream: boolean, includeUsage: boolean): Promise<void> {
  const res = reply.raw;
  const write = (o: unknown) => res.write(`data: ${JSON.stringify(o)}\n\n`);
  let settle!: () => void;
  const finished = new Promise<void>((ok) => (settle = ok));
  const started = new Set<Choice>();
  const listener: GenerationListener = {
    delta: (c, text, ids) => {
      if (!stream) return;
      c.unsentIds.push(...ids);
      if (!text && (state.tokenizer || !ids.length)) return; // a held-back byte or stop-string prefix: nothing to show yet
      const [lps, sent] = [c.unsentLogprobs, c.unsentIds];
      c.unsentLogprobs = [];
      c.unsentIds = [];
      write(format.chunk(c, text, sent, null, !started.has(c), lps));
      started.add(c);
    },
    finished: (c) => {
      if (!stream) return;
      // logprobs of tokens whose text never showed (a special token, a held-back byte at the end) still go out
      if (c.unsentLogprobs.length || c.unsentIds.length) {
        write(format.chunk(c, '', c.unsentIds, null, !started.has(c), c.unsentLogprobs));
        c.unsentLogprobs = [];
        c.unsentIds = [];
        started.add(c);
      }
      write(format.chunk(c, '', [], c.finishReason, false, []));
    },
    done: () => {
      if (stream) {
        if (includeUsage) write(format.usageChunk(gen));
        res.end('data: [DONE]\n\n');
      } else void reply.code(200).type('application/json').send(format.whole(gen));
      settle();
    },
    error: (message) => {
      if (stream) {
        write(errorBody(500, message));
        res.end('data: [DONE]\n\n');
      } else sendError(reply, new ApiError(500, message), state.log);
      settle();
    },
  };
  const gen = new Generation(state.loop, choices, listener, state.metrics);
  // a client that goes away cancels its requests (their cache blocks are freed); watched before the requests are added,
  // since under --tp adding may wait for the step in progress and the client may leave meanwhile
  let added = false;
  let closed = false;
  res.on('close', () => {
    closed = true;
    if (added && !gen.isDone) gen.cancel();
    settle();
  });
  await gen.start(); // a UserError here (ids beyond the vocabulary, too long) is the client's 400: nothing was queued
  added = true;
  if (closed && !gen.isDone) gen.cancel();
  if (stream) {
    reply.hijack();
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
  }
  await finished;
}

/** A token as text in logprobs: its decode (special tokens too), or `token_id:N` without a tokenizer (vLLM's form). */
const tokenText = (state: ServerState, id: number) => (state.tokenizer ? state.tokenizer.decode([id], false) : `token_id:${id}`);

/** Legacy completions' logprobs object: tokens, their logprobs, the top alternatives by text, text offsets. */
function completionLogprobs(state: ServerState, lps: readonly TokenLogprob[]) {
  const tokens = lps.map((lp) => tokenText(state, lp.token));
  let offset = 0;
  return {
    tokens, token_logprobs: lps.map((lp) => lp.logprob),
    top_logprobs: lps.map((lp) => Object.fromEntries(lp.top.map(([id, v]) => [tokenText(state, id), v]))),
    text_offset: tokens.map((t) => ((offset += t.length), offset - t.length)),
  };
}

/** Chat's logprobs object: one entry per token with its UTF-8 bytes and the top alternatives. */
function chatLogprobs(state: ServerState, lps: readonly TokenLogprob[]) {
  const entry = (id: number, logprob: number) => {
    const token = tokenText(state, id);
    return { token, logprob, bytes: [...Buffer.from(token, 'utf8')] };
  };
  return { content: lps.map((lp) => ({ ...entry(lp.token, lp.logprob), top_logprobs: lp.top.map(([id, v]) => entry(id, v)) })), refusal: null };
}

const created = () => Math.floor(Date.now() / 1000);
const newSeed = () => randomInt(0, 2 ** 31 - 1);

export async function completions(state: ServerState, req: FastifyRequest, reply: FastifyReply): Promise<void> {
  const b = parse(completionRequest, req.body);
  const logprobs = b.logprobs ?? undefined;
  const p = b.prompt;
  const prompts: number[][] =
    typeof p === 'string' ? [needTokenizer(state, 'a text prompt').encode(p)]
    : typeof p[0] === 'string' ? (p as string[]).map((t) => needTokenizer(state, 'a text prompt').encode(t))
    : typeof p[0] === 'number' ? [p as number[]]
    : (p as number[][]);
  const n = b.n ?? 1;
  admit(state, prompts.length * n);
  const seed = b.seed ?? newSeed();
  const stops = stopsOf(b.stop);
  if (stops.length && !state.tokenizer) throw new ApiError(400, 'stop strings need a tokenizer, and the model folder has no tokenizer.json: use stop_token_ids', 'stop', 'no_tokenizer');
  const choices = prompts.flatMap((ids, i) => Array.from({ length: n }, (_, j) => new Choice(i * n + j, ids, samplingOf(b, b.max_tokens ?? 16, j, seed, state.eosIds, logprobs), state.tokenizer, stops)));
  const id = `cmpl-${state.nextId()}`;
  const t = created();
  const model = state.modelName;
  await respond(state, reply, choices, {
    id,
    chunk: (c, text, ids, finish, _first, lps) => ({ id, object: 'text_completion', created: t, model, choices: [{ index: c.index, text, token_ids: ids, logprobs: logprobs === undefined ? null : completionLogprobs(state, lps), finish_reason: finish }] }),
    whole: (g) => ({
      id, object: 'text_completion', created: t, model,
      choices: g.choices.map((c) => ({ index: c.index, text: c.text, token_ids: c.tokens, logprobs: logprobs === undefined ? null : completionLogprobs(state, c.logprobs), finish_reason: c.finishReason })),
      usage: g.usage(),
    }),
    usageChunk: (g) => ({ id, object: 'text_completion', created: t, model, choices: [], usage: g.usage() }),
  }, b.stream === true, b.stream_options?.include_usage === true);
}

export async function chatCompletions(state: ServerState, req: FastifyRequest, reply: FastifyReply): Promise<void> {
  const b = parse(chatRequest, req.body);
  if (b.top_logprobs != null && !b.logprobs) throw new ApiError(400, 'top_logprobs needs logprobs: true', 'top_logprobs');
  const logprobs = b.logprobs ? (b.top_logprobs ?? 0) : undefined;
  if (b.stream_options && !b.stream) throw new ApiError(400, 'stream_options is only allowed with stream: true', 'stream_options');
  const tok = needTokenizer(state, 'chat');
  const messages = b.messages.map((m) => ({ role: m.role, content: typeof m.content === 'string' ? m.content : (m.content ?? []).map((x) => x.text).join(''), ...(m.name ? { name: m.name } : {}) }));
  const promptIds = tok.encodeChat(messages, b.add_generation_prompt ?? true);
  const n = b.n ?? 1;
  admit(state, n);
  const seed = b.seed ?? newSeed();
  const stops = stopsOf(b.stop);
  // chat's default length is the rest of the context (OpenAI's and vLLM's), not legacy completions' 16 tokens
  const maxTokens = b.max_completion_tokens ?? b.max_tokens ?? Math.max(1, state.loop.engine.maxModelLen - promptIds.length);
  const choices = Array.from({ length: n }, (_, j) => new Choice(j, promptIds, samplingOf(b, maxTokens, j, seed, state.eosIds, logprobs), tok, stops));
  const id = `chatcmpl-${state.nextId()}`;
  const t = created();
  const model = state.modelName;
  await respond(state, reply, choices, {
    id,
    chunk: (c, text, _ids, finish, first, lps) => ({
      id, object: 'chat.completion.chunk', created: t, model,
      choices: [{ index: c.index, delta: finish ? {} : first ? { role: 'assistant', content: text } : { content: text }, logprobs: logprobs === undefined || finish ? null : chatLogprobs(state, lps), finish_reason: finish }],
    }),
    whole: (g) => ({
      id, object: 'chat.completion', created: t, model,
      choices: g.choices.map((c) => ({ index: c.index, message: { role: 'assistant', content: c.text }, logprobs: logprobs === undefined ? null : chatLogprobs(state, c.logprobs), finish_reason: c.finishReason })),
      usage: g.usage(),
    }),
    usageChunk: (g) => ({ id, object: 'chat.completion.chunk', created: t, model, choices: [], usage: g.usage() }),
  }, b.stream === true, b.stream_options?.include_usage === true);
}
