import { hostArray } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cpuBackend, describeTaskContract } from '../../../../test/l1-harness.js';
import { erf, geluAndMulReference, geluAndMulTask, geluErf, geluTanh } from './gelu_and_mul.js';

describe('erf and GELU', () => {
  it('erf matches tabulated values on both branches (series < 3 <= continued fraction)', () => {
    const table: [number, number][] = [
      [0, 0],
      [0.001, 0.0011283787909692363],
      [0.5, 0.5204998778130465],
      [1, 0.8427007929497149],
      [-1.5, -0.9661051464753108],
      [2, 0.9953222650189527],
      [3, 0.9999779095030014],
      [4, 0.9999999845827421],
    ];
    for (const [x, want] of table) expect(erf(x)).toBeCloseTo(want, 14);
    expect(erf(30)).toBe(1);
    expect(erf(-30)).toBe(-1);
    // continuous across the branch point
    expect(Math.abs(erf(3 - 1e-12) - erf(3 + 1e-12))).toBeLessThan(1e-13);
  });

  it('gelu values by hand: gelu(1) = Phi(1) = 0.8413447460685429, tanh form 0.841191990608277', () => {
    expect(geluErf(1)).toBeCloseTo(0.8413447460685429, 14);
    expect(geluErf(-1)).toBeCloseTo(-(1 - 0.8413447460685429), 14);
    expect(geluTanh(1)).toBeCloseTo(0.8411919906082768, 14);
    expect(geluTanh(0)).toBe(0);
  });
});

describe('geluAndMulReference', () => {
  it('matches hand-computed values for both modes', () => {
    const x = hostArray([1, 4], [1, 2, 3, -1]); // gate [1, 2], up [3, -1]
    const exact = geluAndMulReference(x, 'none');
    expect(exact.shape).toEqual([1, 2]);
    expect(exact.data[0]).toBeCloseTo(3 * 0.8413447460685429, 14); // 2.524034238205629
    expect(exact.data[1]).toBeCloseTo(-2 * 0.9772498680518208, 14); // gelu(2) = 2 Phi(2)
    const tanh = geluAndMulReference(x, 'tanh');
    expect(tanh.data[0]).toBeCloseTo(2.5235759718248305, 14);
    expect(tanh.data[1]).toBeCloseTo(-1.954597694087775, 14);
  });

  it('task reference reads the mode from init (default none)', () => {
    const x = hostArray([1, 2], [1, 1]);
    const c = geluAndMulTask.cases.ci[0]!;
    expect(geluAndMulTask.reference([x], new Map(), { ...c, init: [] })[0]!.data[0]).toBeCloseTo(0.8413447460685429, 14);
    expect(geluAndMulTask.reference([x], new Map(), { ...c, init: ['tanh'] })[0]!.data[0]).toBeCloseTo(0.8411919906082768, 14);
  });
});

describe('gelu_and_mul task', () => {
  it('has CI cases for both modes and both dtypes', () => {
    const modes = new Set(geluAndMulTask.cases.ci.map((c) => `${c.init[0]}/${c.dtype}`));
    expect(modes).toEqual(new Set(['none/f32', 'tanh/f32', 'none/bf16', 'tanh/bf16']));
  });

  it('work: read [T, 2D] + write [T, D]', () => {
    expect(geluAndMulTask.work(geluAndMulTask.cases.ci[0]!).bytes).toBe((7 * 128 + 7 * 64) * 4);
  });
});

describeTaskContract(geluAndMulTask, cpuBackend);
