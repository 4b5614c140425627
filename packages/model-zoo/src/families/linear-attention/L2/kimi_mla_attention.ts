import { DTYPE_INFO, F, Module, defineTask, hostArray, type Tensor, type TaskCase } from '@fastkernels/core';
import { bytesOf, fromInts, randn } from '../../../common/inputs.js';
import { getForwardContext, layerLatentCache } from '../../../engine/forward-context.js';
import type { FlashAttnDecode } from '../../../tasks/L1/attention/paged_decode_attention.js';
import type { FlashAttnVarlen } from '../../../tasks/L1/attention/varlen_prefill_attention.js';
import type { StoreKVCache } from '../../../tasks/L1/kvcache/store_kvcache.js';
import type { Linear } from '../../../tasks/L1/linear/linear.js';
import type { RMSNorm } from '../../../tasks/L1/norm/rms_norm.js';
import { buildTaskStep, stepAttentionPairs, stepSpec, stepTokens, taskStepFor } from '../../dense-moe-llm/task-batch.js';
import { decodeCtx } from '../../../common/decoder-layer.js';
import { FAMILY } from '../family.js';
import { initKimiParameters, kimiConfigOf, kimiLayerOf } from '../kimi-linear-cases.js';
import { KIMI_LINEAR_48B, tinyKimiLinearConfig, type KimiLinearConfig } from '../kimi-linear-config.js';
import { refMla } from '../kimi-linear-reference.js';

/**
 * Kimi-Linear's KimiMLAAttention (the remote code's; vLLM's KimiMLAAttention over its MLA layer) with the checkpoint's
 * names: q_proj (no query LoRA: q_lora_rank is null) gives each head's query [nope | rope]; kv_a_proj_with_mqa gives
 * the compressed kv (kv_lora_rank) and one rope key shared by all heads; kv_a_layernorm (L1/rms_norm) then kv_b_proj
 * decompress each head's k_nope and v; the key is [k_nope | k_rope]. NoPE: Kimi-Linear's MLA layers apply no rotary at
 * all (mla_use_nope; position comes from the KDA layers), so the "rope" dims are plain dims here. Attention with scale
 * (qk_nope + qk_rope)^-0.5, o_proj. forward(positions [T], hiddenStates [T, D]) -> [T, D]; the step's metadata and this
 * layer's cache come from the forward context (vLLM's signature; positions are unused, NoPE).
 *
 * The paged cache keeps the latent, as vLLM's MLA does: one row of [normed kv latent (kv_lora_rank) | k_rope] per token
 * (a single "kv head" of kv_lora_rank + qk_rope_head_dim) in the layer's one latent tensor (LayerCacheSpec 'latent'; no
 * separate values), written once by L1/store_kvcache given that tensor as both caches. Attention runs in the absorbed form over that row: each head's q_nope is multiplied into the
 * latent space by its slice of kv_b_proj (W_UK), so q' = [W_UK^T q_nope | q_rope] attends the cached rows as MQA with
 * the rows' latent part as values, and the result goes back through the head's value slice (W_UV) before o_proj: the
 * same function as decompressing every cached token. Decodes run that way (L1/paged_decode_attention, MQA over the
 * latent rows with valueHeadSize kv_lora_rank: vLLM's FlashMLA decode with head_dim_v). Prefills run as vLLM's MLA prefill does: the chunk's rows and its cached
 * context's (gathered from the cache) are decompressed by kv_b_proj into per-head keys [k_nope | k_rope] and values
 * (zero-padded to the key width for the one-head-dim kernel), then L1/varlen_prefill_attention over H heads (vLLM runs
 * the context and the new tokens as two calls merged with merge_attn_states; one varlen call here). The kv_b_proj slices
 * of the absorbed decode are taken per call (vLLM precomputes them after loading).
 */
