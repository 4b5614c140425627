import { Tensor, compareStatsHost } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { CpuBackend } from './backend.js';

describe('CpuHarnessKernels', () => {
  const b = new CpuBackend();
  it('compareStats is the host statistics of the two tensors (views included)', () => {
    const a = Tensor.fromArray(b, [1, 2, NaN, 4, 5, 6], [2, 3], 'f32');
    const e = Tensor.fromArray(b, [1, 2.5, 3, 4, Infinity, 6], [3, 2], 'f32').transpose(0, 1);
    const tol = { atol: 0.1, rtol: 0 };
    expect(b.harnessKernels.compareStats(a, e.contiguous().reshape([2, 3]), tol)).toEqual(compareStatsHost(a.toFloat64Array(), e.toFloat64Array(), tol));
    expect(b.harnessKernels.compareStats(a, e, tol)).toMatchObject({ n: 6, matched: 2, nonFinite: 0 }); // NaN against Inf: neither matched nor counted
  });

  it('countDifferentBytes counts differing bytes and checks ranges', () => {
    const x = b.allocate(10, 0);
    const y = b.allocate(12, 0);
    b.write(x, 0, new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]));
    b.write(y, 2, new Uint8Array([1, 2, 3, 4, 0, 6, 7, 8, 9, 0]));
    expect(b.harnessKernels.countDifferentBytes(x, 0, y, 2, 10)).toBe(2);
    expect(b.harnessKernels.countDifferentBytes(x, 0, y, 2, 4)).toBe(0);
    expect(() => b.harnessKernels.countDifferentBytes(x, 1, y, 0, 10)).toThrow(RangeError);
    x.release();
    y.release();
  });

  it('fills stay on the host Rng stream', () => {
    expect(b.harnessKernels.fillNormal()).toBe(false);
  });
});
