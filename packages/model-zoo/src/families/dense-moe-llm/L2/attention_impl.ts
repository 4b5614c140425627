import { DTYPE_INFO, Tensor, Module, defineTask, hostArray, type HostArray, type TaskCase } from '@fastkernels/core';
import { bytesOf, initNormal, randn } from '../../../common/inputs.js';
import { getForwardContext, layerKvCache } from '../../../engine/forward-context.js';
import { FAMILY } from '../family.js';
import type { FlashAttnDecode } from '../../../tasks/L1/attention/paged_decode_attention.js';
import type { FlashAttnVarlen } from '../../../tasks/L1/attention/varlen_prefill_attention.js';
import type { StoreKVCache } from '../../../tasks/L1/kvcache/store_kvcache.js';
import type { DenseSeq } from '../reference.js';
import { buildTaskStep, stepAttentionPairs, stepCachedTokens, stepSpec, stepTokens, taskStepFor } from '../task-batch.js';

/**
 * vLLM's Attention layer (vllm.attention.layer.Attention, FLASH_ATTN backend): forward(query [T, Hq * D], key / value
 * [T, Hkv * D]) with the step's metadata and this layer's paged KV cache taken from the forward context (as vLLM's
 * unified_attention custom op does, so the layer stays capturable in CUDA graphs): every token's key / value written to
 * the cache at its slot (L1/store_kvcache), the prefill tokens (first) through varlen attention, their cached context
 * gathered from the cache for chunked prefill (L1/varlen_prefill_attention), the decode tokens (then) through paged
 * decode attention (L1/paged_decode_attention). Constructor as vLLM's (num_heads, head_size, scale, num_kv_heads,
 * per_layer_sliding_window), plus the layer index that picks the cache (vLLM's prefix) and the sinks parameter gpt-oss
 * hands it. The same steps as the engine's LlamaAttention after its qkv projection and rotary.
 */
export class Attention extends Module {
  readonly sinks: Tensor | null;
  private readonly kvStore: StoreKVCache;
  private readonly attnPrefill: FlashAttnVarlen;
  private readonly attnDecode: FlashAttnDecode;

  constructor(
    readonly numHeads: number,
    readonly headSize: number,
    readonly scale: number,
    readonly numKvHeads = numHeads,
    readonly slidingWindow = 0,
    readonly layerIdx = 0,
    readonly hasSinks = false,
  ) {
    super();
    if (numHeads % numKvHeads !== 0) throw new RangeError(`Attention: numHeads ${numHeads} is not a multiple of numKvHeads ${numKvHeads}`);
    this.sinks = hasSinks ? this.parameter('sinks', [numHeads], 'f32') : null;
    this.kvStore = this.createModule('kv_store', 'L1/store_kvcache');
    this.attnPrefill = this.createModule('attn_prefill', 'L1/varlen_prefill_attention', numHeads, headSize, scale, numKvHeads, true, slidingWindow);
    this.attnDecode = this.createModule('attn_decode', 'L1/paged_decode_attention', numHeads, headSize, scale, numKvHeads, slidingWindow);
  }

  forward(query: Tensor, key: Tensor, value: Tensor): Tensor {
    const fc = getForwardContext();
    const md = fc.attnMetadata;
    const { kCache, vCache } = layerKvCache(fc, this.layerIdx);
    const [nq, nk, D] = [this.numHeads, this.numKvHeads, this.headSize];
    const T = query.shape[0]!;
    const [Tp, Td] = [md.numPrefillTokens, md.numDecodes];
    if (T !== Tp + Td) throw new RangeError(`Attention: ${T} tokens, the forward context describes ${Tp} prefill + ${Td} decode tokens`);
    const owned: Tensor[] = [];
    const keep = (t: Tensor) => (owned.push(t), t);
    const [q, k, v] = [keep(query.view(T, nq, D)), keep(key.view(T, nk, D)), keep(value.view(T, nk, D))];
    this.kvStore.forward(k, v, kCache, vCache, md.slotMapping);
    const sink: Tensor[] = this.sinks ? [this.sinks] : [];
    try {
      const out = keep(Tensor.empty(this.ctx.backend, [T, nq, D], query.dtype, { device: this.ctx.device }));
      if (Tp > 0) {
        // chunked prefill: the chunk's keys are its cached context plus itself, gathered from the cache written above
        const gather = (cache: Tensor) => {
          const table = keep(cache.view(cache.shape[0]! * cache.shape[1]!, nk * D));
          const rows = keep(this.ctx.backend.ops.embedding(md.prefillKvSlots!, table));
          return keep(rows.view(rows.shape[0]!, nk, D));
        };
        const [kp, vp] = md.prefillKvSlots ? [gather(kCache), gather(vCache)] : [keep(k.narrow(0, 0, Tp)), keep(v.narrow(0, 0, Tp))];
        const o = keep(this.attnPrefill.forward(keep(q.narrow(0, 0, Tp)), kp, vp, md.cuSeqlensQ!, md.cuSeqlensK!, ...sink));
        keep(out.narrow(0, 0, Tp)).copy_(o);
      }
      if (Td > 0) {
        const o = keep(this.attnDecode.forward(keep(q.narrow(0, Tp, Td)), kCache, vCache, md.blockTables!, md.seqLens!, ...sink));
        keep(out.narrow(0, Tp, Td)).copy_(o);
      }
      return out.view(T, nq * D);
    } finally {
      for (const t of owned) t.dispose();
    }
  }
}

