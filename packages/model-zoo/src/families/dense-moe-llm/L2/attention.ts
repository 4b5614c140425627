import { DTYPE_INFO, Module, Tensor, currentTensorParallelGroup, defineTask, hostArray, qkvLayout, type Rng, type TaskCase } from '@fastkernels/core';
import { runsOwnForward } from '../../../common/fusion.js';
import { bytesOf, fromInts, randn } from '../../../common/inputs.js';
import { getForwardContext, layerKvCache } from '../../../engine/forward-context.js';
import { LLAMA3_8B, type LlamaRopeScaling } from '../config.js';
import { FAMILY } from '../family.js';
import type { FlashAttnDecode } from '../../../tasks/L1/attention/paged_decode_attention.js';
import type { RMSNorm } from '../../../tasks/L1/norm/rms_norm.js';
import { LLAMA31_ROPE_SCALING, RotaryEmbedding, computeInvFreqF32 } from '../../../tasks/L1/rotary/rotary_emb.js';
import { GPT_OSS_YARN_SCALING, yarnRotaryArgs } from '../../../tasks/L1/rotary/yarn_rotary_emb.js';
import { StoreKVCache } from '../../../tasks/L1/kvcache/store_kvcache.js';
import type { FlashAttnVarlen } from '../../../tasks/L1/attention/varlen_prefill_attention.js';
import { normedProject, project, type Projection } from '../projection.js';
import { denseAttentionLayer, type AttnGeometry } from '../reference.js';
import { buildTaskStep, stepAttentionPairs, stepCachedTokens, stepSpec, stepTokens, taskStepFor } from '../task-batch.js';
import { decodeCtx } from '../../../common/decoder-layer.js';

/** q [T, nq * D], k [T, nk * D] and v [T, nk, D] of this rank's heads, as LlamaAttention reads them (prepareQkv). */
export interface QkvParts {
  readonly q: Tensor;
  readonly k: Tensor;
  readonly v: Tensor;
}

/**
 * vLLM's LlamaAttention (vllm/model_executor/models/llama.py) at tp_size 1: a merged QKV projection
 * (QKVParallelLinear: rows q | k | v), rotary embedding of q and k, the paged KV-cache write, attention
 * (varlen prefill for the prefill tokens, paged decode for the decode tokens, as vLLM's FLASH_ATTN backend
 * splits a mixed batch), then o_proj. The step's metadata and this layer's cache come from the forward
 * context (getForwardContext), so forward keeps vLLM's signature (positions, hiddenStates).
 *
 * Constructor: vLLM's (hidden_size, num_heads, num_kv_heads, rope_theta, rope_scaling,
 * max_position_embeddings, bias, bias_o_proj) in order, then head_dim (vLLM reads it from the config;
 * 0 = hiddenSize / numHeads), the layer's sliding window (vLLM: per_layer_sliding_window; 0 = none) and
 * the layer index (vLLM derives it from `prefix`) that selects this layer's KV cache.
 * ropeScaling: llama3 goes to L1/rotary_emb as is; linear (LinearScalingRotaryEmbedding) builds the cache over
 * maxPositionEmbeddings * factor positions and rewrites it with positions divided by factor (L1/rotary_emb has
 * no linear mode of its own); yarn (gpt-oss) builds L1/yarn_rotary_emb, whose cache carries YaRN's magnitude.
 * sinks (gpt-oss's GptOssAttention, vLLM's `sinks` parameter of the Attention layer): a learned logit per query head,
 * the parameter `sinks` [numHeads] (float32, as the kernels take it), passed to both attention kernels, where it joins
 * every softmax denominator.
 *
 * Tensor parallelism (a TensorParallelGroup of world W > 1 current at construction, vLLM's tp_size): qkv_proj is
 * L2/qkv_parallel_linear (this rank's numHeads / W query heads and max(1, numKvHeads / W) kv heads), attention runs
 * over those heads (the forward context's cache holds this rank's kv heads), and o_proj is L2/row_parallel_linear,
 * whose all-reduce leaves the full output on every rank. At W = 1 both projections are L1/linear, as before.
 */
