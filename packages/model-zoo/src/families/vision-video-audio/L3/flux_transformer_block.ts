import { DTYPE_INFO, F, Module, OpScope, defineTask, hostArray, type HostArray, type Tensor } from '@fastkernels/core';
import { bytesOf, randn } from '../../../common/inputs.js';
import type { GELU } from '../../../layers/activation.js';
import type { LayerNorm } from '../../../layers/norm.js';
import { createLayer } from '../../../layers/registry.js';
import type { Linear } from '../../../tasks/L1/linear/linear.js';
import { randomCosSin } from '../../../tasks/L1/rotary/diffusion_rope.js';
import { initFamilyParameters } from '../cases.js';
import { FAMILY } from '../family.js';
import { FLUX1_DEV } from '../flux-config.js';
import { geluTanh, layerNorm, linear, param, sub } from '../host-math.js';
import { AdaLayerNormZeroSingle, adaLayerNormZeroReference, type AdaLayerNormZero } from '../L2/ada_layer_norm.js';
import { fluxAttentionReference, type FluxAttention } from '../L2/flux_attention.js';
import { feedForwardReference, type FeedForward } from '../L2/flux_feedforward.js';
import { geluProjection } from '../L2/gelu-projection.js';
import { gatedResidual, normModulate } from '../L2/modulate.js';

/**
 * diffusers' FluxTransformerBlock (double stream): adaLN-Zero on the image (norm1) and text (norm1_context) streams,
 * joint attention (L2/flux_attention), gated residuals, then per stream LayerNorm (no affine) modulated by the MLP
 * shift / scale, FeedForward, gated residual. forward(hiddenStates [B, S, D], encoderHiddenStates [B, St, D], temb
 * [B, D], cos, sin [St + S, d/2]) -> [encoderHiddenStates, hiddenStates] (diffusers' order).
 */
export class FluxTransformerBlock extends Module {
  readonly norm1: AdaLayerNormZero;
  readonly norm1Context: AdaLayerNormZero;
  readonly attn: FluxAttention;
  readonly norm2: LayerNorm;
  readonly ff: FeedForward;
  readonly norm2Context: LayerNorm;
  readonly ffContext: FeedForward;
  constructor(
    readonly dim: number,
    readonly numAttentionHeads: number,
    readonly attentionHeadDim: number,
    qkNorm = 'rms_norm',
    eps = 1e-6,
  ) {
    super();
    if (qkNorm !== 'rms_norm') throw new RangeError(`FluxTransformerBlock: qk_norm '${qkNorm}' is not supported (rms_norm)`);
    this.norm1 = this.createModule('norm1', 'L2/ada_layer_norm', dim);
    this.norm1Context = this.createModule('norm1_context', 'L2/ada_layer_norm', dim);
    this.attn = this.createModule('attn', 'L2/flux_attention', dim, numAttentionHeads, attentionHeadDim, 0, true, dim, true, true, eps, dim, false, false);
    this.norm2 = this.registerModule('norm2', createLayer('LayerNorm', dim, 1e-6, false));
    this.ff = this.createModule('ff', 'L2/flux_feedforward', dim, dim);
    this.norm2Context = this.registerModule('norm2_context', createLayer('LayerNorm', dim, 1e-6, false));
    this.ffContext = this.createModule('ff_context', 'L2/flux_feedforward', dim, dim);
  }

  /**
   * x + gate_msa * attn; then x + gate_mlp * ff(norm2(x) * (1 + scale_mlp) + shift_mlp): the gated residuals are
   * elementwise chains, norm2 and its modulation one layer_norm_modulate while norm2 is our LayerNorm (modulate.ts).
   */
  private stream(s: OpScope, x: Tensor, attnOut: Tensor, [gateMsa, shiftMlp, scaleMlp, gateMlp]: Tensor[], norm: LayerNorm, ff: FeedForward): Tensor {
    const h = s.own(gatedResidual(x, gateMsa!, attnOut));
    const n = s.own(normModulate(norm, h, scaleMlp!, shiftMlp!));
    return gatedResidual(h, gateMlp!, s.own(ff.forward(n)));
  }

  forward(hiddenStates: Tensor, encoderHiddenStates: Tensor, temb: Tensor, cos: Tensor | null = null, sin: Tensor | null = null): Tensor[] {
    const s = new OpScope();
    try {
      const [nh, ...mods] = this.norm1.forward(hiddenStates, temb).map((t) => s.own(t)) as Tensor[];
      const [ne, ...cmods] = this.norm1Context.forward(encoderHiddenStates, temb).map((t) => s.own(t)) as Tensor[];
      const [attnOut, ctxOut] = (this.attn.forward(nh!, ne!, cos, sin) as Tensor[]).map((t) => s.own(t));
      const hidden = this.stream(s, hiddenStates, attnOut!, mods, this.norm2, this.ff);
      const encoder = this.stream(s, encoderHiddenStates, ctxOut!, cmods, this.norm2Context, this.ffContext);
      return [...s.keep([encoder, hidden])];
    } catch (e) {
      s.dispose();
      throw e;
    }
  }
}

