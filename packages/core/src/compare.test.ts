import { describe, expect, it, vi } from 'vitest';
import { REQUIRED_MATCHED_RATIO, compareOutputs, compareTensors } from './compare.js';
import type { DType } from './dtype.js';
import { hostArray } from './host.js';
import { DEFAULT_TOLERANCE, type HostArray, type Tolerance } from './task.js';
import { Tensor } from './tensor.js';
import { HostTestBackend } from './test-support/host-backend.js';

const tol: Tolerance = { atol: 1e-5, rtol: 1e-3 };
const h = (data: number[], shape: number[] = [data.length]): HostArray => hostArray(shape, data);

describe('compareTensors on host arrays', () => {
  it('PASSED for identical values with zero errors', () => {
    const c = compareTensors(h([1, 2, 3]), h([1, 2, 3]), tol);
    expect(c).toEqual({ status: 'PASSED', maxAbsError: 0, maxRelError: 0, matchedRatio: 1 });
  });

  it('reports max absolute and relative errors', () => {
    const c = compareTensors(h([1.5, 2, -4.25]), h([1, 2, -4]), { atol: 1, rtol: 0 });
    expect(c.status).toBe('PASSED');
    expect(c.maxAbsError).toBe(0.5);
    expect(c.maxRelError).toBe(0.5);
    expect(c.matchedRatio).toBe(1);
    // the largest relative error need not be at the largest absolute error
    const d = compareTensors(h([0.2, 110]), h([0.1, 100]), { atol: 100, rtol: 0 });
    expect(d.maxAbsError).toBe(10);
    expect(d.maxRelError).toBeCloseTo(1, 12);
  });

  it('a non-zero actual where the expected is exactly zero has an infinite relative error', () => {
    const c = compareTensors(h([1e-6, 1]), h([0, 1]), tol);
    expect(c.status).toBe('PASSED');
    expect(c.maxAbsError).toBe(1e-6);
    expect(c.maxRelError).toBe(Infinity);
  });

  it('tolerance is |a - e| <= atol + rtol * |e|, inclusive', () => {
    const t = { atol: 0.5, rtol: 0.25 };
    expect(compareTensors(h([3]), h([2]), t).status).toBe('PASSED');
    expect(compareTensors(h([1]), h([2]), t).status).toBe('PASSED');
    expect(compareTensors(h([-3]), h([-2]), t).status).toBe('PASSED');
    expect(compareTensors(h([3.0000001]), h([2]), t).status).toBe('INCORRECT_NUMERICAL');
    expect(compareTensors(h([2.5]), h([2]), { atol: 0.5, rtol: 0 }).status).toBe('PASSED');
    expect(compareTensors(h([2.5]), h([2]), { atol: 0, rtol: 0.25 }).status).toBe('PASSED');
    expect(compareTensors(h([2.5]), h([2]), { atol: 0, rtol: 0.2 }).status).toBe('INCORRECT_NUMERICAL');
  });

  it('INCORRECT_SHAPE (rank and size), before anything else', () => {
    const a = compareTensors(h([1, 2, 3, 4], [2, 2]), h([1, 2, 3, 4], [4]), tol);
    expect(a.status).toBe('INCORRECT_SHAPE');
    expect(a.detail).toBe('shape [2, 2], expected [4]');
    expect(a.maxAbsError).toBe(Infinity);
    expect(a.matchedRatio).toBe(0);
    expect(compareTensors(h([1, 2, 3, 4, 5, 6], [2, 3]), h([1, 2, 3, 4, 5, 6], [3, 2]), tol).status).toBe('INCORRECT_SHAPE');
    expect(compareTensors(h([NaN]), h([1, 2]), tol).status).toBe('INCORRECT_SHAPE');
    expect(compareTensors(h([], [0]), h([], [0, 1]), tol).status).toBe('INCORRECT_SHAPE');
  });

  it('empty tensors pass with a matched ratio of 1', () => {
    expect(compareTensors(h([], [0]), h([], [0]), tol)).toEqual({ status: 'PASSED', maxAbsError: 0, maxRelError: 0, matchedRatio: 1 });
    expect(compareTensors(h([], [2, 0]), h([], [2, 0]), tol).status).toBe('PASSED');
  });

  it('NaN or Inf where the expected is finite fails with its own detail, even for one element in many', () => {
    const exp = Array.from({ length: 1000 }, (_, i) => i + 1);
    for (const bad of [NaN, Infinity, -Infinity]) {
      const act = [...exp];
      act[500] = bad;
      const c = compareTensors(h(act), h(exp), tol);
      expect(c.status).toBe('INCORRECT_NUMERICAL');
      expect(c.detail).toBe('1 NaN/Inf values where the expected output is finite');
      expect(c.maxAbsError).toBe(Infinity);
      expect(c.maxRelError).toBe(Infinity);
      expect(c.matchedRatio).toBe(0.999);
    }
  });

  it('NaN and Inf at the same positions as the expected match', () => {
    const c = compareTensors(h([NaN, Infinity, -Infinity, 1]), h([NaN, Infinity, -Infinity, 1]), tol);
    expect(c.status).toBe('PASSED');
    expect(c.matchedRatio).toBe(1);
    expect(c.maxAbsError).toBe(0);
  });

  it('a different non-finite value, or a finite one where the expected is not, does not match', () => {
    const c = compareTensors(h([-Infinity, 1]), h([Infinity, 1]), tol);
    expect(c.matchedRatio).toBe(0.5);
    expect(c.status).toBe('INCORRECT_NUMERICAL');
    const d = compareTensors(h([1, 1]), h([NaN, 1]), tol);
    expect(d.matchedRatio).toBe(0.5);
    expect(d.status).toBe('INCORRECT_NUMERICAL');
    expect(d.maxAbsError).toBe(0);
    const e = compareTensors(h([NaN, 1]), h([Infinity, 1]), tol);
    expect(e.matchedRatio).toBe(0.5);
  });

  it('all-zero actual where the expected is not zero fails even within tolerance', () => {
    const c = compareTensors(h([0, 0, -0]), h([1e-7, 0, 0]), tol);
    expect(c.status).toBe('INCORRECT_NUMERICAL');
    expect(c.detail).toBe('output is all zeros, expected is not');
    expect(c.matchedRatio).toBe(1);
    // both all zero is fine
    expect(compareTensors(h([0, -0]), h([0, 0]), tol).status).toBe('PASSED');
    // one non-zero actual element is enough to skip that check
    expect(compareTensors(h([1e-7, 0]), h([0, 1e-7]), tol).status).toBe('PASSED');
  });

  it('the 99% matched boundary', () => {
    expect(REQUIRED_MATCHED_RATIO).toBe(0.99);
    const exp = Array.from({ length: 1000 }, (_, i) => Math.sin(i) + 2);
    const off = (k: number) => exp.map((v, i) => (i < k ? v + 1 : v));
    const at99 = compareTensors(h(off(10)), h(exp), tol);
    expect(at99.matchedRatio).toBe(0.99);
    expect(at99.status).toBe('PASSED');
    expect(at99.maxAbsError).toBeCloseTo(1, 12);
    const at989 = compareTensors(h(off(11)), h(exp), tol);
    expect(at989.matchedRatio).toBe(0.989);
    expect(at989.status).toBe('INCORRECT_NUMERICAL');
    expect(at989.detail).toBe('98.90% of elements within atol=0.00001, rtol=0.001 (need 99%)');
    // 99 of 100 passes, 98 of 100 does not
    const small = Array.from({ length: 100 }, () => 1);
    expect(compareTensors(h(small.map((v, i) => (i === 0 ? 5 : v))), h(small), tol).status).toBe('PASSED');
    expect(compareTensors(h(small.map((v, i) => (i < 2 ? 5 : v))), h(small), tol).status).toBe('INCORRECT_NUMERICAL');
  });

  it('checks non-finite before all-zero before tolerance', () => {
    const c = compareTensors(h([0, NaN]), h([1, 2]), tol);
    expect(c.detail).toMatch(/NaN\/Inf/);
  });
});

