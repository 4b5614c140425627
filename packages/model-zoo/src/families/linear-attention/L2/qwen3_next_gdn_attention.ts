import { DTYPE_INFO, F, Module, defineTask, hostArray, type Tensor } from '@fastkernels/core';
import { bytesOf, randn } from '../../../common/inputs.js';
import { layerStateCache, setForwardContext } from '../../../engine/forward-context.js';
import type { Conv1d } from '../../../layers/conv.js';
import { createLayer } from '../../../layers/registry.js';
import type { Linear } from '../../../tasks/L1/linear/linear.js';
import type { RMSNormGated } from '../../../tasks/L1/norm/rms_norm_gated.js';
import type { CausalConv1d } from '../../../tasks/L1/recurrent/causal_conv1d.js';
import type { ChunkGatedDeltaRule } from '../../../tasks/L1/recurrent/chunk_gated_delta_rule.js';
import type { FusedRecurrentGatedDeltaRule } from '../../../tasks/L1/recurrent/fused_recurrent_gated_delta_rule.js';
import { FAMILY } from '../family.js';
import { QN_STATE_TOLERANCE, initQwen3NextParameters, qnConfigOf } from '../qwen3-next-cases.js';
import { QWEN3_NEXT_80B, tinyQwen3NextConfig, type Qwen3NextConfig } from '../qwen3-next-config.js';
import { refGatedDeltaNet } from '../qwen3-next-reference.js';
import { deltaRuleKernels, pooledRecurrence, pooledShortConv, pooledStep, poolViews, type LayerStatePool } from '../pooled-recurrence.js';

/**
 * HF's Qwen3NextGatedDeltaNet (transformers/models/qwen3_next/modeling_qwen3_next.py; vLLM's Qwen3NextGatedDeltaNet, the
 * original's Qwen3NextGDNAttention) with the checkpoint's names: in_proj_qkvz (per key-head group: q, k, then the group's
 * r = HV / Hk value heads of v and of z) and in_proj_ba (per group: r b's then r a's), the short depthwise conv1d over
 * q | k | v (silu; L1/causal_conv1d with the conv state), beta = sigmoid(b), g = -exp(A_log) * softplus(a + dt_bias),
 * the gated delta rule with in-kernel q / k l2norm (L1/fused_recurrent_gated_delta_rule for one-token steps,
 * L1/chunk_gated_delta_rule otherwise, as HF and vLLM split), the gated RMSNorm per value head with z (norm before the
 * silu gate; L1/rms_norm_gated) and out_proj.
 *
 * forward(hiddenStates [B, T, D], convState [B, convDim, W - 1] | null, recurrentState [B, HV, K, V] f32 | null) ->
 * [out [B, T, D], convState, recurrentState]: HF keeps both states in its cache; here they are passed in and returned.
 * On the engine (a forward context with this layer's state pool, no states given) hiddenStates is the step's tokens as
 * [1, T, D], prefills first, then one token per decoding sequence, as vLLM runs it: the conv and the delta rule take
 * the pools themselves with the step's state indices (and cu_seqlens for the prefills) as device tensors, read each
 * sequence's rows and update them in place (-1 rows are padding: nothing read or written). The prefills run as one
 * varlen call of each (a new sequence's rows were zeroed by the runner: vLLM's has_initial_state), the decodes as one
 * batch of one-token rows. Nothing is read on the host, so a decode step captures into a CUDA graph; the second and
 * third outputs are views of the pools.
 */
export class Qwen3NextGDNAttention extends Module {
  readonly inProjQkvz: Linear;
  readonly inProjBa: Linear;
  readonly conv1d: Conv1d;
  readonly dtBias: Tensor;
  readonly ALog: Tensor;
  readonly norm: RMSNormGated;
  readonly outProj: Linear;
  private readonly conv: CausalConv1d;
  private readonly chunk: ChunkGatedDeltaRule;
  private readonly recurrent: FusedRecurrentGatedDeltaRule;
  constructor(
    readonly config: Qwen3NextConfig,
    readonly layerIdx = 0,
  ) {
    super();
    const { hiddenSize: D, linearKeyDim, linearValueDim, linearNumValueHeads: HV, linearValueHeadDim: dv, convDim, linearConvKernelDim: W, rmsNormEps } = config;
    this.inProjQkvz = this.createModule('in_proj_qkvz', 'L1/linear', D, 2 * linearKeyDim + 2 * linearValueDim, false);
    this.inProjBa = this.createModule('in_proj_ba', 'L1/linear', D, 2 * HV, false);
    // HF's nn.Conv1d(conv_dim, conv_dim, W, groups=conv_dim, padding=W - 1, bias=False): only its weight is used
    this.conv1d = this.registerModule('conv1d', createLayer('Conv1d', convDim, convDim, W, 1, W - 1, 1, convDim, false));
    this.dtBias = this.parameter('dt_bias', [HV]).fill_(1);
    this.ALog = this.parameter('A_log', [HV]);
    this.norm = this.createModule('norm', 'L1/rms_norm_gated', dv, rmsNormEps, null, true, 'silu');
    this.outProj = this.createModule('out_proj', 'L1/linear', linearValueDim, D, false);
    this.conv = this.createModule('causal_conv1d', 'L1/causal_conv1d', 'silu');
    this.chunk = this.createModule('chunk_gated_delta_rule', 'L1/chunk_gated_delta_rule', null, true);
    this.recurrent = this.createModule('fused_recurrent_gated_delta_rule', 'L1/fused_recurrent_gated_delta_rule', null, true);
  }

