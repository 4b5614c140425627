import { DTYPE_INFO, F, Module, defineTask, hostArray, type HostArray, type Tensor } from '@fastkernels/core';
import { bytesOf, randn } from '../../../common/inputs.js';
import type { SiLU } from '../../../layers/activation.js';
import type { LayerNorm } from '../../../layers/norm.js';
import { createLayer } from '../../../layers/registry.js';
import type { Linear } from '../../../tasks/L1/linear/linear.js';
import { initFamilyParameters } from '../cases.js';
import { FAMILY } from '../family.js';
import { FLUX1_DEV } from '../flux-config.js';
import { layerNorm, linear, param, silu } from '../host-math.js';
import { normModulate } from './modulate.js';

/**
 * diffusers' AdaLayerNormContinuous (FLUX's norm_out): emb = linear(silu(cond)) [B, 2D] chunked as scale, shift
 * (that order, unlike AdaLayerNormZero); x -> norm(x) * (1 + scale) + shift. forward(x [B, S, D], cond [B, C]).
 */
export class AdaLayerNormContinuous extends Module {
  readonly silu: SiLU;
  readonly linear: Linear;
  readonly norm: LayerNorm;
  constructor(
    readonly embeddingDim: number,
    readonly conditioningEmbeddingDim: number,
    readonly elementwiseAffine = true,
    readonly eps = 1e-5,
    bias = true,
    normType = 'layer_norm',
  ) {
    super();
    if (normType !== 'layer_norm') throw new RangeError(`AdaLayerNormContinuous: norm_type '${normType}' is not supported (layer_norm)`);
    this.silu = this.registerModule('silu', createLayer('SiLU'));
    this.linear = this.createModule('linear', 'L1/linear', conditioningEmbeddingDim, 2 * embeddingDim, bias);
    this.norm = this.registerModule('norm', createLayer('LayerNorm', embeddingDim, eps, elementwiseAffine, bias));
  }

  forward(x: Tensor, conditioningEmbedding: Tensor): Tensor {
    const a = this.silu.forward(conditioningEmbedding);
    const a2 = F.to(a, x.dtype);
    a.dispose();
    const e = this.linear.forward(a2);
    a2.dispose();
    const [scale, shift] = F.chunk(e, 2, 1) as [Tensor, Tensor];
    const y = normModulate(this.norm, x, scale, shift);
    for (const t of [scale, shift, e]) t.dispose();
    return y;
  }
}

/** Golden float64 AdaLayerNormContinuous. */
export function adaLayerNormContinuousReference(x: HostArray, cond: HostArray, params: ReadonlyMap<string, HostArray>, eps: number): HostArray {
  const [B, S, D] = x.shape as [number, number, number];
  const e = linear(cond.data.map(silu), B, param(params, 'linear.weight'), params.get('linear.bias') ?? null);
  const h = layerNorm(x.data, B * S, D, eps, params.get('norm.weight') ?? null, params.get('norm.bias') ?? null);
  return hostArray(x.shape, h.map((v, t) => {
    const b = Math.floor(t / (S * D));
    const j = t % D;
    return v * (1 + e[b * 2 * D + j]!) + e[b * 2 * D + D + j]!;
  }));
}

const contCase = (name: string, dtype: 'f32' | 'bf16', B: number, S: number, D: number, C: number, affine: boolean, eps: number) => ({ name, dtype, dims: { B, S, D, C }, init: [D, C, affine, eps] });

export const adaLayerNormContinuousTask = defineTask(
  {
    id: 'L2/ada_layer_norm_continuous',
    level: 2,
    className: 'AdaLayerNormContinuous',
    family: [FAMILY],
    architectures: ['flux', 'hunyuan_video'],
    mirrors: 'diffusers.models.normalization.AdaLayerNormContinuous',
    description: 'Continuous adaptive LayerNorm: linear(silu(cond)) -> scale, shift; norm(x) * (1 + scale) + shift (FLUX norm_out).',
    init: [
      { name: 'embeddingDim', type: 'int' },
      { name: 'conditioningEmbeddingDim', type: 'int' },
      { name: 'elementwiseAffine', type: 'bool', optional: true, default: true },
      { name: 'eps', type: 'float', optional: true, default: 1e-5 },
      { name: 'bias', type: 'bool', optional: true, default: true },
      { name: 'normType', type: 'enum', choices: ['layer_norm'], optional: true, default: 'layer_norm' },
    ],
    inputs: [
      { name: 'x', dtype: 'act', shape: ['B', 'S', 'D'] },
      { name: 'conditioningEmbedding', dtype: 'act', shape: ['B', 'C'] },
    ],
    outputs: [{ name: 'out', dtype: 'act', shape: ['B', 'S', 'D'] }],
    imports: ['L1/linear', 'L1/layer_norm'],
    cases: {
      ci: [contCase('tiny-f32', 'f32', 2, 5, 32, 24, false, 1e-6), contCase('tiny-affine-bf16', 'bf16', 1, 6, 32, 32, true, 1e-5)],
      production: [
        // FLUX.1-dev norm_out over the 4096 image tokens (1024 px) / 1024 (512 px).
        contCase('flux1-dev-1024px', 'bf16', 1, 4096, FLUX1_DEV.innerDim, FLUX1_DEV.innerDim, false, 1e-6),
        contCase('flux1-dev-512px', 'bf16', 1, 1024, FLUX1_DEV.innerDim, FLUX1_DEV.innerDim, false, 1e-6),
      ],
    },
  },
  {
    baseline: AdaLayerNormContinuous,
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.B!, c.dims.S!, c.dims.D!], c.dtype), randn(ctx, rng, [c.dims.B!, c.dims.C!], c.dtype)],
    initParameters: (m, _c, rng) => initFamilyParameters(m, rng),
    reference: ([x, cond], params, c) => [adaLayerNormContinuousReference(x!, cond!, params, (c.init[3] as number | undefined) ?? 1e-5)],
    work: (c) => {
      const { B, S, D, C } = c.dims as Record<string, number>;
      const it = DTYPE_INFO[c.dtype].itemsize;
      return { bytes: bytesOf([2 * D!, C!], it) + 2 * bytesOf([B!, S!, D!], it), flops: 4 * B! * C! * D! + 8 * B! * S! * D! };
    },
  },
);