/**
 * diffusers' FluxSingleTransformerBlock (single stream over [text, image]): AdaLayerNormZeroSingle, then in parallel
 * the pre-only attention and proj_mlp + GELU(tanh); proj_out of their concatenation, gated, residual.
 * forward(hiddenStates [B, N, D], temb [B, D], cos, sin [N, d/2]) -> [B, N, D]. The second class of the
 * flux_transformer_block task: FluxTransformer2DModel builds it with `new`; its children resolve through the registry.
 */
export class FluxSingleTransformerBlock extends Module {
  readonly mlpHiddenDim: number;
  readonly norm: AdaLayerNormZeroSingle;
  readonly projMlp: Linear;
  readonly actMlp: GELU;
  readonly projOut: Linear;
  readonly attn: FluxAttention;
  constructor(
    readonly dim: number,
    readonly numAttentionHeads: number,
    readonly attentionHeadDim: number,
    mlpRatio = 4.0,
  ) {
    super();
    this.mlpHiddenDim = Math.trunc(dim * mlpRatio);
    this.norm = this.registerModule('norm', new AdaLayerNormZeroSingle(dim));
    this.projMlp = this.createModule('proj_mlp', 'L1/linear', dim, this.mlpHiddenDim, true);
    this.actMlp = this.registerModule('act_mlp', createLayer('GELU', 'tanh'));
    this.projOut = this.createModule('proj_out', 'L1/linear', dim + this.mlpHiddenDim, dim, true);
    this.attn = this.createModule('attn', 'L2/flux_attention', dim, numAttentionHeads, attentionHeadDim, 0, true, null, true, true, 1e-6, dim, null, true);
  }

  forward(hiddenStates: Tensor, temb: Tensor, cos: Tensor | null = null, sin: Tensor | null = null): Tensor {
    const s = new OpScope();
    try {
      const [n, gate] = this.norm.forward(hiddenStates, temb).map((t) => s.own(t)) as [Tensor, Tensor];
      const mlp = s.own(geluProjection(this.projMlp, this.actMlp, n));
      const attnOut = s.own(this.attn.forward(n, null, cos, sin) as Tensor);
      const out = s.own(this.projOut.forward(s.own(F.cat([attnOut, mlp], 2))));
      return s.keep([gatedResidual(hiddenStates, gate, out)])[0];
    } catch (e) {
      s.dispose();
      throw e;
    }
  }
}

/** Golden float64 FluxTransformerBlock -> [encoder, hidden]. */
export function fluxBlockReference(h: HostArray, e: HostArray, temb: HostArray, cos: HostArray | null, sin: HostArray | null, params: ReadonlyMap<string, HostArray>, heads: number): HostArray[] {
  const [B, S, D] = h.shape as [number, number, number];
  const St = e.shape[1]!;
  const [nh, gMsa, shMlp, scMlp, gMlp] = adaLayerNormZeroReference(h, temb, sub(params, 'norm1'), 6) as HostArray[];
  const [ne, cgMsa, cshMlp, cscMlp, cgMlp] = adaLayerNormZeroReference(e, temb, sub(params, 'norm1_context'), 6) as HostArray[];
  const [ao, co] = fluxAttentionReference(nh!, ne!, cos, sin, sub(params, 'attn'), heads, D / heads, 1e-6, false) as [HostArray, HostArray];
  const stream = (x: HostArray, R: number, a: HostArray, gm: HostArray, sh: HostArray, sc: HostArray, gl: HostArray, ff: string) => {
    const bd = (t: number) => Math.floor(t / (R * D)) * D + (t % D);
    const x1 = x.data.map((v, t) => v + gm.data[bd(t)]! * a.data[t]!);
    const n = layerNorm(x1, B * R, D, 1e-6).map((v, t) => v * (1 + sc.data[bd(t)]!) + sh.data[bd(t)]!);
    const f = feedForwardReference(hostArray([B, R, D], n), sub(params, ff));
    return hostArray([B, R, D], x1.map((v, t) => v + gl.data[bd(t)]! * f.data[t]!));
  };
  return [stream(e, St, co, cgMsa!, cshMlp!, cscMlp!, cgMlp!, 'ff_context'), stream(h, S, ao, gMsa!, shMlp!, scMlp!, gMlp!, 'ff')];
}

