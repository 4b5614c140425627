import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { launchEnv } from '@fastkernels/backend-nccl';
import { UserError, currentTensorParallelGroup, errorMessage, type Backend, type ModuleRegistry } from '@fastkernels/core';
import { DEFAULT_SAMPLING, LLMEngine, type SamplingParams, type StepOutput } from '@fastkernels/model-zoo';
import type { Argv } from 'yargs';
import { environment, selectBackend } from '../env.js';
import { intFlag } from '../flags.js';
import type { Io } from '../io.js';
import { ControlReceiver, followControl, openControlChannel, type ControlOp } from '../serve-control.js';
import { TP_HELP, checkTensorParallelRun, runWithTensorParallel, tpFlag } from '../tensor-parallel.js';
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

/**
 * Under `serve --tp N` (rank 0): where each step's control message goes (serve-control.ts's ControlSender). Every
 * engine operation rank 0 makes (add, abort) is queued and sent, in order, before the next step.
 */
export interface ServerControl {
  send(m: { ops: readonly ControlOp[]; step: boolean; shutdown: boolean }): Promise<void>;
}

export interface CompletionServerOptions {
  /** Tensor parallelism: the control channel to the other ranks (rank 0 only). */
  readonly control?: ServerControl;
  /** Under --tp a failed step (or a lost rank) ends the server: called once with the error. */
  readonly onFatal?: (e: Error) => void;
}

export class CompletionServer {
  readonly server: Server;
  private readonly pending = new Map<number, Pending>();
  private pumping = false;
  private seq = 0;
  /** Set when a step throws: the error every pending request got. */
  lastError: string | null = null;
  private readonly control: ServerControl | undefined;
  /** --tp: the operations since the last control message, in the order they were applied to this engine. */
  private ops: ControlOp[] = [];
  /** --tp: a control message is on its way and its step has not run: engine operations wait (see whenOpen). */
  private gated = false;
  private readonly deferred: (() => void)[] = [];
  /** --tp: the step in progress (send + step), awaited by shutdown. */
  private busy: Promise<void> | null = null;
  private stopping = false;
  /** --tp: set when the server failed for good (a step threw, a rank went away). */
  fatal: string | null = null;

  constructor(
    readonly engine: LLMEngine,
    readonly modelName: string,
    readonly options: CompletionServerOptions = {},
  ) {
    this.control = options.control;
    this.server = createServer((req, res) => void this.handle(req, res));
  }

  /**
   * Run an engine operation now, or (--tp, while a control message waits to be flushed before its step) right after
   * that step: an operation must land between the same two steps on rank 0 as in the message the others apply.
   */
  private whenOpen(fn: () => void): void {
    if (this.gated) this.deferred.push(fn);
    else fn();
  }

  /** --tp: stop the server for good (a failed step, a lost rank): pending requests get the error. */
  fail(e: Error): void {
    if (this.fatal) return;
    this.fatal = e.message;
    this.failPending(e.message);
    this.options.onFatal?.(e);
  }

  private failPending(message: string): void {
    for (const p of this.pending.values()) {
      if (p.stream) p.res.end(`data: ${JSON.stringify({ error: { message } })}\n\ndata: [DONE]\n\n`);
      else if (!p.res.headersSent) error(p.res, 500, message);
    }
    this.pending.clear();
  }

