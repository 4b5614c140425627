import { DTYPE_INFO, Module, defineTask, hostArray, type HostArray, type Tensor } from '@fastkernels/core';
import { bytesOf, fromInts, randn } from '../../../common/inputs.js';
import { DENSE_MOE_LLM } from '../../families.js';
import { KV_BLOCK_SIZE } from './store_kvcache.js';

/**
 * The paged KV-cache write into the HND layout FlashInfer's trtllm-gen kernels read (vLLM's reshape_and_cache_flash on
 * the FlashInfer backend's kv-cache, whose stride order puts heads before the block's tokens): key / value [T, nKv, D] go
 * to kCache / vCache [numBlocks, nKv, 16, D] at slotMapping [T] (slot = block * 16 + offset; -1 = padding, skipped).
 * In place. Runs the backend's storeKvcache_ on [numBlocks, 16, nKv, D] views of the HND caches (both backends write
 * through the cache's strides, the head dim staying contiguous).
 */
export class StoreKVCacheHND extends Module {
  constructor() {
    super();
  }

  forward(key: Tensor, value: Tensor, kCache: Tensor, vCache: Tensor, slotMapping: Tensor): void {
    const kView = kCache.permute(0, 2, 1, 3);
    const vView = vCache.permute(0, 2, 1, 3);
    try {
      this.ctx.backend.ops.storeKvcache_(key, value, kView, vView, slotMapping);
    } finally {
      kView.dispose();
      vView.dispose();
    }
  }
}

/** Float64 HND cache write: new [kCache, vCache], indexed [block, head, offset, dim]. */
export function storeKvcacheHndReference(key: HostArray, value: HostArray, kCache: HostArray, vCache: HostArray, slotMapping: HostArray): [HostArray, HostArray] {
  const [T, nKv, D] = key.shape as [number, number, number];
  const bs = kCache.shape[2]!;
  const kOut = hostArray(kCache.shape, kCache.data);
  const vOut = hostArray(vCache.shape, vCache.data);
  for (let t = 0; t < T; t++) {
    const slot = slotMapping.data[t]!;
    if (slot < 0) continue;
    const [block, offset] = [Math.floor(slot / bs), slot % bs];
    for (let h = 0; h < nKv; h++) {
      const dst = ((block * nKv + h) * bs + offset) * D;
      const src = (t * nKv + h) * D;
      kOut.data.set(key.data.subarray(src, src + D), dst);
      vOut.data.set(value.data.subarray(src, src + D), dst);
    }
  }
  return [kOut, vOut];
}

const padOf = (c: { options: Record<string, unknown> }) => (c.options.pad as number | undefined) ?? 0;
const HND: (string | number)[] = ['NB', 'NKV', KV_BLOCK_SIZE, 'D'];

export const storeKvcacheHndTask = defineTask(
  {
    id: 'L1/store_kvcache_hnd',
    level: 1,
    className: 'StoreKVCacheHND',
    family: [DENSE_MOE_LLM],
    architectures: [
      'bitnet', 'cosyvoice3', 'gemma4', 'gpt_oss', 'hunyuan_video', 'jamba', 'llama', 'llama_eagle3', 'mixtral', 'qwen2_5_omni',
      'qwen2_vl', 'qwen3_next', 'qwen3_vl', 'whisper',
    ],
    mirrors: 'vllm._custom_ops.reshape_and_cache_flash',
    description:
      "Paged KV-cache write in FlashInfer's HND layout: each token's key / value heads into [numBlocks, nKv, 16, D] caches at its slot; slot -1 skipped. In place.",
    init: [],
    inputs: [
      { name: 'key', dtype: 'act', shape: ['T', 'NKV', 'D'] },
      { name: 'value', dtype: 'act', shape: ['T', 'NKV', 'D'] },
      { name: 'kCache', dtype: 'act', shape: HND, doc: 'HND, written in place' },
      { name: 'vCache', dtype: 'act', shape: HND, doc: 'HND, written in place' },
      { name: 'slotMapping', dtype: 'i64', shape: ['T'], doc: 'distinct slots; -1 marks a padding token' },
    ],
    outputs: [
      { name: 'kCache', dtype: 'act', shape: HND, doc: 'the kCache argument after the call' },
      { name: 'vCache', dtype: 'act', shape: HND, doc: 'the vCache argument after the call' },
    ],
    cases: {
      ci: [
        { name: 'small-f32', dtype: 'f32', dims: { T: 21, NKV: 2, D: 32, NB: 4 }, init: [], options: { pad: 3 } },
        { name: 'small-bf16', dtype: 'bf16', dims: { T: 13, NKV: 4, D: 64, NB: 3 }, init: [], options: { pad: 2 } },
      ],
      production: [
        { name: 'llama3-8b-decode-b32', dtype: 'bf16', dims: { T: 32, NKV: 8, D: 128, NB: 2048 }, init: [] },
        { name: 'llama3-8b-prefill-4096', dtype: 'bf16', dims: { T: 4096, NKV: 8, D: 128, NB: 2048 }, init: [] },
        { name: 'gpt-oss-decode-b64-padded', dtype: 'bf16', dims: { T: 64, NKV: 8, D: 64, NB: 2048 }, init: [], options: { pad: 7 } },
      ],
    },
  },
  {
    baseline: StoreKVCacheHND,
    makeInputs: (c, ctx, rng) => {
      const { T, NKV, D, NB } = c.dims as Record<string, number>;
      const pad = padOf(c);
      const perm = rng.permutation(NB! * KV_BLOCK_SIZE);
      const padAt = new Set(rng.permutation(T!).slice(0, pad));
      let next = 0;
      const slots = Array.from({ length: T! }, (_, t) => (padAt.has(t) ? -1 : perm[next++]!));
      const cacheShape = [NB!, NKV!, KV_BLOCK_SIZE, D!];
      return [
        randn(ctx, rng, [T!, NKV!, D!], c.dtype),
        randn(ctx, rng, [T!, NKV!, D!], c.dtype),
        randn(ctx, rng, cacheShape, c.dtype),
        randn(ctx, rng, cacheShape, c.dtype),
        fromInts(ctx, slots, [T!], 'i64'),
      ];
    },
    collectOutputs: (args) => [args[2]!, args[3]!],
    reference: ([key, value, kCache, vCache, slots]) => storeKvcacheHndReference(key!, value!, kCache!, vCache!, slots!),
    work: (c) => {
      const { T, NKV, D } = c.dims as Record<string, number>;
      const it = DTYPE_INFO[c.dtype].itemsize;
      return { bytes: 2 * bytesOf([T!, NKV!, D!], it) + bytesOf([T!], 8) + 2 * bytesOf([T! - padOf(c), NKV!, D!], it), flops: 0 };
    },
  },
);
