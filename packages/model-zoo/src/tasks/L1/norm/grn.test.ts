/** GRN and LayerNorm2d (ConvNeXt-V2's L1 tasks) on hand-computed values, and LayerNorm2d's channels-last output. */
import { ModuleRegistry, Tensor, hostArray, withContext } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../../test/l1-harness.js';
import { GRN, grnReference } from './grn.js';
import { LayerNorm2d, layerNorm2dReference } from './layer_norm2d.js';

const ctx = () => ({ backend: cpuBackend(), device: 0, dtype: 'f64' as const, registry: new ModuleRegistry() });

describe('GRN', () => {
  it('x * (1 + w * ||x||_HW / (mean_c ||x||_HW + eps)) + b on a 1 x 2 x 1 x 2 map', () => {
    // channel 0: values 3, 4 -> norm 5; channel 1: 0, 0 -> norm 0; mean norm 2.5 -> Nx = [2, 0]
    const x = hostArray([1, 2, 1, 2], [3, 0, 4, 0]);
    const w = hostArray([2], [0.5, 1]);
    const b = hostArray([2], [0.1, -0.2]);
    const want = [3 + 0.5 * 3 * (5 / (2.5 + 1e-6)) + 0.1, -0.2, 4 + 0.5 * 4 * (5 / (2.5 + 1e-6)) + 0.1, -0.2];
    const got = grnReference(x, w, b);
    got.data.forEach((v, i) => expect(v).toBeCloseTo(want[i]!, 12));
    const c = ctx();
    withContext(c, () => {
      const m = new GRN(2);
      m.weight.copy_(Tensor.fromArray(c.backend, w.data, [1, 1, 1, 2], 'f64'));
      m.bias.copy_(Tensor.fromArray(c.backend, b.data, [1, 1, 1, 2], 'f64'));
      const y = m.forward(Tensor.fromArray(c.backend, x.data, [1, 2, 1, 2], 'f64'));
      [...y.toFloat64Array()].forEach((v, i) => expect(v).toBeCloseTo(want[i]!, 12));
    });
  });
});

describe('LayerNorm2d', () => {
  it('normalises each pixel over channels and returns a channels-last view, as HF / timm permute', () => {
    // pixel 0: channels (1, 3) -> mean 2, var 1 -> (-1, 1); pixel 1: (2, 6) -> mean 4, var 4 -> (-1, 1)
    const x = hostArray([1, 2, 1, 2], [1, 2, 3, 6]);
    const ref = layerNorm2dReference(x, null, null, 0);
    expect([...ref.data]).toEqual([-1, -1, 1, 1]);
    const c = ctx();
    withContext(c, () => {
      const m = new LayerNorm2d(2, 0);
      const y = m.forward(Tensor.fromArray(c.backend, x.data, [1, 2, 1, 2], 'f64'));
      expect([...y.shape]).toEqual([1, 2, 1, 2]);
      expect([...y.strides]).toEqual([4, 1, 4, 2]); // [N, H, W, C] memory viewed as NCHW
      [...y.toFloat64Array()].forEach((v, i) => expect(v).toBeCloseTo(ref.data[i]!, 12));
    });
  });
});