export class KimiMLAAttention extends Module {
  readonly qProj: Linear;
  readonly kvAProjWithMqa: Linear;
  readonly kvALayernorm: RMSNorm;
  readonly kvBProj: Linear;
  readonly oProj: Linear;
  private readonly kvStore: StoreKVCache;
  private readonly attnPrefill: FlashAttnVarlen;
  private readonly attnDecode: FlashAttnDecode;
  constructor(
    readonly config: KimiLinearConfig,
    readonly layerIdx = 0,
  ) {
    super();
    const { hiddenSize: D, numAttentionHeads: H, kvLoraRank: R, qkNopeHeadDim: dn, qkRopeHeadDim: dr, vHeadDim: dv, qHeadDim: dq, rmsNormEps } = config;
    this.qProj = this.createModule('q_proj', 'L1/linear', D, H * dq, false);
    this.kvAProjWithMqa = this.createModule('kv_a_proj_with_mqa', 'L1/linear', D, R + dr, false);
    this.kvALayernorm = this.createModule('kv_a_layernorm', 'L1/rms_norm', R, rmsNormEps);
    this.kvBProj = this.createModule('kv_b_proj', 'L1/linear', R, H * (dn + dv), false);
    this.oProj = this.createModule('o_proj', 'L1/linear', H * dv, D, false);
    this.kvStore = this.createModule('kv_store', 'L1/store_kvcache');
    const scale = 1 / Math.sqrt(dq);
    this.attnPrefill = this.createModule('attn_prefill', 'L1/varlen_prefill_attention', H, dq, scale, H, true, 0);
    // the values are the rows' first R dims (the latent; FlashMLA's head_dim_v): no P.V over the rope columns
    this.attnDecode = this.createModule('attn_decode', 'L1/paged_decode_attention', H, R + dr, scale, 1, 0, R);
  }

  forward(_positions: Tensor, hiddenStates: Tensor): Tensor {
    const { numAttentionHeads: H, kvLoraRank: R, qkNopeHeadDim: dn, qkRopeHeadDim: dr, vHeadDim: dv, qHeadDim: dq } = this.config;
    const fc = getForwardContext();
    const md = fc.attnMetadata;
    const cache = layerLatentCache(fc, this.layerIdx); // [numBlocks, blockSize, 1, R + dr]
    const T = hiddenStates.shape[0]!;
    const [Tp, Td] = [md.numPrefillTokens, md.numDecodes];
    if (T !== Tp + Td) throw new RangeError(`KimiMLAAttention: ${T} tokens, the forward context describes ${Tp} prefill + ${Td} decode tokens`);
    const temps: Tensor[] = [];
    const t = (x: Tensor) => (temps.push(x), x);
    try {
      const q = t(t(this.qProj.forward(hiddenStates)).view([T, H, dq]));
      const ckv = t(this.kvAProjWithMqa.forward(hiddenStates)); // [T, R + dr]
      const latent = t(this.kvALayernorm.forward(t(t(ckv.narrow(1, 0, R)).contiguous())) as Tensor);
      // the cached row of each token: [normed latent | k_rope], one kv head
      const kv = t((dr ? t(F.cat([latent, t(ckv.narrow(1, R, dr))], 1)) : latent).view([T, 1, R + dr]));
      // one tensor as key and value and as both caches: the store writes each row once
      this.kvStore.forward(kv, kv, cache, cache, md.slotMapping);
      const parts: Tensor[] = [];
      if (Tp) {
        // prefill, decompressed: the chunk's rows and its cached context's (gathered from the cache, written above)
        let kvP = t(t(kv.view([T, R + dr])).narrow(0, 0, Tp));
        if (md.prefillKvSlots) {
          const slots = cache.shape[0]! * cache.shape[1]!;
          kvP = t(F.embedding(md.prefillKvSlots, t(cache.view([slots, R + dr]))));
        }
        const L = kvP.shape[0]!;
        const kvb = t(t(this.kvBProj.forward(t(t(kvP.narrow(1, 0, R)).contiguous()))).view([L, H, dn + dv]));
        const kNope = t(kvb.narrow(2, 0, dn));
        const k = dr ? t(F.cat([kNope, t(t(t(t(kvP.narrow(1, R, dr)).contiguous()).view([L, 1, dr])).expand([L, H, dr]))], 2)) : t(kNope.contiguous());
        const vRaw = t(t(kvb.narrow(2, dn, dv)).contiguous());
        const v = dv === dq ? vRaw : t(F.pad(vRaw, [0, dq - dv]));
        const qP = Td ? t(q.narrow(0, 0, Tp)) : q;
        const o = t(this.attnPrefill.forward(qP, k, v, md.cuSeqlensQ!, md.cuSeqlensK!)); // [Tp, H, dq]
        parts.push(dv === dq ? o : t(t(t(o.view([Tp, H, dq])).narrow(2, 0, dv)).contiguous()));
      }
      if (Td) {
        // decode, absorbed: q' = [q_nope W_UK_h | q_rope] per head attends the latent rows (MQA), W_UV_h after
        const w = t(this.kvBProj.weight.view([H, dn + dv, R]));
        const wUK = t(t(w.narrow(1, 0, dn)).contiguous()); // [H, dn, R]
        const wUVt = t(t(t(w.narrow(1, dn, dv)).transpose(1, 2)).contiguous()); // [H, R, dv]
        const qD = t(q.narrow(0, Tp, Td));
        const qNope = t(t(t(qD.narrow(2, 0, dn)).transpose(0, 1)).contiguous()); // [H, Td, dn]
        const qAbs = t(t(t(F.bmm(qNope, wUK)).transpose(0, 1)).contiguous()); // [Td, H, R]
        const qq = dr ? t(F.cat([qAbs, t(qD.narrow(2, dn, dr))], 2)) : qAbs; // [Td, H, R + dr]
        const attn = t(this.attnDecode.forward(qq, cache, cache, md.blockTables!, md.seqLens!)); // [Td, H, R]: the rows are keys, their latent part values
        const oLat = t(t(attn.transpose(0, 1)).contiguous()); // [H, Td, R]
        parts.push(t(t(t(F.bmm(oLat, wUVt)).transpose(0, 1)).contiguous())); // [Td, H, dv]
      }
      const o = parts.length === 1 ? parts[0]! : t(F.cat(parts, 0)); // [T, H, dv]
      return this.oProj.forward(t(o.view([T, H * dv])));
    } finally {
      for (const x of temps) x.dispose();
    }
  }
}

