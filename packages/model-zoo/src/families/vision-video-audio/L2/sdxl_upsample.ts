import { F, Module, defineTask, type Tensor } from '@fastkernels/core';
import { randn } from '../../../common/inputs.js';
import { createLayer } from '../../../layers/registry.js';
import type { Conv2d } from '../../../layers/conv.js';
import { initFamilyParameters } from '../cases.js';
import { FAMILY } from '../family.js';
import { upsample2dReference } from '../vae/reference.js';

/**
 * diffusers.models.upsampling.Upsample2D(channels, use_conv, use_conv_transpose=False, out_channels): nearest 2x
 * (computed in f32 for bf16 inputs, as diffusers does: upsample_nearest2d had no bf16 kernel), then a 3x3 `conv`
 * when use_conv. The VAE decoder's and SDXL UNet's upsampler. forward(hiddenStates [N, C, H, W]) -> [N, Co, 2H, 2W].
 */
export class Upsample2D extends Module {
  readonly outChannels: number;
  readonly conv: Conv2d | null;
  constructor(
    readonly channels: number,
    readonly useConv = false,
    outChannels: number | null = null,
  ) {
    super();
    this.outChannels = outChannels ?? channels;
    this.conv = useConv ? this.registerModule('conv', createLayer('Conv2d', channels, this.outChannels, 3, 1, 1)) : null;
  }

  forward(hiddenStates: Tensor): Tensor {
    const wide = hiddenStates.dtype === 'bf16' ? F.to(hiddenStates, 'f32') : hiddenStates;
    const up = F.interpolate(wide, { scale_factor: 2, mode: 'nearest' });
    if (wide !== hiddenStates) wide.dispose();
    const back = up.dtype === hiddenStates.dtype ? up : F.to(up, hiddenStates.dtype);
    if (back !== up) up.dispose();
    if (!this.conv) return back;
    const y = this.conv.forward(back);
    back.dispose();
    return y;
  }
}

type Dims = { N: number; C: number; Co: number; H: number; W: number; Ho: number; Wo: number };
const ucase = (name: string, dtype: 'f32' | 'bf16', N: number, C: number, H: number, W: number, useConv = true, Co = C) => ({
  name, dtype, dims: { N, C, Co, H, W, Ho: 2 * H, Wo: 2 * W }, init: [C, useConv, Co],
});

export const sdxlUpsampleTask = defineTask(
  {
    id: 'L2/sdxl_upsample',
    level: 2,
    className: 'Upsample2D',
    family: [FAMILY],
    architectures: ['sdxl', 'flux'],
    mirrors: 'diffusers.models.upsampling.Upsample2D',
    description: 'Nearest-neighbour 2x upsampling followed by a 3x3 convolution (VAE decoder and SDXL UNet up blocks).',
    init: [
      { name: 'channels', type: 'int' },
      { name: 'useConv', type: 'bool', optional: true, default: false },
      { name: 'outChannels', type: 'int', optional: true, doc: 'default channels' },
    ],
    inputs: [{ name: 'hiddenStates', dtype: 'act', shape: ['N', 'C', 'H', 'W'] }],
    outputs: [{ name: 'out', dtype: 'act', shape: ['N', 'Co', 'Ho', 'Wo'] }],
    imports: ['L1/conv2d'],
    cases: {
      ci: [ucase('conv-f32', 'f32', 2, 8, 5, 3), ucase('conv-bf16', 'bf16', 1, 16, 4, 4), ucase('no-conv-f32', 'f32', 1, 4, 3, 5, false)],
      production: [
        // FLUX.1 VAE decoder at 1024²: after up_blocks 0, 1, 2
        ucase('flux-vae-512-128', 'bf16', 1, 512, 128, 128),
        ucase('flux-vae-512-256', 'bf16', 1, 512, 256, 256),
        ucase('flux-vae-256-512', 'bf16', 1, 256, 512, 512),
        // SDXL UNet at 1024² (latents 128², batch 2 for classifier-free guidance)
        ucase('sdxl-unet-1280-32', 'bf16', 2, 1280, 32, 32),
        ucase('sdxl-unet-640-64', 'bf16', 2, 640, 64, 64),
      ],
    },
  },
  {
    baseline: Upsample2D,
    makeInputs: (c, ctx, rng) => {
      const { N, C, H, W } = c.dims as Dims;
      return [randn(ctx, rng, [N, C, H, W], c.dtype)];
    },
    initParameters: (m, _c, rng) => initFamilyParameters(m, rng),
    reference: ([x], P) => [upsample2dReference(x!, P, P.has('conv.weight'))],
    work: (c) => {
      const { N, C, Co, Ho, Wo } = c.dims as Dims;
      const it = c.dtype === 'f32' ? 4 : 2;
      const conv = c.init[1] as boolean;
      return { bytes: it * (N * C * Ho * Wo * (conv ? 2.25 : 1.25) + (conv ? N * Co * Ho * Wo + 9 * C * Co : 0)), flops: conv ? 2 * N * Ho * Wo * Co * C * 9 : N * C * Ho * Wo };
    },
  },
);
