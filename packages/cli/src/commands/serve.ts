import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { UserError, errorMessage } from '@fastkernels/core';
import { LLMEngine, type SamplingParams, type StepOutput } from '@fastkernels/model-zoo';
import type { Argv } from 'yargs';
import { environment, selectBackend } from '../env.js';
import { intFlag } from '../flags.js';
import type { Io } from '../io.js';
import { engineFlags, engineOptions, modelSource, type EngineArgs } from './e2e.js';

/**
 * An OpenAI-compatible completions server over the engine (vLLM's /v1/completions, token ids in and out: there is
 * no tokenizer, so `prompt` is an array of token ids, or an array of such arrays, and each choice carries
 * `token_ids` with an empty `text`). The engine steps on the event loop between I/O (setImmediate), so requests
 * arriving while others run join the running batch (continuous batching). Streaming is SSE (`stream: true`).
 */
interface Pending {
  readonly requestId: number;
  readonly res: ServerResponse;
  readonly stream: boolean;
  readonly id: string;
  readonly created: number;
  readonly promptLen: number;
  readonly index: number;
  readonly group: Group;
}

interface Group {
  remaining: number;
  readonly choices: { index: number; token_ids: number[]; finish_reason: string }[];
  promptTokens: number;
}

const MAX_BODY = 16 << 20;

export class CompletionServer {
  readonly server: Server;
  private readonly pending = new Map<number, Pending>();
  private pumping = false;
  private seq = 0;
  /** Set when a step throws: the error every pending request got. */
  lastError: string | null = null;

  constructor(
    readonly engine: LLMEngine,
    readonly modelName: string,
  ) {
    this.server = createServer((req, res) => void this.handle(req, res));
  }

  listen(port: number, host = '127.0.0.1'): Promise<AddressInfo> {
    return new Promise((ok, fail) => {
      this.server.once('error', fail);
      this.server.listen(port, host, () => ok(this.server.address() as AddressInfo));
    });
  }

