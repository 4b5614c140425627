import { DTYPE_INFO, F, Module, Tensor, defineTask, hostArray, toHostArray, type HostArray, type TaskCase, type TaskCaseInput } from '@fastkernels/core';
import { bytesOf, fromInts, randn } from '../../../common/inputs.js';
import { DENSE_MOE_LLM } from '../../families.js';
import { KV_BLOCK_SIZE } from '../kvcache/store_kvcache.js';
import { GPT_OSS, INTERFACE_ARCHITECTURES, LLAMA3, MIXTRAL, TRTLLM_INIT, maxSeqlen, scaledByBmm2, scaledReference, trtllmInitOf, type Heads } from './interface-tasks.js';
import { pagedBlockTable } from './paged_decode_attention.js';
import { nhdCachesOf, nhdHalfReference, slidingWindowOfLeft } from './trtllm-kv-layout.js';
import { packedOffsets, varlenPrefillAttentionReference, visiblePairs } from './varlen_prefill_attention.js';

/** Cache slots of every key of every sequence, in order (sequence b's keys are positions 0 .. kvLen_b - 1). */
export function pagedKeySlots(blockTables: ArrayLike<number>, maxPages: number, cuSeqLensKv: ArrayLike<number>, pageSize: number): number[] {
  const slots: number[] = [];
  for (let b = 0; b + 1 < cuSeqLensKv.length; b++) {
    for (let j = 0; j < cuSeqLensKv[b + 1]! - cuSeqLensKv[b]!; j++) slots.push(blockTables[b * maxPages + Math.floor(j / pageSize)]! * pageSize + (j % pageSize));
  }
  return slots;
}

/**
 * FlashInfer's trtllm-gen context attention over the paged cache (trtllm_batch_context_with_kv_cache, vLLM's FlashInfer
 * backend for prefill / chunked prefill on Blackwell): query [TQ, Hq, D] packed by cum_seq_lens_q, kv_cache [num_pages,
 * 2, Hkv, 16, D] (HND) holding each sequence's context and chunk (the chunk already written), block_tables [B, max_pages],
 * seq_lens [B] (keys per sequence), cum_seq_lens_kv [B + 1]; causal bottom-right, bmm1_scale, bmm2_scale, window_left,
 * sinks. max_q_len / max_kv_len come from the host and size the launch only. The baseline transposes the cache to NHD,
 * reads block_tables and cum_seq_lens_kv on the host to list the keys' slots, gathers them and runs the registry's
 * varlen_prefill_attention: a host sync and two copies FlashInfer's kernel, reading pages in place, does not make.
 */
export class TRTLLMPrefill extends Module {
  constructor(
    readonly bmm1Scale: number,
    readonly bmm2Scale = 1,
    readonly windowLeft = -1,
  ) {
    super();
  }

  forward(
    query: Tensor,
    kvCache: Tensor,
    blockTables: Tensor,
    _seqLens: Tensor,
    cumSeqLensQ: Tensor,
    cumSeqLensKv: Tensor,
    sinks?: Tensor | null,
    _maxQLen?: number,
    _maxKvLen?: number,
  ): Tensor {
    const [numPages, , Hkv, pageSize, D] = kvCache.shape as [number, number, number, number, number];
    const slots = pagedKeySlots(toHostArray(blockTables).data, blockTables.shape[1]!, toHostArray(cumSeqLensKv).data, pageSize);
    const index = Tensor.fromArray(this.ctx.backend, slots, [slots.length], 'i64', { device: this.ctx.device });
    const owned: Tensor[] = [index];
    const keysOf = (cache: Tensor) => {
      const table = cache.view(numPages * pageSize, Hkv * D);
      const rows = this.ctx.backend.ops.embedding(index, table);
      const keys = rows.view(slots.length, Hkv, D);
      owned.push(cache, table, rows, keys);
      return keys;
    };
    const [kNhd, vNhd] = nhdCachesOf(kvCache);
    const [k, v] = [keysOf(kNhd), keysOf(vNhd)];
    const out = F.varlenPrefillAttention(query, k, v, cumSeqLensQ, cumSeqLensKv, { scale: this.bmm1Scale, causal: true, sliding_window: slidingWindowOfLeft(this.windowLeft), sinks: sinks ?? null });
    for (const t of owned) t.dispose();
    return scaledByBmm2(out, this.bmm2Scale);
  }
}

