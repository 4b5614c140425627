import { DTYPE_INFO, F, Module, defineTask, hostArray, type HostArray, type TaskCase, type Tensor, type WorkCount } from '@fastkernels/core';
import { bytesOf, fromInts, randn } from '../../../common/inputs.js';
import { DENSE_MOE_LLM } from '../../families.js';
import { KV_BLOCK_SIZE } from '../kvcache/store_kvcache.js';

/**
 * The decode path of vLLM's FLASH_ATTN backend (FlashAttentionImpl.forward with q_len 1:
 * flash_attn_varlen_func(..., block_table=..., seqused_k=...)): one query token per sequence
 * attends to that sequence's keys in a paged cache. GQA when numHeads > numKvHeads; a sliding
 * window of w keeps the last w keys (the query's own position included). sinks [numHeads] (gpt-oss's learned attention
 * sinks, flash-attn's s_aux): a per-head logit that joins the softmax denominator with no value. valueHeadSize (MLA's
 * absorbed decode over latent rows, FlashMLA's head_dim_v = kv_lora_rank): the values are the first valueHeadSize dims
 * of each cached value row, the output [B, numHeads, valueHeadSize]. With sinks or a narrower value the call goes
 * through the op registry's paged_decode_attention (the backend's kernel), else the backend's Ops method as before.
 */
export class FlashAttnDecode extends Module {
  constructor(
    readonly numHeads: number,
    readonly headSize: number,
    readonly scale: number,
    readonly numKvHeads: number,
    readonly slidingWindow = 0,
    readonly valueHeadSize = headSize,
  ) {
    super();
    if (numHeads % numKvHeads !== 0) throw new RangeError(`FlashAttnDecode: numHeads ${numHeads} is not a multiple of numKvHeads ${numKvHeads}`);
    if (!Number.isInteger(valueHeadSize) || valueHeadSize < 1 || valueHeadSize > headSize) {
      throw new RangeError(`FlashAttnDecode: valueHeadSize ${valueHeadSize} must be an integer in 1..headSize (${headSize})`);
    }
  }

  forward(query: Tensor, kCache: Tensor, vCache: Tensor, blockTables: Tensor, seqLens: Tensor, sinks?: Tensor | null): Tensor {
    const narrow = this.valueHeadSize !== this.headSize;
    if (sinks || narrow) {
      return F.pagedDecodeAttention(query, kCache, vCache, blockTables, seqLens, {
        scale: this.scale, sliding_window: this.slidingWindow, sinks: sinks ?? null, ...(narrow ? { v_head_dim: this.valueHeadSize } : {}),
      });
    }
    return this.ctx.backend.ops.pagedDecodeAttention(query, kCache, vCache, blockTables, seqLens, this.scale, this.slidingWindow);
  }
}

/**
 * Golden paged decode attention on host arrays. Independent formulation: first gather each
 * sequence's keys and values out of the paged cache into dense [L, nKv, D] arrays, then run plain
 * dense softmax attention of the single query over the (windowed) keys; a head's sink logit, when given, adds
 * exp(sink) to its denominator. valueDim (default D): the output [B, nQ, valueDim] keeps the values' first dims.
 */
