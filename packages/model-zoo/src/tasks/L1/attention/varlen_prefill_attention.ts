import { DTYPE_INFO, F, Module, defineTask, hostArray, type ExecutionContext, type HostArray, type Rng, type TaskCase, type TaskCaseInput, type Tensor, type WorkCount } from '@fastkernels/core';
import { bytesOf, fromInts, randn } from '../../../common/inputs.js';
import { DENSE_MOE_LLM } from '../../families.js';

/**
 * flash_attn_varlen_func as vLLM's prefill path calls it: packed sequences described by
 * cu_seqlens_q / cu_seqlens_k, GQA when numHeads > numKvHeads. With causal masking the ends of
 * q and k are aligned (bottom-right): query i of a sequence with lq queries and lk keys sits at
 * position i + lk - lq and sees keys j <= that position (chunked prefill: k holds the cached
 * context plus the chunk). A sliding window of w keeps keys j > position - w. sinks [numHeads] (gpt-oss's learned
 * attention sinks, flash-attn's s_aux): a per-head logit that joins the softmax denominator with no value; given, the
 * call goes through the op registry's varlen_prefill_attention (the backend's kernel), else the backend's Ops method.
 */
export class FlashAttnVarlen extends Module {
  constructor(
    readonly numHeads: number,
    readonly headSize: number,
    readonly scale: number,
    readonly numKvHeads: number,
    readonly causal = true,
    readonly slidingWindow = 0,
  ) {
    super();
    if (numHeads % numKvHeads !== 0) throw new RangeError(`FlashAttnVarlen: numHeads ${numHeads} is not a multiple of numKvHeads ${numKvHeads}`);
  }

  forward(q: Tensor, k: Tensor, v: Tensor, cuSeqlensQ: Tensor, cuSeqlensK: Tensor, sinks?: Tensor | null): Tensor {
    if (sinks) return F.varlenPrefillAttention(q, k, v, cuSeqlensQ, cuSeqlensK, { scale: this.scale, causal: this.causal, sliding_window: this.slidingWindow, sinks });
    return this.ctx.backend.ops.varlenPrefillAttention(q, k, v, cuSeqlensQ, cuSeqlensK, this.scale, this.causal, this.slidingWindow);
  }
}

/** Whether query i (of lq) may see key j (of lk): bottom-right causal alignment, left sliding window. */
function visible(i: number, j: number, lq: number, lk: number, causal: boolean, slidingWindow: number): boolean {
  const pos = i + lk - lq;
  if (causal && j > pos) return false;
  if (slidingWindow > 0 && j <= pos - slidingWindow) return false;
  return true;
}

/**
 * Golden varlen attention on host arrays: per sequence, per query token and head, a masked
 * softmax over the sequence's keys (a head's sink logit, when given, adds exp(sink) to the denominator). A query that
 * sees no key (lk < lq under causal masking) gives 0.
 */