export class LlamaAttention extends Module {
  readonly headDim: number;
  /** This rank's query heads, kv heads and their widths (the totals at world 1). */
  readonly numLocalHeads: number;
  readonly numLocalKvHeads: number;
  readonly qSize: number;
  readonly kvSize: number;
  readonly scaling: number;
  private readonly qkvProj: Projection;
  private readonly oProj: Projection;
  private readonly rotaryEmb: RotaryEmbedding;
  private readonly kvStore: StoreKVCache;
  private readonly attnPrefill: FlashAttnVarlen;
  private readonly attnDecode: FlashAttnDecode;
  /** gpt-oss's per-head sink logits [numLocalHeads] (null without sinks). */
  readonly sinks: Tensor | null;

  constructor(
    readonly hiddenSize: number,
    readonly numHeads: number,
    readonly numKvHeads: number,
    readonly ropeTheta = 10000,
    readonly ropeScaling: LlamaRopeScaling | null = null,
    readonly maxPositionEmbeddings = 8192,
    readonly bias = false,
    readonly biasOProj = false,
    headDim = 0,
    readonly slidingWindow = 0,
    readonly layerIdx = 0,
    readonly hasSinks = false,
  ) {
    super();
    if (numHeads % numKvHeads !== 0) throw new RangeError(`LlamaAttention: numHeads ${numHeads} is not a multiple of numKvHeads ${numKvHeads}`);
    this.headDim = headDim || hiddenSize / numHeads;
    if (!Number.isInteger(this.headDim)) throw new RangeError(`LlamaAttention: hiddenSize ${hiddenSize} is not a multiple of numHeads ${numHeads}`);
    const D = this.headDim;
    const world = currentTensorParallelGroup().world;
    const layout = qkvLayout(D, numHeads, numKvHeads, world);
    this.numLocalHeads = layout.numHeads;
    this.numLocalKvHeads = layout.numKvHeads;
    this.qSize = this.numLocalHeads * D;
    this.kvSize = this.numLocalKvHeads * D;
    this.scaling = 1 / Math.sqrt(D);
    if (world === 1) {
      this.qkvProj = this.createModule('qkv_proj', 'L1/linear', hiddenSize, this.qSize + 2 * this.kvSize, bias);
      this.oProj = this.createModule('o_proj', 'L1/linear', this.qSize, hiddenSize, biasOProj);
    } else {
      this.qkvProj = this.createModule('qkv_proj', 'L2/qkv_parallel_linear', hiddenSize, D, numHeads, numKvHeads, bias);
      this.oProj = this.createModule('o_proj', 'L2/row_parallel_linear', numHeads * D, hiddenSize, biasOProj);
    }
    const linear = ropeScaling?.ropeType === 'linear' ? ropeScaling.factor : 0;
    const cachePositions = linear ? Math.ceil(maxPositionEmbeddings * linear) : maxPositionEmbeddings;
    this.rotaryEmb =
      ropeScaling?.ropeType === 'yarn'
        ? this.createModule('rotary_emb', 'L1/yarn_rotary_emb', ...yarnRotaryArgs(D, ropeTheta, ropeScaling, this.ctx.dtype))
        : this.createModule('rotary_emb', 'L1/rotary_emb', D, D, cachePositions, ropeTheta, true, this.ctx.dtype, ropeScaling?.ropeType === 'llama3' ? ropeScaling : null);
    if (linear) this.applyLinearScaling(cachePositions, linear);
    this.sinks = hasSinks ? this.parameter('sinks', [this.numLocalHeads], 'f32') : null;
    this.kvStore = this.createModule('kv_store', 'L1/store_kvcache');
    const [nq, nk] = [this.numLocalHeads, this.numLocalKvHeads];
    this.attnPrefill = this.createModule('attn_prefill', 'L1/varlen_prefill_attention', nq, D, this.scaling, nk, true, slidingWindow);
    this.attnDecode = this.createModule('attn_decode', 'L1/paged_decode_attention', nq, D, this.scaling, nk, slidingWindow);
  }

