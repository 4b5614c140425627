import { F, Module, defineTask, fillNormal_, hostArray, type HostArray, type Tensor } from '@fastkernels/core';
import { randn } from '../../../common/inputs.js';
import { familiesOf } from '../../families.js';

/**
 * LayerNorm over the channels of [N, C, H, W] maps (timm LayerNorm2d; HF ConvNextV2LayerNorm with
 * data_format="channels_first"): permute to channels-last, layer_norm over C, permute back, as both do. The output
 * is then channels-last in memory (a permuted view), which the next convolution takes as is.
 */
export class LayerNorm2d extends Module {
  readonly weight: Tensor | null;
  readonly bias: Tensor | null;
  constructor(
    readonly numChannels: number,
    readonly eps = 1e-6,
    readonly affine = true,
  ) {
    super();
    this.weight = affine ? this.parameter('weight', [numChannels]).fill_(1) : null;
    this.bias = affine ? this.parameter('bias', [numChannels]) : null;
  }

  forward(x: Tensor): Tensor {
    const nhwc = x.permute([0, 2, 3, 1]);
    try {
      const y = F.layerNorm(nhwc, [this.numChannels], this.weight, this.bias, this.eps);
      const out = y.permute([0, 3, 1, 2]);
      y.dispose();
      return out;
    } finally {
      nhwc.dispose();
    }
  }
}

/** Golden float64 channels-first LayerNorm of [N, C, H, W]: each (n, h, w) normalised over C, biased variance. */
export function layerNorm2dReference(x: HostArray, weight: HostArray | null, bias: HostArray | null, eps: number): HostArray {
  const [N, C] = x.shape as [number, number];
  const plane = x.shape.slice(2).reduce((a, b) => a * b, 1);
  const out = hostArray(x.shape);
  for (let n = 0; n < N; n++) {
    for (let p = 0; p < plane; p++) {
      const at = (c: number) => (n * C + c) * plane + p;
      let mean = 0;
      for (let c = 0; c < C; c++) mean += x.data[at(c)]!;
      mean /= C;
      let v = 0;
      for (let c = 0; c < C; c++) v += (x.data[at(c)]! - mean) ** 2;
      const inv = 1 / Math.sqrt(v / C + eps);
      for (let c = 0; c < C; c++) out.data[at(c)] = (x.data[at(c)]! - mean) * inv * (weight ? weight.data[c]! : 1) + (bias ? bias.data[c]! : 0);
    }
  }
  return out;
}

const eps = (c: { init: readonly unknown[] }) => (c.init[1] as number | undefined) ?? 1e-6;
const ln = (name: string, dtype: 'f32' | 'bf16', N: number, C: number, H: number, W: number, init: unknown[] = [C]) => ({ name, dtype, dims: { N, C, H, W }, init });

export const layerNorm2dTask = defineTask(
  {
    id: 'L1/layer_norm2d',
    level: 1,
    className: 'LayerNorm2d',
    family: familiesOf(['convnextv2']),
    architectures: ['convnextv2'],
    mirrors: 'timm.layers.norm.LayerNorm2d',
    description: "LayerNorm over the channel dim of NCHW maps (ConvNeXt-V2's stem and downsampling norms): permute to channels-last, normalise over C with an affine weight and bias, permute back.",
    init: [
      { name: 'numChannels', type: 'int' },
      { name: 'eps', type: 'float', optional: true, default: 1e-6 },
      { name: 'affine', type: 'bool', optional: true, default: true },
    ],
    inputs: [{ name: 'x', dtype: 'act', shape: ['N', 'C', 'H', 'W'], optional: false }],
    outputs: [{ name: 'out', dtype: 'act', shape: ['N', 'C', 'H', 'W'], optional: false }],
    tolerance: {},
    cases: {
      ci: [ln('small', 'f32', 2, 24, 5, 7), ln('small-bf16', 'bf16', 1, 64, 6, 6), ln('no-affine', 'f32', 2, 16, 3, 4, [16, 1e-5, false])],
      // ConvNeXt-V2-base at 384 x 384: the stem norm (128 ch at 96 x 96) and the downsampling norms before stages 1-3
      production: [
        ln('convnextv2-base-stem-bs32', 'bf16', 32, 128, 96, 96),
        ln('convnextv2-base-down1-bs32', 'bf16', 32, 128, 96, 96),
        ln('convnextv2-base-down2-bs32', 'bf16', 32, 256, 48, 48),
        ln('convnextv2-base-down3-bs32', 'bf16', 32, 512, 24, 24),
        ln('convnextv2-base-stem-bs1', 'bf16', 1, 128, 96, 96),
      ],
    },
  },
  {
    baseline: LayerNorm2d,
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.N!, c.dims.C!, c.dims.H!, c.dims.W!], c.dtype, 2)],
    // weight 1 + N(0, 0.2^2), bias N(0, 0.2^2): trained-looking, every parameter exercised
    initParameters: (m, _c, rng) => {
      for (const [name, p] of m.namedParameters()) fillNormal_(p, rng, 0.2, name === 'weight' ? 1 : 0);
    },
    reference: ([x], P, c) => [layerNorm2dReference(x!, P.get('weight') ?? null, P.get('bias') ?? null, eps(c))],
    work: (c) => {
      const { N, C, H, W } = c.dims as Record<string, number>;
      const it = c.dtype === 'f32' ? 4 : 2;
      return { bytes: it * 2 * N! * C! * H! * W!, flops: 7 * N! * C! * H! * W! };
    },
  },
);
