import { F, Module, defineTask, toHostArray, type TaskCase, type TaskCaseInput, type Tensor } from '@fastkernels/core';
import { DENSE_MOE_LLM } from '../../families.js';
import { GPT_OSS, INTERFACE_ARCHITECTURES, LLAMA3, MIXTRAL, QWEN3_MOE, flashAttnInit, flashAttnInitOf, maxSeqlen, slidingWindowOf, type Heads, type WindowSize } from './interface-tasks.js';
import { varlenPrefillAttentionReference, varlenPrefillInputs, varlenPrefillWork } from './varlen_prefill_attention.js';

export { maxSeqlen, slidingWindowOf, type WindowSize } from './interface-tasks.js';

/**
 * FlashAttention's flash_attn_varlen_func for prefill, as vLLM's FlashAttentionImpl calls it: q [TQ, Hq, D], k / v
 * [TK, Hkv, D] packed without padding, cu_seqlens_q / cu_seqlens_k [B + 1] i32, softmax_scale (default 1 / sqrt(D)),
 * causal (bottom-right aligned: chunked prefill's k holds the cached context plus the chunk), window_size (left, right),
 * s_aux [Hq] f32 (gpt-oss's sinks: a per-head logit in the softmax denominator with no value). max_seqlen_q / _k come
 * from the host as flash-attn takes them; they size the launch only. Runs the registry's varlen_prefill_attention.
 */
export class FlashAttnPrefill extends Module {
  readonly slidingWindow: number;

  constructor(
    readonly softmaxScale: number | null = null,
    readonly causal = false,
    readonly windowSize: WindowSize = [-1, -1],
  ) {
    super();
    this.slidingWindow = slidingWindowOf(windowSize, causal);
  }

  forward(q: Tensor, k: Tensor, v: Tensor, cuSeqlensQ: Tensor, cuSeqlensK: Tensor, sAux?: Tensor | null, _maxSeqlenQ?: number, _maxSeqlenK?: number): Tensor {
    const scale = this.softmaxScale ?? 1 / Math.sqrt(q.shape[2]!);
    return F.varlenPrefillAttention(q, k, v, cuSeqlensQ, cuSeqlensK, { scale, causal: this.causal, sliding_window: this.slidingWindow, sinks: sAux ?? null });
  }
}

const sum = (a: readonly number[]) => a.reduce((x, y) => x + y, 0);

function caseLens(c: Pick<TaskCase, 'options'>): { qLens: number[]; kLens: number[] } {
  const qLens = c.options.qLens as number[];
  return { qLens, kLens: (c.options.kLens as number[] | undefined) ?? qLens };
}

/** causal defaults to false here (flash-attn's default; encoders), true in L1/flash_attn_decode. */
const initOf = (c: TaskCase) => flashAttnInitOf(c, false);

/** A case from its sequence lengths; init is flash-attn's (softmax_scale, causal, window_size). */
function prefillCase(name: string, dtype: 'f32' | 'bf16', heads: Heads, qLens: number[], kLens: number[], init: unknown[], sinks = false): TaskCaseInput {
  const [NQ, NKV, D] = heads;
  return { name, dtype, dims: { TQ: sum(qLens), TK: sum(kLens), B1: qLens.length + 1, NQ, NKV, D }, init, options: { qLens, kLens, ...(sinks ? { sinks: true } : {}) } };
}

export const flashAttnPrefillTask = defineTask(
  {
    id: 'L1/flash_attn_prefill',
    level: 1,
    className: 'FlashAttnPrefill',
    family: [DENSE_MOE_LLM],
    architectures: INTERFACE_ARCHITECTURES,
    mirrors: 'flash_attn.flash_attn_varlen_func',
    description:
      "flash_attn_varlen_func's prefill form: packed q / k / v with cu_seqlens_q / _k, softmax_scale, causal (bottom-right), window_size (left, right), s_aux sinks; GQA.",
    init: flashAttnInit(false),
    inputs: [
      { name: 'q', dtype: 'act', shape: ['TQ', 'NQ', 'D'] },
      { name: 'k', dtype: 'act', shape: ['TK', 'NKV', 'D'] },
      { name: 'v', dtype: 'act', shape: ['TK', 'NKV', 'D'] },
      { name: 'cu_seqlens_q', dtype: 'i32', shape: ['B1'], doc: 'offsets of the packed queries [B + 1], from 0' },
      { name: 'cu_seqlens_k', dtype: 'i32', shape: ['B1'], doc: 'offsets of the packed keys [B + 1] (each >= its query length)' },
      { name: 's_aux', dtype: 'f32', shape: ['NQ'], optional: true, doc: 'per-head sink logits (gpt-oss); cases with options.sinks' },
    ],
    hostInputs: [
      { name: 'max_seqlen_q', doc: 'the longest query sequence (sizes the launch)' },
      { name: 'max_seqlen_k', doc: 'the longest key sequence' },
    ],
    outputs: [{ name: 'out', dtype: 'act', shape: ['TQ', 'NQ', 'D'] }],
    cases: {
      ci: [
        prefillCase('causal-gqa-f32', 'f32', [4, 2, 32], [5, 9, 1, 13], [5, 9, 1, 13], [null, true]),
        prefillCase('chunked-causal-bf16', 'bf16', [4, 1, 64], [4, 7], [20, 7], [null, true]),
        prefillCase('window-sinks-f32', 'f32', [4, 2, 16], [9, 3, 12], [9, 20, 30], [0.25, true, [7, 0]], true),
        prefillCase('encoder-non-causal-bf16', 'bf16', [2, 2, 32], [6, 3], [6, 3], [0.2]),
      ],
      production: [
        prefillCase('llama3-8b-prefill-4096', 'bf16', LLAMA3, [4096], [4096], [1 / Math.sqrt(128), true]),
        prefillCase('llama3-8b-chunked-2048x2', 'bf16', LLAMA3, [2048, 2048], [8192, 2048], [1 / Math.sqrt(128), true]),
        prefillCase('mixtral-8x7b-prefill-2048x2', 'bf16', MIXTRAL, [2048, 2048], [2048, 2048], [1 / Math.sqrt(128), true]),
        prefillCase('qwen3-30b-a3b-prefill-4096', 'bf16', QWEN3_MOE, [4096], [4096], [1 / Math.sqrt(128), true]),
        prefillCase('gpt-oss-prefill-4096-sliding128', 'bf16', GPT_OSS, [4096], [4096], [1 / 8, true, [127, 0]], true),
        prefillCase('gpt-oss-prefill-4096-full', 'bf16', GPT_OSS, [4096], [4096], [1 / 8, true], true),
      ],
    },
  },
  {
    baseline: FlashAttnPrefill,
    makeInputs: (c, ctx, rng) => {
      const { qLens, kLens } = caseLens(c);
      return varlenPrefillInputs(c, ctx, rng, qLens, kLens);
    },
    hostArgs: ([, , , cuQ, cuK]) => [maxSeqlen(toHostArray(cuQ!).data), maxSeqlen(toHostArray(cuK!).data)],
    reference: ([q, k, v, cuQ, cuK, sAux], _p, c) => {
      const { scale, causal, window } = initOf(c);
      return [varlenPrefillAttentionReference(q!, k!, v!, cuQ!, cuK!, scale, causal, window, sAux ?? null)];
    },
    work: (c) => {
      const { qLens, kLens } = caseLens(c);
      const { causal, window } = initOf(c);
      return varlenPrefillWork(c, qLens, kLens, causal, window);
    },
  },
);
