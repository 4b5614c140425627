import { F, Tensor, hostArray, withContext, ModuleRegistry, type ExecutionContext } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../../test/l1-harness.js';
import { DiffusionRoPE, diffusionRopeReference } from './diffusion_rope.js';
import { FluxPosEmbed, fluxPosEmbedReference } from './flux_pos_embed.js';

const ctx = (): ExecutionContext => ({ backend: cpuBackend(), device: 0, dtype: 'f32', registry: new ModuleRegistry() });

describe('diffusion rotary references', () => {
  it('rotates an interleaved pair by the angle, and neox halves likewise', () => {
    // one token, one head, D = 4, R = 2: only (x0, x1) turns, by 90 degrees
    const x = hostArray([1, 1, 1, 4], [1, 2, 3, 4]);
    const cos = hostArray([1, 1], [0]);
    const sin = hostArray([1, 1], [1]);
    expect([...diffusionRopeReference(x, cos, sin, true).data]).toEqual([-2, 1, 3, 4]);
    // neox with R = 2 pairs x0 with x1 as well (half = 1)
    expect([...diffusionRopeReference(x, cos, sin, false).data]).toEqual([-2, 1, 3, 4]);
    const c2 = hostArray([1, 2], [0, 1]);
    const s2 = hostArray([1, 2], [1, 0]);
    // neox, R = 4: (x0, x2) turns 90 degrees, (x1, x3) stays
    expect([...diffusionRopeReference(x, c2, s2, false).data]).toEqual([-3, 2, 1, 4]);
  });

  it('the module matches the reference on a partial rotary and keeps the pass-through channels exact', () => {
    const c = ctx();
    withContext(c, () => {
      const x = Tensor.fromArray(c.backend, Array.from({ length: 2 * 3 * 6 }, (_, i) => Math.sin(i)), [1, 2, 3, 6], 'f32');
      const ang = [0.3, -1.2, 2.0, 0.7];
      const cos = Tensor.fromArray(c.backend, ang.map(Math.cos), [2, 2], 'f32');
      const sin = Tensor.fromArray(c.backend, ang.map(Math.sin), [2, 2], 'f32');
      const y = new DiffusionRoPE(false).forward(x, cos, sin);
      const ref = diffusionRopeReference({ shape: x.shape, data: x.toFloat64Array() }, { shape: [2, 2], data: cos.toFloat64Array() }, { shape: [2, 2], data: sin.toFloat64Array() }, true);
      y.toFloat64Array().forEach((v, i) => expect(v).toBeCloseTo(ref.data[i]!, 6));
      expect(() => new DiffusionRoPE().forward(x, F.contiguous(cos.view(1, 4)), sin)).toThrow(/cos and sin must both be/);
    });
  });

  it('FluxPosEmbed: angle p * theta^(-2k/d), each column twice, axes concatenated', () => {
    const ids = hostArray([2, 2], [0, 0, 3, 5]);
    const [cos, sin] = fluxPosEmbedReference(ids, 100, [2, 4]);
    expect(cos.shape).toEqual([2, 6]);
    // row 0: all angles 0
    expect([...cos.data.slice(0, 6)]).toEqual([1, 1, 1, 1, 1, 1]);
    // row 1, axis 0 (d 2): angle 3; axis 1 (d 4): angles 5 and 5 / 10
    const want = [3, 3, 5, 5, 0.5, 0.5];
    want.forEach((a, j) => {
      expect(cos.data[6 + j]).toBeCloseTo(Math.cos(a), 12);
      expect(sin.data[6 + j]).toBeCloseTo(Math.sin(a), 12);
    });
    expect(FluxPosEmbed.frequencies(10000, 4)).toEqual([1, 0.01]);
    expect(() => withContext(ctx(), () => new FluxPosEmbed(10000, [3, 4]))).toThrow(/positive even/);
  });
});