const sum = (a: readonly number[]) => a.reduce((x, y) => x + y, 0);
const lensOf = (c: Pick<TaskCase, 'options'>) => ({ qLens: c.options.qLens as number[], kLens: c.options.kLens as number[] });

/** A case from (query, key) lengths per sequence: pages for every key plus `spare`, MB pages per table row. */
function prefillCase(name: string, dtype: 'f32' | 'bf16', heads: Heads, qLens: number[], kLens: number[], init: unknown[], spare = 1, sinks = false): TaskCaseInput {
  const [NQ, NKV, D] = heads;
  const pages = kLens.map((n) => Math.ceil(n / KV_BLOCK_SIZE));
  return {
    name, dtype,
    dims: { TQ: sum(qLens), B: qLens.length, B1: qLens.length + 1, NQ, NKV, D, MB: Math.max(...pages), NB: sum(pages) + spare },
    init, options: { qLens, kLens, ...(sinks ? { sinks: true } : {}) },
  };
}

/** Float64: each sequence's keys gathered from the HND cache through its table, then masked softmax attention. */
function trtllmPrefillReference(q: HostArray, kv: HostArray, table: HostArray, cuQ: HostArray, cuKv: HostArray, sinks: HostArray | null, c: TaskCase): HostArray {
  const { bmm1, bmm2, window } = trtllmInitOf(c);
  const [, , H, S, D] = kv.shape as number[] as [number, number, number, number, number];
  const slots = pagedKeySlots(table.data, table.shape[1]!, cuKv.data, S);
  const gather = (half: 0 | 1) => {
    const nhd = nhdHalfReference(kv, half);
    const out = hostArray([slots.length, H, D]);
    slots.forEach((s, i) => out.data.set(nhd.data.subarray(s * H * D, (s + 1) * H * D), i * H * D));
    return out;
  };
  const out = varlenPrefillAttentionReference(q, gather(0), gather(1), cuQ, cuKv, bmm1, true, window, sinks);
  return scaledReference(out, bmm2);
}

