import { DTYPE_INFO, F, Module, defineTask, hostArray, type Tensor } from '@fastkernels/core';
import { bytesOf, randn } from '../../../common/inputs.js';
import { layerStateCache, setForwardContext } from '../../../engine/forward-context.js';
import type { Conv1d } from '../../../layers/conv.js';
import { createLayer } from '../../../layers/registry.js';
import type { Linear } from '../../../tasks/L1/linear/linear.js';
import type { RMSNormGated } from '../../../tasks/L1/norm/rms_norm_gated.js';
import type { CausalConv1d } from '../../../tasks/L1/recurrent/causal_conv1d.js';
import type { ChunkKDA } from '../../../tasks/L1/recurrent/chunk_kda.js';
import type { FusedRecurrentKDA } from '../../../tasks/L1/recurrent/fused_recurrent_kda.js';
import { FAMILY } from '../family.js';
import { KIMI_STATE_TOLERANCE, initKimiParameters, kimiConfigOf } from '../kimi-linear-cases.js';
import { KIMI_LINEAR_48B, tinyKimiLinearConfig, type KimiLinearConfig } from '../kimi-linear-config.js';
import { refKda } from '../kimi-linear-reference.js';
import { deltaRuleKernels, pooledRecurrence, pooledShortConv, pooledStep, poolViews, type LayerStatePool } from '../pooled-recurrence.js';

/**
 * Kimi-Linear's KimiDeltaAttention (the remote code's modeling_kimi.py over FLA's KDA; vLLM's KimiDeltaAttention) with
 * the checkpoint's names: q_proj / k_proj / v_proj (num_heads * head_dim each), each through its own short depthwise
 * conv (q_conv1d / k_conv1d / v_conv1d [C, 1, W], silu; L1/causal_conv1d with its conv state), the low-rank per-channel
 * decay g = -exp(A_log[h]) * softplus(f_b_proj(f_a_proj(x)) + dt_bias) (FLA's fused_kda_gate), beta =
 * sigmoid(b_proj(x)), the KDA delta rule with in-kernel q / k l2norm (L1/fused_recurrent_kda for one-token steps,
 * L1/chunk_kda otherwise, as vLLM splits decode and prefill; built through the registry, so candidates apply), the gated output norm rmsnorm(o) * w *
 * sigmoid(g_b_proj(g_a_proj(x))) per head (o_norm; L1/rms_norm_gated) and o_proj. g and beta are computed in f32 (FLA's
 * gate kernel and the remote code's beta are f32).
 *
 * forward(hiddenStates [B, T, D], qConv, kConv, vConv [B, C, W - 1] | null, recurrentState [B, H, K, V] f32 | null) ->
 * [out [B, T, D], qConv, kConv, vConv, recurrentState]: the states passed in and returned (FLA's form). On the engine
 * (a forward context with this layer's four pools, no states given) hiddenStates is the step's tokens as [1, T, D],
 * prefills first, then one token per decoding sequence: the convs and the delta rule take the pools with the step's
 * state indices (and cu_seqlens for the prefills) as device tensors and update them in place, as the Qwen3-Next
 * DeltaNet layer does; the last four outputs are then views of the pools.
 */
export class KimiDeltaAttention extends Module {
  readonly qProj: Linear;
  readonly kProj: Linear;
  readonly vProj: Linear;
  readonly qConv1d: Conv1d;
  readonly kConv1d: Conv1d;
  readonly vConv1d: Conv1d;
  readonly ALog: Tensor;
  readonly dtBias: Tensor;
  readonly fAProj: Linear;
  readonly fBProj: Linear;
  readonly bProj: Linear;
  readonly gAProj: Linear;
  readonly gBProj: Linear;
  readonly oNorm: RMSNormGated;
  readonly oProj: Linear;
  private readonly conv: CausalConv1d;
  private readonly chunk: ChunkKDA;
  private readonly recurrent: FusedRecurrentKDA;
  constructor(
    readonly config: KimiLinearConfig,
    readonly layerIdx = 0,
  ) {
    super();
    const { hiddenSize: D, kdaNumHeads: H, kdaHeadDim: dk, kdaProjSize: C, kdaConvKernelSize: W, rmsNormEps } = config;
    this.qProj = this.createModule('q_proj', 'L1/linear', D, C, false);
    this.kProj = this.createModule('k_proj', 'L1/linear', D, C, false);
    this.vProj = this.createModule('v_proj', 'L1/linear', D, C, false);
    // FLA's ShortConvolution: nn.Conv1d(C, C, W, groups=C, padding=W - 1, bias=False), only its weight used
    const shortConv = (name: string) => this.registerModule(name, createLayer('Conv1d', C, C, W, 1, W - 1, 1, C, false) as Conv1d);
    this.qConv1d = shortConv('q_conv1d');
    this.kConv1d = shortConv('k_conv1d');
    this.vConv1d = shortConv('v_conv1d');
    this.ALog = this.parameter('A_log', [1, 1, H, 1], 'f32');
    this.dtBias = this.parameter('dt_bias', [C], 'f32');
    this.fAProj = this.createModule('f_a_proj', 'L1/linear', D, dk, false);
    this.fBProj = this.createModule('f_b_proj', 'L1/linear', dk, C, false);
    this.bProj = this.createModule('b_proj', 'L1/linear', D, H, false);
    this.gAProj = this.createModule('g_a_proj', 'L1/linear', D, dk, false);
    this.gBProj = this.createModule('g_b_proj', 'L1/linear', dk, C, false);
    this.oNorm = this.createModule('o_norm', 'L1/rms_norm_gated', dk, rmsNormEps, null, true, 'sigmoid');
    this.oProj = this.createModule('o_proj', 'L1/linear', C, D, false);
    this.conv = this.createModule('causal_conv1d', 'L1/causal_conv1d', 'silu');
    this.chunk = this.createModule('chunk_kda', 'L1/chunk_kda', null, true);
    this.recurrent = this.createModule('fused_recurrent_kda', 'L1/fused_recurrent_kda', null, true);
  }

