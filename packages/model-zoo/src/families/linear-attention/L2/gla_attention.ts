import { DTYPE_INFO, F, Module, defineTask, hostArray, type Tensor } from '@fastkernels/core';
import { bytesOf, randn } from '../../../common/inputs.js';
import { Sequential } from '../../../layers/container.js';
import type { Linear } from '../../../tasks/L1/linear/linear.js';
import type { LogSigmoid } from '../../../tasks/L1/activation/log_sigmoid.js';
import type { RMSNormGated } from '../../../tasks/L1/norm/rms_norm_gated.js';
import type { ChunkGLA } from '../../../tasks/L1/recurrent/chunk_gla.js';
import type { FusedRecurrentGLA } from '../../../tasks/L1/recurrent/fused_recurrent_gla.js';
import { STATE_F32_TOLERANCE, configOf, initGlaParameters } from '../cases.js';
import { GLA_2_7B, tinyGlaConfig, type GlaConfig } from '../config.js';
import { FAMILY } from '../family.js';
import { refGlaAttention } from '../reference.js';
import { layerStateCache, setForwardContext } from '../../../engine/forward-context.js';
import { pooledRecurrence, pooledStep, poolViews, type LayerStatePool } from '../pooled-recurrence.js';

/** FLA runs the recurrent kernel up to this many tokens, its chunked one above (GatedLinearAttention.forward). */
export const RECURRENT_MAX_T = 64;

/**
 * FLA's GatedLinearAttention (fla/layers/gla.py) as GLAConfig builds it: q/k/v/g projections, the low-rank forget gate
 * gk_proj (Linear(D, 16) then Linear(16, key_dim) with bias) through logsigmoid / gate_logit_normalizer (and clamp_min),
 * the recurrence (L1/fused_recurrent_gla for T <= 64, else L1/chunk_gla), the per-head swish-gated RMSNorm
 * g_norm_swish_gate (L1/rms_norm_gated, norm before gate) and o_proj. forward(hiddenStates [B, T, D], initialState
 * [B, H, K, V] f32 | null) -> [out [B, T, D], finalState [B, H, K, V] f32]: FLA keeps the state in past_key_values;
 * here it is passed in and returned, and the caller owns where it lives.
 *
 * On the engine (a forward context with this layer's state pool, no initialState) hiddenStates is the step's tokens
 * packed as [1, T, D], prefill chunks first, then one token per decoding sequence, and the states live in the pool:
 * the prefills run L1/chunk_gla varlen (cu_seqlens), the decodes L1/fused_recurrent_gla as a batch of one-token rows
 * (vLLM's split for gated DeltaNet), both updating the pool rows of the step's state indices in place; the second
 * output is then a view of the pool.
 */
export class GatedLinearAttention extends Module {
  readonly qProj: Linear;
  readonly kProj: Linear;
  readonly vProj: Linear;
  readonly gProj: Linear;
  readonly gkProj: Sequential;
  readonly oProj: Linear;
  readonly gNormSwishGate: RMSNormGated;
  private readonly gateAct: LogSigmoid;
  private readonly chunk: ChunkGLA;
  private readonly recurrent: FusedRecurrentGLA;
  constructor(
    readonly config: GlaConfig,
    readonly layerIdx = 0,
  ) {
    super();
    const { hiddenSize: D, keyDim, valueDim, gateLowRankDim, headVDim, normEps } = config;
    this.qProj = this.createModule('q_proj', 'L1/linear', D, keyDim, false);
    this.kProj = this.createModule('k_proj', 'L1/linear', D, keyDim, false);
    this.vProj = this.createModule('v_proj', 'L1/linear', D, valueDim, false);
    this.gProj = this.createModule('g_proj', 'L1/linear', D, valueDim, false);
    const gk0 = this.ctx.registry.create<Linear>('L1/linear', D, gateLowRankDim, false);
    const gk1 = this.ctx.registry.create<Linear>('L1/linear', gateLowRankDim, keyDim, true);
    this.gkProj = this.registerModule('gk_proj', new Sequential(gk0, gk1));
    this.oProj = this.createModule('o_proj', 'L1/linear', valueDim, D, false);
    this.gNormSwishGate = this.createModule('g_norm_swish_gate', 'L1/rms_norm_gated', headVDim, normEps, null, true, 'swish');
    this.gateAct = this.createModule('gate_act', 'L1/log_sigmoid');
    this.chunk = this.createModule('chunk_gla', 'L1/chunk_gla', null, 64);
    this.recurrent = this.createModule('fused_recurrent_gla', 'L1/fused_recurrent_gla', null);
  }

