import { DTYPE_INFO, F, Module, defineTask, hostArray, toHostArray, type TaskCase, type Tensor } from '@fastkernels/core';
import { bytesOf, fromInts, randn } from '../../../common/inputs.js';
import { DENSE_MOE_LLM } from '../../families.js';
import { KV_BLOCK_SIZE } from '../kvcache/store_kvcache.js';
import { decodeDims, decodeSeqLens, expectedKeys, pagedDecodeAttentionReference } from './paged_decode_attention.js';
import { nhdCachesOf, nhdHalfReference, slidingWindowOfLeft } from './trtllm-kv-layout.js';

/**
 * FlashInfer's trtllm-gen decode (trtllm_batch_decode_with_kv_cache, as vLLM's FlashInfer backend calls it on
 * Blackwell): query [B, Hq, D], kv_cache [num_pages, 2, Hkv, 16, D] (HND), block_tables [B, max_pages] i32, seq_lens
 * [B] i32, bmm1_scale (q_scale * k_scale * softmax_scale), bmm2_scale (v_scale: multiplies the output), window_left
 * (-1 = none), sinks [Hq] f32 (gpt-oss). max_seq_len comes from the host and sizes the launch only; the workspace buffer
 * is the kernel's own business and not an argument here. The baseline transposes the cache to NHD for the registry's
 * paged_decode_attention on every call (nhdCachesOf), which FlashInfer does not.
 */
export class TRTLLMDecode extends Module {
  constructor(
    readonly bmm1Scale: number,
    readonly bmm2Scale = 1,
    readonly windowLeft = -1,
  ) {
    super();
  }

  forward(query: Tensor, kvCache: Tensor, blockTables: Tensor, seqLens: Tensor, sinks?: Tensor | null, _maxSeqLen?: number): Tensor {
    const [k, v] = nhdCachesOf(kvCache);
    const out = F.pagedDecodeAttention(query, k, v, blockTables, seqLens, { scale: this.bmm1Scale, sliding_window: slidingWindowOfLeft(this.windowLeft), sinks: sinks ?? null });
    k.dispose();
    v.dispose();
    if (this.bmm2Scale === 1) return out;
    const scaled = F.mul(out, this.bmm2Scale);
    out.dispose();
    return scaled;
  }
}

const initOf = (c: TaskCase) => ({ bmm1: c.init[0] as number, bmm2: (c.init[1] as number | undefined) ?? 1, window: slidingWindowOfLeft((c.init[2] as number | undefined) ?? -1) });

const decodeCase = (name: string, dtype: 'f32' | 'bf16', B: number, heads: [number, number, number], S: number, spare: number, init: unknown[], sinks = false) => {
  const [NQ, NKV, D] = heads;
  return { name, dtype, dims: decodeDims(B, NQ, NKV, D, S, spare), init, options: sinks ? { sinks: true } : {} };
};

const LLAMA3: [number, number, number] = [32, 8, 128];
const GPT_OSS: [number, number, number] = [64, 8, 64];
const QWEN3_MOE: [number, number, number] = [32, 4, 128];
const KV_HND = ['NB', 2, 'NKV', KV_BLOCK_SIZE, 'D'];