export const flashinferPrefillTask = defineTask(
  {
    id: 'L1/flashinfer_prefill',
    level: 1,
    className: 'TRTLLMPrefill',
    family: [DENSE_MOE_LLM],
    architectures: INTERFACE_ARCHITECTURES,
    mirrors: 'flashinfer.prefill.trtllm_batch_context_with_kv_cache',
    description:
      'FlashInfer trtllm-gen context attention over an HND paged kv_cache: packed queries (cum_seq_lens_q) against each sequence\'s cached context + chunk (block_tables, cum_seq_lens_kv), causal bottom-right, bmm1 / bmm2 scales, window_left, sinks; GQA.',
    init: TRTLLM_INIT,
    inputs: [
      { name: 'query', dtype: 'act', shape: ['TQ', 'NQ', 'D'] },
      { name: 'kv_cache', dtype: 'act', shape: ['NB', 2, 'NKV', KV_BLOCK_SIZE, 'D'], doc: 'HND; every key of every sequence already written' },
      { name: 'block_tables', dtype: 'i32', shape: ['B', 'MB'] },
      { name: 'seq_lens', dtype: 'i32', shape: ['B'], doc: 'keys per sequence (context + chunk)' },
      { name: 'cum_seq_lens_q', dtype: 'i32', shape: ['B1'] },
      { name: 'cum_seq_lens_kv', dtype: 'i32', shape: ['B1'] },
      { name: 'sinks', dtype: 'f32', shape: ['NQ'], optional: true, doc: 'per-head sink logits (gpt-oss); cases with options.sinks' },
    ],
    hostInputs: [
      { name: 'max_q_len', doc: 'the longest query chunk (sizes the launch)' },
      { name: 'max_kv_len', doc: 'the longest key sequence' },
    ],
    outputs: [{ name: 'out', dtype: 'act', shape: ['TQ', 'NQ', 'D'] }],
    cases: {
      ci: [
        prefillCase('prefill-gqa-f32', 'f32', [4, 2, 32], [5, 19, 1], [5, 19, 1], [1 / Math.sqrt(32)]),
        prefillCase('chunked-bmm2-bf16', 'bf16', [4, 1, 64], [4, 7], [37, 7], [1 / 8, 0.5]),
        prefillCase('chunked-window8-sinks-f32', 'f32', [4, 2, 16], [9, 3], [20, 30], [0.25, 1, 7], 2, true),
      ],
      production: [
        prefillCase('llama3-8b-prefill-4096', 'bf16', LLAMA3, [4096], [4096], [1 / Math.sqrt(128)]),
        prefillCase('llama3-8b-chunked-2048x2', 'bf16', LLAMA3, [2048, 2048], [8192, 2048], [1 / Math.sqrt(128)]),
        prefillCase('mixtral-8x7b-prefill-2048x2', 'bf16', MIXTRAL, [2048, 2048], [2048, 2048], [1 / Math.sqrt(128)]),
        prefillCase('gpt-oss-prefill-4096-sliding128', 'bf16', GPT_OSS, [4096], [4096], [1 / 8, 1, 127], 1, true),
      ],
    },
  },
  {
    baseline: TRTLLMPrefill,
    makeInputs: (c, ctx, rng) => {
      const { qLens, kLens } = lensOf(c);
      const { TQ, B, NQ, NKV, D, MB, NB } = c.dims as Record<string, number>;
      const order = rng.permutation(B!); // the (lq, lk) pairs are the case's, their order and pages per call
      const seqLens = order.map((i) => kLens[i]!);
      const table = pagedBlockTable(seqLens, MB!, NB!, rng, `flashinfer_prefill: case '${c.name}'`);
      const [cuQ, cuKv] = [packedOffsets(qLens, order), packedOffsets(kLens, order)];
      return [
        randn(ctx, rng, [TQ!, NQ!, D!], c.dtype),
        randn(ctx, rng, [NB!, 2, NKV!, KV_BLOCK_SIZE, D!], c.dtype),
        fromInts(ctx, table, [B!, MB!], 'i32'),
        fromInts(ctx, seqLens, [B!], 'i32'),
        fromInts(ctx, cuQ, [B! + 1], 'i32'),
        fromInts(ctx, cuKv, [B! + 1], 'i32'),
        c.options.sinks ? randn(ctx, rng, [NQ!], 'f32', 2) : null,
      ];
    },
    hostArgs: ([, , , , cuQ, cuKv]) => [maxSeqlen(toHostArray(cuQ!).data), maxSeqlen(toHostArray(cuKv!).data)],
    reference: ([q, kv, table, _lens, cuQ, cuKv, sinks], _p, c) => [trtllmPrefillReference(q!, kv!, table!, cuQ!, cuKv!, sinks ?? null, c)],
    work: (c) => {
      const { qLens, kLens } = lensOf(c);
      const { TQ, NQ, NKV, D, B, MB } = c.dims as Record<string, number>;
      const it = DTYPE_INFO[c.dtype].itemsize;
      const pairs = sum(qLens.map((lq, i) => visiblePairs(lq, kLens[i]!, true, trtllmInitOf(c).window)));
      return {
        bytes: 2 * bytesOf([TQ!, NQ!, D!], it) + 2 * bytesOf([sum(kLens), NKV!, D!], it) + bytesOf([B!, MB!], 4) + bytesOf([3 * B! + 2], 4),
        flops: 4 * NQ! * D! * pairs,
      };
    },
  },
);