  /** vLLM's LinearScalingRotaryEmbedding cache: t = arange(maxPos * factor) / factor, freqs = t * inv_freq (float32). */
  private applyLinearScaling(positions: number, factor: number): void {
    const D = this.headDim;
    const inv = computeInvFreqF32(D, this.ropeTheta, null);
    const half = D / 2;
    const cache = new Float32Array(positions * D);
    for (let t = 0; t < positions; t++) {
      const pos = Math.fround(t / factor);
      for (let i = 0; i < half; i++) {
        const f = Math.fround(pos * inv[i]!);
        cache[t * D + i] = Math.cos(f);
        cache[t * D + half + i] = Math.sin(f);
      }
    }
    const param = this.rotaryEmb.namedParameters().find(([k]) => k === 'cos_sin_cache')?.[1];
    if (!param) throw new Error('LlamaAttention: linear rope scaling needs the rotary module\'s cos_sin_cache parameter');
    const src = Tensor.fromArray(this.ctx.backend, cache, [positions, D], 'f32', { device: this.ctx.device });
    param.copy_(src);
    src.dispose();
  }

  /**
   * rotary_emb then kv_store as one backend op (Ops.rotaryStoreKvcache: one CUDA launch instead of two), when the
   * backend has it and both children are the baseline modules, whose forward is exactly that op pair. A candidate
   * kernel or an instrumented module (the capture and blame tools override forward) must see its own calls, so then,
   * or when the backend declines (null), forward runs the two modules.
   */
  private rotaryStoreFused(positions: Tensor, qIn: Tensor, kIn: Tensor, v: Tensor, kCache: Tensor, vCache: Tensor, slotMapping: Tensor): [Tensor, Tensor] | null {
    const ops = this.ctx.backend.ops;
    const rotary = this.rotaryEmb;
    if (!ops.rotaryStoreKvcache || !runsOwnForward(rotary, RotaryEmbedding) || !runsOwnForward(this.kvStore, StoreKVCache)) return null;
    return ops.rotaryStoreKvcache(positions, qIn, kIn, v, rotary.cosSinCache, rotary.headSize, rotary.isNeoxStyle, kCache, vCache, slotMapping);
  }

  forward(positions: Tensor, hiddenStates: Tensor): Tensor {
    const qkv = project(this.qkvProj, hiddenStates); // [T, q | k | v] (this rank's heads)
    try {
      return this.forwardFromQkv(positions, qkv);
    } finally {
      qkv.dispose();
    }
  }

  /**
   * The decoder layer's input_layernorm (`norm`, adding `residual` first when given) and this layer's qkv_proj as one
   * backend op (normedProject: at bs-1 decode on CUDA, rms_norm inside the qkv GEMV), then the rest of forward; null
   * where normedProject is (then nothing was computed: the caller runs the norm and forward). Returns [output, the new residual (null without one)].
   */
  forwardNormed(positions: Tensor, hiddenStates: Tensor, residual: Tensor | null, norm: RMSNorm): [Tensor, Tensor | null] | null {
    const fused = normedProject(this.ctx.backend.ops, norm, this.qkvProj, hiddenStates, residual, null);
    if (!fused) return null;
    const [qkv, res] = fused;
    try {
      return [this.forwardFromQkv(positions, qkv), res];
    } catch (e) {
      res?.dispose();
      throw e;
    } finally {
      qkv.dispose();
    }
  }

