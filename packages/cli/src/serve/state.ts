import type { TextTokenizer } from '@fastkernels/model-zoo';
import type { EngineLoop } from './engine-loop.js';
import type { ServerMetrics } from './metrics.js';

/** What the routes share: the engine loop, the tokenizer (null: ids only), limits and the drain flag. */
export interface ServerState {
  readonly loop: EngineLoop;
  readonly tokenizer: TextTokenizer | null;
  readonly modelName: string;
  /** The model's architecture (config.json), for /v1/models and the embeddings answer. */
  readonly architecture: string;
  /** EOS ids of the tokenizer beyond config.json's (a chat model's end-of-turn token), stop ids of every request. */
  readonly eosIds: readonly number[];
  readonly metrics: ServerMetrics;
  /** Requests allowed to wait for the running batch before new ones get 429. */
  readonly maxWaiting: number;
  /** Set on SIGTERM: new requests get 503 while those in flight finish. */
  draining: boolean;
  nextId(): number;
  log(line: string): void;
}
