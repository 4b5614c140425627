import { hostArray, type HostArray } from '@fastkernels/core';
import { GroupNorm } from '../../../layers/norm.js';
import { defineL1OpTask } from '../../define-op-task.js';

/** Golden float64 GroupNorm on [N, C, *]: each group of C / G channels normalised over its planes, then per-channel affine. */
export function groupNormReference(x: HostArray, numGroups: number, weight: HostArray | null, bias: HostArray | null, eps: number): HostArray {
  const [N, C] = x.shape as [number, number];
  const plane = x.shape.slice(2).reduce((a, b) => a * b, 1);
  const per = (C / numGroups) * plane;
  const out = hostArray(x.shape);
  for (let n = 0; n < N; n++) {
    for (let g = 0; g < numGroups; g++) {
      const base = (n * numGroups + g) * per;
      let mean = 0;
      for (let i = 0; i < per; i++) mean += x.data[base + i]!;
      mean /= per;
      let v = 0;
      for (let i = 0; i < per; i++) v += (x.data[base + i]! - mean) ** 2;
      const inv = 1 / Math.sqrt(v / per + eps);
      for (let i = 0; i < per; i++) {
        const ch = g * (C / numGroups) + Math.floor(i / plane);
        out.data[base + i] = (x.data[base + i]! - mean) * inv * (weight ? weight.data[ch]! : 1) + (bias ? bias.data[ch]! : 0);
      }
    }
  }
  return out;
}

const eps = (c: { init: readonly unknown[] }) => (c.init[2] as number | undefined) ?? 1e-5;

/** torch.nn.GroupNorm on NCHW feature maps: the layer (layers/norm.ts) is the baseline. */
export const groupNormTask = defineL1OpTask('group_norm', {
  id: 'L1/group_norm',
  className: 'GroupNorm',
  mirrors: 'torch.nn.GroupNorm',
  description: 'Group normalisation of [N, C, H, W]: statistics per sample over each group of channels and its planes, then a per-channel affine.',
  architectures: ['dp3', 'rwkv7', 'sdxl'],
  baseline: GroupNorm,
  init: [
    { name: 'numGroups', type: 'int' },
    { name: 'numChannels', type: 'int' },
    { name: 'eps', type: 'float', optional: true, default: 1e-5 },
    { name: 'affine', type: 'bool', optional: true, default: true },
  ],
  forward: { input: { shape: ['N', 'C', 'H', 'W'] } },
  params: { weight: { shape: ['C'] }, bias: { shape: ['C'] } },
  attrs: (c) => ({ num_groups: c.init[0] as number, eps: eps(c) }),
  cases: {
    ci: [
      { name: 'small', dtype: 'f32', dims: { N: 2, C: 8, H: 5, W: 3 }, init: [4, 8] },
      { name: 'small-one-group-no-affine', dtype: 'f32', dims: { N: 1, C: 6, H: 4, W: 4 }, init: [1, 6, 1e-6, false] },
      { name: 'small-bf16', dtype: 'bf16', dims: { N: 2, C: 12, H: 4, W: 6 }, init: [3, 12, 1e-6] },
    ],
    production: [
      // SDXL UNet (1024 px: 128 x 128 latents, batch 2 for classifier-free guidance): GroupNorm(32, C, eps=1e-5).
      { name: 'sdxl-unet-320', dtype: 'bf16', dims: { N: 2, C: 320, H: 128, W: 128 }, init: [32, 320, 1e-5] },
      { name: 'sdxl-unet-1280', dtype: 'bf16', dims: { N: 2, C: 1280, H: 32, W: 32 }, init: [32, 1280, 1e-5] },
      // SDXL VAE decoder: GroupNorm(32, 512, eps=1e-6) at 256 x 256.
      { name: 'sdxl-vae-decoder-512', dtype: 'bf16', dims: { N: 1, C: 512, H: 256, W: 256 }, init: [32, 512, 1e-6] },
    ],
  },
  inputScale: 2,
  reference: ([x], params, c) => [groupNormReference(x!, c.init[0] as number, params.get('weight') ?? null, params.get('bias') ?? null, eps(c))],
  flopsPerElement: 7,
});