  forward(hiddenStates: Tensor, qConv: Tensor | null = null, kConv: Tensor | null = null, vConv: Tensor | null = null, recurrentState: Tensor | null = null): Tensor[] {
    const pool = qConv || kConv || vConv || recurrentState ? null : layerStateCache(this.layerIdx);
    if (pool) return this.poolForward(hiddenStates, pool);
    return this.explicitForward(hiddenStates, [qConv, kConv, vConv], recurrentState);
  }

  /** The decay gate g [B, T, H, K] and beta [B, T, H], both f32, of x [N, D]. */
  private gates(x: Tensor, B: number, T: number, t: (y: Tensor) => Tensor): [Tensor, Tensor] {
    const { kdaNumHeads: H, kdaHeadDim: dk } = this.config;
    const f = t(F.to(t(this.fBProj.forward(t(this.fAProj.forward(x)))), 'f32'));
    const pre = t(F.add(t(f.view([B, T, H, dk])), t(this.dtBias.view([H, dk]))));
    const g = t(F.mul(t(F.neg(t(F.exp(t(this.ALog.view([H, 1])))))), t(F.softplus(pre))));
    const beta = t(F.sigmoid(t(F.to(t(t(this.bProj.forward(x)).view([B, T, H])), 'f32'))));
    return [g, beta];
  }

  /** o [B, T, H, V] -> o_norm with the output gate, o_proj: [N, D]. */
  private output(o: Tensor, x: Tensor, N: number, t: (y: Tensor) => Tensor): Tensor {
    const { kdaNumHeads: H, kdaHeadDim: dk, kdaProjSize: C } = this.config;
    const gate = t(t(this.gBProj.forward(t(this.gAProj.forward(x)))).view([N * H, dk]));
    const normed = t(this.oNorm.forward(t(t(o.contiguous()).view([N * H, dk])), gate));
    return this.oProj.forward(t(normed.view([N, C])));
  }

  private explicitForward(hiddenStates: Tensor, convStates: (Tensor | null)[], recurrentState: Tensor | null): Tensor[] {
    const { hiddenSize: D, kdaNumHeads: H, kdaHeadDim: dk, kdaProjSize: C, kdaConvKernelSize: W } = this.config;
    const [B, T] = hiddenStates.shape as [number, number, number];
    const N = B * T;
    const temps: Tensor[] = [];
    const t = (x: Tensor) => (temps.push(x), x);
    try {
      const x = t(hiddenStates.reshape([N, D]));
      const finals: Tensor[] = [];
      const heads = ([this.qProj, this.kProj, this.vProj] as const).map((proj, i) => {
        const conv1d = [this.qConv1d, this.kConv1d, this.vConv1d][i]!;
        const y = t(t(t(t(proj.forward(x)).view([B, T, C])).transpose(1, 2)).contiguous()); // [B, C, T]
        const [out, fin] = this.conv.forward(y, t(conv1d.weight.view([C, W])), convStates[i] ?? null) as [Tensor, Tensor];
        t(out);
        finals.push(fin);
        return t(t(t(out.transpose(1, 2)).contiguous()).view([B, T, H, dk]));
      });
      const [g, beta] = this.gates(x, B, T, t);
      const kernel = T === 1 ? this.recurrent : this.chunk;
      const [o, finalState] = kernel.forward(heads[0]!, heads[1]!, heads[2]!, g, beta, recurrentState) as [Tensor, Tensor];
      t(o);
      const out = t(this.output(o, x, N, t));
      return [out.view([B, T, D]), ...finals, finalState];
    } finally {
      for (const x of temps) x.dispose();
    }
  }

