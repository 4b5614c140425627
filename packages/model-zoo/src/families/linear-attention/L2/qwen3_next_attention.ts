import { DTYPE_INFO, F, Module, Tensor, defineTask, hostArray, type TaskCase } from '@fastkernels/core';
import { bytesOf, fromInts, randn } from '../../../common/inputs.js';
import { getForwardContext, layerKvCache } from '../../../engine/forward-context.js';
import type { FlashAttnDecode } from '../../../tasks/L1/attention/paged_decode_attention.js';
import type { FlashAttnVarlen } from '../../../tasks/L1/attention/varlen_prefill_attention.js';
import type { StoreKVCache } from '../../../tasks/L1/kvcache/store_kvcache.js';
import type { Linear } from '../../../tasks/L1/linear/linear.js';
import type { GemmaRMSNorm } from '../../../tasks/L1/norm/gemma_rms_norm.js';
import type { RotaryEmbedding } from '../../../tasks/L1/rotary/rotary_emb.js';
import { buildTaskStep, stepAttentionPairs, stepSpec, stepTokens, taskStepFor } from '../../dense-moe-llm/task-batch.js';
import { FAMILY } from '../family.js';
import { initQwen3NextParameters, qnConfigOf, qnLayerOf } from '../qwen3-next-cases.js';
import { QWEN3_NEXT_80B, tinyQwen3NextConfig, type Qwen3NextConfig } from '../qwen3-next-config.js';
import { refGatedAttention } from '../qwen3-next-reference.js';
import { decodeCtx } from '../../../common/decoder-layer.js';

/**
 * HF's Qwen3NextAttention (vLLM's Qwen3NextAttention) with the checkpoint's names: q_proj gives, per head, the query and
 * an output gate (head_dim each), k_proj / v_proj; zero-centred q_norm / k_norm over each head (L1/gemma_rms_norm),
 * partial rotary (the first head_dim * partial_rotary_factor dims of each head, neox style; L1/rotary_emb), the paged KV
 * cache write and attention as LlamaAttention runs it (varlen prefill over the chunk and its cached context, paged
 * decode), the output times sigmoid(gate), o_proj. forward(positions [T], hiddenStates [T, D]) -> [T, D]; the step's
 * metadata and this layer's cache come from the forward context (vLLM's signature).
 */
export class Qwen3NextAttention extends Module {
  readonly qProj: Linear;
  readonly kProj: Linear;
  readonly vProj: Linear;
  readonly oProj: Linear;
  readonly qNorm: GemmaRMSNorm;
  readonly kNorm: GemmaRMSNorm;
  private readonly rotaryEmb: RotaryEmbedding;
  private readonly kvStore: StoreKVCache;
  private readonly attnPrefill: FlashAttnVarlen;
  private readonly attnDecode: FlashAttnDecode;
  constructor(
    readonly config: Qwen3NextConfig,
    readonly layerIdx = 0,
  ) {
    super();
    const { hiddenSize: D, numAttentionHeads: nq, numKeyValueHeads: nk, headDim: hd, rmsNormEps } = config;
    this.qProj = this.createModule('q_proj', 'L1/linear', D, nq * hd * 2, false);
    this.kProj = this.createModule('k_proj', 'L1/linear', D, nk * hd, false);
    this.vProj = this.createModule('v_proj', 'L1/linear', D, nk * hd, false);
    this.oProj = this.createModule('o_proj', 'L1/linear', nq * hd, D, false);
    this.qNorm = this.createModule('q_norm', 'L1/gemma_rms_norm', hd, rmsNormEps);
    this.kNorm = this.createModule('k_norm', 'L1/gemma_rms_norm', hd, rmsNormEps);
    this.rotaryEmb = this.createModule('rotary_emb', 'L1/rotary_emb', hd, config.rotaryDim, config.maxPositionEmbeddings, config.ropeTheta, true, this.ctx.dtype, null);
    this.kvStore = this.createModule('kv_store', 'L1/store_kvcache');
    const scale = 1 / Math.sqrt(hd);
    this.attnPrefill = this.createModule('attn_prefill', 'L1/varlen_prefill_attention', nq, hd, scale, nk, true, 0);
    this.attnDecode = this.createModule('attn_decode', 'L1/paged_decode_attention', nq, hd, scale, nk, 0);
  }