interface ImplInit {
  readonly nq: number;
  readonly D: number;
  readonly scale: number;
  readonly nk: number;
  readonly window: number;
  readonly layer: number;
}
const implInit = (c: Pick<TaskCase, 'init'>): ImplInit => {
  const [nq, D, scale, nk, window, layer] = c.init as [number, number, number, number?, number?, number?];
  return { nq, D, scale, nk: nk ?? nq, window: window ?? 0, layer: layer ?? 0 };
};

/**
 * Float64 attention of one step from its dense description: each sequence's keys are its cached context (the step's
 * recorded prefix for this layer) then its new tokens' keys; query i at position ctx + i sees keys j <= ctx + i within
 * the window; a head's sink adds exp(sink) to the denominator.
 */
export function attentionImplReference(q: HostArray, k: HostArray, v: HostArray, seqs: readonly DenseSeq[], a: ImplInit, sinks: HostArray | null): HostArray {
  const { nq, nk, D, scale, window, layer } = a;
  const T = q.shape[0]!;
  const out = hostArray([T, nq * D]);
  const g = nq / nk;
  for (const s of seqs) {
    const L = s.ctx + s.n;
    const keyAt = (src: 'k' | 'v', j: number, h: number, d: number) =>
      j < s.ctx ? (src === 'k' ? s.prefixK : s.prefixV)[layer]![(j * nk + h) * D + d]! : (src === 'k' ? k : v).data[((s.start + j - s.ctx) * nk + h) * D + d]!;
    for (let i = 0; i < s.n; i++) {
      const pos = s.ctx + i;
      const lo = window > 0 ? Math.max(0, pos - window + 1) : 0;
      for (let h = 0; h < nq; h++) {
        const kh = Math.floor(h / g);
        const scores: number[] = [];
        for (let j = lo; j <= pos && j < L; j++) {
          let dot = 0;
          for (let d = 0; d < D; d++) dot += q.data[(s.start + i) * nq * D + h * D + d]! * keyAt('k', j, kh, d);
          scores.push(dot * scale);
        }
        const sink = sinks ? sinks.data[h]! : -Infinity;
        const max = Math.max(sink, ...scores);
        const p = scores.map((x) => Math.exp(x - max));
        const denom = p.reduce((acc, x) => acc + x, Math.exp(sink - max));
        for (let d = 0; d < D; d++) {
          let acc = 0;
          p.forEach((w, jj) => (acc += w * keyAt('v', lo + jj, kh, d)));
          out.data[(s.start + i) * nq * D + h * D + d] = acc / denom;
        }
      }
    }
  }
  return out;
}

/** A step of prefills (prompt lengths) then decodes (cached context lengths); init is (numHeads, headSize, scale, numKvHeads, window, layerIdx, sinks). */
function implCase(name: string, dtype: 'f32' | 'bf16', init: unknown[], prefillLens: number[], decodeCtxLens: number[]) {
  const a = implInit({ init });
  const T = prefillLens.reduce((x, y) => x + y, 0) + decodeCtxLens.length;
  return { name, dtype, dims: { T, QD: a.nq * a.D, KVD: a.nk * a.D }, init, options: { prefillLens, decodeCtxLens } };
}
const decodes = (B: number, ctxLen: number) => Array.from({ length: B }, (_, i) => ctxLen - ((i * 37) % Math.max(1, ctxLen >> 1)));
const LLAMA3 = [32, 128, 1 / Math.sqrt(128), 8];
const QWEN3_MOE = [32, 128, 1 / Math.sqrt(128), 4];
const GPT_OSS = (window: number) => [64, 64, 1 / 8, 8, window, 0, true];