  /** The engine's step over the state pools (see the class comment): out [1, T, D] and views of the four pools. */
  private poolForward(hiddenStates: Tensor, pool: LayerStatePool): Tensor[] {
    const { hiddenSize: D, kdaNumHeads: H, kdaHeadDim: dk, kdaProjSize: C, kdaConvKernelSize: W } = this.config;
    const pools = pool.cache.states as [Tensor, Tensor, Tensor, Tensor];
    const T = hiddenStates.shape[1]!;
    const temps: Tensor[] = [];
    const t = (x: Tensor) => (temps.push(x), x);
    try {
      const step = pooledStep(pool, hiddenStates, `KimiDeltaAttention (layer ${this.layerIdx})`, t);
      const x = t(hiddenStates.reshape([T, D]));
      // each short conv over its pool in place
      const heads = ([this.qProj, this.kProj, this.vProj] as const).map((proj, i) => {
        const w = t([this.qConv1d, this.kConv1d, this.vConv1d][i]!.weight.view([C, W]));
        const y = t(t(proj.forward(x)).view([1, T, C]));
        const post = pooledShortConv(this.conv, y, w, pools[i]!, step, t);
        return t(t(post.contiguous()).view([1, T, H, dk]));
      });
      const [g, beta] = this.gates(x, 1, T, t);
      const o = pooledRecurrence([heads[0]!, heads[1]!, heads[2]!, g, beta], deltaRuleKernels(this.chunk, this.recurrent, pools[3]), step, t);
      const out = t(this.output(o, x, T, t));
      return [out.view([1, T, D]), ...poolViews(pools)];
    } finally {
      for (const x of temps) x.dispose();
    }
  }
}

type KdaCase = { name: string; dtype: 'f32' | 'bf16'; cfg: KimiLinearConfig; B: number; T: number; state: boolean };
const kdaCase = ({ name, dtype, cfg, B, T, state }: KdaCase) => ({
  name,
  dtype,
  dims: { B, T, D: cfg.hiddenSize, C: cfg.kdaProjSize, W1: cfg.kdaConvKernelSize - 1, H: cfg.kdaNumHeads, K: cfg.kdaHeadDim, V: cfg.kdaHeadDim },
  init: [cfg, 0],
  options: { initial_state: state },
});