export function pagedDecodeAttentionReference(
  query: HostArray,
  kCache: HostArray,
  vCache: HostArray,
  blockTables: HostArray,
  seqLens: HostArray,
  scale: number,
  slidingWindow = 0,
  sinks: HostArray | null = null,
  valueDim = query.shape[2]!,
): HostArray {
  const [B, nQ, D] = query.shape as [number, number, number];
  const [numBlocks, blockSize, nKv] = kCache.shape as [number, number, number, number];
  const maxBlocks = blockTables.shape[1]!;
  const group = nQ / nKv;
  const out = hostArray([B, nQ, valueDim]);
  for (let b = 0; b < B; b++) {
    const L = seqLens.data[b]!;
    if (L > maxBlocks * blockSize) throw new RangeError(`pagedDecodeAttentionReference: seq ${b} has ${L} tokens, its table holds ${maxBlocks * blockSize}`);
    // 1. gather the sequence's K/V into dense arrays
    const K = new Float64Array(L * nKv * D);
    const V = new Float64Array(L * nKv * D);
    for (let j = 0; j < L; j++) {
      const block = blockTables.data[b * maxBlocks + Math.floor(j / blockSize)]!;
      if (block < 0 || block >= numBlocks) throw new RangeError(`pagedDecodeAttentionReference: seq ${b} token ${j} maps to block ${block}`);
      const src = (block * blockSize + (j % blockSize)) * nKv * D;
      K.set(kCache.data.subarray(src, src + nKv * D), j * nKv * D);
      V.set(vCache.data.subarray(src, src + nKv * D), j * nKv * D);
    }
    // 2. dense attention of the query (at position L - 1) over keys [start, L)
    const start = slidingWindow > 0 ? Math.max(0, L - slidingWindow) : 0;
    for (let h = 0; h < nQ; h++) {
      const kvh = Math.floor(h / group);
      const q = (b * nQ + h) * D;
      const scores = new Float64Array(L - start);
      let max = -Infinity;
      for (let j = start; j < L; j++) {
        let s = 0;
        for (let d = 0; d < D; d++) s += query.data[q + d]! * K[(j * nKv + kvh) * D + d]!;
        s *= scale;
        scores[j - start] = s;
        if (s > max) max = s;
      }
      const sink = sinks ? sinks.data[h]! : -Infinity;
      if (sink > max) max = sink;
      let sum = Math.exp(sink - max);
      for (let i = 0; i < scores.length; i++) {
        scores[i] = Math.exp(scores[i]! - max);
        sum += scores[i]!;
      }
      const o = (b * nQ + h) * valueDim;
      for (let j = start; j < L; j++) {
        const w = scores[j - start]! / sum;
        for (let d = 0; d < valueDim; d++) out.data[o + d]! += w * V[(j * nKv + kvh) * D + d]!;
      }
    }
  }
  return out;
}

/**
 * Sequence lengths of one call: (1, S) always, the other pairs (L, S + 1 - L) with L uniform in [1, S],
 * an odd one out of S; shuffled. Random, yet the total is fixed, so `work` is exact.
 */
export function decodeSeqLens(B: number, S: number, rng: { int(lo: number, hi: number): number; permutation(n: number): number[] }): number[] {
  const lens: number[] = [];
  for (let p = 0; p < Math.floor(B / 2); p++) {
    const L = p === 0 ? 1 : rng.int(1, S + 1);
    lens.push(L, S + 1 - L);
  }
  if (B % 2) lens.push(S);
  const perm = rng.permutation(B);
  return perm.map((i) => lens[i]!);
}

/** Upper bound on the cache blocks one call's sequences need (sizes NB). */
export function decodeBlocksBound(B: number, S: number): number {
  const total = Math.floor(B / 2) * (S + 1) + (B % 2) * S;
  return Math.ceil(total / KV_BLOCK_SIZE) + B;
}

/** Dims of a decode case: max blocks per sequence MB = ceil(S / 16), NB = enough blocks + `spare` unused. */
export function decodeDims(B: number, NQ: number, NKV: number, D: number, S: number, spare: number): Record<string, number> {
  return { B, NQ, NKV, D, S, MB: Math.ceil(S / KV_BLOCK_SIZE), NB: decodeBlocksBound(B, S) + spare };
}

/** Keys the query of a length-L sequence attends to. */
const keysSeen = (L: number, window: number) => (window > 0 ? Math.min(L, window) : L);

/** Expected keys attended over one call (exact without a window, where every pair sums to S + 1). */
export function expectedKeys(B: number, S: number, window: number): number {
  let total = 0;
  if (B >= 2) total += keysSeen(1, window) + keysSeen(S, window);
  if (B % 2) total += keysSeen(S, window);
  const randomPairs = Math.max(0, Math.floor(B / 2) - 1);
  if (randomPairs > 0) {
    let pair = 0;
    for (let L = 1; L <= S; L++) pair += keysSeen(L, window) + keysSeen(S + 1 - L, window);
    total += (randomPairs * pair) / S;
  }
  return total;
}

/**
 * A block table [B, MB] for sequences of these lengths: each sequence gets distinct blocks of the NB, drawn in a shuffled
 * order (so neighbours in a table are not neighbours in memory); entries past a sequence's length are 0. `what` names
 * the case in the error when the blocks do not suffice.
 */