  forward(hiddenStates: Tensor, convState: Tensor | null = null, recurrentState: Tensor | null = null): Tensor[] {
    const pool = convState || recurrentState ? null : layerStateCache(this.layerIdx);
    if (pool) return this.poolForward(hiddenStates, pool);
    return this.explicitForward(hiddenStates, convState, recurrentState);
  }

  private explicitForward(hiddenStates: Tensor, convState: Tensor | null, recurrentState: Tensor | null): Tensor[] {
    const { hiddenSize: D, linearNumKeyHeads: Hk, linearNumValueHeads: HV, linearKeyHeadDim: dk, linearValueHeadDim: dv, linearKeyDim, linearValueDim, convDim, linearConvKernelDim: W } = this.config;
    const r = HV / Hk;
    const [B, T] = hiddenStates.shape as [number, number, number];
    const N = B * T;
    const temps: Tensor[] = [];
    const t = (x: Tensor) => (temps.push(x), x);
    try {
      const x = t(hiddenStates.reshape([N, D]));
      // per key-head group: [q (dk) | k (dk) | v (r dv) | z (r dv)] and [b (r) | a (r)]
      const qkvz = t(t(this.inProjQkvz.forward(x)).view([N, Hk, 2 * dk + 2 * r * dv]));
      const part = (y: Tensor, start: number, len: number, shape: number[]) => t(t(t(y.narrow(2, start, len)).contiguous()).view(shape));
      const q = part(qkvz, 0, dk, [B, T, linearKeyDim]);
      const k = part(qkvz, dk, dk, [B, T, linearKeyDim]);
      const v = part(qkvz, 2 * dk, r * dv, [B, T, linearValueDim]);
      const z = part(qkvz, 2 * dk + r * dv, r * dv, [B, T, HV, dv]);
      const ba = t(t(this.inProjBa.forward(x)).view([N, Hk, 2 * r]));
      const b = part(ba, 0, r, [B, T, HV]);
      const a = part(ba, r, r, [B, T, HV]);
      // the short conv over the channels q | k | v: [B, convDim, T]
      const mixed = t(t(t(F.cat([q, k, v], 2)).transpose(1, 2)).contiguous());
      const w = t(this.conv1d.weight.view([convDim, W]));
      const [convOut, convFinal] = this.conv.forward(mixed, w, convState) as [Tensor, Tensor];
      t(convOut);
      const post = t(t(convOut.transpose(1, 2)).contiguous()); // [B, T, convDim]
      const split = (start: number, len: number, shape: number[]) => t(t(t(post.narrow(2, start, len)).contiguous()).view(shape));
      const qc = split(0, linearKeyDim, [B, T, Hk, dk]);
      const kc = split(linearKeyDim, linearKeyDim, [B, T, Hk, dk]);
      const vc = split(2 * linearKeyDim, linearValueDim, [B, T, HV, dv]);
      const beta = t(F.sigmoid(b));
      // g = -exp(A_log) * softplus(a + dt_bias)
      const g = t(F.mul(t(F.neg(t(F.exp(this.ALog)))), t(F.softplus(t(F.add(a, this.dtBias))))));
      const kernel = T === 1 ? this.recurrent : this.chunk;
      const [o, finalState] = kernel.forward(qc, kc, vc, g, beta, recurrentState) as [Tensor, Tensor];
      t(o);
      const normed = t(this.norm.forward(o, z));
      const out = t(this.outProj.forward(t(normed.view([N, linearValueDim]))));
      return [out.view([B, T, D]), convFinal, finalState];
    } finally {
      for (const x of temps) x.dispose();
    }
  }

