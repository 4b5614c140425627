import { DTYPE_INFO, defineTask, hostArray } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cpuBackend, describeTaskContract } from '../../../../test/l1-harness.js';
import { RMSNorm, rmsNormReference, rmsNormTask } from './rms_norm.js';

describe('rmsNormReference', () => {
  it('normalises a row by hand: x=[1,2,3,4], w=[1,0.5,2,1], eps=0', () => {
    // mean(x^2) = (1 + 4 + 9 + 16) / 4 = 7.5; 1/sqrt(7.5) = 0.3651483716701107
    const y = rmsNormReference(hostArray([1, 4], [1, 2, 3, 4]), hostArray([4], [1, 0.5, 2, 1]), 0);
    const want = [0.3651483716701107, 0.3651483716701107, 2.1908902300206643, 1.4605934866804429];
    y.data.forEach((v, i) => expect(v).toBeCloseTo(want[i]!, 14));
    expect(y.shape).toEqual([1, 4]);
  });

  it('adds eps inside the root and treats rows independently', () => {
    // row 0: x = [3, 4], mean(x^2) = 12.5, eps 0.5 -> 1/sqrt(13) ; row 1: zeros stay zero (eps keeps it finite)
    const y = rmsNormReference(hostArray([2, 2], [3, 4, 0, 0]), hostArray([2], [1, 1]), 0.5);
    const inv = 1 / Math.sqrt(13);
    expect(y.data[0]).toBeCloseTo(3 * inv, 14);
    expect(y.data[1]).toBeCloseTo(4 * inv, 14);
    expect([...y.data.slice(2)]).toEqual([0, 0]);
  });

  it('task reference does the fused residual add: returns [rmsnorm(x + r), x + r]', () => {
    const c = rmsNormTask.cases.ci[1]!;
    const x = hostArray([1, 2], [1, 2]);
    const r = hostArray([1, 2], [2, 2]); // x + r = [3, 4]; mean sq = 12.5
    const [y, res] = rmsNormTask.reference([x, r], new Map([['weight', hostArray([2], [2, 1])]]), { ...c, init: [2, 0] });
    expect([...res!.data]).toEqual([3, 4]);
    expect(y!.data[0]).toBeCloseTo((2 * 3) / Math.sqrt(12.5), 14);
    expect(y!.data[1]).toBeCloseTo(4 / Math.sqrt(12.5), 14);
  });
});

describe('rms_norm task', () => {
  it('work counts bytes by dtype itemsize', () => {
    const c = rmsNormTask.cases.ci[0]!; // f32 T=7 H=64, no residual: read x, write y, read w
    expect(rmsNormTask.work(c)).toEqual({ bytes: 7 * 64 * 4 * 2 + 64 * 4, flops: 4 * 7 * 64 });
    const fused = rmsNormTask.cases.ci[1]!; // bf16 T=5 H=128 with residual: 4 tensors + weight
    expect(rmsNormTask.work(fused).bytes).toBe(5 * 128 * DTYPE_INFO.bf16.itemsize * 4 + 128 * 2);
  });

  it('defineTask rejects invalid metadata with the field that is wrong', () => {
    const { baseline, makeInputs, initParameters, reference, work, stem: _stem, ...meta } = rmsNormTask;
    const behaviour = { baseline, makeInputs, initParameters, reference, work };
    expect(() => defineTask({ ...meta, id: 'rms_norm' }, behaviour)).toThrow(/task rms_norm: id/);
    expect(() => defineTask({ ...meta, className: 'rmsNorm' }, behaviour)).toThrow(/className/);
    expect(() => defineTask({ ...meta, level: 2 }, behaviour)).toThrow(/level 2 does not match/);
    expect(() => defineTask({ ...meta, cases: { ci: [], production: meta.cases.production } }, behaviour)).toThrow(/cases\.ci/);
    expect(() => defineTask({ ...meta }, behaviour)).not.toThrow();
  });

  it('RMSNorm mirrors vLLM (hiddenSize, eps = 1e-6)', () => {
    expect(RMSNorm.length).toBe(1);
  });
});

describeTaskContract(rmsNormTask, cpuBackend);