function mlaCase(name: string, dtype: 'f32' | 'bf16', cfg: KimiLinearConfig, layerIdx: number, prefillLens: number[], decodeCtxLens: number[]) {
  const T = prefillLens.reduce((a, b) => a + b, 0) + decodeCtxLens.length;
  return { name, dtype, dims: { T, H: cfg.hiddenSize }, init: [cfg, layerIdx], options: { prefillLens, decodeCtxLens } };
}
const TINY = tinyKimiLinearConfig();

export const kimiMlaAttentionTask = defineTask(
  {
    id: 'L2/kimi_mla_attention',
    level: 2,
    className: 'KimiMLAAttention',
    family: [FAMILY],
    architectures: ['kimi_linear'],
    mirrors: 'vllm.model_executor.models.kimi_linear.KimiMLAAttention',
    description: "Kimi-Linear's NoPE multi-latent attention over the paged KV cache: q_proj, kv_a_proj_with_mqa -> latent + shared rope key, kv_a_layernorm, kv_b_proj -> per-head k_nope and v, no rotary; the cache keeps the latent row; prefill decompresses the chunk and its context (varlen attention over H heads), decode runs absorbed (q_nope through W_UK, MQA over the rows, W_UV after), o_proj.",
    init: [
      { name: 'config', type: 'object', doc: 'the parsed Kimi-Linear config (KimiLinearConfig)' },
      { name: 'layerIdx', type: 'int', optional: true, default: 0, doc: 'which KV cache of the forward context' },
    ],
    inputs: [
      { name: 'positions', dtype: 'i64', shape: ['T'], doc: 'unused (NoPE); kept for vLLM\'s signature' },
      { name: 'hiddenStates', dtype: 'act', shape: ['T', 'H'], doc: 'prefill tokens first, then one token per decoding sequence (forward context)' },
    ],
    outputs: [{ name: 'out', dtype: 'act', shape: ['T', 'H'] }],
    tolerance: { bf16: { atol: 3e-2, rtol: 3e-2 } },
    imports: ['L1/linear', 'L1/rms_norm', 'L1/store_kvcache', 'L1/varlen_prefill_attention', 'L1/paged_decode_attention'],
    cases: {
      ci: [
        mlaCase('tiny-mixed-f32', 'f32', TINY, 2, [5, 3], [20, 6]),
        mlaCase('tiny-decode-bf16', 'bf16', TINY, 2, [], [17, 1, 33]),
        mlaCase('tiny-prefill-layer0-f32', 'f32', TINY, 0, [9, 2], []),
        mlaCase('tiny-no-rope-dims-mixed-f32', 'f32', tinyKimiLinearConfig({ qk_rope_head_dim: 0 }), 2, [4], [7, 2]),
      ],
      production: [
        mlaCase('kimi-linear-48b-decode-b32', 'bf16', KIMI_LINEAR_48B, 3, [], decodeCtx(32, 4096)),
        mlaCase('kimi-linear-48b-prefill-4096', 'bf16', KIMI_LINEAR_48B, 3, [4096], []),
        mlaCase('kimi-linear-48b-mixed-512+b16', 'bf16', KIMI_LINEAR_48B, 3, [512], decodeCtx(16, 2048)),
      ],
    },
  },
  {
    baseline: KimiMLAAttention,
    makeInputs: (c, ctx, rng) => {
      const cfg = kimiConfigOf(c);
      const step = buildTaskStep(c, ctx, rng, { numLayers: kimiLayerOf(c) + 1, numKvHeads: 1, headDim: cfg.kvLoraRank + cfg.qkRopeHeadDim, lastLayerOnly: true, latent: true });
      return [fromInts(ctx, step.positions, [step.positions.length], 'i64'), randn(ctx, rng, [step.positions.length, cfg.hiddenSize], c.dtype)];
    },
    initParameters: (m, _c, rng) => initKimiParameters(m, rng),
    reference: ([, hidden], params, c) => [hostArray(hidden!.shape, refMla(hidden!.data, params, '', kimiConfigOf(c), taskStepFor(c).seqs, kimiLayerOf(c)))],
    work: (c) => mlaWork(c),
  },
);

