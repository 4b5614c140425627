/**
 * The OpenAI-compatible server for an encoder (embedding) model: /v1/embeddings (embeddings.ts), /v1/models, /health;
 * the generation routes answer 400 (an encoder does not generate). Same conventions as the decoder server (server.ts):
 * errors in OpenAI's shape, bodies read as JSON whatever their text content type, --api-key on /v1 routes.
 */
import type { AddressInfo } from 'node:net';
import type { EncoderRunner, TextTokenizer } from '@fastkernels/model-zoo';
import Fastify, { type FastifyInstance } from 'fastify';
import { EmbeddingBatcher, embeddings } from './embeddings.js';
import { ApiError, errorBody, errorHandler } from './errors.js';
import { MAX_BODY } from './server.js';

export interface EmbeddingServerOptions {
  readonly tokenizer?: TextTokenizer | null;
  readonly apiKey?: string;
  readonly architecture?: string;
  readonly maxModelLen: number;
  readonly hiddenSize: number;
  readonly log?: (line: string) => void;
}

export class EmbeddingServer {
  readonly app: FastifyInstance;
  readonly batcher: EmbeddingBatcher;
  draining = false;

  constructor(
    readonly runner: EncoderRunner,
    readonly modelName: string,
    readonly options: EmbeddingServerOptions,
  ) {
    this.batcher = new EmbeddingBatcher(runner);
    this.app = this.build(options.log ?? (() => {}));
  }

  private build(log: (l: string) => void): FastifyInstance {
    const app = Fastify({ bodyLimit: MAX_BODY, logger: false, return503OnClosing: true });
    app.removeContentTypeParser('text/plain');
    app.addContentTypeParser(['text/plain', 'application/x-www-form-urlencoded'], { parseAs: 'string' }, (_req, body, done) => {
      try {
        done(null, JSON.parse(body as string));
      } catch (e) {
        done(new ApiError(400, `the body is not JSON: ${(e as Error).message}`), undefined);
      }
    });
    app.setErrorHandler(errorHandler(log));
    app.setNotFoundHandler((req, reply) => reply.code(404).send(errorBody(404, `no route ${req.method} ${req.url.split('?')[0]} (POST /v1/embeddings; GET /v1/models, /health)`)));
    const key = this.options.apiKey;
    if (key) {
      app.addHook('onRequest', async (req, reply) => {
        if (!req.url.startsWith('/v1')) return;
        if (req.headers.authorization !== `Bearer ${key}`) {
          await reply.code(401).send(errorBody(401, 'missing or wrong API key: send the header "Authorization: Bearer <key>" with the key given to serve --api-key', null, 'invalid_api_key'));
        }
      });
    }
    const health = async () => ({ status: this.draining ? 'draining' : 'ok' });
    app.get('/health', health);
    app.get('/v1/health', health);
    app.get('/v1/models', async () => ({ object: 'list', data: [{ id: this.modelName, object: 'model', created: 0, owned_by: 'fastkernels', max_model_len: this.options.maxModelLen }] }));
    const ctx = { batcher: this.batcher, tokenizer: this.options.tokenizer ?? null, modelName: this.modelName, hiddenSize: this.options.hiddenSize };
    app.post('/v1/embeddings', async (req) => {
      if (this.draining) throw new ApiError(503, 'the server is shutting down');
      return embeddings(ctx, req.body);
    });
    const noGeneration = async () => {
      throw new ApiError(400, `model ${this.modelName} (${this.options.architecture ?? 'encoder'}) is an encoder (embedding) model: it does not generate text (POST /v1/embeddings)`, 'model', 'model_not_supported');
    };
    app.post('/v1/completions', noGeneration);
    app.post('/v1/chat/completions', noGeneration);
    return app;
  }

  async listen(port: number, host = '127.0.0.1'): Promise<AddressInfo> {
    await this.app.listen({ port, host });
    return this.app.server.address() as AddressInfo;
  }

  /** SIGTERM: refuse new requests, wait (up to timeoutMs) for those in flight. */
  async drain(timeoutMs: number): Promise<boolean> {
    this.draining = true;
    const end = Date.now() + timeoutMs;
    while (this.batcher.inFlight > 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 10));
    return this.batcher.inFlight === 0;
  }

  async close(): Promise<void> {
    this.app.server.closeAllConnections();
    await this.app.close();
  }
}