  /**
   * q, k and v of the qkv projection [T, q | k | v] as the attention reads them: views of the projection here; a subclass
   * normalises the heads there (Qwen3's q_norm / k_norm). The parts are disposed after the call.
   */
  protected prepareQkv(qkv: Tensor): QkvParts {
    const T = qkv.shape[0]!;
    const v = qkv.narrow(1, this.qSize + this.kvSize, this.kvSize);
    try {
      return { q: qkv.narrow(1, 0, this.qSize), k: qkv.narrow(1, this.qSize, this.kvSize), v: v.view(T, this.numLocalKvHeads, this.headDim) };
    } finally {
      v.dispose();
    }
  }

  /** forward from the qkv projection [T, q | k | v] (this rank's heads; the caller keeps and disposes it). */
  private forwardFromQkv(positions: Tensor, projected: Tensor): Tensor {
    const parts = this.prepareQkv(projected);
    try {
      return this.attendQkv(positions, parts);
    } finally {
      for (const t of [parts.q, parts.k, parts.v]) t.dispose();
    }
  }

  private attendQkv(positions: Tensor, { q: qIn, k: kIn, v }: QkvParts): Tensor {
    const fc = getForwardContext();
    const md = fc.attnMetadata;
    const { kCache, vCache } = layerKvCache(fc, this.layerIdx);
    const T = qIn.shape[0]!;
    const Tp = md.numPrefillTokens;
    const Td = md.numDecodes;
    if (T !== Tp + Td) throw new RangeError(`LlamaAttention: ${T} tokens, the forward context describes ${Tp} prefill + ${Td} decode tokens`);
    const nq = this.numLocalHeads;
    const nk = this.numLocalKvHeads;
    const D = this.headDim;

    const fused = this.rotaryStoreFused(positions, qIn, kIn, v, kCache, vCache, md.slotMapping);
    const [q, kRot] = fused ?? this.rotaryEmb.forward(positions, qIn, kIn);
    const k = kRot!.view(T, nk, D);
    if (!fused) this.kvStore.forward(k, v, kCache, vCache, md.slotMapping);

    const q3 = q.view(T, nq, D);
    // Chunked prefill: the keys of a chunk are the cached context + the chunk, gathered from the cache (written above).
    let kP = k;
    let vP = v;
    const gathered: Tensor[] = [];
    if (Tp > 0 && md.prefillKvSlots) {
      const slots = kCache.shape[0]! * kCache.shape[1]!;
      const rows = (c: Tensor) => {
        const table = c.view(slots, nk * D);
        const g = this.ctx.backend.ops.embedding(md.prefillKvSlots!, table);
        const g3 = g.view(g.shape[0]!, nk, D);
        gathered.push(table, g, g3);
        return g3;
      };
      kP = rows(kCache);
      vP = rows(vCache);
    }
    const prefillKv = (t: Tensor, full: Tensor) => (full === t ? t.narrow(0, 0, Tp) : full);
    // sinks go to the kernels only when the layer has them (a candidate written for the sink-less call sees its arity)
    const sink: Tensor[] = this.sinks ? [this.sinks] : [];
    let attn: Tensor;
    if (Td === 0) {
      attn = this.attnPrefill.forward(q3, kP, vP, md.cuSeqlensQ!, md.cuSeqlensK!, ...sink);
    } else if (Tp === 0) {
      attn = this.attnDecode.forward(q3, kCache, vCache, md.blockTables!, md.seqLens!, ...sink);
    } else {
      attn = Tensor.empty(this.ctx.backend, [T, nq, D], qIn.dtype, { device: this.ctx.device });
      const parts: [number, number, () => Tensor][] = [
        [0, Tp, () => {
          const kk = prefillKv(k, kP);
          const vv = prefillKv(v, vP);
          const qq = q3.narrow(0, 0, Tp);
          const o = this.attnPrefill.forward(qq, kk, vv, md.cuSeqlensQ!, md.cuSeqlensK!, ...sink);
          for (const t of [qq, kk, vv]) if (t !== kP && t !== vP) t.dispose();
          return o;
        }],
        [Tp, Td, () => {
          const qd = q3.narrow(0, Tp, Td);
          const o = this.attnDecode.forward(qd, kCache, vCache, md.blockTables!, md.seqLens!, ...sink);
          qd.dispose();
          return o;
        }],
      ];
      for (const [start, len, run] of parts) {
        const o = run();
        const dst = attn.narrow(0, start, len);
        dst.copy_(o);
        dst.dispose();
        o.dispose();
      }
    }
    const flat = attn.view(T, nq * D);
    const out = project(this.oProj, flat);
    for (const t of [q, kRot!, k, q3, attn, flat, ...gathered]) t.dispose();
    return out;
  }
}

