import { F, Module, defineTask, toHostArray, type TaskCase, type Tensor } from '@fastkernels/core';
import { fromInts, randn } from '../../../common/inputs.js';
import { DENSE_MOE_LLM } from '../../families.js';
import { KV_BLOCK_SIZE } from '../kvcache/store_kvcache.js';
import {
  GPT_OSS, INTERFACE_ARCHITECTURES, LLAMA3, QWEN3_MOE, flashAttnInit, flashAttnInitOf, maxSeqlen, pagedDecodeCase, slidingWindowOf, type Heads, type WindowSize,
} from './interface-tasks.js';
import { decodeSeqLens, pagedBlockTable, pagedDecodeAttentionReference, pagedDecodeWork } from './paged_decode_attention.js';

/**
 * FlashAttention's flash_attn_varlen_func in its paged-KV decode form, as vLLM's FlashAttentionImpl calls it for decode
 * steps: q [B, Hq, D] (one query token per sequence, cu_seqlens_q = 0..B), k_cache / v_cache [num_blocks, 16, Hkv, D]
 * (NHD), block_table [B, max_blocks] i32, seqused_k [B] i32 (tokens in the cache, the query's own included),
 * softmax_scale, causal, window_size (left, right), s_aux [Hq] f32 sinks. max_seqlen_q (1) / max_seqlen_k come from the
 * host and size the launch only. Runs the registry's paged_decode_attention, which reads q_len 1 per sequence (the
 * form vLLM's decode batches have), so cu_seqlens_q is taken as 0..B and not read.
 */
export class FlashAttnDecode extends Module {
  readonly slidingWindow: number;

  constructor(
    readonly softmaxScale: number | null = null,
    readonly causal = true,
    readonly windowSize: WindowSize = [-1, -1],
  ) {
    super();
    this.slidingWindow = slidingWindowOf(windowSize, causal);
  }

  forward(
    q: Tensor,
    kCache: Tensor,
    vCache: Tensor,
    _cuSeqlensQ: Tensor,
    sequsedK: Tensor,
    blockTable: Tensor,
    sAux?: Tensor | null,
    _maxSeqlenQ?: number,
    _maxSeqlenK?: number,
  ): Tensor {
    const scale = this.softmaxScale ?? 1 / Math.sqrt(q.shape[2]!);
    return F.pagedDecodeAttention(q, kCache, vCache, blockTable, sequsedK, { scale, sliding_window: this.slidingWindow, sinks: sAux ?? null });
  }
}

/** causal defaults to true here (vLLM's decoders), false in L1/flash_attn_prefill (flash-attn's default). */
const initOf = (c: TaskCase) => flashAttnInitOf(c, true);

/** A decode case (pagedDecodeCase) with B1 = B + 1 for cu_seqlens_q; init is (softmax_scale, causal, window_size). */
const decodeCase = (name: string, dtype: 'f32' | 'bf16', B: number, heads: Heads, S: number, spare: number, init: unknown[], sinks = false) => {
  const c = pagedDecodeCase(name, dtype, B, heads, S, spare, init, sinks);
  return { ...c, dims: { ...c.dims, B1: B + 1 } };
};