  /** The engine's step over the state pools (see the class comment): out [1, T, D] and views of the two pools. */
  private poolForward(hiddenStates: Tensor, pool: LayerStatePool): Tensor[] {
    const { hiddenSize: D, linearNumKeyHeads: Hk, linearNumValueHeads: HV, linearKeyHeadDim: dk, linearValueHeadDim: dv, linearKeyDim, linearValueDim, convDim, linearConvKernelDim: W } = this.config;
    const [convPool, recPool] = pool.cache.states as [Tensor, Tensor];
    const T = hiddenStates.shape[1]!;
    const r = HV / Hk;
    const temps: Tensor[] = [];
    const t = (x: Tensor) => (temps.push(x), x);
    try {
      const step = pooledStep(pool, hiddenStates, `Qwen3NextGDNAttention (layer ${this.layerIdx})`, t);
      const x = t(hiddenStates.reshape([T, D]));
      const qkvz = t(t(this.inProjQkvz.forward(x)).view([T, Hk, 2 * dk + 2 * r * dv]));
      const part = (y: Tensor, start: number, len: number, shape: number[]) => t(t(t(y.narrow(2, start, len)).contiguous()).view(shape));
      const q = part(qkvz, 0, dk, [1, T, linearKeyDim]);
      const k = part(qkvz, dk, dk, [1, T, linearKeyDim]);
      const v = part(qkvz, 2 * dk, r * dv, [1, T, linearValueDim]);
      const z = part(qkvz, 2 * dk + r * dv, r * dv, [1, T, HV, dv]);
      const ba = t(t(this.inProjBa.forward(x)).view([T, Hk, 2 * r]));
      const b = part(ba, 0, r, [1, T, HV]);
      const a = part(ba, r, r, [1, T, HV]);
      const mixed = t(F.cat([q, k, v], 2)); // [1, T, convDim]
      const w = t(this.conv1d.weight.view([convDim, W]));
      // the short conv, its states read and written in the conv pool on the device
      const post = pooledShortConv(this.conv, mixed, w, convPool, step, t); // [1, T, convDim]
      const split = (start: number, len: number, shape: number[]) => t(t(t(post.narrow(2, start, len)).contiguous()).view(shape));
      const qc = split(0, linearKeyDim, [1, T, Hk, dk]);
      const kc = split(linearKeyDim, linearKeyDim, [1, T, Hk, dk]);
      const vc = split(2 * linearKeyDim, linearValueDim, [1, T, HV, dv]);
      const beta = t(F.sigmoid(b));
      const g = t(F.mul(t(F.neg(t(F.exp(this.ALog)))), t(F.softplus(t(F.add(a, this.dtBias))))));
      // the delta rule over the recurrent pool, in place: the prefills chunked (varlen), the decodes one token a row
      const o = pooledRecurrence([qc, kc, vc, g, beta], deltaRuleKernels(this.chunk, this.recurrent, recPool), step, t);
      const normed = t(this.norm.forward(o, z));
      const out = t(this.outProj.forward(t(normed.view([T, linearValueDim]))));
      return [out.view([1, T, D]), ...poolViews([convPool, recPool])];
    } finally {
      for (const x of temps) x.dispose();
    }
  }
}

type GdnCase = { name: string; dtype: 'f32' | 'bf16'; cfg: Qwen3NextConfig; B: number; T: number; state: boolean };
const gdnCase = ({ name, dtype, cfg, B, T, state }: GdnCase) => ({
  name,
  dtype,
  dims: { B, T, D: cfg.hiddenSize, C: cfg.convDim, W1: cfg.linearConvKernelDim - 1, HV: cfg.linearNumValueHeads, K: cfg.linearKeyHeadDim, V: cfg.linearValueHeadDim },
  init: [cfg, 0],
  options: { initial_state: state },
});