/** Init args of a case: [hidden, nq, nk, theta, scaling, maxPos, bias, biasO, headDim, window, layerIdx, sinks]. */
interface AttnInit {
  hidden: number;
  nq: number;
  nk: number;
  D: number;
  theta: number;
  scaling: LlamaRopeScaling | null;
  maxPos: number;
  bias: boolean;
  biasO: boolean;
  window: number;
}

/** The case's layerIdx (init[10]): a layer reads the cache at its index, so the step holds one per layer up to it. */
const attnLayer = (c: Pick<TaskCase, 'init'>) => (c.init[10] as number | undefined) ?? 0;

function attnInit(c: Pick<TaskCase, 'init'>): AttnInit {
  const [hidden, nq, nk, theta = 10000, scaling = null, maxPos = 8192, bias = false, biasO = false, headDim = 0, window = 0] = c.init as [number, number, number, number?, LlamaRopeScaling?, number?, boolean?, boolean?, number?, number?];
  return { hidden, nq, nk, D: headDim || hidden / nq, theta, scaling: scaling ?? null, maxPos, bias, biasO, window };
}

export function attnGeometryOf(a: AttnInit): AttnGeometry {
  return { hiddenSize: a.hidden, numHeads: a.nq, numKvHeads: a.nk, headDim: a.D, ropeTheta: a.theta, ropeScaling: a.scaling, slidingWindow: a.window };
}

/** Weights ~ N(0, 1/K) so activations stay O(1); biases ~ N(0, 0.25). The rotary cache is kept as built. */
export function initProjections(m: Module, rng: Rng): void {
  for (const [name, p] of m.namedParameters()) {
    if (name.endsWith('cos_sin_cache')) continue;
    const isWeight = name.endsWith('weight') && p.shape.length === 2;
    const isNorm = name.endsWith('layernorm.weight') || name.endsWith('norm.weight');
    let v: Float64Array;
    if (isWeight) v = rng.fillNormal(p.numel, 1 / Math.sqrt(p.shape[1]!));
    else if (isNorm) v = rng.fillNormal(p.numel, 0.1).map((x) => x + 1);
    else v = rng.fillNormal(p.numel, 0.5);
    const t = Tensor.fromArray(p.backend, v, p.shape, p.dtype, { device: p.device });
    p.copy_(t);
    t.dispose();
  }
}

function attnCase(name: string, dtype: 'f32' | 'bf16', init: unknown[], prefillLens: number[], decodeCtxLens: number[]) {
  const T = prefillLens.reduce((a, b) => a + b, 0) + decodeCtxLens.length;
  return { name, dtype, dims: { T, H: init[0] as number }, init, options: { prefillLens, decodeCtxLens } };
}