  /**
   * --tp: stop stepping, let the step in progress finish, and send every rank the shutdown (with the operations still
   * queued), so all leave at the same point. The HTTP server is closed first (open connections are dropped).
   */
  async shutdown(): Promise<void> {
    if (!this.control) return;
    this.stopping = true;
    this.server.closeAllConnections();
    await this.busy;
    await new Promise((r) => setImmediate(r)); // the dropped connections' cancellations
    if (this.fatal) return;
    const ops = this.ops;
    this.ops = [];
    await this.control.send({ ops, step: false, shutdown: true });
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
      if (this.fatal || this.stopping) return error(res, 503, this.fatal ? `the server failed: ${this.fatal}` : 'the server is shutting down');
      this.whenOpen(() => {
        try {
          this.start(parsed, res);
        } catch (e) {
          error(res, 400, errorMessage(e));
        }
      });
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
        if (this.control) this.ops.push({ kind: 'add', requestId: rid, promptIds: p, params: { ...DEFAULT_SAMPLING, ...params } });
        group.promptTokens += p.length;
        this.pending.set(rid, { requestId: rid, res, stream, id, created, promptLen: p.length, index, group });
      });
    } catch (e) {
      for (const rid of ids) {
        this.pending.delete(rid);
        this.abortRequest(rid);
      }
      throw e;
    }
    // a client that goes away cancels its requests
    res.on('close', () => this.whenOpen(() => {
      for (const rid of ids) if (this.pending.delete(rid)) this.abortRequest(rid);
    }));
    if (stream) res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    this.schedule();
  }

  private abortRequest(rid: number): void {
    this.engine.abortRequest(rid);
    if (this.control) this.ops.push({ kind: 'abort', requestId: rid });
  }

  private schedule(): void {
    if (this.pumping || this.busy || this.stopping || this.fatal) return;
    this.pumping = true;
    setImmediate(() => this.pump());
  }

  private pump(): void {
    this.pumping = false;
    if (!this.engine.hasUnfinished || this.stopping || this.fatal) return;
    if (this.control) {
      const busy = this.controlledStep(this.control);
      this.busy = busy;
      void busy.then(() => {
        this.busy = null;
        if (this.engine.hasUnfinished) this.schedule();
      });
      return;
    }
    this.stepAndDeliver();
  }

  /**
   * --tp: send the other ranks this step's message (the operations since the last one, then step), and step once the
   * bytes are out (never before: a rank that has not read its message would leave this one waiting in a collective).
   * Operations arriving meanwhile wait for the step (whenOpen). A failed send or step ends the server (fail).
   */
  private async controlledStep(control: ServerControl): Promise<void> {
    this.gated = true;
    try {
      const ops = this.ops;
      this.ops = [];
      try {
        await control.send({ ops, step: true, shutdown: false });
      } catch (e) {
        this.fail(e instanceof Error ? e : new Error(String(e)));
        return;
      }
      this.stepAndDeliver();
    } finally {
      this.gated = false;
      for (const fn of this.deferred.splice(0)) fn();
    }
  }

  /** One engine step; tokens and finished requests go to their clients. */
  private stepAndDeliver(): void {
    let out: StepOutput;
    try {
      out = this.engine.step();
    } catch (e) {
      this.lastError = errorMessage(e);
      if (this.control) {
        // the ranks step together: a failed step (a collective error, most likely) ends the tensor-parallel server
        this.fail(new Error(`a step failed: ${this.lastError}`));
        return;
      }
      this.failPending(this.lastError);
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
    if (!this.control && this.engine.hasUnfinished) this.schedule();
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
  tp?: number;
}

/** Load the model (this rank's shard under --tp) and build the engine, with the model's EOS id(s) from config.json. */
function buildEngine(argv: ServeArgs, backend: Backend, registry: ModuleRegistry, log: (l: string) => void, tp: { world: number; device?: number } = { world: 1 }): { engine: LLMEngine; name: string; dispose(): void } {
  const src = modelSource(argv.model, backend, argv, tp);
  const loaded = src.load(registry);
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
  return {
    engine, name: src.name,
    dispose: () => {
      engine.dispose();
      loaded.dispose();
    },
  };
}

async function listenOrExplain(server: CompletionServer, port: number, host: string): Promise<AddressInfo> {
  try {
    return await server.listen(port, host);
  } catch (e) {
    throw new UserError(`cannot listen on ${host}:${port}: ${(e as Error).message}`, { field: '--port' });
  }
}

/** Start the server; resolves with it (the CLI then waits for SIGINT/SIGTERM to close it). */
export async function startServe(argv: ServeArgs, io: Io): Promise<{ server: CompletionServer; address: AddressInfo; stop(): Promise<void> }> {
  const port = intFlag('port', argv.port, 0, 65535);
  const env = environment();
  const backend = selectBackend(env, argv.backend);
  const log = (l: string) => io.err(`${l}\n`);
  const built = buildEngine(argv, backend, env.registry, log);
  const server = new CompletionServer(built.engine, argv.servedModelName ?? built.name);
  let address: AddressInfo;
  try {
    address = await listenOrExplain(server, port, argv.host);
  } catch (e) {
    built.dispose();
    throw e;
  }
  log(`serving ${server.modelName} on http://${address.address}:${address.port}/v1/completions (token ids in and out)`);
  return {
    server, address,
    stop: async () => {
      await server.close();
      built.dispose();
    },
  };
}

export interface ServeRankOptions {
  readonly rank: number;
  readonly world: number;
  /** Shared by every rank (the launcher's rendezvous token): the control channel's hello. */
  readonly token: string;
  /** Rank 0's control port to every rank (a collective: the group's max all-reduce of [port]). */
  readonly exchangePort: (port: number) => number | Promise<number>;
  readonly modelName: string;
  readonly host: string;
  readonly port: number;
  readonly log: (line: string) => void;
  /** Rank 0: settles when the server should stop (SIGINT/SIGTERM in the CLI). */
  readonly stop: Promise<void>;
  /** Rank 0: the server is up. */
  readonly onListening?: (address: AddressInfo, server: CompletionServer) => void;
}

/**
 * One rank of `serve --tp N`, its engine built (in the group): open the control channel (serve-control.ts), then rank 0
 * serves HTTP, sending every step's control message first, until `stop` (then every rank gets the shutdown), and the
 * other ranks follow the messages until the shutdown. Rejects when a step fails, a rank goes away or the channel breaks
 * (the process then exits non-zero and the launcher stops the other ranks).
 */
export async function runServeRank(engine: LLMEngine, o: ServeRankOptions): Promise<void> {
  const channel = await openControlChannel({ rank: o.rank, world: o.world, token: o.token, exchangePort: o.exchangePort });
  if (channel instanceof ControlReceiver) {
    try {
      await followControl(engine, channel);
    } finally {
      channel.close();
    }
    return;
  }
  let fatal!: (e: Error) => void;
  const failed = new Promise<never>((_, reject) => (fatal = reject));
  failed.catch(() => {});
  const server = new CompletionServer(engine, o.modelName, { control: channel, onFatal: (e) => fatal(e) });
  channel.onPeerLost = (why) => server.fail(new Error(why));
  let address: AddressInfo;
  try {
    address = await listenOrExplain(server, o.port, o.host);
  } catch (e) {
    await channel.send({ ops: [], step: false, shutdown: true }).catch(() => {});
    channel.close();
    throw e;
  }
  o.log(`serving ${o.modelName} on http://${address.address}:${address.port}/v1/completions (token ids in and out; tensor parallel over ${o.world} GPUs, rank 0 serves)`);
  o.onListening?.(address, server);
  try {
    await Promise.race([o.stop, failed]);
  } catch (e) {
    server.server.closeAllConnections();
    await server.close();
    channel.close();
    throw new Error(`serve --tp ${o.world}: ${(e as Error).message}`);
  }
  await server.shutdown();
  await server.close();
  channel.close();
}

export function serveCommand(io: Io, rawArgs: readonly string[] = process.argv.slice(2)) {
  return {
    command: 'serve',
    describe: 'An OpenAI-compatible /v1/completions server (token ids in and out) on the engine',
    builder: (y: Argv) =>
      engineFlags(y)
        .option('model', { type: 'string', demandOption: true, describe: 'model folder: config.json (+ safetensors)' })
        .option('host', { type: 'string', default: '127.0.0.1', describe: 'address to bind (loopback by default)' })
        .option('port', { type: 'number', default: 8000, describe: '0 = any free port' })
        .option('served-model-name', { type: 'string', describe: 'the model id in responses [default: the folder name]' })
        .option('tp', { type: 'number', default: 1, describe: `${TP_HELP}. Rank 0 serves HTTP and sends every rank each step's new and cancelled requests before the step (a local socket; idle ranks wait there, not in NCCL)` })
        .example('$0 serve --model ./llama3-8b --port 8000', 'then: curl -s localhost:8000/v1/completions -d \'{"prompt": [1, 2, 3], "max_tokens": 16}\'')
        .example('$0 serve --model ./llama3-8b --tp 2', 'the same server, the model split over 2 GPUs'),
    handler: (argv: ServeArgs) => runServe(argv, io, rawArgs),
  };
}

export async function runServe(argv: ServeArgs, io: Io, rawArgs: readonly string[] = process.argv.slice(2)): Promise<void> {
  const tp = tpFlag(argv.tp);
  const port = intFlag('port', argv.port, 0, 65535);
  if (tp === 1) {
    const s = await startServe(argv, io);
    await new Promise<void>((ok) => {
      const done = () => ok();
      process.once('SIGINT', done);
      process.once('SIGTERM', done);
    });
    await s.stop();
    return;
  }
  if (argv.randomInit === 'device') {
    throw new UserError('device random init cannot be sharded over ranks', { field: '--random-init', fix: 'with --tp, use --random-init host (the default then) or a checkpoint (`fastkernels init-weights`)' });
  }
  const env = environment();
  const backend = selectBackend(env, argv.backend);
  engineOptions(argv, () => {}); // the engine flags, checked before any rank starts
  await runWithTensorParallel(
    {
      tp, io, rawArgs,
      preflight: () => {
        checkTensorParallelRun(tp, argv.model, backend);
      },
      // Ctrl-C is how a server stops: every rank leaving cleanly after it is a success
      relaunch: { interruptIsSuccess: true },
    },
    async (rank) => {
      const log = (l: string) => rank.io.err(`${l}\n`);
      const built = buildEngine(argv, backend, env.registry, log, { world: rank.world, ...(rank.device !== undefined ? { device: rank.device } : {}) });
      // the launcher forwards SIGINT/SIGTERM to every rank: rank 0 turns it into the shutdown message; the others wait
      // for that message (a rank 0 that dies closes their socket instead)
      const signals: NodeJS.Signals[] = ['SIGINT', 'SIGTERM'];
      let onSignal = () => {};
      const stop = new Promise<void>((ok) => (onSignal = () => ok()));
      for (const s of signals) process.on(s, onSignal);
      const group = currentTensorParallelGroup();
      const on = { backend: built.engine.ctx.backend, device: built.engine.ctx.device };
      try {
        await runServeRank(built.engine, {
          rank: rank.rank, world: rank.world, token: launchEnv()?.token ?? '',
          exchangePort: (p) => group.agree([p], 'max', on)[0]!,
          modelName: argv.servedModelName ?? built.name, host: argv.host, port, log, stop,
        });
      } finally {
        for (const s of signals) process.off(s, onSignal);
        built.dispose();
      }
    },
  );
}