describe('compareTensors on tensors', () => {
  const be = new HostTestBackend();

  it('INCORRECT_DTYPE when both are tensors of different dtypes', () => {
    const a = Tensor.fromArray(be, [1, 2], [2], 'bf16');
    const e = Tensor.fromArray(be, [1, 2], [2], 'f32');
    const c = compareTensors(a, e, tol);
    expect(c.status).toBe('INCORRECT_DTYPE');
    expect(c.detail).toBe('dtype bf16, expected f32');
    // shape is checked first
    expect(compareTensors(Tensor.fromArray(be, [1], [1], 'bf16'), e, tol).status).toBe('INCORRECT_SHAPE');
  });

  it('a tensor against a host array compares values only', () => {
    const a = Tensor.fromArray(be, [1, 2, 3, 4], [2, 2], 'bf16').transpose(0, 1);
    const c = compareTensors(a, h([1, 3, 2, 4], [2, 2]), tol);
    expect(c.status).toBe('PASSED');
    expect(compareTensors(h([1, 3, 2, 4], [2, 2]), a, tol).status).toBe('PASSED');
  });

  it('bf16 rounding passes at the bf16 tolerance and fails at the f32 one', () => {
    const vals = Array.from({ length: 64 }, (_, i) => 1 + i / 7);
    const a = Tensor.fromArray(be, vals, [64], 'bf16');
    expect(compareTensors(a, h(vals), DEFAULT_TOLERANCE.bf16).status).toBe('PASSED');
    expect(compareTensors(a, h(vals), DEFAULT_TOLERANCE.f32).status).toBe('INCORRECT_NUMERICAL');
  });
});