  forward(hiddenStates: Tensor, initialState: Tensor | null = null): Tensor[] {
    const { numHeads: H, headKDim: K, headVDim: V, hiddenSize: D, valueDim, gateLogitNormalizer, clampMin } = this.config;
    const [B, T] = hiddenStates.shape as [number, number, number];
    const temps: Tensor[] = [];
    const t = (x: Tensor) => (temps.push(x), x);
    try {
      const x = t(hiddenStates.reshape([B * T, D]));
      const heads = (y: Tensor, d: number) => t(t(y).view([B, T, H, d]));
      const q = heads(this.qProj.forward(x), K);
      const k = heads(this.kProj.forward(x), K);
      const v = heads(this.vProj.forward(x), V);
      const logits = t(this.gkProj.forward(x));
      let gk = t(F.div(t(this.gateAct.forward(logits)), gateLogitNormalizer));
      if (clampMin !== null) gk = t(F.clamp(gk, clampMin, null));
      const g4 = t(gk.view([B, T, H, K]));
      const pool = initialState ? null : layerStateCache(this.layerIdx);
      let o: Tensor;
      let finalState: Tensor;
      if (pool) [o, finalState] = this.poolRecurrence(q, k, v, g4, pool);
      else {
        // FLA: the recurrent kernel for short inputs (decode), the chunked one for prefills
        const kernel = T <= RECURRENT_MAX_T || this.config.attnMode === 'fused_recurrent' ? this.recurrent : this.chunk;
        [o, finalState] = kernel.forward(q, k, v, g4, initialState) as [Tensor, Tensor];
      }
      t(o);
      const g = heads(this.gProj.forward(x), V);
      const normed = t(this.gNormSwishGate.forward(o, g));
      const out = this.oProj.forward(t(normed.view([B * T, valueDim])));
      const shaped = out.view([B, T, D]);
      out.dispose();
      return [shaped, finalState];
    } finally {
      for (const x of temps) x.dispose();
    }
  }

  /** The engine's step over the state pool (see the class comment): o [1, T, H, V] and a view of the pool. */
  private poolRecurrence(q: Tensor, k: Tensor, v: Tensor, g: Tensor, pool: LayerStatePool): [Tensor, Tensor] {
    const state = pool.cache.states[0]!;
    const temps: Tensor[] = [];
    const t = (x: Tensor) => (temps.push(x), x);
    try {
      const step = pooledStep(pool, q, `GatedLinearAttention (layer ${this.layerIdx}), q`, t);
      const o = pooledRecurrence([q, k, v, g], {
        prefill: ([qp, kp, vp, gp], cuSeqlens, indices) => this.chunk.forward(qp!, kp!, vp!, gp!, state, cuSeqlens, indices)[0]!,
        decode: ([qd, kd, vd, gd], indices) => this.recurrent.forward(qd!, kd!, vd!, gd!, state, null, indices)[0]!,
      }, step, t);
      return [o.view(o.shape), ...poolViews([state])] as [Tensor, Tensor];
    } finally {
      for (const x of temps) x.dispose();
    }
  }
}

type AttnCase = { name: string; dtype: 'f32' | 'bf16'; cfg: GlaConfig; B: number; T: number; state: boolean };
const attnCase = ({ name, dtype, cfg, B, T, state }: AttnCase) => ({
  name,
  dtype,
  dims: { B, T, D: cfg.hiddenSize, H: cfg.numHeads, K: cfg.headKDim, V: cfg.headVDim },
  init: [cfg, 0],
  options: { initial_state: state },
});