const L8 = LLAMA3_8B;
const llama8bInit = [L8.hiddenSize, L8.numAttentionHeads, L8.numKeyValueHeads, L8.ropeTheta, null, L8.maxPositionEmbeddings, false, false, L8.headDim, 0, 0];
/** gpt-oss-20b / -120b attention (64 heads of 64 over 8 kv heads on hidden 2880, biases, YaRN, sinks) at a window and layer. */
const gptOssInit = (window: number, layer: number) => [2880, 64, 8, 150000, GPT_OSS_YARN_SCALING, 131072, true, true, 64, window, layer, true];
/** A small YaRN (factor 4 over 64 original positions: 256 cached) for CI cases. */
const TINY_YARN = { ...GPT_OSS_YARN_SCALING, factor: 4, originalMaxPositionEmbeddings: 64 };
/** B decode contexts spread evenly up to S. */
export const attentionTask = defineTask(
  {
    id: 'L2/attention',
    level: 2,
    className: 'LlamaAttention',
    family: [FAMILY],
    architectures: ['llama', 'qwen2', 'mistral', 'gpt_oss'],
    mirrors: 'vllm.model_executor.models.llama.LlamaAttention',
    description:
      'Llama self-attention over a paged KV cache: merged QKV projection (+bias for qwen2 / gpt-oss), neox RoPE (llama3/linear/YaRN scaling), cache write, varlen prefill and paged decode attention (GQA, sliding window, gpt-oss sinks) in one mixed batch, o_proj. Step metadata and the cache come from the forward context.',
    init: [
      { name: 'hiddenSize', type: 'int' },
      { name: 'numHeads', type: 'int' },
      { name: 'numKvHeads', type: 'int' },
      { name: 'ropeTheta', type: 'float', optional: true, default: 10000 },
      { name: 'ropeScaling', type: 'object', optional: true, default: null, doc: "{ropeType: 'llama3', factor, lowFreqFactor, highFreqFactor, originalMaxPositionEmbeddings} | {ropeType: 'linear', factor}" },
      { name: 'maxPositionEmbeddings', type: 'int', optional: true, default: 8192 },
      { name: 'bias', type: 'bool', optional: true, default: false, doc: 'bias on q/k/v (qwen2)' },
      { name: 'biasOProj', type: 'bool', optional: true, default: false },
      { name: 'headDim', type: 'int', optional: true, default: 0, doc: '0 = hiddenSize / numHeads' },
      { name: 'slidingWindow', type: 'int', optional: true, default: 0, doc: '0 = full attention' },
      { name: 'layerIdx', type: 'int', optional: true, default: 0, doc: 'which KV cache of the forward context' },
      { name: 'sinks', type: 'bool', optional: true, default: false, doc: "gpt-oss's learned per-head attention sinks (parameter `sinks` [numHeads])" },
    ],
    inputs: [
      { name: 'positions', dtype: 'i64', shape: ['T'] },
      { name: 'hiddenStates', dtype: 'act', shape: ['T', 'H'], doc: 'prefill tokens first, then one token per decoding sequence (forward context)' },
    ],
    outputs: [{ name: 'out', dtype: 'act', shape: ['T', 'H'] }],
    tolerance: { bf16: { atol: 2e-2, rtol: 2e-2 } },
    imports: ['L1/linear', 'L1/rotary_emb', 'L1/yarn_rotary_emb', 'L1/store_kvcache', 'L1/varlen_prefill_attention', 'L1/paged_decode_attention'],
    cases: {
      ci: [
        attnCase('mixed-gqa-f32', 'f32', [64, 4, 2, 10000, null, 256], [5, 3], [20, 6]),
        attnCase('mixed-qwen2-bias-bf16', 'bf16', [64, 4, 2, 1000000, null, 256, true, false], [7], [17, 1, 33]),
        attnCase('mistral-window8-f32', 'f32', [64, 4, 2, 10000, null, 256, false, false, 0, 8], [12, 4], [20, 9]),
        attnCase('llama3-scaled-head32-decode-f32', 'f32', [64, 4, 1, 500000, LLAMA31_ROPE_SCALING, 2048, true, true, 32], [], [40, 3, 16]),
        attnCase('linear-scaled-prefill-f32', 'f32', [64, 4, 2, 10000, { ropeType: 'linear', factor: 2 }, 128], [9, 2], []),
        // a captured layer past the first (`fastkernels capture` records each layer's own layerIdx)
        attnCase('mixed-gqa-layer2-f32', 'f32', [64, 4, 2, 10000, null, 256, false, false, 0, 0, 2], [6], [11, 4]),
        // gpt-oss: q/k/v/o biases, YaRN, sinks, a head width apart from hidden / heads, sliding and full layers
        attnCase('gpt-oss-sinks-yarn-window8-f32', 'f32', [64, 4, 2, 10000, TINY_YARN, 256, true, true, 24, 8, 0, true], [12, 3], [19, 7]),
        attnCase('gpt-oss-sinks-yarn-full-layer1-f32', 'f32', [64, 4, 2, 10000, TINY_YARN, 256, true, true, 24, 0, 1, true], [9], [30, 2]),
        attnCase('gpt-oss-sinks-yarn-bf16', 'bf16', [64, 4, 1, 10000, TINY_YARN, 256, true, true, 16, 8, 0, true], [7], [13, 1]),
      ],
      production: [
        attnCase('llama3-8b-decode-b32', 'bf16', llama8bInit, [], decodeCtx(32, 2048)),
        attnCase('llama3-8b-prefill-4096', 'bf16', llama8bInit, [4096], []),
        attnCase('llama3-8b-mixed-512+b16', 'bf16', llama8bInit, [512], decodeCtx(16, 1024)),
        attnCase('llama3.1-8b-decode-b32', 'bf16', [...llama8bInit.slice(0, 4), LLAMA31_ROPE_SCALING, 131072, ...llama8bInit.slice(6)], [], decodeCtx(32, 4096)),
        attnCase('gpt-oss-decode-b32-sliding128', 'bf16', gptOssInit(128, 0), [], decodeCtx(32, 4096)),
        attnCase('gpt-oss-prefill-4096-full', 'bf16', gptOssInit(0, 1), [4096], []),
        attnCase('gpt-oss-mixed-512+b16-sliding128', 'bf16', gptOssInit(128, 0), [512], decodeCtx(16, 2048)),
      ],
    },
  },
  {
    baseline: LlamaAttention,
    makeInputs: (c, ctx, rng) => {
      const a = attnInit(c);
      const step = buildTaskStep(c, ctx, rng, { numLayers: attnLayer(c) + 1, numKvHeads: a.nk, headDim: a.D, lastLayerOnly: true });
      return [fromInts(ctx, step.positions, [step.positions.length], 'i64'), randn(ctx, rng, [step.positions.length, a.hidden], c.dtype)];
    },
    initParameters: (m, _c, rng) => initProjections(m, rng),
    reference: ([positions, hidden], params, c) => {
      const step = taskStepFor(c);
      const a = attnInit(c);
      const out = denseAttentionLayer(hidden!.data, positions!.data, params, '', attnGeometryOf(a), step.seqs, attnLayer(c));
      return [hostArray(hidden!.shape, out)];
    },
    work: (c) => attentionWork(c),
  },
);

/** Bytes and FLOPs of one LlamaAttention call for a case. */
export function attentionWork(c: TaskCase): { bytes: number; flops: number } {
  const a = attnInit(c);
  const spec = stepSpec(c);
  const T = stepTokens(spec);
  const it = DTYPE_INFO[c.dtype].itemsize;
  const qkvN = (a.nq + 2 * a.nk) * a.D;
  const weights = bytesOf([qkvN, a.hidden], it) + bytesOf([a.hidden, a.nq * a.D], it);
  const pairs = stepAttentionPairs(spec, a.window);
  const cached = stepCachedTokens(spec);
  return {
    // weights, hidden in/out, qkv out and back, the cache write, cached keys/values read by decodes
    bytes: weights + 2 * bytesOf([T, a.hidden], it) + 2 * bytesOf([T, qkvN], it) + 2 * bytesOf([T, a.nk * a.D], it) + 2 * cached * a.nk * a.D * it,
    flops: 2 * T * a.hidden * qkvN + 2 * T * a.nq * a.D * a.hidden + 4 * a.nq * a.D * pairs + 3 * T * (a.nq + a.nk) * a.D,
  };
}