  forward(positions: Tensor, hiddenStates: Tensor): Tensor {
    const { numAttentionHeads: nq, numKeyValueHeads: nk, headDim: hd } = this.config;
    const fc = getForwardContext();
    const md = fc.attnMetadata;
    const { kCache, vCache } = layerKvCache(fc, this.layerIdx);
    const T = hiddenStates.shape[0]!;
    const [Tp, Td] = [md.numPrefillTokens, md.numDecodes];
    if (T !== Tp + Td) throw new RangeError(`Qwen3NextAttention: ${T} tokens, the forward context describes ${Tp} prefill + ${Td} decode tokens`);
    const temps: Tensor[] = [];
    const t = (x: Tensor) => (temps.push(x), x);
    try {
      // per head [query (hd) | gate (hd)]
      const qg = t(t(this.qProj.forward(hiddenStates)).view([T, nq, 2 * hd]));
      // the query heads are read in place by q_norm (rows 2 hd apart); the gate is copied once, to multiply [T, nq hd]
      const q = t(qg.narrow(2, 0, hd));
      const gate = t(t(t(qg.narrow(2, hd, hd)).contiguous()).view([T, nq * hd]));
      const heads = (x: Tensor, n: number, norm: GemmaRMSNorm) => t(t(norm.forward(t(x.view([T * n, hd]))) as Tensor).view([T, n * hd]));
      const qn = heads(q, nq, this.qNorm);
      const kn = heads(t(this.kProj.forward(hiddenStates)), nk, this.kNorm);
      const v = t(t(this.vProj.forward(hiddenStates)).view([T, nk, hd]));
      const [qr, kr] = this.rotaryEmb.forward(positions, qn, kn) as [Tensor, Tensor];
      t(qr);
      t(kr);
      const k = t(kr.view([T, nk, hd]));
      this.kvStore.forward(k, v, kCache, vCache, md.slotMapping);
      const q3 = t(qr.view([T, nq, hd]));
      const parts: Tensor[] = [];
      if (Tp) {
        // chunked prefill: the keys of a chunk are its cached context + the chunk, gathered from the cache (written above)
        let kP = Td ? t(k.narrow(0, 0, Tp)) : k;
        let vP = Td ? t(v.narrow(0, 0, Tp)) : v;
        if (md.prefillKvSlots) {
          const slots = kCache.shape[0]! * kCache.shape[1]!;
          const rows = (c: Tensor) => t(t(F.embedding(md.prefillKvSlots!, t(c.view([slots, nk * hd])))).view([md.prefillKvSlots!.shape[0]!, nk, hd]));
          kP = rows(kCache);
          vP = rows(vCache);
        }
        const qP = Td ? t(q3.narrow(0, 0, Tp)) : q3;
        parts.push(t(this.attnPrefill.forward(qP, kP, vP, md.cuSeqlensQ!, md.cuSeqlensK!)));
      }
      if (Td) parts.push(t(this.attnDecode.forward(t(q3.narrow(0, Tp, Td)), kCache, vCache, md.blockTables!, md.seqLens!)));
      const attn = parts.length === 1 ? parts[0]! : t(F.cat(parts, 0));
      const gated = t(F.mul(t(attn.reshape([T, nq * hd])), t(F.sigmoid(gate))));
      return this.oProj.forward(gated);
    } finally {
      for (const x of temps) x.dispose();
    }
  }
}

function attnCase(name: string, dtype: 'f32' | 'bf16', cfg: Qwen3NextConfig, layerIdx: number, prefillLens: number[], decodeCtxLens: number[]) {
  const T = prefillLens.reduce((a, b) => a + b, 0) + decodeCtxLens.length;
  return { name, dtype, dims: { T, H: cfg.hiddenSize }, init: [cfg, layerIdx], options: { prefillLens, decodeCtxLens } };
}
const TINY = tinyQwen3NextConfig();

