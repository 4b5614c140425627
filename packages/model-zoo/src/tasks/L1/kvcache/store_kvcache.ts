import { DTYPE_INFO, Module, defineTask, hostArray, type HostArray, type Tensor } from '@fastkernels/core';
import { bytesOf, fromInts, randn } from '../../../common/inputs.js';
import { DENSE_MOE_LLM } from '../../families.js';

/** Tokens per cache block (vLLM's default block_size for the FLASH_ATTN backend). */
export const KV_BLOCK_SIZE = 16;

/**
 * The paged KV-cache write: vLLM's `reshape_and_cache_flash` (nano-vllm's Triton `store_kvcache`).
 * key/value [T, nKv, D] go to kCache/vCache [numBlocks, 16, nKv, D] at slotMapping [T]
 * (slot = block * 16 + offset; -1 = a padding token, skipped). Writes in place, returns nothing. An MLA layer's latent
 * cache (one tensor) is given as both caches with its rows as both key and value: each row is written once.
 */
export class StoreKVCache extends Module {
  constructor() {
    super();
  }

  forward(key: Tensor, value: Tensor, kCache: Tensor, vCache: Tensor, slotMapping: Tensor): void {
    this.ctx.backend.ops.storeKvcache_(key, value, kCache, vCache, slotMapping);
  }
}

/**
 * Golden cache write on host arrays: returns new [kCache, vCache] (the inputs are not touched).
 * Written slot by slot from the cache's own [block, offset, head, dim] indexing.
 */
export function storeKvcacheReference(key: HostArray, value: HostArray, kCache: HostArray, vCache: HostArray, slotMapping: HostArray): [HostArray, HostArray] {
  const [T, nKv, D] = key.shape as [number, number, number];
  const [numBlocks, blockSize, cKv, cD] = kCache.shape as [number, number, number, number];
  if (cKv !== nKv || cD !== D) throw new RangeError(`storeKvcacheReference: cache [${kCache.shape.join(', ')}] does not hold [${nKv}, ${D}] heads`);
  const kOut = hostArray(kCache.shape, kCache.data);
  const vOut = hostArray(vCache.shape, vCache.data);
  for (let t = 0; t < T; t++) {
    const slot = slotMapping.data[t]!;
    if (slot < 0) continue;
    const block = Math.floor(slot / blockSize);
    const offset = slot % blockSize;
    if (block >= numBlocks) throw new RangeError(`storeKvcacheReference: slot ${slot} outside ${numBlocks} blocks`);
    for (let h = 0; h < nKv; h++) {
      for (let d = 0; d < D; d++) {
        const dst = ((block * blockSize + offset) * nKv + h) * D + d;
        const src = (t * nKv + h) * D + d;
        kOut.data[dst] = key.data[src]!;
        vOut.data[dst] = value.data[src]!;
      }
    }
  }
  return [kOut, vOut];
}

/** Padding tokens (slot -1) of a case: options.pad, default none. */
function padCount(c: { dims: Record<string, number>; options: Record<string, unknown> }): number {
  const pad = (c.options.pad as number | undefined) ?? 0;
  if (!Number.isInteger(pad) || pad < 0 || pad > c.dims.T!) throw new RangeError(`store_kvcache: options.pad must be an integer in [0, T], got ${pad}`);
  return pad;
}