/** Weights once, the step's activations, the cache reads of decodes and prefill contexts; projections and attention pairs. */
export function mlaWork(c: TaskCase, cfg: KimiLinearConfig = kimiConfigOf(c)) {
  const s = stepSpec(c);
  const T = stepTokens(s);
  const it = DTYPE_INFO[c.dtype].itemsize;
  const { hiddenSize: D, numAttentionHeads: H, kvLoraRank: R, qkNopeHeadDim: dn, qkRopeHeadDim: dr, vHeadDim: dv, qHeadDim: dq } = cfg;
  const weights = D * H * dq + D * (R + dr) + R * H * (dn + dv) + H * dv * D + R;
  const cached = s.decodeCtxLens.reduce((a, b) => a + b, 0);
  return {
    bytes: weights * it + 2 * bytesOf([T, D], it) + 2 * bytesOf([cached + T, R + dr], it),
    // each token's rows through kv_b_proj (decompressed for prefill, absorbed into q and out of o for decode); prefill
    // pairs over H heads of dq (scores) + dv (values), decode pairs over the latent rows (R + dr, then R)
    flops: 2 * T * (weights + R * H * (dn + dv)) + 2 * stepAttentionPairs({ prefillLens: s.prefillLens, decodeCtxLens: [] }, 0) * H * (dq + dv) + 2 * stepAttentionPairs({ prefillLens: [], decodeCtxLens: s.decodeCtxLens }, 0) * H * (2 * R + dr),
  };
}
