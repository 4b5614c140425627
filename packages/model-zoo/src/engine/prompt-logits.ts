import { withContext, type ExecutionContext } from '@fastkernels/core';
import { KV_BLOCK_SIZE } from '../tasks/L1/kvcache/store_kvcache.js';
import { BlockManager } from './block-manager.js';
import { disposeAttentionMetadata, withForwardContext } from './forward-context.js';
import { validateRequests, type ModelGeometry } from './generate.js';
import { KvCache, kvCacheSpecFor } from './kv-cache.js';
import { ModelRunner, type CausalLM } from './model-runner.js';
import { DEFAULT_SAMPLING, Sequence } from './sequence.js';
import { hasRecurrentState } from './cache-spec.js';
import { StateCache } from './state-cache.js';

/**
 * Float32 logits of every position of one prompt ([P, V] row-major): the prompt alone as one prefill step
 * (ModelRunner.prepare, the same varlen prefill path generate's first step runs, in a cache of its own), then the
 * LM head on all P hidden rows, `chunkRows` rows at a time. Row p holds the logits that predict token p + 1; the
 * last row equals the logits of generate's first token. For parity checks against a dense reference (HF forward).
 */
export function promptLogits(model: CausalLM, ctx: ExecutionContext, geom: ModelGeometry, promptIds: readonly number[], options: { chunkRows?: number } = {}): Float32Array {
  validateRequests([{ promptIds, maxTokens: 1 }], geom, 1);
  const P = promptIds.length;
  const V = geom.vocabSize;
  const chunk = Math.max(1, options.chunkRows ?? 256);
  const seq = new Sequence(0, promptIds, { ...DEFAULT_SAMPLING, maxTokens: 1 });
  const numBlocks = Math.ceil(P / KV_BLOCK_SIZE);
  const cache = new KvCache(ctx.backend, ctx.device, kvCacheSpecFor(geom, ctx.dtype), numBlocks);
  const blocks = new BlockManager(numBlocks, KV_BLOCK_SIZE);
  const states = hasRecurrentState(geom) ? new StateCache(ctx.backend, ctx.device, geom, 1) : null; // zeros: slot 0
  if (states) seq.stateSlot = 0;
  const runner = new ModelRunner(model, ctx, cache, blocks, states);
  try {
    blocks.allocate(seq);
    const { inputIds, positions, metadata } = runner.prepare([seq], []);
    try {
      return withContext(ctx, () => {
        const hidden = withForwardContext({ attnMetadata: metadata, kvCaches: cache.layers, ...(states ? { stateCaches: states.layers } : {}) }, () => model.forward(inputIds, positions));
        const out = new Float32Array(P * V);
        try {
          for (let r = 0; r < P; r += chunk) {
            const n = Math.min(chunk, P - r);
            const rows = hidden.narrow(0, r, n);
            const act = model.computeLogits(rows);
            rows.dispose();
            const f = act.dtype === 'f32' ? act : act.to('f32');
            if (f !== act) act.dispose();
            out.set(f.toFloat64Array(), r * V);
            f.dispose();
          }
        } finally {
          hidden.dispose();
        }
        return out;
      });
    } finally {
      inputIds.dispose();
      positions.dispose();
      disposeAttentionMetadata(metadata);
      blocks.deallocate(seq);
    }
  } finally {
    runner.dispose();
    cache.dispose();
    states?.dispose();
  }
}
