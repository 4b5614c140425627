import { roundToDType } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { erf, erfc, geluErf, geluTanh } from './math.js';
import { cpu, expectClose, tensor, values } from './test-helpers.js';

const ops = cpu.ops;

describe('erf', () => {
  // Reference values to 17+ significant digits (tables of erf / erfc).
  const table: [number, number][] = [
    [0, 0],
    [1e-10, 1.1283791670955126e-10],
    [0.1, 0.1124629160182849],
    [0.5, 0.5204998778130465],
    [1, 0.8427007929497149],
    [1.5, 0.9661051464753108],
    [2, 0.9953222650189527],
    [2.5, 0.999593047982555],
    [3, 0.9999779095030014],
    [4, 0.9999999845827421],
    [10, 1],
  ];
  it('matches tabulated values to ~1e-16 and is odd', () => {
    for (const [x, want] of table) {
      expect(Math.abs(erf(x) - want)).toBeLessThanOrEqual(2.5e-16 * Math.max(1, Math.abs(want)));
      expect(erf(-x)).toBe(-erf(x));
    }
    expect(Number.isNaN(erf(NaN))).toBe(true);
  });

  it('erfc is accurate in the tail', () => {
    expect(Math.abs(erfc(3) / 2.209049699858544e-5 - 1)).toBeLessThan(1e-14);
    expect(Math.abs(erfc(4) / 1.541725790028002e-8 - 1)).toBeLessThan(1e-14);
    expect(Math.abs(erfc(0.5) - 0.4795001221869535)).toBeLessThan(3e-16);
    expect(erfc(-3)).toBeCloseTo(2 - 2.209049699858544e-5, 15);
  });
});

describe('siluAndMul', () => {
  it('computes silu(a) * b over the halves of the last dim', () => {
    const y = ops.siluAndMul(tensor([1, 0, -2, 2, 3, 0.5], [1, 6], 'f64'));
    expect(y.shape).toEqual([1, 3]);
    expectClose(values(y), [0.7310585786300049 * 2, 0, (-2 / (1 + Math.exp(2))) * 0.5], 1e-15);
  });

  it('keeps x dtype and rejects an odd last dim', () => {
    const y = ops.siluAndMul(tensor([1, 1], [2], 'bf16'));
    expect(y.dtype).toBe('bf16');
    expect(values(y)).toEqual([roundToDType(0.7310585786300049, 'bf16')]);
    expect(() => ops.siluAndMul(tensor([1, 2, 3], [3]))).toThrow(/even/);
  });
});

describe('geluAndMul', () => {
  it('exact gelu uses erf', () => {
    expect(geluErf(1)).toBeCloseTo(0.8413447460685429, 15);
    expect(geluErf(-1)).toBeCloseTo(-0.15865525393145707, 15);
    const y = ops.geluAndMul(tensor([1, -1, 2, 3], [2, 2], 'f64'), 'none');
    expectClose(values(y), [0.8413447460685429 * -1, 2 * 0.9772498680518208 * 3], 1e-15);
  });

  it('tanh approximation', () => {
    expect(geluTanh(1)).toBeCloseTo(0.8411919906082768, 15);
    const y = ops.geluAndMul(tensor([1, 2], [2], 'f64'), 'tanh');
    expectClose(values(y), [0.8411919906082768 * 2], 1e-15);
    expect(() => ops.geluAndMul(tensor([1, 2], [2]), 'fast' as 'none')).toThrow(/approximate/);
  });
});
