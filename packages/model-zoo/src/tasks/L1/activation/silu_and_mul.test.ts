import { hostArray } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cpuBackend, describeTaskContract } from '../../../../test/l1-harness.js';
import { siluAndMulReference, siluAndMulTask } from './silu_and_mul.js';

describe('siluAndMulReference', () => {
  it('matches hand-computed values', () => {
    // row 0: gate [1, -1], up [2, 0.5]; row 1: gate [0, 3], up [5, -2]
    const y = siluAndMulReference(hostArray([2, 4], [1, -1, 2, 0.5, 0, 3, 5, -2]));
    expect(y.shape).toEqual([2, 2]);
    // silu(1) = 1 / (1 + e^-1) = 0.7310585786300049; * 2
    expect(y.data[0]).toBeCloseTo(1.4621171572600098, 15);
    // silu(-1) = -0.2689414213699951; * 0.5
    expect(y.data[1]).toBeCloseTo(-0.13447071068499755, 15);
    expect(y.data[2]).toBe(0);
    // silu(3) = 3 * 0.9525741268224334; * -2
    expect(y.data[3]).toBeCloseTo(-5.7154447609346, 13);
  });

  it('keeps leading dims and rejects an odd last dim', () => {
    expect(siluAndMulReference(hostArray([2, 3, 6])).shape).toEqual([2, 3, 3]);
    expect(() => siluAndMulReference(hostArray([1, 3]))).toThrow(/odd/);
  });
});

describe('silu_and_mul task', () => {
  it('work: read [T, 2D] + write [T, D] at the itemsize', () => {
    expect(siluAndMulTask.work(siluAndMulTask.cases.ci[0]!)).toEqual({ bytes: (7 * 128 + 7 * 64) * 4, flops: 6 * 7 * 64 });
    const prod = siluAndMulTask.cases.production.find((c) => c.dims.T === 4096)!;
    expect(siluAndMulTask.work(prod).bytes).toBe((4096 * 28672 + 4096 * 14336) * 2);
  });

  it('every case has D2 = 2 D', () => {
    for (const c of [...siluAndMulTask.cases.ci, ...siluAndMulTask.cases.production]) expect(c.dims.D2).toBe(2 * c.dims.D!);
  });
});

describeTaskContract(siluAndMulTask, cpuBackend);
