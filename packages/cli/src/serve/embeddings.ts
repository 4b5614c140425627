/**
 * /v1/embeddings for encoder models: OpenAI's request (input: a string, strings, token ids or lists of token ids;
 * encoding_format float | base64; dimensions only where the model's size) and response ({object: 'list', data:
 * [{object: 'embedding', index, embedding}], model, usage}). Requests are batched continuously: a flush waits a short
 * window (2 ms) after the first waiting request, and those that arrive meanwhile or while a forward runs go together into
 * the next one (EncoderRunner packs them into padded batches by its token budget).
 * `pooling` (dense by default; cls, mean) is an extension, as vLLM's pooling params are.
 */
import { UserError } from '@fastkernels/core';
import type { EncoderRunner, Pooling, TextTokenizer } from '@fastkernels/model-zoo';
import { z } from 'zod';
import { ApiError, fromZod } from './errors.js';

const ids = z.array(z.number().int().nonnegative());
export const EmbeddingsRequestSchema = z.looseObject({
  model: z.string().optional(),
  input: z.union([z.string(), z.array(z.string()).min(1), ids.min(1), z.array(ids.min(1)).min(1)]),
  encoding_format: z.enum(['float', 'base64']).default('float'),
  dimensions: z.number().int().positive().optional(),
  user: z.string().optional(),
  pooling: z.enum(['dense', 'cls', 'mean']).default('dense'),
});

/** Float32 little-endian bytes, base64 (what OpenAI's base64 encoding_format carries). */
export function base64Floats(v: readonly number[]): string {
  return Buffer.from(Float32Array.from(v).buffer).toString('base64');
}

interface Pending {
  readonly seqs: number[][];
  readonly pooling: Pooling;
  resolve(v: number[][]): void;
  reject(e: unknown): void;
}

/** The queue between HTTP requests and the runner: each flush takes every waiting request. */
export class EmbeddingBatcher {
  private queue: Pending[] = [];
  private scheduled = false;
  inFlight = 0;
  constructor(
    readonly runner: EncoderRunner,
    /** How long the first waiting request waits for others (requests arrive on separate event-loop turns). */
    readonly windowMs = 2,
  ) {}

  embed(seqs: number[][], pooling: Pooling): Promise<number[][]> {
    this.inFlight++;
    return new Promise<number[][]>((resolve, reject) => {
      this.queue.push({ seqs, pooling, resolve, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setTimeout(() => this.flush(), this.windowMs);
      }
    }).finally(() => this.inFlight--);
  }

  private flush(): void {
    this.scheduled = false;
    const batch = this.queue;
    this.queue = [];
    for (const pooling of new Set(batch.map((p) => p.pooling))) {
      const group = batch.filter((p) => p.pooling === pooling);
      try {
        const out = this.runner.embed(group.flatMap((p) => p.seqs), [pooling]);
        let k = 0;
        for (const p of group) p.resolve(p.seqs.map(() => out[k++]!.embedding!));
      } catch (e) {
        // one bad request must not fail the others it was batched with: retry each alone
        for (const p of group) {
          try {
            p.resolve(this.runner.embed(p.seqs, [pooling]).map((r) => r.embedding!));
          } catch (e2) {
            p.reject(e2 instanceof UserError ? e2 : e);
          }
        }
      }
    }
  }
}

export interface EmbeddingsContext {
  readonly batcher: EmbeddingBatcher;
  readonly tokenizer: TextTokenizer | null;
  readonly modelName: string;
  readonly hiddenSize: number;
}

/** Answer one /v1/embeddings body. */
export async function embeddings(ctx: EmbeddingsContext, body: unknown): Promise<object> {
  const parsed = EmbeddingsRequestSchema.safeParse(body);
  if (!parsed.success) throw fromZod(parsed.error);
  const r = parsed.data;
  if (r.dimensions !== undefined && r.dimensions !== ctx.hiddenSize) {
    throw new ApiError(400, `model ${ctx.modelName} gives ${ctx.hiddenSize}-dimensional embeddings; dimensions ${r.dimensions} is not supported (it is not a Matryoshka model)`, 'dimensions');
  }
  const texts = typeof r.input === 'string' ? [r.input] : Array.isArray(r.input) && typeof r.input[0] === 'string' ? (r.input as string[]) : null;
  let seqs: number[][];
  if (texts) {
    const tok = ctx.tokenizer;
    if (!tok) throw new ApiError(400, `model ${ctx.modelName} has no tokenizer.json: send token ids ("input": [0, 5, 2] or [[...], [...]])`, 'input');
    seqs = texts.map((t) => tok.encode(t));
  } else {
    seqs = typeof (r.input as unknown[])[0] === 'number' ? [r.input as number[]] : (r.input as number[][]);
  }
  const vectors = await ctx.batcher.embed(seqs, r.pooling);
  const tokens = seqs.reduce((a, s) => a + s.length, 0);
  return {
    object: 'list',
    data: vectors.map((v, index) => ({ object: 'embedding', index, embedding: r.encoding_format === 'base64' ? base64Floats(v) : v })),
    model: ctx.modelName,
    usage: { prompt_tokens: tokens, total_tokens: tokens },
  };
}
