import { DTYPE_INFO, F, Module, defineTask, toHostArray, type TaskCase, type TaskCaseInput, type Tensor } from '@fastkernels/core';
import { bytesOf, fromInts, randn } from '../../../common/inputs.js';
import { DENSE_MOE_LLM } from '../../families.js';
import { varlenPrefillAttentionReference, visiblePairs } from './varlen_prefill_attention.js';

/** FlashAttention's window_size (left, right): -1 = unbounded on that side. */
export type WindowSize = readonly [number, number];

/**
 * FlashAttention's window_size as our ops' sliding_window: (left, right) keeps keys with pos - left <= j <= pos + right;
 * the ops keep the last w keys (pos - j < w), so w = left + 1 (vLLM passes (w - 1, 0) for a window of w). Causal sets
 * the right side to 0 (as flash-attn does); a bounded right side without causal is not a production form and is refused.
 */
export function slidingWindowOf(windowSize: WindowSize, causal: boolean): number {
  const [left, right] = windowSize;
  if (right >= 0 && !causal) throw new RangeError(`window_size (${left}, ${right}): a bounded right window is supported only with causal (where it is 0)`);
  return left < 0 ? 0 : left + 1;
}

/** Largest difference of consecutive offsets (flash-attn's max_seqlen_q / max_seqlen_k). */
export function maxSeqlen(cuSeqlens: ArrayLike<number>): number {
  let max = 0;
  for (let b = 0; b + 1 < cuSeqlens.length; b++) max = Math.max(max, cuSeqlens[b + 1]! - cuSeqlens[b]!);
  return max;
}

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

const initOf = (c: TaskCase) => ({
  scale: (c.init[0] as number | null | undefined) ?? 1 / Math.sqrt(c.dims.D!),
  causal: (c.init[1] as boolean | undefined) ?? false,
  window: slidingWindowOf((c.init[2] as WindowSize | undefined) ?? [-1, -1], (c.init[1] as boolean | undefined) ?? false),
});

/** A case from its sequence lengths; init is flash-attn's (softmax_scale, causal, window_size). */
function prefillCase(name: string, dtype: 'f32' | 'bf16', heads: [number, number, number], qLens: number[], kLens: number[], init: unknown[], sinks = false): TaskCaseInput {
  const [NQ, NKV, D] = heads;
  return { name, dtype, dims: { TQ: sum(qLens), TK: sum(kLens), B1: qLens.length + 1, NQ, NKV, D }, init, options: { qLens, kLens, ...(sinks ? { sinks: true } : {}) } };
}

const LLAMA3: [number, number, number] = [32, 8, 128];
/** gpt-oss-20b / -120b: 64 query heads of 64 over 8 kv heads; sliding layers of 128 (window_size (127, 0)), sinks. */
const GPT_OSS: [number, number, number] = [64, 8, 64];
/** Mixtral-8x7B: 32 query heads of 128 over 8; Qwen3-30B-A3B: 32 over 4 of 128. */
const MIXTRAL: [number, number, number] = [32, 8, 128];
const QWEN3_MOE: [number, number, number] = [32, 4, 128];

export const flashAttnPrefillTask = defineTask(
  {
    id: 'L1/flash_attn_prefill',
    level: 1,
    className: 'FlashAttnPrefill',
    family: [DENSE_MOE_LLM],
    architectures: [
      'bitnet', 'cosyvoice3', 'gemma4', 'gpt_oss', 'hunyuan_video', 'jamba', 'llama', 'llama_eagle3', 'mixtral', 'qwen2_5_omni',
      'qwen2_vl', 'qwen3_next', 'qwen3_vl', 'whisper',
    ],
    mirrors: 'flash_attn.flash_attn_varlen_func',
    description:
      "flash_attn_varlen_func's prefill form: packed q / k / v with cu_seqlens_q / _k, softmax_scale, causal (bottom-right), window_size (left, right), s_aux sinks; GQA.",
    init: [
      { name: 'softmaxScale', type: 'float', optional: true, doc: 'default 1 / sqrt(D)' },
      { name: 'causal', type: 'bool', optional: true, default: false },
      { name: 'windowSize', type: 'object', optional: true, default: [-1, -1], doc: '(left, right), -1 = unbounded; vLLM passes (w - 1, 0)' },
    ],
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
      const { TQ, TK, NQ, NKV, D } = c.dims as Record<string, number>;
      const order = rng.permutation(qLens.length); // the (lq, lk) pairs are the case's, their order per call
      const cuQ = [0];
      const cuK = [0];
      for (const i of order) {
        cuQ.push(cuQ[cuQ.length - 1]! + qLens[i]!);
        cuK.push(cuK[cuK.length - 1]! + kLens[i]!);
      }
      return [
        randn(ctx, rng, [TQ!, NQ!, D!], c.dtype),
        randn(ctx, rng, [TK!, NKV!, D!], c.dtype),
        randn(ctx, rng, [TK!, NKV!, D!], c.dtype),
        fromInts(ctx, cuQ, [cuQ.length], 'i32'),
        fromInts(ctx, cuK, [cuK.length], 'i32'),
        c.options.sinks ? randn(ctx, rng, [NQ!], 'f32', 2) : null,
      ];
    },
    hostArgs: ([, , , cuQ, cuK]) => [maxSeqlen(toHostArray(cuQ!).data), maxSeqlen(toHostArray(cuK!).data)],
    reference: ([q, k, v, cuQ, cuK, sAux], _p, c) => {
      const { scale, causal, window } = initOf(c);
      return [varlenPrefillAttentionReference(q!, k!, v!, cuQ!, cuK!, scale, causal, window, sAux ?? null)];
    },
    work: (c) => {
      const { qLens, kLens } = caseLens(c);
      const { TQ, TK, NQ, NKV, D } = c.dims as Record<string, number>;
      const { causal, window } = initOf(c);
      const it = DTYPE_INFO[c.dtype].itemsize;
      const pairs = sum(qLens.map((lq, i) => visiblePairs(lq, kLens[i]!, causal, window)));
      return {
        bytes: 2 * bytesOf([TQ!, NQ!, D!], it) + 2 * bytesOf([TK!, NKV!, D!], it) + 2 * bytesOf([qLens.length + 1], 4),
        flops: 4 * NQ! * D! * pairs,
      };
    },
  },
);
