import { hostArray, type HostArray } from '@fastkernels/core';
import { MaxPool2d } from '../../../layers/pooling.js';
import { defineL1OpTask } from '../../define-op-task.js';
import { convOut } from './conv2d.js';

/** Golden max pooling of [N, C, H, W] with a square window (padding counts as -inf, torch's floor rule). */
export function maxPool2dReference(x: HostArray, k: number, stride: number, padding: number): HostArray {
  const [N, C, H, W] = x.shape as [number, number, number, number];
  const Ho = convOut(H, k, stride, padding);
  const Wo = convOut(W, k, stride, padding);
  const out = hostArray([N, C, Ho, Wo]);
  for (let nc = 0; nc < N * C; nc++) {
    for (let i = 0; i < Ho; i++) {
      for (let j = 0; j < Wo; j++) {
        let m = -Infinity;
        for (let a = 0; a < k; a++) {
          const y = i * stride - padding + a;
          if (y < 0 || y >= H) continue;
          for (let b = 0; b < k; b++) {
            const xx = j * stride - padding + b;
            if (xx >= 0 && xx < W) m = Math.max(m, x.data[(nc * H + y) * W + xx]!);
          }
        }
        out.data[(nc * Ho + i) * Wo + j] = m;
      }
    }
  }
  return out;
}

const int = (c: { init: readonly unknown[] }, i: number, d: number) => (c.init[i] as number | null | undefined) ?? d;
const pool = (name: string, dtype: 'f32' | 'bf16' | 'f16', N: number, C: number, H: number, W: number, k: number, s: number, p: number) => ({
  name, dtype, dims: { N, C, H, W, Ho: convOut(H, k, s, p), Wo: convOut(W, k, s, p) }, init: [k, s, p],
});

/** torch.nn.MaxPool2d: the layer (layers/pooling.ts) is the baseline; YOLOv10's SPPF pools 5x5, stride 1, padding 2, three times. */
export const maxPool2dTask = defineL1OpTask('max_pool2d', {
  id: 'L1/max_pool2d',
  className: 'MaxPool2d',
  mirrors: 'torch.nn.MaxPool2d',
  description: 'Max pooling of NCHW feature maps over a square window (stride, padding as -inf).',
  architectures: ['rtdetrv2', 'yolov10'],
  baseline: MaxPool2d,
  init: [
    { name: 'kernelSize', type: 'int' },
    { name: 'stride', type: 'int', optional: true, default: null },
    { name: 'padding', type: 'int', optional: true, default: 0 },
    { name: 'dilation', type: 'int', optional: true, default: 1 },
    { name: 'returnIndices', type: 'bool', optional: true, default: false },
    { name: 'ceilMode', type: 'bool', optional: true, default: false },
  ],
  forward: { input: { shape: ['N', 'C', 'H', 'W'] } },
  params: {},
  outputs: [{ shape: ['N', 'C', 'Ho', 'Wo'] }],
  attrs: (c) => ({ kernel_size: c.init[0] as number, stride: int(c, 1, c.init[0] as number), padding: int(c, 2, 0) }),
  cases: {
    ci: [pool('sppf-small', 'f32', 2, 6, 7, 9, 5, 1, 2), pool('small-3x3-s2', 'f32', 1, 4, 9, 8, 3, 2, 1), pool('sppf-small-bf16', 'bf16', 2, 8, 6, 6, 5, 1, 2)],
    // YOLOv10 SPPF at 640 x 640 (P5 is 20 x 20): n has 128 hidden channels, s 256, m 288.
    production: [
      pool('yolov10n-sppf-bs1', 'f16', 1, 128, 20, 20, 5, 1, 2),
      pool('yolov10n-sppf-bs32', 'f16', 32, 128, 20, 20, 5, 1, 2),
      pool('yolov10s-sppf-bs32', 'f16', 32, 256, 20, 20, 5, 1, 2),
      pool('yolov10m-sppf-bs32', 'f16', 32, 288, 20, 20, 5, 1, 2),
    ],
  },
  reference: ([x], _p, c) => [maxPool2dReference(x!, c.init[0] as number, int(c, 1, c.init[0] as number), int(c, 2, 0))],
  flopsPerElement: 25,
});