export function pagedBlockTable(lens: readonly number[], MB: number, NB: number, rng: { permutation(n: number): number[] }, what: string): number[] {
  const pool = rng.permutation(NB);
  const table = new Array<number>(lens.length * MB).fill(0);
  let next = 0;
  lens.forEach((L, b) => {
    const need = Math.ceil(L / KV_BLOCK_SIZE);
    if (need > MB || next + need > NB) throw new RangeError(`${what} has too few blocks (MB ${MB}, NB ${NB})`);
    for (let i = 0; i < need; i++) table[b * MB + i] = pool[next++]!;
  });
  return table;
}

/**
 * Work of one paged decode call over a case's dims (B, NQ, NKV, D, S, MB): the query in and the output out, each
 * attended key and value head once, the block table, and `int32s` more i32 values (lengths, offsets).
 */
export function pagedDecodeWork(c: TaskCase, window: number, int32s: number, valueDim?: number): WorkCount {
  const { B, NQ, NKV, D, S, MB } = c.dims as Record<'B' | 'NQ' | 'NKV' | 'D' | 'S' | 'MB', number>;
  const DV = valueDim ?? D;
  const it = DTYPE_INFO[c.dtype].itemsize;
  const keys = expectedKeys(B, S, window);
  return {
    bytes: bytesOf([B, NQ, D], it) + bytesOf([B, NQ, DV], it) + keys * NKV * (D + DV) * it + bytesOf([B, MB], 4) + bytesOf([int32s], 4),
    // per (query head, key): q.k (2D) and p*v (2DV)
    flops: 2 * NQ * (D + DV) * keys,
  };
}

const SCALE_128 = 1 / Math.sqrt(128);

function caseWindow(c: TaskCase): number {
  return (c.init[4] as number | undefined) ?? 0;
}

/** The case's valueHeadSize (init[5]; absent: the head size). */
function caseValueDim(c: TaskCase): number | undefined {
  return c.init[5] as number | undefined;
}

/** gpt-oss-20b / -120b attention: 64 query heads of 64 over 8 kv heads, sliding layers of 128. */
const GPT_OSS: [number, number, number] = [64, 8, 64];

