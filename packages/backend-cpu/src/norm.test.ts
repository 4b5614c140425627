import { roundToDType } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cpu, expectClose, randn, Rng, tensor, values } from './test-helpers.js';

const ops = cpu.ops;

describe('rmsNorm', () => {
  it('normalises each row by its root mean square and scales by the weight', () => {
    const x = tensor([3, 4, 1, 1], [2, 2], 'f64');
    const w = tensor([1, 2], [2], 'f64');
    const y = values(ops.rmsNorm(x, w, 0));
    const r = Math.sqrt(12.5);
    expectClose(y, [3 / r, 8 / r, 1, 2], 1e-15);
    const eps = values(ops.rmsNorm(tensor([0, 0], [1, 2], 'f64'), w, 1e-6));
    expect(eps).toEqual([0, 0]);
  });

  it('keeps x dtype and rounds once from float64', () => {
    const rng = new Rng(3);
    const xv = rng.fillNormal(16);
    const x = tensor(xv, [2, 8], 'bf16');
    const w = tensor(rng.fillNormal(8), [8], 'bf16');
    const y = ops.rmsNorm(x, w, 1e-5);
    expect(y.dtype).toBe('bf16');
    const X = values(x);
    const W = values(w);
    const want: number[] = [];
    for (let r = 0; r < 2; r++) {
      const row = X.slice(r * 8, r * 8 + 8);
      const inv = 1 / Math.sqrt(row.reduce((s, v) => s + v * v, 0) / 8 + 1e-5);
      row.forEach((v, j) => want.push(roundToDType(v * inv * W[j]!, 'bf16')));
    }
    expect(values(y)).toEqual(want);
  });

  it('rejects a weight that does not match the last dim', () => {
    expect(() => ops.rmsNorm(tensor([1, 2, 3], [1, 3]), tensor([1, 2], [2]), 1e-6)).toThrow(/weight/);
    expect(() => ops.rmsNorm(tensor([1, 2], [1, 2], 'i32'), tensor([1, 2], [2]), 1e-6)).toThrow(/float/);
  });
});

describe('fusedAddRmsNorm', () => {
  it('returns [rmsNorm(x + residual), x + residual]', () => {
    const x = tensor([1, 2], [1, 2], 'f64');
    const res = tensor([2, 2], [1, 2], 'f64');
    const [y, r] = ops.fusedAddRmsNorm(x, res, tensor([1, 1], [2], 'f64'), 0);
    expect(values(r)).toEqual([3, 4]);
    expectClose(values(y), [3 / Math.sqrt(12.5), 4 / Math.sqrt(12.5)], 1e-15);
  });

  it('normalises the residual sum after rounding it to x dtype (as vLLM)', () => {
    // 1 + 2^-9 is not a bf16 value: the sum rounds to 1 before the norm reads it back.
    const x = tensor([1, 1], [1, 2], 'bf16');
    const res = tensor([2 ** -9, 0], [1, 2], 'f32');
    const [y, r] = ops.fusedAddRmsNorm(x, res, tensor([1, 1], [2], 'f32'), 0);
    expect(r.dtype).toBe('bf16');
    expect(values(r)).toEqual([1, 1]);
    expect(values(y)).toEqual([1, 1]);
  });

  it('matches rmsNorm of add for random data', () => {
    const rng = new Rng(4);
    const x = randn(rng, [3, 16], 'f16');
    const res = randn(rng, [3, 16], 'f16');
    const w = randn(rng, [16], 'f16');
    const [y, r] = ops.fusedAddRmsNorm(x, res, w, 1e-6);
    const sum = ops.add(x, res);
    expect(values(r)).toEqual(values(sum));
    expect(values(y)).toEqual(values(ops.rmsNorm(sum, w, 1e-6)));
  });

  it('rejects a residual of another shape', () => {
    expect(() => ops.fusedAddRmsNorm(tensor([1, 2], [1, 2]), tensor([1, 2], [2, 1]), tensor([1, 1], [2]), 0)).toThrow(/residual/);
  });
});

describe('softmax', () => {
  it('normalises over the last dim', () => {
    expectClose(values(ops.softmax(tensor([1, 2, 3], [3], 'f64'), -1)), [0.09003057317038046, 0.24472847105479767, 0.6652409557748219], 1e-15);
  });

  it('works over any dim, negative allowed, and is max-subtracted (no overflow)', () => {
    const x = tensor([1000, 0, 1000, 0], [2, 2], 'f64');
    expect(values(ops.softmax(x, 0))).toEqual([0.5, 0.5, 0.5, 0.5]);
    expectClose(values(ops.softmax(x, 1)), [1, 0, 1, 0], 1e-300);
    const rng = new Rng(5);
    const t = randn(rng, [2, 3, 4], 'f64');
    const s = ops.softmax(t, -2);
    const S = values(s);
    for (let a = 0; a < 2; a++) for (let c = 0; c < 4; c++) expect(S[a * 12 + c]! + S[a * 12 + 4 + c]! + S[a * 12 + 8 + c]!).toBeCloseTo(1, 14);
    expect(() => ops.softmax(t, 3)).toThrow(/out of range/);
  });

  it('returns x dtype', () => {
    const s = ops.softmax(tensor([0, Math.log(2)], [2], 'f16'), 0);
    expect(s.dtype).toBe('f16');
    expect(values(s)).toEqual([roundToDType(1 / 3, 'f16'), roundToDType(2 / 3, 'f16')]);
  });
});
