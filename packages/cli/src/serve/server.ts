import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { LLMEngine, TextTokenizer } from '@fastkernels/model-zoo';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { EngineLoop, type ServerControl } from './engine-loop.js';
import { ApiError, errorBody, errorHandler } from './errors.js';
import { ServerMetrics } from './metrics.js';
import { chatCompletions, completions } from './routes.js';
import type { ServerState } from './state.js';

/** Largest request body (the 16 MiB of the hand-written server before it, now answered with a 413). */
export const MAX_BODY = 16 << 20;

export interface OpenAIServerOptions {
  /** Tensor parallelism: the control channel to the other ranks (rank 0 only). */
  readonly control?: ServerControl;
  /** Under --tp a failed step (or a lost rank) ends the server: called once with the error. */
  readonly onFatal?: (e: Error) => void;
  readonly tokenizer?: TextTokenizer | null;
  /** Bearer token every /v1 route requires (none: open; the server binds loopback unless --host says otherwise). */
  readonly apiKey?: string;
  readonly maxWaiting?: number;
  readonly architecture?: string;
  readonly eosIds?: readonly number[];
  readonly bodyLimit?: number;
  readonly log?: (line: string) => void;
}

/**
 * The OpenAI-compatible HTTP server (fastify) over one engine: /v1/completions (text or token ids),
 * /v1/chat/completions, /v1/models, /v1/embeddings (a clear 400 for decoder-only models), /health, /metrics.
 */
export class OpenAIServer {
  readonly app: FastifyInstance;
  readonly loop: EngineLoop;
  readonly metrics: ServerMetrics;
  private readonly state: ServerState;

  constructor(
    readonly engine: LLMEngine,
    readonly modelName: string,
    readonly options: OpenAIServerOptions = {},
  ) {
    this.loop = new EngineLoop(engine, options.control, options.onFatal);
    this.metrics = new ServerMetrics(engine, modelName);
    let seq = 0;
    const log = options.log ?? (() => {});
    this.state = {
      loop: this.loop, tokenizer: options.tokenizer ?? null, modelName, architecture: options.architecture ?? 'unknown',
      eosIds: options.eosIds ?? [], metrics: this.metrics, maxWaiting: options.maxWaiting ?? 1024, draining: false,
      nextId: () => ++seq, log,
    };
    this.app = this.build(options.bodyLimit ?? MAX_BODY, log);
  }

  /** The node:http server under fastify (tests and --tp's shutdown close its connections). */
  get server(): Server {
    return this.app.server;
  }

  private build(bodyLimit: number, log: (l: string) => void): FastifyInstance {
    const app = Fastify({ bodyLimit, logger: false, return503OnClosing: true });
    // curl -d sends application/x-www-form-urlencoded and fetch's string body text/plain: both are read as JSON (the
    // body must be JSON whatever the header says, as in vLLM); any other media type is a 415
    app.removeContentTypeParser('text/plain');
    app.addContentTypeParser(['text/plain', 'application/x-www-form-urlencoded'], { parseAs: 'string' }, (_req, body, done) => {
      try {
        done(null, JSON.parse(body as string));
      } catch (e) {
        done(new ApiError(400, `the body is not JSON: ${(e as Error).message}`), undefined);
      }
    });
    app.setErrorHandler(errorHandler(log));
    app.setNotFoundHandler((req, reply) => reply.code(404).send(errorBody(404, `no route ${req.method} ${req.url.split('?')[0]} (POST /v1/completions, /v1/chat/completions, /v1/embeddings; GET /v1/models, /health, /metrics)`)));
    const key = this.options.apiKey;
    if (key) {
      app.addHook('onRequest', async (req, reply) => {
        if (!req.url.startsWith('/v1')) return; // health and metrics stay open to probes, as in vLLM
        if (req.headers.authorization !== `Bearer ${key}`) {
          await reply.code(401).send(errorBody(401, 'missing or wrong API key: send the header "Authorization: Bearer <key>" with the key given to serve --api-key', null, 'invalid_api_key'));
        }
      });
    }
    const state = this.state;
    const health = async (_req: FastifyRequest, reply: FastifyReply) => {
      if (state.loop.fatal) return reply.code(503).send(errorBody(503, `the server failed: ${state.loop.fatal}`));
      return { status: state.draining ? 'draining' : 'ok' };
    };
    app.get('/health', health);
    app.get('/v1/health', health);
    app.get('/metrics', async (_req, reply) => reply.type(this.metrics.registry.contentType).send(await this.metrics.registry.metrics()));
    app.get('/v1/models', async () => ({
      object: 'list',
      data: [{ id: state.modelName, object: 'model', created: 0, owned_by: 'fastkernels', max_model_len: state.loop.engine.maxModelLen }],
    }));
    app.post('/v1/completions', (req, reply) => completions(state, req, reply));
    app.post('/v1/chat/completions', (req, reply) => chatCompletions(state, req, reply));
    app.post('/v1/embeddings', async () => {
      // the route exists for encoder models (BGE-M3 and the like); a decoder-only model has no pooled embedding
      throw new ApiError(400, `model ${state.modelName} (${state.architecture}) is a decoder-only generation model: it does not serve embeddings (use an encoder/embedding model)`, 'model', 'model_not_supported');
    });
    return app;
  }

  /** --tp: stop the server for good (a failed step, a lost rank): requests in flight get the error. */
  fail(e: Error): void {
    this.loop.fail(e);
  }

  async listen(port: number, host = '127.0.0.1'): Promise<AddressInfo> {
    await this.app.listen({ port, host });
    return this.app.server.address() as AddressInfo;
  }

  /**
   * SIGTERM: refuse new requests (503), let those in flight finish (up to timeoutMs; then they are dropped), then
   * stop. Resolves with whether everything finished.
   */
  async drain(timeoutMs: number): Promise<boolean> {
    this.state.draining = true;
    return this.loop.whenIdle(timeoutMs);
  }

  /** --tp: stop stepping and send every rank the shutdown (open connections are dropped first). */
  async shutdown(): Promise<void> {
    this.state.draining = true;
    this.server.closeAllConnections();
    await this.loop.shutdown();
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await this.app.close();
  }
}