describe('compareOutputs', () => {
  const be = new HostTestBackend();

  it('count mismatch is INCORRECT_SHAPE', () => {
    const c = compareOutputs([h([1]), h([2])], [h([1])], () => tol);
    expect(c.status).toBe('INCORRECT_SHAPE');
    expect(c.detail).toBe('2 outputs, expected 1');
    expect(c.matchedRatio).toBe(0);
  });

  it('no outputs pass', () => {
    expect(compareOutputs([], [], () => tol).status).toBe('PASSED');
  });

  it('asks for the tolerance of each expected dtype', () => {
    const tolFor = vi.fn((d: DType | undefined) => (d ? DEFAULT_TOLERANCE[d] : tol));
    const e1 = Tensor.fromArray(be, [1], [1], 'bf16');
    compareOutputs([Tensor.fromArray(be, [1], [1], 'bf16'), h([2])], [e1, h([2])], tolFor);
    expect(tolFor.mock.calls).toEqual([['bf16'], [undefined]]);
  });

  it('merges: worst errors, smallest ratio, all pass', () => {
    const c = compareOutputs([h([1.5, 1]), h([2, 2.25])], [h([1, 1]), h([2, 2])], () => ({ atol: 1, rtol: 0 }));
    expect(c.status).toBe('PASSED');
    expect(c.maxAbsError).toBe(0.5);
    expect(c.maxRelError).toBe(0.5);
    expect(c.matchedRatio).toBe(1);
    expect(c.detail).toBeUndefined();
  });

  it('a failing output makes the whole comparison fail, naming the output', () => {
    const c = compareOutputs([h([1]), h([0, 0])], [h([1]), h([1, 1])], () => tol);
    expect(c.status).toBe('INCORRECT_NUMERICAL');
    expect(c.detail).toBe('output 1: output is all zeros, expected is not');
    expect(c.matchedRatio).toBe(0);
  });

  it('the worst status wins, not the first failing one', () => {
    const c = compareOutputs([h([5]), h([1, 2])], [h([1]), h([1, 2], [2, 1])], () => tol);
    expect(c.status).toBe('INCORRECT_SHAPE');
    expect(c.detail).toBe('output 1: shape [2], expected [2, 1]');
    // and a later, milder failure does not replace it
    const d = compareOutputs([h([1, 2]), h([5])], [h([1, 2], [2, 1]), h([1])], () => tol);
    expect(d.status).toBe('INCORRECT_SHAPE');
    expect(d.detail).toBe('output 0: shape [2], expected [2, 1]');
  });
});