export const glaAttentionTask = defineTask(
  {
    id: 'L2/gla_attention',
    level: 2,
    className: 'GatedLinearAttention',
    family: [FAMILY],
    architectures: ['gla'],
    mirrors: 'fla.layers.gla.GatedLinearAttention',
    description: 'Gated linear attention layer: q/k/v/g projections, low-rank logsigmoid forget gate, recurrent (T <= 64) or chunked recurrence with the state in and out, swish-gated RMSNorm per head, o_proj.',
    init: [
      { name: 'config', type: 'object', doc: 'the parsed GLA config (GlaConfig)' },
      { name: 'layerIdx', type: 'int', optional: true, default: 0 },
    ],
    inputs: [
      { name: 'hiddenStates', dtype: 'act', shape: ['B', 'T', 'D'] },
      { name: 'initialState', dtype: 'f32', shape: ['B', 'H', 'K', 'V'], optional: true, doc: "the sequence's recurrent state (decode, a prefill chunk after the first)" },
    ],
    outputs: [
      { name: 'out', dtype: 'act', shape: ['B', 'T', 'D'] },
      { name: 'finalState', dtype: 'f32', shape: ['B', 'H', 'K', 'V'] },
    ],
    tolerance: { bf16: { atol: 5e-2, rtol: 5e-2 }, f32: STATE_F32_TOLERANCE },
    imports: ['L1/linear', 'L1/log_sigmoid', 'L1/chunk_gla', 'L1/fused_recurrent_gla', 'L1/rms_norm_gated'],
    cases: {
      ci: [
        attnCase({ name: 'tiny-decode-state-f32', dtype: 'f32', cfg: tinyGlaConfig(), B: 3, T: 1, state: true }),
        attnCase({ name: 'tiny-prefill-chunked-f32', dtype: 'f32', cfg: tinyGlaConfig({ clamp_min: -0.3 }), B: 2, T: 70, state: true }),
        attnCase({ name: 'tiny-prompt-bf16', dtype: 'bf16', cfg: tinyGlaConfig(), B: 2, T: 9, state: false }),
      ],
      production: [
        attnCase({ name: 'gla-2.7b-decode-b1', dtype: 'bf16', cfg: GLA_2_7B, B: 1, T: 1, state: true }),
        attnCase({ name: 'gla-2.7b-decode-b256', dtype: 'bf16', cfg: GLA_2_7B, B: 256, T: 1, state: true }),
        attnCase({ name: 'gla-2.7b-prefill-4096', dtype: 'bf16', cfg: GLA_2_7B, B: 1, T: 4096, state: false }),
        attnCase({ name: 'gla-2.7b-prefill-chunk-256-state', dtype: 'bf16', cfg: GLA_2_7B, B: 1, T: 256, state: true }),
      ],
    },
  },
  {
    baseline: GatedLinearAttention,
    makeInputs: (c, ctx, rng) => {
      // a standalone call (states in and out as arguments): drop any forward context an engine-step case left set, whose
      // state pools the layer would otherwise take for its own
      setForwardContext(null);
      const { B, T, D, H, K, V } = c.dims as Record<string, number>;
      return [randn(ctx, rng, [B!, T!, D!], c.dtype), c.options.initial_state ? randn(ctx, rng, [B!, H!, K!, V!], 'f32') : null];
    },
    initParameters: (m, _c, rng) => initGlaParameters(m, rng),
    reference: ([x, s0], params, c) => {
      const cfg = configOf(c);
      const [B, T] = x!.shape as [number, number];
      const r = refGlaAttention(x!.data, B, T, s0?.data ?? null, params, '', cfg);
      return [hostArray([B, T, cfg.hiddenSize], r.out), hostArray([B, cfg.numHeads, cfg.headKDim, cfg.headVDim], r.state)];
    },
    work: (c) => attentionWork(configOf(c), c.dims.B!, c.dims.T!, c.dtype, !!c.options.initial_state),
  },
);

/** Weights read once, activations in and out, the state in (when given) and out; the GEMMs and the recurrence. */
export function attentionWork(cfg: GlaConfig, B: number, T: number, dtype: keyof typeof DTYPE_INFO, stateIn: boolean) {
  const it = DTYPE_INFO[dtype].itemsize;
  const { hiddenSize: D, keyDim, valueDim, gateLowRankDim: r, numHeads: H, headKDim: K, headVDim: V } = cfg;
  const weights = D * (2 * keyDim + 2 * valueDim + r) + r * keyDim + keyDim + valueDim * D + V;
  const N = B * T;
  return {
    bytes: weights * it + 2 * bytesOf([N, D], it) + bytesOf([B, H, K, V], 4) * (stateIn ? 2 : 1),
    flops: 2 * N * weights + 4 * N * H * K * V,
  };
}