export const kimiDeltaAttentionTask = defineTask(
  {
    id: 'L2/kimi_delta_attention',
    level: 2,
    className: 'KimiDeltaAttention',
    family: [FAMILY],
    architectures: ['kimi_linear'],
    mirrors: 'vllm.model_executor.layers.kda.KimiDeltaAttention',
    description: "Kimi-Linear's KDA layer: q/k/v projections each with a short causal conv (silu) and its conv state, per-channel decay g = -exp(A_log) softplus(f_b(f_a(x)) + dt_bias), beta = sigmoid(b_proj(x)), the KDA delta rule with l2-normed q / k (recurrent for one token, chunked otherwise) with its state, gated RMSNorm with sigmoid(g_b(g_a(x))), o_proj.",
    init: [
      { name: 'config', type: 'object', doc: 'the parsed Kimi-Linear config (KimiLinearConfig)' },
      { name: 'layerIdx', type: 'int', optional: true, default: 0 },
    ],
    inputs: [
      { name: 'hiddenStates', dtype: 'act', shape: ['B', 'T', 'D'] },
      { name: 'qConv', dtype: 'act', shape: ['B', 'C', 'W1'], optional: true, doc: 'the last W - 1 inputs of the q conv' },
      { name: 'kConv', dtype: 'act', shape: ['B', 'C', 'W1'], optional: true },
      { name: 'vConv', dtype: 'act', shape: ['B', 'C', 'W1'], optional: true },
      { name: 'recurrentState', dtype: 'f32', shape: ['B', 'H', 'K', 'V'], optional: true, doc: 'the KDA state of each sequence' },
    ],
    outputs: [
      { name: 'out', dtype: 'act', shape: ['B', 'T', 'D'] },
      { name: 'qConv', dtype: 'act', shape: ['B', 'C', 'W1'] },
      { name: 'kConv', dtype: 'act', shape: ['B', 'C', 'W1'] },
      { name: 'vConv', dtype: 'act', shape: ['B', 'C', 'W1'] },
      { name: 'recurrentState', dtype: 'f32', shape: ['B', 'H', 'K', 'V'] },
    ],
    tolerance: { bf16: { atol: 5e-2, rtol: 5e-2 }, f32: KIMI_STATE_TOLERANCE },
    imports: ['L1/linear', 'L1/causal_conv1d', 'L1/chunk_kda', 'L1/fused_recurrent_kda', 'L1/rms_norm_gated'],
    cases: {
      ci: [
        kdaCase({ name: 'tiny-decode-state-f32', dtype: 'f32', cfg: tinyKimiLinearConfig(), B: 3, T: 1, state: true }),
        kdaCase({ name: 'tiny-prefill-chunk-state-f32', dtype: 'f32', cfg: tinyKimiLinearConfig(), B: 2, T: 70, state: true }),
        kdaCase({ name: 'tiny-prompt-bf16', dtype: 'bf16', cfg: tinyKimiLinearConfig(), B: 2, T: 9, state: false }),
      ],
      production: [
        kdaCase({ name: 'kimi-linear-48b-decode-b1', dtype: 'bf16', cfg: KIMI_LINEAR_48B, B: 1, T: 1, state: true }),
        kdaCase({ name: 'kimi-linear-48b-decode-b64', dtype: 'bf16', cfg: KIMI_LINEAR_48B, B: 64, T: 1, state: true }),
        kdaCase({ name: 'kimi-linear-48b-prefill-4096', dtype: 'bf16', cfg: KIMI_LINEAR_48B, B: 1, T: 4096, state: false }),
        kdaCase({ name: 'kimi-linear-48b-prefill-chunk-256-state', dtype: 'bf16', cfg: KIMI_LINEAR_48B, B: 1, T: 256, state: true }),
      ],
    },
  },
  {
    baseline: KimiDeltaAttention,
    makeInputs: (c, ctx, rng) => {
      // a standalone call with explicit states: drop any forward context an engine-step case left (its pools would
      // otherwise be taken for this layer's)
      setForwardContext(null);
      // the state dims from the config: a capture on the engine (states in the pool) records B, T, D only
      const cfg = kimiConfigOf(c);
      const { B, T, D } = c.dims as Record<string, number>;
      const s = !!c.options.initial_state;
      const conv = [B!, cfg.kdaProjSize, cfg.kdaConvKernelSize - 1];
      const rec = [B!, cfg.kdaNumHeads, cfg.kdaHeadDim, cfg.kdaHeadDim];
      const st = (shape: number[], dtype: typeof c.dtype, std = 1) => (s ? randn(ctx, rng, shape, dtype, std) : null);
      return [randn(ctx, rng, [B!, T!, D!], c.dtype), st(conv, c.dtype), st(conv, c.dtype), st(conv, c.dtype), st(rec, 'f32', 0.5)];
    },
    initParameters: (m, _c, rng) => initKimiParameters(m, rng),
    reference: ([x, qc, kc, vc, rec], params, c) => {
      const cfg = kimiConfigOf(c);
      const [B, T] = x!.shape as [number, number];
      const s0 = qc && kc && vc && rec ? { qConv: qc.data, kConv: kc.data, vConv: vc.data, recurrent: rec.data } : null;
      const r = refKda(x!.data, B, T, s0, params, '', cfg);
      const conv = [B, cfg.kdaProjSize, cfg.kdaConvKernelSize - 1];
      return [hostArray([B, T, cfg.hiddenSize], r.out), hostArray(conv, r.qConv), hostArray(conv, r.kConv), hostArray(conv, r.vConv), hostArray([B, cfg.kdaNumHeads, cfg.kdaHeadDim, cfg.kdaHeadDim], r.recurrent)];
    },
    work: (c) => kdaWork(kimiConfigOf(c), c.dims.B!, c.dims.T!, c.dtype, !!c.options.initial_state),
  },
);

/** Weights read once, activations in and out, the states in (when given) and out; the GEMMs, the convs and the delta rule. */
export function kdaWork(cfg: KimiLinearConfig, B: number, T: number, dtype: keyof typeof DTYPE_INFO, stateIn: boolean) {
  const it = DTYPE_INFO[dtype].itemsize;
  const { hiddenSize: D, kdaNumHeads: H, kdaHeadDim: K, kdaProjSize: C, kdaConvKernelSize: W } = cfg;
  const gemm = 3 * D * C + 2 * (D * K + K * C) + D * H + C * D;
  const N = B * T;
  const states = 3 * bytesOf([B, C, W - 1], it) + bytesOf([B, H, K, K], 4);
  return {
    bytes: (gemm + 3 * C * W + K) * it + (H + C) * 4 + 2 * bytesOf([N, D], it) + states * (stateIn ? 2 : 1),
    flops: 2 * N * gemm + 6 * N * C * W + 6 * N * H * K * K,
  };
}
