/**
 * The generated pooling kernels vs the float64 CPU backend through the op registry: max (dilation, ceil_mode, indices),
 * avg (count_include_pad, divisor_override, ceil_mode), adaptive avg / max, 1-d to 3-d, NCHW / channels-last /
 * non-contiguous / unbatched inputs, bf16 / f16 / f32.
 */
import { describe, it } from 'vitest';
import type { DType, Tensor } from '@fastkernels/core';
import { G } from '../../../test/spine-helpers.js';
import { checkOp, rand } from '../../../test/ops-helpers.js';

const GT = { ...G, timeout: 300_000 };
const DTYPES: DType[] = ['bf16', 'f16', 'f32'];

const channelsLast = (t: Tensor): Tensor => {
  const r = t.rank;
  const p = t.permute([0, ...Array.from({ length: r - 2 }, (_, i) => i + 2), 1]);
  const c = p.contiguous();
  p.dispose();
  const v = c.permute([0, r - 1, ...Array.from({ length: r - 2 }, (_, i) => i + 1)]);
  c.dispose();
  return v;
};
const narrowW = (t: Tensor) => t.narrow(t.rank - 1, 1, t.shape[t.rank - 1]! - 2);

describe('CUDA pooling vs the float64 CPU backend', () => {
  for (const dtype of DTYPES) {
    it(`${dtype}: max / avg / adaptive, 1-d to 3-d, layouts`, GT, () => {
      const run = (label: string, op: string, shape: number[], attrs: Record<string, unknown>, seed: number, view?: (t: Tensor) => Tensor) =>
        checkOp(`${label} ${dtype}`, { op, inputs: [rand(shape, dtype, seed)], attrs, views: [view] });
      run('ResNet stem max 3x3 s2 p1', 'max_pool2d', [2, 16, 28, 28], { kernel_size: 3, stride: 2, padding: 1 }, 1);
      run('max with indices, channels-last', 'max_pool2d_with_indices', [2, 8, 13, 11], { kernel_size: 3, stride: 2, padding: 1 }, 2, channelsLast);
      run('YOLO SPPF max 5x5 s1 p2 channels-last', 'max_pool2d', [1, 32, 20, 20], { kernel_size: 5, stride: 1, padding: 2 }, 3, channelsLast);
      run('max dilation 2, ceil_mode', 'max_pool2d_with_indices', [1, 4, 15, 14], { kernel_size: 3, stride: 2, padding: 1, dilation: 2, ceil_mode: true }, 4);
      run('max1d on a narrowed input', 'max_pool1d_with_indices', [3, 5, 30], { kernel_size: 4, stride: 3 }, 5, narrowW);
      run('max3d', 'max_pool3d', [1, 3, 7, 8, 9], { kernel_size: 3, stride: 2, padding: 1 }, 6);
      run('avg 2x2 s2', 'avg_pool2d', [2, 8, 16, 16], { kernel_size: 2 }, 7);
      run('avg 3x3 p1 without pad in the count, ceil_mode', 'avg_pool2d', [2, 4, 11, 10], { kernel_size: 3, stride: 2, padding: 1, count_include_pad: false, ceil_mode: true }, 8);
      run('avg divisor_override, channels-last', 'avg_pool2d', [1, 8, 9, 9], { kernel_size: 3, stride: 3, divisor_override: 5 }, 9, channelsLast);
      run('avg1d unbatched', 'avg_pool1d', [6, 25], { kernel_size: 5, stride: 2, padding: 2 }, 10);
      run('avg3d', 'avg_pool3d', [1, 2, 6, 6, 6], { kernel_size: 2 }, 11);
      run('adaptive avg to 1x1 (global pool)', 'adaptive_avg_pool2d', [2, 32, 7, 7], { output_size: 1 }, 12);
      run('adaptive avg 7 -> 3 (overlapping windows), channels-last', 'adaptive_avg_pool2d', [2, 8, 7, 10], { output_size: [3, 4] }, 13, channelsLast);
      run('adaptive max with indices', 'adaptive_max_pool2d_with_indices', [1, 5, 9, 11], { output_size: [4, null] }, 14);
      run('adaptive avg 1d unbatched', 'adaptive_avg_pool1d', [4, 17], { output_size: 5 }, 15);
      run('adaptive max 3d', 'adaptive_max_pool3d', [1, 2, 5, 6, 7], { output_size: [2, 3, 4] }, 16);
    });
  }
});