export const qwen3NextGdnAttentionTask = defineTask(
  {
    id: 'L2/qwen3_next_gdn_attention',
    level: 2,
    className: 'Qwen3NextGDNAttention',
    family: [FAMILY],
    architectures: ['qwen3_next'],
    mirrors: 'transformers.models.qwen3_next.modeling_qwen3_next.Qwen3NextGatedDeltaNet',
    description: "Qwen3-Next's gated DeltaNet layer: in_proj_qkvz / in_proj_ba, short causal conv (silu) with its conv state, beta = sigmoid(b), g = -exp(A_log) softplus(a + dt_bias), gated delta rule with l2-normed q / k (recurrent for one token, chunked otherwise) with its state, gated RMSNorm with z, out_proj.",
    init: [
      { name: 'config', type: 'object', doc: 'the parsed Qwen3-Next config (Qwen3NextConfig)' },
      { name: 'layerIdx', type: 'int', optional: true, default: 0 },
    ],
    inputs: [
      { name: 'hiddenStates', dtype: 'act', shape: ['B', 'T', 'D'] },
      { name: 'convState', dtype: 'act', shape: ['B', 'C', 'W1'], optional: true, doc: 'the last W - 1 conv inputs of each sequence' },
      { name: 'recurrentState', dtype: 'f32', shape: ['B', 'HV', 'K', 'V'], optional: true, doc: 'the delta-rule state of each sequence' },
    ],
    outputs: [
      { name: 'out', dtype: 'act', shape: ['B', 'T', 'D'] },
      { name: 'convState', dtype: 'act', shape: ['B', 'C', 'W1'] },
      { name: 'recurrentState', dtype: 'f32', shape: ['B', 'HV', 'K', 'V'] },
    ],
    tolerance: { bf16: { atol: 5e-2, rtol: 5e-2 }, f32: QN_STATE_TOLERANCE },
    imports: ['L1/linear', 'L1/causal_conv1d', 'L1/chunk_gated_delta_rule', 'L1/fused_recurrent_gated_delta_rule', 'L1/rms_norm_gated'],
    cases: {
      ci: [
        gdnCase({ name: 'tiny-decode-state-f32', dtype: 'f32', cfg: tinyQwen3NextConfig(), B: 3, T: 1, state: true }),
        gdnCase({ name: 'tiny-prefill-chunk-state-f32', dtype: 'f32', cfg: tinyQwen3NextConfig(), B: 2, T: 70, state: true }),
        gdnCase({ name: 'tiny-prompt-bf16', dtype: 'bf16', cfg: tinyQwen3NextConfig(), B: 2, T: 9, state: false }),
      ],
      production: [
        gdnCase({ name: 'qwen3-next-80b-decode-b1', dtype: 'bf16', cfg: QWEN3_NEXT_80B, B: 1, T: 1, state: true }),
        gdnCase({ name: 'qwen3-next-80b-decode-b64', dtype: 'bf16', cfg: QWEN3_NEXT_80B, B: 64, T: 1, state: true }),
        gdnCase({ name: 'qwen3-next-80b-prefill-4096', dtype: 'bf16', cfg: QWEN3_NEXT_80B, B: 1, T: 4096, state: false }),
        gdnCase({ name: 'qwen3-next-80b-prefill-chunk-256-state', dtype: 'bf16', cfg: QWEN3_NEXT_80B, B: 1, T: 256, state: true }),
      ],
    },
  },
  {
    baseline: Qwen3NextGDNAttention,
    makeInputs: (c, ctx, rng) => {
      // a standalone call (states in and out as arguments): drop any forward context an engine-step case left set, whose
      // state pools the layer would otherwise take for its own
      setForwardContext(null);
      // the state dims from the config: a capture on the engine (states in the pool, not arguments) records B, T, D only
      const cfg = qnConfigOf(c);
      const { B, T, D } = c.dims as Record<string, number>;
      const s = !!c.options.initial_state;
      const conv = [B!, cfg.convDim, cfg.linearConvKernelDim - 1];
      const rec = [B!, cfg.linearNumValueHeads, cfg.linearKeyHeadDim, cfg.linearValueHeadDim];
      return [randn(ctx, rng, [B!, T!, D!], c.dtype), s ? randn(ctx, rng, conv, c.dtype) : null, s ? randn(ctx, rng, rec, 'f32', 0.5) : null];
    },
    initParameters: (m, _c, rng) => initQwen3NextParameters(m, rng),
    reference: ([x, conv, rec], params, c) => {
      const cfg = qnConfigOf(c);
      const [B, T] = x!.shape as [number, number];
      const r = refGatedDeltaNet(x!.data, B, T, conv && rec ? { conv: conv.data, recurrent: rec.data } : null, params, '', cfg);
      return [hostArray([B, T, cfg.hiddenSize], r.out), hostArray([B, cfg.convDim, cfg.linearConvKernelDim - 1], r.conv), hostArray([B, cfg.linearNumValueHeads, cfg.linearKeyHeadDim, cfg.linearValueHeadDim], r.recurrent)];
    },
    work: (c) => gdnWork(qnConfigOf(c), c.dims.B!, c.dims.T!, c.dtype, !!c.options.initial_state),
  },
);

/** Weights read once, activations in and out, both states in (when given) and out; the GEMMs, the conv and the delta rule. */
export function gdnWork(cfg: Qwen3NextConfig, B: number, T: number, dtype: keyof typeof DTYPE_INFO, stateIn: boolean) {
  const it = DTYPE_INFO[dtype].itemsize;
  const { hiddenSize: D, linearKeyDim: kd, linearValueDim: vd, linearNumValueHeads: HV, linearKeyHeadDim: K, linearValueHeadDim: V, convDim: C, linearConvKernelDim: W } = cfg;
  const weights = D * (2 * kd + 2 * vd) + D * 2 * HV + C * W + vd * D + 2 * HV + V;
  const N = B * T;
  const states = bytesOf([B, C, W - 1], it) + bytesOf([B, HV, K, V], 4);
  return {
    bytes: weights * it + 2 * bytesOf([N, D], it) + states * (stateIn ? 2 : 1),
    flops: 2 * N * (weights - C * W) + 2 * N * C * W + 6 * N * HV * K * V,
  };
}
