import { DTYPE_INFO, F, Module, defineTask, hostArray, type Tensor } from '@fastkernels/core';
import { bytesOf, randn } from '../../../common/inputs.js';
import type { RMSNorm } from '../../../tasks/L1/norm/rms_norm.js';
import { STATE_F32_TOLERANCE, configOf, initGlaParameters } from '../cases.js';
import { GLA_2_7B, tinyGlaConfig, type GlaConfig } from '../config.js';
import { FAMILY } from '../family.js';
import { attentionWork, type GatedLinearAttention } from '../L2/gla_attention.js';
import type { GLAMLP } from '../L2/gla_mlp.js';
import { refGlaBlock } from '../reference.js';
import { setForwardContext } from '../../../engine/forward-context.js';

/**
 * FLA's GLABlock (fla/models/gla/modeling_gla.py), the original's GLADecoderLayer: pre-norm residual block,
 * attn_norm (L1/rms_norm) -> attn (L2/gla_attention) -> mlp_norm fused with the residual add (FLA's
 * mlp_norm(h, residual, prenorm=True)) -> mlp (L2/gla_mlp) -> + residual. forward(hiddenStates [B, T, D],
 * initialState [B, H, K, V] f32 | null) -> [out [B, T, D], finalState].
 */
export class GLADecoderLayer extends Module {
  readonly attnNorm: RMSNorm;
  readonly attn: GatedLinearAttention;
  readonly mlpNorm: RMSNorm;
  readonly mlp: GLAMLP;
  constructor(
    readonly config: GlaConfig,
    readonly layerIdx = 0,
  ) {
    super();
    const { hiddenSize: D, normEps } = config;
    this.attnNorm = this.createModule('attn_norm', 'L1/rms_norm', D, normEps);
    this.attn = this.createModule('attn', 'L2/gla_attention', config, layerIdx);
    this.mlpNorm = this.createModule('mlp_norm', 'L1/rms_norm', D, normEps);
    this.mlp = this.createModule('mlp', 'L2/gla_mlp', D, config.hiddenRatio, config.intermediateSize, 'swish');
  }

  forward(hiddenStates: Tensor, initialState: Tensor | null = null): Tensor[] {
    const [B, T, D] = hiddenStates.shape as [number, number, number];
    const temps: Tensor[] = [];
    const t = (x: Tensor) => (temps.push(x), x);
    try {
      const x = t(hiddenStates.reshape([B * T, D]));
      const h = t(this.attnNorm.forward(x) as Tensor);
      const [a, finalState] = this.attn.forward(t(h.view([B, T, D])), initialState) as [Tensor, Tensor];
      t(a);
      const [m, residual] = (this.mlpNorm.forward(t(a.view([B * T, D])), x) as [Tensor, Tensor]).map(t) as [Tensor, Tensor];
      const y = t(this.mlp.forward(m));
      const out = t(F.add(residual, y));
      return [out.view([B, T, D]), finalState];
    } finally {
      for (const x of temps) x.dispose();
    }
  }
}

export const blockCase = (name: string, dtype: 'f32' | 'bf16', cfg: GlaConfig, B: number, T: number, state: boolean) => ({
  name, dtype, dims: { B, T, D: cfg.hiddenSize, H: cfg.numHeads, K: cfg.headKDim, V: cfg.headVDim }, init: [cfg, 0], options: { initial_state: state },
});

/** One block: the attention's work plus the two norms and the MLP's. */
export function blockWork(cfg: GlaConfig, B: number, T: number, dtype: keyof typeof DTYPE_INFO, stateIn: boolean) {
  const a = attentionWork(cfg, B, T, dtype, stateIn);
  const it = DTYPE_INFO[dtype].itemsize;
  const N = B * T;
  const { hiddenSize: D, intermediateSize: I } = cfg;
  return { bytes: a.bytes + (3 * D * I + 2 * D) * it + 6 * bytesOf([N, D], it), flops: a.flops + 6 * N * D * I + 10 * N * D };
}

export const glaDecoderTask = defineTask(
  {
    id: 'L3/gla_decoder',
    level: 3,
    className: 'GLADecoderLayer',
    family: [FAMILY],
    architectures: ['gla'],
    mirrors: 'fla.models.gla.modeling_gla.GLABlock',
    description: 'One GLA block: RMSNorm, gated linear attention with the recurrent state in and out, fused residual RMSNorm, SwiGLU MLP, residual.',
    init: [
      { name: 'config', type: 'object', doc: 'the parsed GLA config (GlaConfig)' },
      { name: 'layerIdx', type: 'int', optional: true, default: 0 },
    ],
    inputs: [
      { name: 'hiddenStates', dtype: 'act', shape: ['B', 'T', 'D'] },
      { name: 'initialState', dtype: 'f32', shape: ['B', 'H', 'K', 'V'], optional: true },
    ],
    outputs: [
      { name: 'out', dtype: 'act', shape: ['B', 'T', 'D'] },
      { name: 'finalState', dtype: 'f32', shape: ['B', 'H', 'K', 'V'] },
    ],
    tolerance: { bf16: { atol: 5e-2, rtol: 5e-2 }, f32: STATE_F32_TOLERANCE },
    imports: ['L1/rms_norm', 'L2/gla_attention', 'L2/gla_mlp'],
    cases: {
      ci: [
        blockCase('tiny-decode-state-f32', 'f32', tinyGlaConfig(), 2, 1, true),
        blockCase('tiny-prefill-chunked-f32', 'f32', tinyGlaConfig(), 1, 67, false),
        blockCase('tiny-prompt-state-bf16', 'bf16', tinyGlaConfig(), 2, 6, true),
      ],
      production: [
        blockCase('gla-2.7b-decode-b1', 'bf16', GLA_2_7B, 1, 1, true),
        blockCase('gla-2.7b-decode-b256', 'bf16', GLA_2_7B, 256, 1, true),
        blockCase('gla-2.7b-prefill-4096', 'bf16', GLA_2_7B, 1, 4096, false),
      ],
    },
  },
  {
    baseline: GLADecoderLayer,
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
      const r = refGlaBlock(x!.data, B, T, s0?.data ?? null, params, '', cfg);
      return [hostArray(x!.shape, r.out), hostArray([B, cfg.numHeads, cfg.headKDim, cfg.headVDim], r.state)];
    },
    work: (c) => blockWork(configOf(c), c.dims.B!, c.dims.T!, c.dtype, !!c.options.initial_state),
  },
);
