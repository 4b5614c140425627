/**
 * Generated layer_norm / group_norm on CUDA vs the float64 CPU backend through the op registry: the production shapes'
 * launch classes (BGE: a warp a row; FLUX: a block a row; YOLO: 1024 threads a group row), rows longer than the
 * registers hold (read again), no / weight-only / mixed-dtype affine, strided rows, odd sizes, multi-dim normalized_shape.
 */
import { describe, it } from 'vitest';
import type { DType } from '@fastkernels/core';
import { G } from '../../test/spine-helpers.js';
import { checkOp, rand } from '../../test/ops-helpers.js';

/** The gpu tag, and time for NVRTC: every dtype / class of every op is a fresh kernel on a first run (no disk cache). */
const GT = { ...G, timeout: 300_000 };

const DTYPES: DType[] = ['bf16', 'f16', 'f32'];

describe('layer_norm vs the float64 CPU backend', () => {
  for (const dtype of DTYPES) {
    it(`${dtype}: BGE and FLUX widths, odd widths, no affine, strided rows, 2-d normalized_shape, long rows`, GT, () => {
      const ln = (label: string, shape: number[], ns: number[], affine: 'both' | 'weight' | 'none', seed: number, view?: (t: import('@fastkernels/core').Tensor) => import('@fastkernels/core').Tensor, wDType: DType = dtype) =>
        checkOp(label, {
          op: 'layer_norm',
          inputs: [rand(shape, dtype, seed, { scale: 2 }), affine === 'none' ? null : rand(ns, wDType, seed + 1), affine === 'both' ? rand(ns, wDType, seed + 2) : null],
          attrs: { normalized_shape: ns, eps: 1e-6 },
          views: [view],
        });
      ln('BGE [129, 1024] (a warp a row)', [129, 1024], [1024], 'both', 1);
      ln('FLUX [64, 3072] (a block a row)', [64, 3072], [3072], 'both', 4);
      ln('odd [7, 1000]', [7, 1000], [1000], 'both', 7);
      ln('odd [5, 333] (vec 1)', [5, 333], [333], 'weight', 10);
      ln('no affine [3, 5, 100]', [3, 5, 100], [100], 'none', 13);
      ln('2-d normalized_shape [4, 6, 10]', [4, 6, 10], [6, 10], 'both', 16);
      ln('strided rows', [20, 1100], [1024], 'both', 19, (t) => t.narrow(1, 8, 1024));
      ln('long rows [2, 140000] (beyond the registers: read again)', [2, 140000], [140000], 'both', 22);
      if (dtype !== 'f32') ln(`${dtype} input, f32 weight and bias`, [33, 1024], [1024], 'both', 25, undefined, 'f32');
    });
  }
});

describe('group_norm vs the float64 CPU backend', () => {
  for (const dtype of DTYPES) {
    it(`${dtype}: YOLO-like map, odd spatial sizes, weight only, no affine, 3-d input`, GT, () => {
      const gn = (label: string, shape: number[], groups: number, affine: 'both' | 'weight' | 'none', seed: number) =>
        checkOp(label, {
          op: 'group_norm',
          inputs: [rand(shape, dtype, seed, { scale: 2 }), affine === 'none' ? null : rand([shape[1]!], dtype, seed + 1), affine === 'both' ? rand([shape[1]!], dtype, seed + 2) : null],
          attrs: { num_groups: groups, eps: 1e-5 },
        });
      gn('[2, 256, 40, 40], 32 groups', [2, 256, 40, 40], 32, 'both', 1);
      gn('[2, 6, 7, 5], 3 groups (odd spatial)', [2, 6, 7, 5], 3, 'both', 4);
      gn('[3, 64, 9], 8 groups, weight only', [3, 64, 9], 8, 'weight', 7);
      gn('[4, 32, 16, 16], 1 group, no affine', [4, 32, 16, 16], 1, 'none', 10);
    });
  }
});
