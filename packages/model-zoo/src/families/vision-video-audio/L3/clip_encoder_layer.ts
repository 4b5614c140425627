import { DTYPE_INFO, F, Module, defineTask, hostArray, type HostArray, type Tensor } from '@fastkernels/core';
import { bytesOf, randn } from '../../../common/inputs.js';
import type { LayerNorm } from '../../../layers/norm.js';
import { createLayer } from '../../../layers/registry.js';
import { initFamilyParameters } from '../cases.js';
import { CLIP_L, tinyClipConfig, type ClipTextConfig } from '../clip-config.js';
import { FAMILY } from '../family.js';
import { layerNorm, param, sub } from '../host-math.js';
import { clipAttentionReference, clipLens, clipMaskInput, type CLIPAttention } from '../L2/clip_attention.js';
import { clipMlpReference, type CLIPMLP } from '../L2/clip_mlp.js';

/**
 * HF's CLIPEncoderLayer (pre-norm): x + self_attn(layer_norm1(x), mask), then x + mlp(layer_norm2(x)).
 * forward(hiddenStates [B, S, H], attentionMask [B, 1, S, S] bool | null) -> [B, S, H].
 */
export class CLIPEncoderLayer extends Module {
  readonly layerNorm1: LayerNorm;
  readonly selfAttn: CLIPAttention;
  readonly layerNorm2: LayerNorm;
  readonly mlp: CLIPMLP;
  constructor(readonly config: ClipTextConfig) {
    super();
    this.selfAttn = this.createModule('self_attn', 'L2/clip_attention', config);
    this.layerNorm1 = this.registerModule('layer_norm1', createLayer('LayerNorm', config.hiddenSize, config.layerNormEps));
    this.mlp = this.createModule('mlp', 'L2/clip_mlp', config);
    this.layerNorm2 = this.registerModule('layer_norm2', createLayer('LayerNorm', config.hiddenSize, config.layerNormEps));
  }

  forward(hiddenStates: Tensor, attentionMask: Tensor | null = null): Tensor {
    const n1 = this.layerNorm1.forward(hiddenStates);
    const a = this.selfAttn.forward(n1, attentionMask);
    n1.dispose();
    const h = F.add(hiddenStates, a);
    a.dispose();
    const n2 = this.layerNorm2.forward(h);
    const m = this.mlp.forward(n2);
    n2.dispose();
    const y = F.add(h, m);
    h.dispose();
    m.dispose();
    return y;
  }
}

/** Golden float64 CLIPEncoderLayer (causal, pads hidden for `lens`). */
export function clipLayerReference(x: HostArray, params: ReadonlyMap<string, HostArray>, c: ClipTextConfig, lens: readonly number[] | null): HostArray {
  const [B, S, H] = x.shape as [number, number, number];
  const ln = (d: ArrayLike<number>, n: string) => layerNorm(d, B * S, H, c.layerNormEps, param(params, `${n}.weight`), param(params, `${n}.bias`));
  const a = clipAttentionReference(hostArray(x.shape, ln(x.data, 'layer_norm1')), sub(params, 'self_attn'), c, lens);
  const h = x.data.map((v, i) => v + a.data[i]!);
  const m = clipMlpReference(hostArray(x.shape, ln(h, 'layer_norm2')), sub(params, 'mlp'), c);
  return hostArray(x.shape, h.map((v, i) => v + m.data[i]!));
}

const layerCase = (name: string, dtype: 'f32' | 'bf16', cfg: ClipTextConfig, B: number, S: number, lens: number[] | null) => ({
  name, dtype, dims: { B, S, H: cfg.hiddenSize, Bm: lens ? B : 1 }, init: [cfg], options: lens ? { lens } : {},
});

export const clipEncoderLayerTask = defineTask(
  {
    id: 'L3/clip_encoder_layer',
    level: 3,
    className: 'CLIPEncoderLayer',
    family: [FAMILY],
    architectures: ['flux'],
    mirrors: 'transformers.models.clip.modeling_clip.CLIPEncoderLayer',
    description: 'CLIP encoder layer: pre-LayerNorm causal self-attention and pre-LayerNorm QuickGELU MLP, residuals.',
    init: [{ name: 'config', type: 'object', doc: 'the parsed CLIP text config (ClipTextConfig)' }],
    inputs: [
      { name: 'hiddenStates', dtype: 'act', shape: ['B', 'S', 'H'] },
      { name: 'attentionMask', dtype: 'bool', shape: ['Bm', 1, 'S', 'S'], optional: true },
    ],
    outputs: [{ name: 'out', dtype: 'act', shape: ['B', 'S', 'H'] }],
    tolerance: { bf16: { atol: 5e-2, rtol: 5e-2 } },
    imports: ['L2/clip_attention', 'L2/clip_mlp', 'L1/layer_norm'],
    cases: {
      ci: [layerCase('tiny-padded-f32', 'f32', tinyClipConfig(), 2, 9, [9, 5]), layerCase('tiny-causal-bf16', 'bf16', tinyClipConfig(), 1, 8, null)],
      production: [layerCase('clip-l-77', 'bf16', CLIP_L, 1, 77, null), layerCase('clip-l-b8-77', 'bf16', CLIP_L, 8, 77, null)],
    },
  },
  {
    baseline: CLIPEncoderLayer,
    makeInputs: (c, ctx, rng) => {
      const { B, S, H } = c.dims as Record<string, number>;
      return [randn(ctx, rng, [B!, S!, H!], c.dtype), clipMaskInput(ctx, B!, S!, clipLens(c))];
    },
    initParameters: (m, _c, rng) => initFamilyParameters(m, rng),
    reference: ([x], params, c) => [clipLayerReference(x!, params, c.init[0] as ClipTextConfig, clipLens(c))],
    work: (c) => {
      const cfg = c.init[0] as ClipTextConfig;
      const { B, S, H } = c.dims as Record<string, number>;
      const it = DTYPE_INFO[c.dtype].itemsize;
      return { bytes: bytesOf([4 * H! + 2 * cfg.intermediateSize, H!], it) + 10 * bytesOf([B!, S!, H!], it), flops: 8 * B! * S! * H! * H! + 4 * B! * S! * S! * H! + 4 * B! * S! * H! * cfg.intermediateSize };
    },
  },
);
