import { F, Module, defineTask, toHostArray, type Tensor } from '@fastkernels/core';
import { fromInts, randn } from '../../../common/inputs.js';
import { DENSE_MOE_LLM } from '../../families.js';
import { KV_BLOCK_SIZE } from '../kvcache/store_kvcache.js';
import { GPT_OSS, INTERFACE_ARCHITECTURES, LLAMA3, QWEN3_MOE, TRTLLM_INIT, pagedDecodeCase, scaledByBmm2, scaledReference, trtllmInitOf } from './interface-tasks.js';
import { decodeSeqLens, pagedBlockTable, pagedDecodeAttentionReference, pagedDecodeWork } from './paged_decode_attention.js';
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
    return scaledByBmm2(out, this.bmm2Scale);
  }
}

const KV_HND = ['NB', 2, 'NKV', KV_BLOCK_SIZE, 'D'];

export const flashinferDecodeTask = defineTask(
  {
    id: 'L1/flashinfer_decode',
    level: 1,
    className: 'TRTLLMDecode',
    family: [DENSE_MOE_LLM],
    architectures: INTERFACE_ARCHITECTURES,
    mirrors: 'flashinfer.decode.trtllm_batch_decode_with_kv_cache',
    description:
      "FlashInfer trtllm-gen paged decode: one query per sequence over an HND kv_cache [pages, 2, Hkv, 16, D] (block_tables, seq_lens), bmm1 / bmm2 scales, window_left, sinks; GQA.",
    init: TRTLLM_INIT,
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
        pagedDecodeCase('gqa-f32', 'f32', 4, [4, 2, 32], 40, 3, [1 / Math.sqrt(32)]),
        pagedDecodeCase('bmm2-scaled-bf16', 'bf16', 3, [2, 2, 64], 50, 2, [1 / 8, 0.5]),
        pagedDecodeCase('window8-sinks-f32', 'f32', 5, [4, 2, 16], 40, 1, [0.25, 1, 7], true),
      ],
      production: [
        pagedDecodeCase('llama3-8b-decode-b32-4k', 'bf16', 32, LLAMA3, 4096, 0, [1 / Math.sqrt(128)]),
        pagedDecodeCase('qwen3-30b-a3b-decode-b64-2k', 'bf16', 64, QWEN3_MOE, 2048, 0, [1 / Math.sqrt(128)]),
        pagedDecodeCase('gpt-oss-decode-b32-4k-sliding128', 'bf16', 32, GPT_OSS, 4096, 0, [1 / 8, 1, 127], true),
        pagedDecodeCase('gpt-oss-decode-b32-4k-full', 'bf16', 32, GPT_OSS, 4096, 0, [1 / 8], true),
      ],
    },
  },
  {
    baseline: TRTLLMDecode,
    makeInputs: (c, ctx, rng) => {
      const { B, NQ, NKV, D, S, MB, NB } = c.dims as Record<string, number>;
      const lens = decodeSeqLens(B!, S!, rng);
      const table = pagedBlockTable(lens, MB!, NB!, rng, `flashinfer_decode: case '${c.name}'`);
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
      const { bmm1, bmm2, window } = trtllmInitOf(c);
      const out = pagedDecodeAttentionReference(q!, nhdHalfReference(kv!, 0), nhdHalfReference(kv!, 1), table!, lens!, bmm1, window, sinks ?? null);
      return [scaledReference(out, bmm2)];
    },
    work: (c) => pagedDecodeWork(c, trtllmInitOf(c).window, c.dims.B!), // seq_lens: B i32
  },
);