/** Golden float64 FluxSingleTransformerBlock. */
export function fluxSingleBlockReference(h: HostArray, temb: HostArray, cos: HostArray | null, sin: HostArray | null, params: ReadonlyMap<string, HostArray>, heads: number): HostArray {
  const [B, N, D] = h.shape as [number, number, number];
  const [n, gate] = adaLayerNormZeroReference(h, temb, sub(params, 'norm'), 3) as [HostArray, HostArray];
  const mlp = linear(n.data, B * N, param(params, 'proj_mlp.weight'), param(params, 'proj_mlp.bias')).map(geluTanh);
  const M = mlp.length / (B * N);
  const a = fluxAttentionReference(n, null, cos, sin, sub(params, 'attn'), heads, D / heads, 1e-6, true)[0]!;
  const cat = new Float64Array(B * N * (D + M));
  for (let r = 0; r < B * N; r++) {
    cat.set(a.data.subarray(r * D, (r + 1) * D), r * (D + M));
    cat.set(mlp.subarray(r * M, (r + 1) * M), r * (D + M) + D);
  }
  const o = linear(cat, B * N, param(params, 'proj_out.weight'), param(params, 'proj_out.bias'));
  return hostArray(h.shape, h.data.map((v, t) => v + gate.data[Math.floor(t / (N * D)) * D + (t % D)]! * o[t]!));
}

const blockCase = (name: string, dtype: 'f32' | 'bf16', B: number, S: number, St: number, D: number, H: number) => ({
  name, dtype, dims: { B, S, St, D, N: S + St, R2: D / H / 2 }, init: [D, H, D / H],
});

export const fluxTransformerBlockTask = defineTask(
  {
    id: 'L3/flux_transformer_block',
    level: 3,
    className: 'FluxTransformerBlock',
    family: [FAMILY],
    architectures: ['flux'],
    mirrors: 'diffusers.models.transformers.transformer_flux.FluxTransformerBlock',
    description: 'FLUX double-stream block: adaLN-Zero per stream, joint text-image attention, gated residuals, modulated LayerNorm + GELU MLP per stream. FluxSingleTransformerBlock lives in the same file.',
    init: [
      { name: 'dim', type: 'int' },
      { name: 'numAttentionHeads', type: 'int' },
      { name: 'attentionHeadDim', type: 'int' },
      { name: 'qkNorm', type: 'enum', choices: ['rms_norm'], optional: true, default: 'rms_norm' },
      { name: 'eps', type: 'float', optional: true, default: 1e-6 },
    ],
    inputs: [
      { name: 'hiddenStates', dtype: 'act', shape: ['B', 'S', 'D'] },
      { name: 'encoderHiddenStates', dtype: 'act', shape: ['B', 'St', 'D'] },
      { name: 'temb', dtype: 'act', shape: ['B', 'D'] },
      { name: 'cos', dtype: 'f32', shape: ['N', 'R2'], optional: true },
      { name: 'sin', dtype: 'f32', shape: ['N', 'R2'], optional: true },
    ],
    outputs: [
      { name: 'encoderHiddenStates', dtype: 'act', shape: ['B', 'St', 'D'] },
      { name: 'hiddenStates', dtype: 'act', shape: ['B', 'S', 'D'] },
    ],
    tolerance: { bf16: { atol: 6e-2, rtol: 5e-2 } },
    imports: ['L2/ada_layer_norm', 'L2/flux_attention', 'L2/flux_feedforward', 'L1/layer_norm', 'L1/linear', 'L1/gelu'],
    cases: {
      ci: [blockCase('tiny-f32', 'f32', 2, 6, 3, 32, 2), blockCase('tiny-bf16', 'bf16', 1, 8, 4, 64, 4)],
      production: [
        blockCase('flux1-dev-1024px', 'bf16', 1, 4096, 512, FLUX1_DEV.innerDim, FLUX1_DEV.numAttentionHeads),
        blockCase('flux1-dev-512px', 'bf16', 1, 1024, 512, FLUX1_DEV.innerDim, FLUX1_DEV.numAttentionHeads),
      ],
    },
  },
  {
    baseline: FluxTransformerBlock,
    makeInputs: (c, ctx, rng) => {
      const { B, S, St, D, N, R2 } = c.dims as Record<string, number>;
      return [randn(ctx, rng, [B!, S!, D!], c.dtype), randn(ctx, rng, [B!, St!, D!], c.dtype), randn(ctx, rng, [B!, D!], c.dtype), ...randomCosSin(ctx, rng, N!, R2!)];
    },
    initParameters: (m, _c, rng) => initFamilyParameters(m, rng),
    reference: ([h, e, temb, cos, sin], params, c) => fluxBlockReference(h!, e!, temb!, cos ?? null, sin ?? null, params, c.init[1] as number),
    work: (c) => {
      const { B, N, D } = c.dims as Record<string, number>;
      const it = DTYPE_INFO[c.dtype].itemsize;
      return { bytes: bytesOf([36 * D!, D!], it) + 12 * bytesOf([B!, N!, D!], it), flops: 2 * B! * N! * D! * 12 * D! + 4 * B! * N! * N! * D! + 24 * B! * D! * D! };
    },
  },
);