export const qwen3NextAttentionTask = defineTask(
  {
    id: 'L2/qwen3_next_attention',
    level: 2,
    className: 'Qwen3NextAttention',
    family: [FAMILY],
    architectures: ['qwen3_next'],
    mirrors: 'transformers.models.qwen3_next.modeling_qwen3_next.Qwen3NextAttention',
    description: "Qwen3-Next's gated full attention over the paged KV cache: q_proj with a per-head output gate, zero-centred q/k RMSNorm per head, partial neox rotary, cache write, varlen prefill and paged decode (GQA), output times sigmoid(gate), o_proj.",
    init: [
      { name: 'config', type: 'object', doc: 'the parsed Qwen3-Next config (Qwen3NextConfig)' },
      { name: 'layerIdx', type: 'int', optional: true, default: 0, doc: 'which KV cache of the forward context' },
    ],
    inputs: [
      { name: 'positions', dtype: 'i64', shape: ['T'] },
      { name: 'hiddenStates', dtype: 'act', shape: ['T', 'H'], doc: 'prefill tokens first, then one token per decoding sequence (forward context)' },
    ],
    outputs: [{ name: 'out', dtype: 'act', shape: ['T', 'H'] }],
    tolerance: { bf16: { atol: 3e-2, rtol: 3e-2 } },
    imports: ['L1/linear', 'L1/gemma_rms_norm', 'L1/rotary_emb', 'L1/store_kvcache', 'L1/varlen_prefill_attention', 'L1/paged_decode_attention'],
    cases: {
      ci: [
        attnCase('tiny-mixed-f32', 'f32', TINY, 3, [5, 3], [20, 6]),
        attnCase('tiny-decode-bf16', 'bf16', TINY, 3, [], [17, 1, 33]),
        attnCase('tiny-prefill-layer0-f32', 'f32', TINY, 0, [9, 2], []),
      ],
      production: [
        attnCase('qwen3-next-80b-decode-b32', 'bf16', QWEN3_NEXT_80B, 3, [], decodeCtx(32, 4096)),
        attnCase('qwen3-next-80b-prefill-4096', 'bf16', QWEN3_NEXT_80B, 3, [4096], []),
        attnCase('qwen3-next-80b-mixed-512+b16', 'bf16', QWEN3_NEXT_80B, 3, [512], decodeCtx(16, 2048)),
      ],
    },
  },
  {
    baseline: Qwen3NextAttention,
    makeInputs: (c, ctx, rng) => {
      const cfg = qnConfigOf(c);
      const step = buildTaskStep(c, ctx, rng, { numLayers: qnLayerOf(c) + 1, numKvHeads: cfg.numKeyValueHeads, headDim: cfg.headDim, lastLayerOnly: true });
      return [fromInts(ctx, step.positions, [step.positions.length], 'i64'), randn(ctx, rng, [step.positions.length, cfg.hiddenSize], c.dtype)];
    },
    initParameters: (m, _c, rng) => initQwen3NextParameters(m, rng),
    reference: ([positions, hidden], params, c) => [hostArray(hidden!.shape, refGatedAttention(hidden!.data, positions!.data, params, '', qnConfigOf(c), taskStepFor(c).seqs, qnLayerOf(c)))],
    work: (c) => gatedAttentionWork(c),
  },
);

/** Weights once, the step's activations, the cache reads of decodes and prefill contexts; projections and attention pairs. */
export function gatedAttentionWork(c: TaskCase, cfg: Qwen3NextConfig = qnConfigOf(c)) {
  const s = stepSpec(c);
  const T = stepTokens(s);
  const it = DTYPE_INFO[c.dtype].itemsize;
  const { hiddenSize: D, numAttentionHeads: nq, numKeyValueHeads: nk, headDim: hd } = cfg;
  const weights = D * (2 * nq * hd + 2 * nk * hd) + nq * hd * D + 2 * hd;
  const cached = s.decodeCtxLens.reduce((a, b) => a + b, 0);
  return {
    bytes: weights * it + 2 * bytesOf([T, D], it) + 2 * bytesOf([cached + T, nk * hd], it),
    flops: 2 * T * weights + 4 * stepAttentionPairs(s, 0) * nq * hd,
  };
}
