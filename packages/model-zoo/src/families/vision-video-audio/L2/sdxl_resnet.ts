import { F, Module, defineTask, type Tensor } from '@fastkernels/core';
import { randn } from '../../../common/inputs.js';
import { createLayer } from '../../../layers/registry.js';
import type { Conv2d } from '../../../layers/conv.js';
import type { GroupNorm } from '../../../layers/norm.js';
import type { SiLU } from '../../../layers/activation.js';
import type { Linear } from '../../../tasks/L1/linear/linear.js';
import { initFamilyParameters } from '../cases.js';
import { FAMILY } from '../family.js';
import { resnetBlock2dReference } from '../vae/reference.js';

/**
 * diffusers.models.resnet.ResnetBlock2D as the AutoencoderKL decoder (temb_channels None) and SDXL's UNet (a time
 * embedding added after conv1, time_embedding_norm "default") build it: pre-norm GroupNorm + SiLU + 3x3 conv twice,
 * a 1x1 conv_shortcut when the channel count changes, (shortcut + h) / output_scale_factor. diffusers' keyword
 * arguments, positionally: (in_channels, out_channels, temb_channels, groups, eps, output_scale_factor); dropout 0.
 * forward(inputTensor [N, Ci, H, W], temb [N, T] | null) -> [N, Co, H, W].
 */
export class ResnetBlock2D extends Module {
  readonly outChannels: number;
  readonly norm1: GroupNorm;
  readonly conv1: Conv2d;
  readonly timeEmbProj: Linear | null;
  readonly norm2: GroupNorm;
  readonly conv2: Conv2d;
  readonly nonlinearity: SiLU;
  readonly convShortcut: Conv2d | null;
  constructor(
    readonly inChannels: number,
    outChannels: number | null = null,
    readonly tembChannels: number | null = 512,
    readonly groups = 32,
    readonly eps = 1e-6,
    readonly outputScaleFactor = 1,
  ) {
    super();
    const out = (this.outChannels = outChannels ?? inChannels);
    this.norm1 = this.registerModule('norm1', createLayer('GroupNorm', groups, inChannels, eps, true));
    this.conv1 = this.registerModule('conv1', createLayer('Conv2d', inChannels, out, 3, 1, 1));
    this.timeEmbProj = tembChannels === null ? null : this.createModule<Linear>('time_emb_proj', 'L1/linear', tembChannels, out, true);
    this.norm2 = this.registerModule('norm2', createLayer('GroupNorm', groups, out, eps, true));
    this.conv2 = this.registerModule('conv2', createLayer('Conv2d', out, out, 3, 1, 1));
    this.nonlinearity = this.registerModule('nonlinearity', createLayer('SiLU'));
    this.convShortcut = inChannels === out ? null : this.registerModule('conv_shortcut', createLayer('Conv2d', inChannels, out, 1, 1, 0));
  }

  forward(inputTensor: Tensor, temb: Tensor | null = null): Tensor {
    const own: Tensor[] = [];
    const t = <T extends Tensor>(x: T): T => (own.push(x), x);
    try {
      let h = t(this.conv1.forward(t(this.nonlinearity.forward(t(this.norm1.forward(inputTensor))))));
      if (temb) {
        if (!this.timeEmbProj) throw new Error('ResnetBlock2D: temb given to a block built with temb_channels None');
        const e = t(this.timeEmbProj.forward(t(this.nonlinearity.forward(temb))));
        h = t(F.add(h, t(e.view([e.shape[0]!, e.shape[1]!, 1, 1]))));
      }
      h = t(this.conv2.forward(t(this.nonlinearity.forward(t(this.norm2.forward(h))))));
      const short = this.convShortcut ? t(this.convShortcut.forward(inputTensor)) : inputTensor;
      const sum = t(F.add(short, h));
      return this.outputScaleFactor === 1 ? (own.pop(), sum) : F.div(sum, this.outputScaleFactor);
    } finally {
      for (const x of own) x.dispose();
    }
  }
}

type Dims = { N: number; Ci: number; Co: number; H: number; W: number; T: number };
const rcase = (name: string, dtype: 'f32' | 'bf16', d: Dims, groups: number, osf = 1) => ({
  name, dtype, dims: d, init: [d.Ci, d.Co, d.T || null, groups, 1e-6, osf],
});

