import { hostArray } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cpuBackend, describeTaskContract } from '../../../../test/l1-harness.js';
import { softmaxReference, softmaxTask } from './softmax.js';

describe('softmaxReference', () => {
  it('softmax([1, 2, 3]) by hand', () => {
    // e^k / (e + e^2 + e^3)
    const y = softmaxReference(hostArray([1, 3], [1, 2, 3]), -1);
    const want = [0.09003057317038046, 0.24472847105479767, 0.6652409557748219];
    y.data.forEach((v, i) => expect(v).toBeCloseTo(want[i]!, 15));
  });

  it('over dim 0 normalises columns', () => {
    // columns [1, 3] -> [1/(1+e^2), 1/(1+e^-2)], [2, 2] -> [0.5, 0.5]
    const y = softmaxReference(hostArray([2, 2], [1, 2, 3, 2]), 0);
    expect(y.data[0]).toBeCloseTo(0.11920292202211755, 15);
    expect(y.data[2]).toBeCloseTo(0.8807970779778823, 15);
    expect(y.data[1]).toBe(0.5);
    expect(y.data[3]).toBe(0.5);
  });

  it('is stable for large logits and handles a middle dim of a rank-3 array', () => {
    expect([...softmaxReference(hostArray([1, 2], [1000, 1000]), -1).data]).toEqual([0.5, 0.5]);
    expect([...softmaxReference(hostArray([1, 2], [-Infinity, 0]), -1).data]).toEqual([0, 1]);
    // [2, 2, 1]: softmax over dim 1 pairs (0, 1) and (2, 3)
    const y = softmaxReference(hostArray([2, 2, 1], [0, 0, 1, 1]), 1);
    expect([...y.data]).toEqual([0.5, 0.5, 0.5, 0.5]);
  });
});

describe('softmax task', () => {
  it('work: read + write at the itemsize, 5 flops per element', () => {
    expect(softmaxTask.work(softmaxTask.cases.ci[0]!)).toEqual({ bytes: 2 * 5 * 257 * 4, flops: 5 * 5 * 257 });
    expect(softmaxTask.work(softmaxTask.cases.ci[2]!).bytes).toBe(2 * 4 * 500 * 2);
  });

  it('CI covers a non-last dim', () => {
    expect(softmaxTask.cases.ci.some((c) => c.init[0] === 0)).toBe(true);
  });
});

describeTaskContract(softmaxTask, cpuBackend);
