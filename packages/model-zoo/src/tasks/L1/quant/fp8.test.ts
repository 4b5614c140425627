import { Tensor, withContext } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../../test/l1-harness.js';
import { baselineRegistry } from '../../../index.js';
import { fp8LinearReference } from './fp8_linear.js';
import { groupQuantFp8Reference, roundE4m3 } from './fp8-reference.js';
import { PerTokenGroupQuantFp8 } from './per_token_group_quant_fp8.js';
import { siluMulQuantFp8Reference } from './silu_mul_quant_fp8.js';

const h = (shape: number[], data: number[]) => ({ shape, data: Float64Array.from(data) });

describe('fp8 tasks (L1/per_token_group_quant_fp8, L1/fp8_linear, L1/silu_mul_quant_fp8)', () => {
  it('e4m3 rounding: 3 mantissa bits, ties to even, subnormal steps of 2^-9, saturation at 448', () => {
    expect(roundE4m3(42)).toBe(40); // tie between 40 (even) and 44
    expect(roundE4m3(46)).toBe(48); // tie between 44 and 48 (even)
    expect(roundE4m3(1.0625)).toBe(1); // tie between 1 and 1.125
    expect(roundE4m3(-3.3)).toBe(-3.25);
    expect(roundE4m3(3 * 2 ** -10)).toBe(2 ** -8); // subnormal tie 1.5 steps -> 2 steps
    expect(roundE4m3(1000)).toBe(448);
  });

  it('group quantisation on hand values: scale = amax / 448 per group, UE8M0 rounds the scale up to a power of two', () => {
    const [q, s] = groupQuantFp8Reference(h([1, 4], [448, -224, 0.5, -1]), 2);
    expect([...s.data]).toEqual([1, Math.fround(1 / 448)]);
    expect([...q.data]).toEqual([448, -224, 224, -448]);
    const [q8, s8] = groupQuantFp8Reference(h([1, 2], [3, 1]), 2, true);
    expect(s8.data[0]).toBe(2 ** -7); // 3 / 448 = 0.0067 -> 2^-7
    expect([...q8.data]).toEqual([384, 128]);
  });

  it('the block-fp8 linear reference on hand values: block scales per [block_n, block_k], bias after', () => {
    // K = 2 in one group of 2, N = 2 in two row blocks of 1; x = [448, 224] quantises exactly (scale 1)
    const out = fp8LinearReference(h([1, 2], [448, 224]), h([2, 2], [1, 2, 3, 4]), h([2, 1], [0.5, 0.25]), h([2], [1, -1]), [1, 2]);
    expect([...out.data]).toEqual([0.5 * (448 + 448) + 1, 0.25 * (3 * 448 + 4 * 224) - 1]);
  });

  it('silu(gate) * up before the quantiser', () => {
    const [q, s] = siluMulQuantFp8Reference(h([1, 2], [0, 5]), 1, false);
    expect([...q.data]).toEqual([0]); // silu(0) = 0
    expect(s.data[0]).toBe(Math.fround(1e-10 / 448)); // eps floors an all-zero group's scale
  });

  it('column-major scales: the same values as a transposed view of [G, T] storage', () => {
    const ctx = { backend: cpuBackend(), device: 0, dtype: 'f32' as const, registry: baselineRegistry() };
    const x = Tensor.fromArray(ctx.backend, Array.from({ length: 12 }, (_, i) => i + 1), [3, 4], 'f32');
    withContext(ctx, () => {
      const [q1, rows] = new PerTokenGroupQuantFp8(2).forward(x);
      const [q2, cols] = new PerTokenGroupQuantFp8(2, true).forward(x);
      expect(cols.shape).toEqual([3, 2]);
      expect(cols.strides).toEqual([1, 3]);
      expect([...cols.toFloat64Array()]).toEqual([...rows.toFloat64Array()]);
      expect([...q2.toFloat64Array()]).toEqual([...q1.toFloat64Array()]);
    });
  });
});