export function varlenPrefillAttentionReference(
  q: HostArray,
  k: HostArray,
  v: HostArray,
  cuSeqlensQ: HostArray,
  cuSeqlensK: HostArray,
  scale: number,
  causal = true,
  slidingWindow = 0,
  sinks: HostArray | null = null,
): HostArray {
  const [Tq, nQ, D] = q.shape as [number, number, number];
  const nKv = k.shape[1]!;
  const group = nQ / nKv;
  const B = cuSeqlensQ.data.length - 1;
  const out = hostArray([Tq, nQ, D]);
  for (let b = 0; b < B; b++) {
    const q0 = cuSeqlensQ.data[b]!;
    const lq = cuSeqlensQ.data[b + 1]! - q0;
    const k0 = cuSeqlensK.data[b]!;
    const lk = cuSeqlensK.data[b + 1]! - k0;
    for (let i = 0; i < lq; i++) {
      for (let h = 0; h < nQ; h++) {
        const kvh = Math.floor(h / group);
        const qo = ((q0 + i) * nQ + h) * D;
        const w = new Float64Array(lk);
        let max = -Infinity;
        for (let j = 0; j < lk; j++) {
          if (!visible(i, j, lq, lk, causal, slidingWindow)) {
            w[j] = -Infinity;
            continue;
          }
          const ko = ((k0 + j) * nKv + kvh) * D;
          let s = 0;
          for (let d = 0; d < D; d++) s += q.data[qo + d]! * k.data[ko + d]!;
          w[j] = s * scale;
          if (w[j]! > max) max = w[j]!;
        }
        if (max === -Infinity) continue; // nothing visible: output stays 0
        const sink = sinks ? sinks.data[h]! : -Infinity;
        if (sink > max) max = sink;
        let sum = Math.exp(sink - max);
        for (let j = 0; j < lk; j++) {
          w[j] = w[j] === -Infinity ? 0 : Math.exp(w[j]! - max);
          sum += w[j]!;
        }
        for (let j = 0; j < lk; j++) {
          if (w[j] === 0) continue;
          const p = w[j]! / sum;
          const vo = ((k0 + j) * nKv + kvh) * D;
          for (let d = 0; d < D; d++) out.data[qo + d]! += p * v.data[vo + d]!;
        }
      }
    }
  }
  return out;
}

/** (query, key) pairs a sequence's mask lets through. */
export function visiblePairs(lq: number, lk: number, causal: boolean, slidingWindow: number): number {
  let n = 0;
  for (let i = 0; i < lq; i++) {
    const pos = i + lk - lq;
    const hi = causal ? Math.min(pos, lk - 1) : lk - 1;
    const lo = slidingWindow > 0 ? Math.max(0, pos - slidingWindow + 1) : 0;
    if (hi >= lo) n += hi - lo + 1;
  }
  return n;
}

/** Offsets [0, l_a, l_a + l_b, ...] of the lengths taken in `order` (cu_seqlens of a packed batch). */
export function packedOffsets(lens: readonly number[], order: readonly number[]): number[] {
  const cu = [0];
  for (const i of order) cu.push(cu[cu.length - 1]! + lens[i]!);
  return cu;
}

/**
 * One varlen prefill call's inputs over a case's dims (TQ, TK, NQ, NKV, D): q, k, v, cu_seqlens_q / _k, and the sinks
 * where options.sinks (else null). The multiset of (lq, lk) pairs is the case's; their order in the batch is shuffled
 * per call.
 */
export function varlenPrefillInputs(c: TaskCase, ctx: ExecutionContext, rng: Rng, qLens: readonly number[], kLens: readonly number[]): (Tensor | null)[] {
  const { TQ, TK, NQ, NKV, D } = c.dims as Record<'TQ' | 'TK' | 'NQ' | 'NKV' | 'D', number>;
  const order = rng.permutation(qLens.length);
  const cuQ = packedOffsets(qLens, order);
  const cuK = packedOffsets(kLens, order);
  return [
    randn(ctx, rng, [TQ, NQ, D], c.dtype),
    randn(ctx, rng, [TK, NKV, D], c.dtype),
    randn(ctx, rng, [TK, NKV, D], c.dtype),
    fromInts(ctx, cuQ, [cuQ.length], 'i32'),
    fromInts(ctx, cuK, [cuK.length], 'i32'),
    c.options.sinks ? randn(ctx, rng, [NQ], 'f32', 2) : null,
  ];
}

/** Work of one varlen prefill call over a case's dims: q in, out written, k and v read once each, two cu_seqlens. */
export function varlenPrefillWork(c: TaskCase, qLens: readonly number[], kLens: readonly number[], causal: boolean, window: number): WorkCount {
  const { TQ, TK, NQ, NKV, D } = c.dims as Record<'TQ' | 'TK' | 'NQ' | 'NKV' | 'D', number>;
  const it = DTYPE_INFO[c.dtype].itemsize;
  let pairs = 0;
  qLens.forEach((lq, i) => (pairs += visiblePairs(lq, kLens[i]!, causal, window)));
  return {
    bytes: 2 * bytesOf([TQ, NQ, D], it) + 2 * bytesOf([TK, NKV, D], it) + 2 * bytesOf([qLens.length + 1], 4),
    // per (query head, visible key): q.k (2D) and p*v (2D)
    flops: 4 * NQ * D * pairs,
  };
}