  close(): Promise<void> {
    return new Promise((ok) => this.server.close(() => ok()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    try {
      if (req.method === 'GET' && (req.url === '/health' || req.url === '/v1/health')) return json(res, 200, { status: 'ok' });
      if (req.method === 'GET' && req.url === '/v1/models') return json(res, 200, { object: 'list', data: [{ id: this.modelName, object: 'model', owned_by: 'fastkernels' }] });
      if (req.method !== 'POST' || req.url !== '/v1/completions') return error(res, 404, `no route ${req.method} ${req.url} (POST /v1/completions, GET /v1/models, GET /health)`);
      const body = await readBody(req);
      let parsed: Record<string, unknown>;
      try {
        parsed = JSON.parse(body) as Record<string, unknown>;
      } catch (e) {
        return error(res, 400, `body is not JSON: ${(e as Error).message}`);
      }
      this.start(parsed, res);
    } catch (e) {
      error(res, 400, errorMessage(e));
    }
  }

  private start(b: Record<string, unknown>, res: ServerResponse): void {
    const prompts = promptsOf(b.prompt);
    if (b.n !== undefined && b.n !== 1) throw new UserError('only n = 1 is supported');
    const num = (k: string, d: number) => {
      const v = b[k];
      if (v === undefined || v === null) return d;
      if (typeof v !== 'number' || !Number.isFinite(v)) throw new UserError(`${k} must be a number`);
      return v;
    };
    const params: Partial<SamplingParams> = {
      maxTokens: num('max_tokens', 16), temperature: num('temperature', 1), topP: num('top_p', 1), topK: num('top_k', 0), seed: num('seed', 0),
      ignoreEos: b.ignore_eos === true,
      ...(Array.isArray(b.stop_token_ids) ? { stopTokenIds: (b.stop_token_ids as unknown[]).map(Number) } : {}),
    };
    if (params.temperature! < 0) throw new UserError('temperature must be >= 0');
    const stream = b.stream === true;
    const id = `cmpl-${++this.seq}`;
    const created = Math.floor(Date.now() / 1000);
    const group: Group = { remaining: prompts.length, choices: [], promptTokens: 0 };
    // validate all before queueing any
    const ids: number[] = [];
    try {
      prompts.forEach((p, index) => {
        const rid = this.engine.addRequest(p, params);
        ids.push(rid);
        group.promptTokens += p.length;
        this.pending.set(rid, { requestId: rid, res, stream, id, created, promptLen: p.length, index, group });
      });
    } catch (e) {
      for (const rid of ids) {
        this.pending.delete(rid);
        this.engine.abortRequest(rid);
      }
      throw e;
    }
    // a client that goes away cancels its requests
    res.on('close', () => {
      for (const rid of ids) if (this.pending.delete(rid)) this.engine.abortRequest(rid);
    });
    if (stream) res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    this.schedule();
  }

  private schedule(): void {
    if (this.pumping) return;
    this.pumping = true;
    setImmediate(() => this.pump());
  }

  private pump(): void {
    this.pumping = false;
    if (!this.engine.hasUnfinished) return;
    let out: StepOutput;
    try {
      out = this.engine.step();
    } catch (e) {
      this.lastError = errorMessage(e);
      for (const p of this.pending.values()) {
        if (p.stream) p.res.end(`data: ${JSON.stringify({ error: { message: this.lastError } })}\n\ndata: [DONE]\n\n`);
        else if (!p.res.headersSent) error(p.res, 500, this.lastError);
      }
      this.pending.clear();
      this.engine.abort();
      return;
    }
    for (const [rid, token] of out.tokens) {
      const p = this.pending.get(rid);
      if (p?.stream) p.res.write(`data: ${JSON.stringify({ id: p.id, object: 'text_completion', created: p.created, model: this.modelName, choices: [{ index: p.index, text: '', token_ids: [token], finish_reason: null, logprobs: null }] })}\n\n`);
    }
    for (const f of out.finished) {
      const p = this.pending.get(f.requestId);
      if (!p) continue;
      this.pending.delete(f.requestId);
      const g = p.group;
      g.choices.push({ index: p.index, token_ids: f.tokenIds, finish_reason: f.finishReason === 'length' ? 'length' : 'stop' });
      if (--g.remaining > 0) continue;
      const completion = g.choices.reduce((a, c) => a + c.token_ids.length, 0);
      const usage = { prompt_tokens: g.promptTokens, completion_tokens: completion, total_tokens: g.promptTokens + completion };
      if (p.stream) {
        p.res.write(`data: ${JSON.stringify({ id: p.id, object: 'text_completion', created: p.created, model: this.modelName, choices: g.choices.map((c) => ({ index: c.index, text: '', token_ids: [], finish_reason: c.finish_reason, logprobs: null })), usage })}\n\n`);
        p.res.end('data: [DONE]\n\n');
      } else {
        json(p.res, 200, {
          id: p.id, object: 'text_completion', created: p.created, model: this.modelName,
          choices: g.choices.sort((a, b) => a.index - b.index).map((c) => ({ index: c.index, text: '', token_ids: c.token_ids, logprobs: null, finish_reason: c.finish_reason })),
          usage,
        });
      }
    }
    if (this.engine.hasUnfinished) this.schedule();
  }
}

function promptsOf(p: unknown): number[][] {
  const isIds = (x: unknown): x is number[] => Array.isArray(x) && x.length > 0 && x.every((v) => Number.isInteger(v) && v >= 0);
  if (typeof p === 'string' || (Array.isArray(p) && p.some((x) => typeof x === 'string'))) {
    throw new UserError('prompt must be token ids (this server has no tokenizer): "prompt": [1, 2, 3] or [[1, 2], [3, 4]]');
  }
  if (isIds(p)) return [p];
  if (Array.isArray(p) && p.length > 0 && p.every(isIds)) return p as number[][];
  throw new UserError('prompt must be a non-empty array of token ids, or an array of such arrays');
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((ok, fail) => {
    const chunks: Buffer[] = [];
    let n = 0;
    req.on('data', (c: Buffer) => {
      n += c.length;
      if (n > MAX_BODY) {
        fail(new UserError(`request body over ${MAX_BODY} bytes`));
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => ok(Buffer.concat(chunks).toString('utf8')));
    req.on('error', fail);
  });
}

function json(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function error(res: ServerResponse, status: number, message: string): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  json(res, status, { error: { message, type: status === 400 ? 'invalid_request_error' : status === 404 ? 'not_found_error' : 'server_error', code: status } });
}

export interface ServeArgs extends EngineArgs {
  model: string;
  host: string;
  port: number;
  servedModelName?: string;
}

/** Start the server; resolves with it (the CLI then waits for SIGINT/SIGTERM to close it). */
export async function startServe(argv: ServeArgs, io: Io): Promise<{ server: CompletionServer; address: AddressInfo; stop(): Promise<void> }> {
  const port = intFlag('port', argv.port, 0, 65535);
  const env = environment();
  const backend = selectBackend(env, argv.backend);
  const log = (l: string) => io.err(`${l}\n`);
  const src = modelSource(argv.model, backend, argv);
  const loaded = src.load(env.registry);
  let eos: number | number[] | undefined;
  try {
    const raw = JSON.parse(readFileSync(resolve(argv.model, 'config.json'), 'utf8')) as { eos_token_id?: number | number[] };
    eos = raw.eos_token_id;
  } catch {
    eos = undefined;
  }
  let engine: LLMEngine;
  try {
    engine = new LLMEngine(loaded.model, loaded.ctx, loaded.geometry, { ...engineOptions(argv, log), ...(eos !== undefined ? { eosTokenId: eos } : {}) });
  } catch (e) {
    loaded.dispose();
    throw e;
  }
  const server = new CompletionServer(engine, argv.servedModelName ?? src.name);
  let address: AddressInfo;
  try {
    address = await server.listen(port, argv.host);
  } catch (e) {
    engine.dispose();
    loaded.dispose();
    throw new UserError(`cannot listen on ${argv.host}:${port}: ${(e as Error).message}`, { field: '--port' });
  }
  log(`serving ${server.modelName} on http://${address.address}:${address.port}/v1/completions (token ids in and out)`);
  return {
    server, address,
    stop: async () => {
      await server.close();
      engine.dispose();
      loaded.dispose();
    },
  };
}

export function serveCommand(io: Io) {
  return {
    command: 'serve',
    describe: 'An OpenAI-compatible /v1/completions server (token ids in and out) on the engine',
    builder: (y: Argv) =>
      engineFlags(y)
        .option('model', { type: 'string', demandOption: true, describe: 'model folder: config.json (+ safetensors)' })
        .option('host', { type: 'string', default: '127.0.0.1', describe: 'address to bind (loopback by default)' })
        .option('port', { type: 'number', default: 8000, describe: '0 = any free port' })
        .option('served-model-name', { type: 'string', describe: 'the model id in responses [default: the folder name]' })
        .example('$0 serve --model ./llama3-8b --port 8000', 'then: curl -s localhost:8000/v1/completions -d \'{"prompt": [1, 2, 3], "max_tokens": 16}\''),
    handler: async (argv: ServeArgs) => {
      const s = await startServe(argv, io);
      await new Promise<void>((ok) => {
        const done = () => ok();
        process.once('SIGINT', done);
        process.once('SIGTERM', done);
      });
      await s.stop();
    },
  };
}