export const attentionImplTask = defineTask(
  {
    id: 'L2/attention_impl',
    level: 2,
    className: 'Attention',
    family: [FAMILY],
    architectures: [
      'bitnet', 'cosyvoice3', 'gemma4', 'gpt_oss', 'hunyuan_video', 'jamba', 'llama', 'llama_eagle3', 'mixtral', 'qwen2_5_omni',
      'qwen2_vl', 'qwen3_vl', 'whisper',
    ],
    mirrors: 'vllm.attention.layer.Attention',
    description:
      "vLLM's Attention layer: q / k / v of a mixed step in, the forward context's metadata and paged KV cache: cache write, varlen prefill (chunked: context gathered), paged decode; GQA, sliding window, sinks.",
    init: [
      { name: 'numHeads', type: 'int' },
      { name: 'headSize', type: 'int' },
      { name: 'scale', type: 'float' },
      { name: 'numKvHeads', type: 'int', optional: true, doc: 'default numHeads' },
      { name: 'slidingWindow', type: 'int', optional: true, default: 0, doc: 'per_layer_sliding_window; 0 = full attention' },
      { name: 'layerIdx', type: 'int', optional: true, default: 0, doc: 'which KV cache of the forward context (vLLM: the prefix)' },
      { name: 'hasSinks', type: 'bool', optional: true, default: false, doc: "gpt-oss's sinks parameter [numHeads] f32" },
    ],
    inputs: [
      { name: 'query', dtype: 'act', shape: ['T', 'QD'], doc: 'prefill tokens first, then one token per decoding sequence (forward context)' },
      { name: 'key', dtype: 'act', shape: ['T', 'KVD'] },
      { name: 'value', dtype: 'act', shape: ['T', 'KVD'] },
    ],
    outputs: [{ name: 'out', dtype: 'act', shape: ['T', 'QD'] }],
    tolerance: { bf16: { atol: 2e-2, rtol: 2e-2 } },
    imports: ['L1/store_kvcache', 'L1/varlen_prefill_attention', 'L1/paged_decode_attention'],
    cases: {
      ci: [
        implCase('mixed-gqa-f32', 'f32', [4, 16, 0.25, 2], [5, 3], [20, 6]),
        implCase('decode-only-window8-layer1-f32', 'f32', [4, 16, 0.25, 1, 8, 1], [], [30, 2, 17]),
        implCase('prefill-sinks-bf16', 'bf16', [4, 32, 1 / Math.sqrt(32), 2, 0, 0, true], [9, 4], []),
        implCase('mixed-sinks-window8-f32', 'f32', [4, 16, 0.25, 2, 8, 0, true], [12], [19, 7]),
      ],
      production: [
        implCase('llama3-8b-decode-b32', 'bf16', LLAMA3, [], decodes(32, 2048)),
        implCase('llama3-8b-prefill-4096', 'bf16', LLAMA3, [4096], []),
        implCase('llama3-8b-mixed-512+b16', 'bf16', LLAMA3, [512], decodes(16, 1024)),
        implCase('qwen3-30b-a3b-decode-b64', 'bf16', QWEN3_MOE, [], decodes(64, 2048)),
        implCase('gpt-oss-decode-b32-sliding128', 'bf16', GPT_OSS(128), [], decodes(32, 4096)),
        implCase('gpt-oss-mixed-512+b16-full', 'bf16', GPT_OSS(0), [512], decodes(16, 2048)),
      ],
    },
  },
  {
    baseline: Attention,
    makeInputs: (c, ctx, rng) => {
      const a = implInit(c);
      const step = buildTaskStep(c, ctx, rng, { numLayers: a.layer + 1, numKvHeads: a.nk, headDim: a.D, lastLayerOnly: true });
      const T = step.positions.length;
      return [randn(ctx, rng, [T, a.nq * a.D], c.dtype), randn(ctx, rng, [T, a.nk * a.D], c.dtype), randn(ctx, rng, [T, a.nk * a.D], c.dtype)];
    },
    // the sinks (the only parameter) ~ N(0, 1): logits of the scores' size
    initParameters: (m, _c, rng) => initNormal(m, rng, 1),
    reference: ([q, k, v], params, c) => [attentionImplReference(q!, k!, v!, taskStepFor(c).seqs, implInit(c), params.get('sinks') ?? null)],
    work: (c) => {
      const a = implInit(c);
      const spec = stepSpec(c);
      const T = stepTokens(spec);
      const it = DTYPE_INFO[c.dtype].itemsize;
      return {
        // q / k / v in, out, the cache write, the cached keys / values the decodes read
        bytes: 2 * bytesOf([T, a.nq * a.D], it) + 4 * bytesOf([T, a.nk * a.D], it) + 2 * stepCachedTokens(spec) * a.nk * a.D * it,
        flops: 4 * a.nq * a.D * stepAttentionPairs(spec, a.window),
      };
    },
  },
);