export const storeKvcacheTask = defineTask(
  {
    id: 'L1/store_kvcache',
    level: 1,
    className: 'StoreKVCache',
    family: [DENSE_MOE_LLM],
    architectures: [
      'llama', 'qwen2', 'mistral', 'mixtral', 'llama_eagle3', 'gpt_oss', 'gemma4', 'bitnet', 'jamba', 'qwen3_next',
      'qwen2_vl', 'qwen2_5_omni', 'qwen3_vl', 'whisper', 'cosyvoice3', 'hunyuan_video',
    ],
    mirrors: 'vllm._custom_ops.reshape_and_cache_flash',
    description:
      'Paged KV-cache write: scatter each token\'s key and value heads into [numBlocks, 16, nKv, D] caches at its slot (block * 16 + offset); slot -1 (padding) is skipped. In place.',
    init: [],
    inputs: [
      { name: 'key', dtype: 'act', shape: ['T', 'NKV', 'D'] },
      { name: 'value', dtype: 'act', shape: ['T', 'NKV', 'D'] },
      { name: 'kCache', dtype: 'act', shape: ['NB', KV_BLOCK_SIZE, 'NKV', 'D'], doc: 'written in place' },
      { name: 'vCache', dtype: 'act', shape: ['NB', KV_BLOCK_SIZE, 'NKV', 'D'], doc: 'written in place' },
      { name: 'slotMapping', dtype: 'i64', shape: ['T'], doc: 'distinct slots; -1 marks a padding token' },
    ],
    outputs: [
      { name: 'kCache', dtype: 'act', shape: ['NB', KV_BLOCK_SIZE, 'NKV', 'D'], doc: 'the kCache argument after the call' },
      { name: 'vCache', dtype: 'act', shape: ['NB', KV_BLOCK_SIZE, 'NKV', 'D'], doc: 'the vCache argument after the call' },
    ],
    cases: {
      ci: [
        { name: 'small-f32', dtype: 'f32', dims: { T: 21, NKV: 2, D: 32, NB: 4 }, init: [], options: { pad: 3 } },
        { name: 'small-bf16', dtype: 'bf16', dims: { T: 13, NKV: 4, D: 64, NB: 3 }, init: [], options: { pad: 2 } },
        { name: 'all-padding-f32', dtype: 'f32', dims: { T: 5, NKV: 1, D: 16, NB: 2 }, init: [], options: { pad: 5 } },
      ],
      production: [
        { name: 'llama3-8b-decode-b1', dtype: 'bf16', dims: { T: 1, NKV: 8, D: 128, NB: 2048 }, init: [] },
        { name: 'llama3-8b-decode-b32', dtype: 'bf16', dims: { T: 32, NKV: 8, D: 128, NB: 2048 }, init: [] },
        { name: 'llama3-8b-decode-b64-padded', dtype: 'bf16', dims: { T: 64, NKV: 8, D: 128, NB: 2048 }, init: [], options: { pad: 7 } },
        { name: 'llama3-8b-prefill-4096', dtype: 'bf16', dims: { T: 4096, NKV: 8, D: 128, NB: 2048 }, init: [] },
      ],
    },
  },
  {
    baseline: StoreKVCache,
    makeInputs: (c, ctx, rng) => {
      const { T, NKV, D, NB } = c.dims as { T: number; NKV: number; D: number; NB: number };
      const pad = padCount(c);
      const slots = NB * KV_BLOCK_SIZE;
      if (T - pad > slots) throw new RangeError(`store_kvcache: ${T - pad} tokens do not fit ${slots} slots`);
      // Distinct random slots anywhere in the cache, then -1 at `pad` random token positions.
      const perm = rng.permutation(slots);
      const padAt = new Set(rng.permutation(T).slice(0, pad));
      let next = 0;
      const slotMapping = Array.from({ length: T }, (_, t) => (padAt.has(t) ? -1 : perm[next++]!));
      const cacheShape = [NB, KV_BLOCK_SIZE, NKV, D];
      return [
        randn(ctx, rng, [T, NKV, D], c.dtype),
        randn(ctx, rng, [T, NKV, D], c.dtype),
        // Caches start full of random values, so a write to the wrong slot (or an untouched slot overwritten) shows.
        randn(ctx, rng, cacheShape, c.dtype),
        randn(ctx, rng, cacheShape, c.dtype),
        fromInts(ctx, slotMapping, [T], 'i64'),
      ];
    },
    collectOutputs: (args) => [args[2]!, args[3]!],
    reference: ([key, value, kCache, vCache, slotMapping]) => storeKvcacheReference(key!, value!, kCache!, vCache!, slotMapping!),
    work: (c) => {
      const { T, NKV, D } = c.dims as { T: number; NKV: number; D: number };
      const it = DTYPE_INFO[c.dtype].itemsize;
      const written = T - padCount(c);
      // read key + value and the slot mapping; write key + value of every non-padding token. No arithmetic.
      return { bytes: 2 * bytesOf([T, NKV, D], it) + bytesOf([T], 8) + 2 * bytesOf([written, NKV, D], it), flops: 0 };
    },
  },
);