/** Sequence lengths of a case (options.qLens / options.kLens; kLens defaults to qLens). */
function caseLens(c: Pick<TaskCase, 'name' | 'dims' | 'options'>): { qLens: number[]; kLens: number[] } {
  const qLens = c.options.qLens as number[] | undefined;
  if (!qLens) throw new Error(`varlen_prefill_attention: case '${c.name}' needs options.qLens`);
  const kLens = (c.options.kLens as number[] | undefined) ?? qLens;
  const sum = (a: number[]) => a.reduce((x, y) => x + y, 0);
  if (kLens.length !== qLens.length || sum(qLens) !== c.dims.TQ || sum(kLens) !== c.dims.TK || qLens.length + 1 !== c.dims['B+1']) {
    throw new Error(`varlen_prefill_attention: case '${c.name}': qLens/kLens do not match dims TQ, TK, B+1`);
  }
  return { qLens, kLens };
}

/** A case from its sequence lengths (dims follow from them). */
function varlenCase(name: string, dtype: 'f32' | 'bf16', heads: [number, number, number], qLens: number[], kLens: number[] = qLens, extra: { scale?: number; causal?: boolean; window?: number; sinks?: boolean } = {}): TaskCaseInput {
  const [NQ, NKV, D] = heads;
  const sum = (a: number[]) => a.reduce((x, y) => x + y, 0);
  const init: unknown[] = [NQ, D, extra.scale ?? 1 / Math.sqrt(D), NKV];
  if (extra.causal !== undefined || extra.window !== undefined) init.push(extra.causal ?? true);
  if (extra.window !== undefined) init.push(extra.window);
  return { name, dtype, dims: { TQ: sum(qLens), TK: sum(kLens), B: qLens.length, 'B+1': qLens.length + 1, NQ, NKV, D }, init, options: { qLens, kLens, ...(extra.sinks ? { sinks: true } : {}) } };
}

const LLAMA3: [number, number, number] = [32, 8, 128];
/** gpt-oss-20b / -120b: 64 query heads of 64 over 8 kv heads, sliding layers of 128, sinks everywhere. */
const GPT_OSS: [number, number, number] = [64, 8, 64];