export const pagedDecodeAttentionTask = defineTask(
  {
    id: 'L1/paged_decode_attention',
    level: 1,
    className: 'FlashAttnDecode',
    family: [DENSE_MOE_LLM],
    architectures: [
      'llama', 'qwen2', 'mistral', 'mixtral', 'llama_eagle3', 'gpt_oss', 'gemma4', 'bitnet', 'jamba', 'qwen3_next',
      'qwen2_vl', 'qwen2_5_omni', 'qwen3_vl', 'whisper', 'cosyvoice3', 'hunyuan_video',
    ],
    mirrors: 'vllm.v1.attention.backends.flash_attn.FlashAttentionImpl',
    description:
      'Decode attention over a paged KV cache (block size 16): one query token per sequence, keys/values found through its block table, seq_lens giving the context; GQA and optional sliding window.',
    init: [
      { name: 'numHeads', type: 'int' },
      { name: 'headSize', type: 'int' },
      { name: 'scale', type: 'float' },
      { name: 'numKvHeads', type: 'int' },
      { name: 'slidingWindow', type: 'int', optional: true, default: 0, doc: 'keep the last w keys; 0 = no window' },
      {
        name: 'valueHeadSize', type: 'int', optional: true,
        doc: 'the values are the first valueHeadSize dims of each cached value row (MLA: kv_lora_rank of the latent row); absent = headSize',
      },
    ],
    inputs: [
      { name: 'query', dtype: 'act', shape: ['B', 'NQ', 'D'] },
      { name: 'kCache', dtype: 'act', shape: ['NB', KV_BLOCK_SIZE, 'NKV', 'D'] },
      { name: 'vCache', dtype: 'act', shape: ['NB', KV_BLOCK_SIZE, 'NKV', 'D'] },
      { name: 'blockTables', dtype: 'i32', shape: ['B', 'MB'], doc: 'block ids of each sequence; entries past its length are 0' },
      { name: 'seqLens', dtype: 'i32', shape: ['B'], doc: 'tokens in the cache per sequence, the query\'s own included (1..S)' },
      { name: 'sinks', dtype: 'f32', shape: ['NQ'], optional: true, doc: "per-head sink logits (gpt-oss); cases with options.sinks" },
    ],
    outputs: [{ name: 'out', dtype: 'act', shape: ['B', 'NQ', 'D'], doc: '[B, NQ, valueHeadSize] when valueHeadSize is given' }],
    cases: {
      ci: [
        { name: 'gqa-f32', dtype: 'f32', dims: decodeDims(4, 4, 2, 32, 40, 3), init: [4, 32, 1 / Math.sqrt(32), 2] },
        { name: 'mha-odd-batch-bf16', dtype: 'bf16', dims: decodeDims(3, 2, 2, 64, 50, 2), init: [2, 64, 1 / Math.sqrt(64), 2] },
        { name: 'mqa-sliding-window-f32', dtype: 'f32', dims: decodeDims(6, 4, 1, 16, 70, 1), init: [4, 16, 0.3, 1, 24] },
        { name: 'single-seq-gqa-bf16', dtype: 'bf16', dims: decodeDims(1, 8, 2, 32, 33, 0), init: [8, 32, 1 / Math.sqrt(32), 2] },
        { name: 'sinks-gqa-window8-f32', dtype: 'f32', dims: decodeDims(5, 4, 2, 16, 40, 1), init: [4, 16, 0.25, 2, 8], options: { sinks: true } },
        { name: 'sinks-gqa-bf16', dtype: 'bf16', dims: decodeDims(4, 4, 1, 32, 30, 0), init: [4, 32, 1 / Math.sqrt(32), 1], options: { sinks: true } },
      ],
      production: [
        { name: 'llama3-8b-decode-b1-8k', dtype: 'bf16', dims: decodeDims(1, 32, 8, 128, 8192, 0), init: [32, 128, SCALE_128, 8] },
        { name: 'llama3-8b-decode-b32-4k', dtype: 'bf16', dims: decodeDims(32, 32, 8, 128, 4096, 0), init: [32, 128, SCALE_128, 8] },
        { name: 'llama3-8b-decode-b64-2k', dtype: 'bf16', dims: decodeDims(64, 32, 8, 128, 2048, 0), init: [32, 128, SCALE_128, 8] },
        { name: 'gpt-oss-decode-b32-4k-sliding128', dtype: 'bf16', dims: decodeDims(32, ...GPT_OSS, 4096, 0), init: [64, 64, 1 / 8, 8, 128], options: { sinks: true } },
        { name: 'gpt-oss-decode-b32-4k-full', dtype: 'bf16', dims: decodeDims(32, ...GPT_OSS, 4096, 0), init: [64, 64, 1 / 8, 8], options: { sinks: true } },
      ],
    },
  },
  {
    baseline: FlashAttnDecode,
    makeInputs: (c, ctx, rng) => {
      const { B, NQ, NKV, D, S, MB, NB } = c.dims as Record<'B' | 'NQ' | 'NKV' | 'D' | 'S' | 'MB' | 'NB', number>;
      const lens = decodeSeqLens(B, S, rng);
      const table = pagedBlockTable(lens, MB, NB, rng, `paged_decode_attention: case '${c.name}'`);
      const cacheShape = [NB, KV_BLOCK_SIZE, NKV, D];
      return [
        randn(ctx, rng, [B, NQ, D], c.dtype),
        randn(ctx, rng, cacheShape, c.dtype),
        randn(ctx, rng, cacheShape, c.dtype),
        fromInts(ctx, table, [B, MB], 'i32'),
        fromInts(ctx, lens, [B], 'i32'),
        c.options.sinks ? randn(ctx, rng, [NQ], 'f32', 2) : null,
      ];
    },
    reference: ([query, kCache, vCache, blockTables, seqLens, sinks], _p, c) =>
      [pagedDecodeAttentionReference(query!, kCache!, vCache!, blockTables!, seqLens!, c.init[2] as number, caseWindow(c), sinks ?? null, caseValueDim(c))],
    work: (c) => pagedDecodeWork(c, caseWindow(c), c.dims.B!, caseValueDim(c)), // the lengths: B i32
  },
);