export const sdxlResnetTask = defineTask(
  {
    id: 'L2/sdxl_resnet',
    level: 2,
    className: 'ResnetBlock2D',
    family: [FAMILY],
    architectures: ['sdxl', 'flux'],
    mirrors: 'diffusers.models.resnet.ResnetBlock2D',
    description: 'Pre-norm residual block of two GroupNorm + SiLU + 3x3 convs, an optional time embedding added after the first, a 1x1 shortcut when channels change (the VAE decoder and the SDXL UNet).',
    init: [
      { name: 'inChannels', type: 'int' },
      { name: 'outChannels', type: 'int', optional: true, doc: 'default in_channels' },
      { name: 'tembChannels', type: 'int', optional: true, doc: 'null: no time embedding (the VAE)' },
      { name: 'groups', type: 'int', optional: true, default: 32 },
      { name: 'eps', type: 'float', optional: true, default: 1e-6 },
      { name: 'outputScaleFactor', type: 'float', optional: true, default: 1 },
    ],
    inputs: [
      { name: 'inputTensor', dtype: 'act', shape: ['N', 'Ci', 'H', 'W'] },
      { name: 'temb', dtype: 'act', shape: ['N', 'T'], optional: true, doc: 'absent when temb_channels is null' },
    ],
    outputs: [{ name: 'out', dtype: 'act', shape: ['N', 'Co', 'H', 'W'] }],
    tolerance: { bf16: { atol: 6e-2, rtol: 6e-2 } },
    imports: ['L1/group_norm', 'L1/conv2d', 'L1/silu', 'L1/linear'],
    cases: {
      ci: [
        rcase('vae-shortcut-f32', 'f32', { N: 2, Ci: 8, Co: 16, H: 5, W: 6, T: 0 }, 4),
        rcase('unet-temb-f32', 'f32', { N: 2, Ci: 16, Co: 16, H: 4, W: 4, T: 12 }, 8, 2),
        rcase('vae-bf16', 'bf16', { N: 1, Ci: 16, Co: 16, H: 6, W: 6, T: 0 }, 8),
      ],
      production: [
        // FLUX.1 VAE decoder at 1024² (latents 128²): mid block, and the widest / largest up-block resnets
        rcase('flux-vae-mid-512-128', 'bf16', { N: 1, Ci: 512, Co: 512, H: 128, W: 128, T: 0 }, 32),
        rcase('flux-vae-up1-512-256', 'bf16', { N: 1, Ci: 512, Co: 512, H: 256, W: 256, T: 0 }, 32),
        rcase('flux-vae-up2-512to256-512', 'bf16', { N: 1, Ci: 512, Co: 256, H: 512, W: 512, T: 0 }, 32),
        rcase('flux-vae-up3-128-1024', 'bf16', { N: 1, Ci: 128, Co: 128, H: 1024, W: 1024, T: 0 }, 32),
        // SDXL UNet at 1024² (latents 128²): 320 channels with the 1280-wide time embedding
        rcase('sdxl-unet-320-128', 'bf16', { N: 2, Ci: 320, Co: 320, H: 128, W: 128, T: 1280 }, 32),
      ],
    },
  },
  {
    baseline: ResnetBlock2D,
    makeInputs: (c, ctx, rng) => {
      const { N, Ci, H, W, T } = c.dims as Dims;
      return [randn(ctx, rng, [N, Ci, H, W], c.dtype), T ? randn(ctx, rng, [N, T], c.dtype) : null];
    },
    initParameters: (m, _c, rng) => initFamilyParameters(m, rng),
    reference: ([x, temb], P, c) => [resnetBlock2dReference(x!, temb ?? null, P, c.init[3] as number, c.init[4] as number, c.init[5] as number)],
    work: (c) => {
      const { N, Ci, Co, H, W, T } = c.dims as Dims;
      const it = c.dtype === 'f32' ? 4 : 2;
      const px = N * H * W;
      return {
        bytes: it * (px * Ci * 3 + px * Co * 7 + 9 * Co * (Ci + Co) + (Ci !== Co ? Ci * Co : 0) + T * Co),
        flops: 2 * px * 9 * Co * (Ci + Co) + (Ci !== Co ? 2 * px * Ci * Co : 0) + 2 * N * T * Co + 20 * px * (Ci + Co),
      };
    },
  },
);