export const varlenPrefillAttentionTask = defineTask(
  {
    id: 'L1/varlen_prefill_attention',
    level: 1,
    className: 'FlashAttnVarlen',
    family: [DENSE_MOE_LLM],
    architectures: [
      'llama', 'qwen2', 'mistral', 'mixtral', 'llama_eagle3', 'gpt_oss', 'gemma4', 'bitnet', 'jamba', 'qwen3_next',
      'qwen2_vl', 'qwen2_5_omni', 'qwen3_vl', 'whisper', 'cosyvoice3', 'hunyuan_video', 'deepseek', 'glm', 'kimi_linear',
      'bge_m3', 'colbertv2',
    ],
    mirrors: 'vllm.vllm_flash_attn.flash_attn_varlen_func',
    description:
      'Variable-length (packed) prefill attention: sequences delimited by cu_seqlens for q and k, causal with bottom-right alignment (chunked prefill over cached context), GQA, optional sliding window.',
    init: [
      { name: 'numHeads', type: 'int' },
      { name: 'headSize', type: 'int' },
      { name: 'scale', type: 'float' },
      { name: 'numKvHeads', type: 'int' },
      { name: 'causal', type: 'bool', optional: true, default: true },
      { name: 'slidingWindow', type: 'int', optional: true, default: 0, doc: 'keep keys within the last w positions; 0 = no window' },
    ],
    inputs: [
      { name: 'q', dtype: 'act', shape: ['TQ', 'NQ', 'D'] },
      { name: 'k', dtype: 'act', shape: ['TK', 'NKV', 'D'] },
      { name: 'v', dtype: 'act', shape: ['TK', 'NKV', 'D'] },
      { name: 'cuSeqlensQ', dtype: 'i32', shape: ['B+1'], doc: 'prefix sums of the query lengths, from 0' },
      { name: 'cuSeqlensK', dtype: 'i32', shape: ['B+1'], doc: 'prefix sums of the key lengths (>= the query lengths), from 0' },
      { name: 'sinks', dtype: 'f32', shape: ['NQ'], optional: true, doc: 'per-head sink logits (gpt-oss); cases with options.sinks' },
    ],
    outputs: [{ name: 'out', dtype: 'act', shape: ['TQ', 'NQ', 'D'] }],
    cases: {
      ci: [
        varlenCase('prefill-gqa-f32', 'f32', [4, 2, 32], [5, 9, 1, 13]),
        varlenCase('prefill-gqa-bf16', 'bf16', [4, 1, 64], [7, 3, 11]),
        varlenCase('chunked-gqa-f32', 'f32', [4, 2, 32], [4, 7, 1], [20, 7, 33]),
        varlenCase('chunked-mha-bf16', 'bf16', [2, 2, 64], [6, 2], [17, 30]),
        varlenCase('sliding-window-f32', 'f32', [4, 2, 16], [12, 30, 5], [12, 45, 5], { window: 8 }),
        varlenCase('non-causal-f32', 'f32', [2, 1, 16], [6, 3], [10, 3], { causal: false, scale: 0.2 }),
        varlenCase('sinks-chunked-window8-f32', 'f32', [4, 2, 16], [9, 3, 12], [9, 20, 30], { window: 8, sinks: true }),
        varlenCase('sinks-gqa-bf16', 'bf16', [4, 1, 32], [7, 5], [7, 5], { sinks: true }),
      ],
      production: [
        varlenCase('llama3-8b-prefill-4096x1', 'bf16', LLAMA3, [4096]),
        varlenCase('llama3-8b-prefill-2048x2', 'bf16', LLAMA3, [2048, 2048]),
        varlenCase('llama3-8b-prefill-uneven-x3', 'bf16', LLAMA3, [2600, 1100, 396]),
        varlenCase('llama3-8b-prefill-1024x4', 'bf16', LLAMA3, [1024, 1024, 1024, 1024]),
        varlenCase('llama3-8b-chunked-prefill-2048x2', 'bf16', LLAMA3, [2048, 2048], [8192, 2048]),
        varlenCase('gpt-oss-prefill-4096-sliding128', 'bf16', GPT_OSS, [4096], [4096], { scale: 1 / 8, window: 128, sinks: true }),
        varlenCase('gpt-oss-prefill-4096-full', 'bf16', GPT_OSS, [4096], [4096], { scale: 1 / 8, sinks: true }),
      ],
    },
  },
  {
    baseline: FlashAttnVarlen,
    makeInputs: (c, ctx, rng) => {
      const { qLens, kLens } = caseLens(c);
      return varlenPrefillInputs(c, ctx, rng, qLens, kLens);
    },
    reference: ([q, k, v, cuQ, cuK, sinks], _p, c) => [
      varlenPrefillAttentionReference(q!, k!, v!, cuQ!, cuK!, c.init[2] as number, (c.init[4] as boolean | undefined) ?? true, (c.init[5] as number | undefined) ?? 0, sinks ?? null),
    ],
    work: (c) => {
      const { qLens, kLens } = caseLens(c);
      return varlenPrefillWork(c, qLens, kLens, (c.init[4] as boolean | undefined) ?? true, (c.init[5] as number | undefined) ?? 0);
    },
  },
);