export const flashinferDecodeTask = defineTask(
  {
    id: 'L1/flashinfer_decode',
    level: 1,
    className: 'TRTLLMDecode',
    family: [DENSE_MOE_LLM],
    architectures: [
      'bitnet', 'cosyvoice3', 'gemma4', 'gpt_oss', 'hunyuan_video', 'jamba', 'llama', 'llama_eagle3', 'mixtral', 'qwen2_5_omni',
      'qwen2_vl', 'qwen3_next', 'qwen3_vl', 'whisper',
    ],
    mirrors: 'flashinfer.decode.trtllm_batch_decode_with_kv_cache',
    description:
      "FlashInfer trtllm-gen paged decode: one query per sequence over an HND kv_cache [pages, 2, Hkv, 16, D] (block_tables, seq_lens), bmm1 / bmm2 scales, window_left, sinks; GQA.",
    init: [
      { name: 'bmm1Scale', type: 'float', doc: 'q_scale * k_scale * softmax_scale' },
      { name: 'bmm2Scale', type: 'float', optional: true, default: 1, doc: 'v_scale (multiplies the output)' },
      { name: 'windowLeft', type: 'int', optional: true, default: -1, doc: 'sliding window w - 1; -1 = none' },
    ],
    inputs: [
      { name: 'query', dtype: 'act', shape: ['B', 'NQ', 'D'] },
      { name: 'kv_cache', dtype: 'act', shape: KV_HND, doc: 'HND: [pages, K | V, kv heads, page tokens, head dim]' },
      { name: 'block_tables', dtype: 'i32', shape: ['B', 'MB'], doc: 'pages of each sequence; entries past its length are 0' },
      { name: 'seq_lens', dtype: 'i32', shape: ['B'], doc: "tokens in the cache per sequence, the query's own included" },
      { name: 'sinks', dtype: 'f32', shape: ['NQ'], optional: true, doc: 'per-head sink logits (gpt-oss); cases with options.sinks' },
    ],
    hostInputs: [{ name: 'max_seq_len', doc: 'the longest sequence (sizes the launch)' }],
    outputs: [{ name: 'out', dtype: 'act', shape: ['B', 'NQ', 'D'] }],
    cases: {
      ci: [
        decodeCase('gqa-f32', 'f32', 4, [4, 2, 32], 40, 3, [1 / Math.sqrt(32)]),
        decodeCase('bmm2-scaled-bf16', 'bf16', 3, [2, 2, 64], 50, 2, [1 / 8, 0.5]),
        decodeCase('window8-sinks-f32', 'f32', 5, [4, 2, 16], 40, 1, [0.25, 1, 7], true),
      ],
      production: [
        decodeCase('llama3-8b-decode-b32-4k', 'bf16', 32, LLAMA3, 4096, 0, [1 / Math.sqrt(128)]),
        decodeCase('qwen3-30b-a3b-decode-b64-2k', 'bf16', 64, QWEN3_MOE, 2048, 0, [1 / Math.sqrt(128)]),
        decodeCase('gpt-oss-decode-b32-4k-sliding128', 'bf16', 32, GPT_OSS, 4096, 0, [1 / 8, 1, 127], true),
        decodeCase('gpt-oss-decode-b32-4k-full', 'bf16', 32, GPT_OSS, 4096, 0, [1 / 8], true),
      ],
    },
  },
  {
    baseline: TRTLLMDecode,
    makeInputs: (c, ctx, rng) => {
      const { B, NQ, NKV, D, S, MB, NB } = c.dims as Record<string, number>;
      const lens = decodeSeqLens(B!, S!, rng);
      const pool = rng.permutation(NB!); // shuffled pages: neighbours in a table are not neighbours in memory
      const table = new Array<number>(B! * MB!).fill(0);
      let next = 0;
      lens.forEach((L, b) => {
        for (let i = 0; i < Math.ceil(L / KV_BLOCK_SIZE); i++) table[b * MB! + i] = pool[next++]!;
      });
      return [
        randn(ctx, rng, [B!, NQ!, D!], c.dtype),
        randn(ctx, rng, [NB!, 2, NKV!, KV_BLOCK_SIZE, D!], c.dtype),
        fromInts(ctx, table, [B!, MB!], 'i32'),
        fromInts(ctx, lens, [B!], 'i32'),
        c.options.sinks ? randn(ctx, rng, [NQ!], 'f32', 2) : null,
      ];
    },
    hostArgs: ([, , , seqLens]) => [Math.max(...toHostArray(seqLens!).data)],
    reference: ([q, kv, table, lens, sinks], _p, c) => {
      const { bmm1, bmm2, window } = initOf(c);
      const out = pagedDecodeAttentionReference(q!, nhdHalfReference(kv!, 0), nhdHalfReference(kv!, 1), table!, lens!, bmm1, window, sinks ?? null);
      return [hostArray(out.shape, out.data.map((x) => x * bmm2))];
    },
    work: (c) => {
      const { B, NQ, NKV, D, S, MB } = c.dims as Record<string, number>;
      const it = DTYPE_INFO[c.dtype].itemsize;
      const keys = expectedKeys(B!, S!, initOf(c).window);
      return { bytes: 2 * bytesOf([B!, NQ!, D!], it) + 2 * keys * NKV! * D! * it + bytesOf([B!, MB!], 4) + bytesOf([B!], 4), flops: 4 * NQ! * D! * keys };
    },
  },
);