export const flashAttnDecodeTask = defineTask(
  {
    id: 'L1/flash_attn_decode',
    level: 1,
    className: 'FlashAttnDecode',
    family: [DENSE_MOE_LLM],
    architectures: INTERFACE_ARCHITECTURES,
    mirrors: 'flash_attn.flash_attn_varlen_func',
    description:
      "flash_attn_varlen_func's paged decode form: one query per sequence over an NHD paged cache (block_table, seqused_k), softmax_scale, window_size, s_aux sinks; GQA.",
    init: flashAttnInit(true),
    inputs: [
      { name: 'q', dtype: 'act', shape: ['B', 'NQ', 'D'] },
      { name: 'k_cache', dtype: 'act', shape: ['NB', KV_BLOCK_SIZE, 'NKV', 'D'] },
      { name: 'v_cache', dtype: 'act', shape: ['NB', KV_BLOCK_SIZE, 'NKV', 'D'] },
      { name: 'cu_seqlens_q', dtype: 'i32', shape: ['B1'], doc: '0..B: one query token per sequence' },
      { name: 'seqused_k', dtype: 'i32', shape: ['B'], doc: "tokens in the cache per sequence, the query's own included" },
      { name: 'block_table', dtype: 'i32', shape: ['B', 'MB'], doc: 'cache blocks of each sequence; entries past its length are 0' },
      { name: 's_aux', dtype: 'f32', shape: ['NQ'], optional: true, doc: 'per-head sink logits (gpt-oss); cases with options.sinks' },
    ],
    hostInputs: [
      { name: 'max_seqlen_q', doc: '1 (decode)' },
      { name: 'max_seqlen_k', doc: 'the longest sequence in the cache (sizes the launch)' },
    ],
    outputs: [{ name: 'out', dtype: 'act', shape: ['B', 'NQ', 'D'] }],
    cases: {
      ci: [
        decodeCase('gqa-f32', 'f32', 4, [4, 2, 32], 40, 3, []),
        decodeCase('mha-odd-batch-bf16', 'bf16', 3, [2, 2, 64], 50, 2, [1 / 8, true]),
        decodeCase('window8-sinks-f32', 'f32', 5, [4, 2, 16], 40, 1, [0.25, true, [7, 0]], true),
        decodeCase('mqa-sinks-bf16', 'bf16', 4, [4, 1, 32], 30, 0, [null, true], true),
      ],
      production: [
        decodeCase('llama3-8b-decode-b32-4k', 'bf16', 32, LLAMA3, 4096, 0, [1 / Math.sqrt(128), true]),
        decodeCase('llama3-8b-decode-b1-8k', 'bf16', 1, LLAMA3, 8192, 0, [1 / Math.sqrt(128), true]),
        decodeCase('qwen3-30b-a3b-decode-b64-2k', 'bf16', 64, QWEN3_MOE, 2048, 0, [1 / Math.sqrt(128), true]),
        decodeCase('gpt-oss-decode-b32-4k-sliding128', 'bf16', 32, GPT_OSS, 4096, 0, [1 / 8, true, [127, 0]], true),
        decodeCase('gpt-oss-decode-b32-4k-full', 'bf16', 32, GPT_OSS, 4096, 0, [1 / 8, true], true),
      ],
    },
  },
  {
    baseline: FlashAttnDecode,
    makeInputs: (c, ctx, rng) => {
      const { B, NQ, NKV, D, S, MB, NB } = c.dims as Record<string, number>;
      const lens = decodeSeqLens(B!, S!, rng);
      const table = pagedBlockTable(lens, MB!, NB!, rng, `flash_attn_decode: case '${c.name}'`);
      const cacheShape = [NB!, KV_BLOCK_SIZE, NKV!, D!];
      return [
        randn(ctx, rng, [B!, NQ!, D!], c.dtype),
        randn(ctx, rng, cacheShape, c.dtype),
        randn(ctx, rng, cacheShape, c.dtype),
        fromInts(ctx, Array.from({ length: B! + 1 }, (_, i) => i), [B! + 1], 'i32'),
        fromInts(ctx, lens, [B!], 'i32'),
        fromInts(ctx, table, [B!, MB!], 'i32'),
        c.options.sinks ? randn(ctx, rng, [NQ!], 'f32', 2) : null,
      ];
    },
    hostArgs: ([, , , cuQ, seqused]) => [maxSeqlen(toHostArray(cuQ!).data), Math.max(...toHostArray(seqused!).data)],
    reference: ([q, kCache, vCache, _cuQ, seqused, table, sAux], _p, c) => {
      const { scale, window } = initOf(c);
      return [pagedDecodeAttentionReference(q!, kCache!, vCache!, table!, seqused!, scale, window, sAux ?? null)];
    },
    work: (c) => pagedDecodeWork(c, initOf(c).window, 2 * c.dims.B! + 1), // seqused_k and cu_seqlens_q: 2B + 1 i32
  },
);
