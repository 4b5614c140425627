import { UserError, type ExecutionContext } from '@fastkernels/core';
import { KV_BLOCK_SIZE } from '../tasks/L1/kvcache/store_kvcache.js';
import { BlockManager } from './block-manager.js';
import { hasRecurrentState, type LayerCacheSpec } from './cache-spec.js';
import { KvCache, kvCacheSpecFor, type KvCacheSpec } from './kv-cache.js';
import { ModelRunner, type CausalLM } from './model-runner.js';
import { DEFAULT_SAMPLING, Sequence, type SamplingParams } from './sequence.js';
import { StateCache } from './state-cache.js';

export interface GenerateRequest {
  readonly promptIds: readonly number[];
  /** Overrides the default maxTokens of the options. */
  readonly maxTokens?: number;
}

export interface GenerateOptions extends Partial<SamplingParams> {
  /** Keep each step's float32 logits per sequence. */
  readonly collectLogits?: boolean;
}

export interface GenerateOutput {
  readonly promptIds: number[];
  readonly tokenIds: number[];
  /** Float32 logits that produced each generated token (collectLogits). */
  readonly logits?: Float32Array[];
}

export interface GenerateResult {
  readonly outputs: GenerateOutput[];
  readonly steps: number;
  readonly prefillMs: number;
  readonly decodeMs: number;
  readonly kvCacheBlocks: number;
}

/** Model facts generate needs (vocabulary and cache geometry), from the config. */
export interface ModelGeometry {
  readonly vocabSize: number;
  readonly maxPositionEmbeddings: number;
  readonly numHiddenLayers: number;
  readonly numAttentionHeads: number;
  readonly numKeyValueHeads: number;
  readonly headDim: number;
  /** Per-layer cache kinds (cache-spec.ts); absent: every layer attends. */
  readonly layerCaches?: readonly LayerCacheSpec[];
}

/** Check prompts against the vocabulary and the position limit; UserError names the prompt and token. */
export function validateRequests(requests: readonly GenerateRequest[], geom: ModelGeometry, defaultMaxTokens: number, where = 'prompt'): void {
  if (!requests.length) throw new UserError('no prompts given', { fix: 'pass --prompt-ids or --prompt-file' });
  requests.forEach((r, i) => {
    if (!r.promptIds.length) throw new UserError(`${where} ${i} is empty`);
    r.promptIds.forEach((id, j) => {
      if (!Number.isInteger(id) || id < 0 || id >= geom.vocabSize) {
        throw new UserError(`${where} ${i}, token ${j}: id ${id} is outside the vocabulary [0, ${geom.vocabSize})`, { field: 'prompt_ids' });
      }
    });
    const max = r.maxTokens ?? defaultMaxTokens;
    if (!Number.isInteger(max) || max < 1) throw new UserError(`${where} ${i}: max_tokens must be a positive integer, got ${max}`, { field: 'max_tokens' });
    if (r.promptIds.length + max > geom.maxPositionEmbeddings) {
      throw new UserError(`${where} ${i}: ${r.promptIds.length} prompt + ${max} new tokens exceed max_position_embeddings ${geom.maxPositionEmbeddings}`, { field: 'max_tokens' });
    }
  });
}

/**
 * Offline generation, the straightforward loop: allocate a paged cache big enough for every request, prefill
 * all prompts in one varlen batch, then decode step by step for the unfinished sequences until each has
 * its max tokens. (The continuous-batching scheduler replaces the loop; the runner, block manager and
 * sequences stay.) A model with recurrent layers gets a state pool with a slot per request.
 */
export function generate(model: CausalLM, ctx: ExecutionContext, geom: ModelGeometry, requests: readonly GenerateRequest[], options: GenerateOptions = {}): GenerateResult {
  const base: SamplingParams = {
    temperature: options.temperature ?? DEFAULT_SAMPLING.temperature,
    topK: options.topK ?? DEFAULT_SAMPLING.topK,
    topP: options.topP ?? DEFAULT_SAMPLING.topP,
    maxTokens: options.maxTokens ?? DEFAULT_SAMPLING.maxTokens,
    seed: options.seed ?? DEFAULT_SAMPLING.seed,
  };
  validateRequests(requests, geom, base.maxTokens);
  const seqs = requests.map((r, i) => new Sequence(i, r.promptIds, { ...base, maxTokens: r.maxTokens ?? base.maxTokens }));
  const blockSize = KV_BLOCK_SIZE;
  const numBlocks = seqs.reduce((a, s) => a + Math.ceil((s.numPromptTokens + s.params.maxTokens) / blockSize), 0);
  const spec: KvCacheSpec = kvCacheSpecFor(geom, ctx.dtype);
  const cache = new KvCache(ctx.backend, ctx.device, spec, numBlocks);
  const blocks = new BlockManager(numBlocks, blockSize);
  const states = hasRecurrentState(geom) ? new StateCache(ctx.backend, ctx.device, geom, seqs.length) : null;
  seqs.forEach((s, i) => states && (s.stateSlot = i));
  const runner = new ModelRunner(model, ctx, cache, blocks, states);
  const logits: Float32Array[][] = seqs.map(() => []);
  const collect = options.collectLogits ?? false;
  let steps = 0;
  try {
    const t0 = performance.now();
    for (const s of seqs) {
      blocks.allocate(s);
      s.status = 'running';
    }
    const first = runner.run(seqs, [], { collectLogits: collect });
    seqs.forEach((s, i) => {
      s.appendToken(first.tokens[i]!);
      if (first.logits) logits[i]!.push(first.logits[i]!);
    });
    steps++;
    ctx.backend.synchronize(ctx.device);
    const t1 = performance.now();
    for (;;) {
      const running = seqs.filter((s) => !s.isFinished);
      if (!running.length) break;
      for (const s of running) blocks.mayAppend(s);
      const r = runner.run([], running, { collectLogits: collect });
      running.forEach((s, i) => {
        s.appendToken(r.tokens[i]!);
        if (r.logits) logits[s.seqId]!.push(r.logits[i]!);
      });
      steps++;
    }
    ctx.backend.synchronize(ctx.device);
    const t2 = performance.now();
    for (const s of seqs) blocks.deallocate(s);
    return {
      outputs: seqs.map((s, i) => ({ promptIds: s.tokenIds.slice(0, s.numPromptTokens), tokenIds: s.completionTokenIds, ...(collect ? { logits: logits[i]! } : {}) })),
      steps,
      prefillMs: t1 - t0,
      decodeMs: t2 - t1,
      kvCacheBlocks: numBlocks,
    };
  } finally {
    runner.dispose();
    cache.dispose();
    states?.dispose();
  }
}
