import { describe, expect, it } from 'vitest';
import { Tensor } from '@fastkernels/core';
import { cpu, expectClose, randn, Rng, tensor, values } from './test-helpers.js';

const ops = cpu.ops;

describe('matmul', () => {
  it('multiplies hand-computed matrices', () => {
    const a = tensor([1, 2, 3, 4, 5, 6], [2, 3]);
    const b = tensor([7, 8, 9, 10, 11, 12], [3, 2]);
    expect(ops.matmul(a, b).toNested()).toEqual([[58, 64], [139, 154]]);
  });

  it('broadcasts batch dims and honours outDType', () => {
    const a = tensor([1, 0, 0, 1, 2, 0, 0, 2], [2, 1, 2, 2]);
    const b = tensor([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12], [3, 2, 2]);
    const c = ops.matmul(a, b, { outDType: 'f64' });
    expect(c.shape).toEqual([2, 3, 2, 2]);
    expect(c.dtype).toBe('f64');
    const v = values(c);
    expect(v.slice(0, 4)).toEqual([1, 2, 3, 4]);
    expect(v.slice(12, 16)).toEqual([2, 4, 6, 8]);
    expect(v.slice(20, 24)).toEqual([18, 20, 22, 24]);
  });

  it('agrees with a naive triple loop on random data', () => {
    const rng = new Rng(1);
    const a = randn(rng, [5, 7]);
    const b = randn(rng, [7, 3]);
    const A = values(a);
    const B = values(b);
    const want: number[] = [];
    for (let m = 0; m < 5; m++) for (let n = 0; n < 3; n++) want.push(A.slice(m * 7, m * 7 + 7).reduce((s, x, k) => s + x * B[k * 3 + n]!, 0));
    expectClose(values(ops.matmul(a, b)), want.map(Math.fround), 1e-6);
  });

  it('rejects mismatched inner and batch dims', () => {
    expect(() => ops.matmul(tensor([1, 2, 3, 4], [2, 2]), tensor([1, 2, 3], [3, 1]))).toThrow(/inner dims/);
    expect(() => ops.matmul(tensor([1, 2], [2]), tensor([1, 2], [2, 1]))).toThrow(/rank >= 2/);
    expect(() => ops.matmul(randn(new Rng(0), [2, 1, 1]), randn(new Rng(0), [3, 1, 1]))).toThrow(/do not broadcast/);
  });
});

describe('linear', () => {
  it('computes x W^T + b', () => {
    const x = tensor([1, 2, 3, 4, 5, 6], [2, 3]);
    const w = tensor([1, 0, 0, 0, 1, 1], [2, 3]);
    const b = tensor([10, 20], [2]);
    expect(ops.linear(x, w, b).toNested()).toEqual([[11, 25], [14, 31]]);
    expect(ops.linear(x, w, null).toNested()).toEqual([[1, 5], [4, 11]]);
    expect(ops.linear(tensor([1, 2, 3], [1, 1, 3]), w, null).shape).toEqual([1, 1, 2]);
  });

  it('equals matmul with the transposed weight', () => {
    const rng = new Rng(2);
    const x = randn(rng, [4, 6], 'f64');
    const w = randn(rng, [5, 6], 'f64');
    expectClose(values(ops.linear(x, w, null)), values(ops.matmul(x, w.transpose(0, 1))), 1e-12);
  });

  it('rejects mismatched shapes', () => {
    const w = tensor([1, 2, 3, 4, 5, 6], [2, 3]);
    expect(() => ops.linear(tensor([1, 2], [1, 2]), w, null)).toThrow(/last dim/);
    expect(() => ops.linear(tensor([1, 2, 3], [1, 3]), w, tensor([1, 2, 3], [3]))).toThrow(/bias/);
  });
});

describe('linear with K = 0', () => {
  it('gives the bias (or zeros) for every row of a rank-3 input', () => {
    const x = Tensor.empty(cpu, [2, 3, 0], 'f32');
    const w = Tensor.empty(cpu, [4, 0], 'f32');
    expect(ops.linear(x, w, null).toNested()).toEqual([[[0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]], [[0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]]]);
    const y = ops.linear(x, w, tensor([1, 2, 3, 4], [4]));
    expect(y.shape).toEqual([2, 3, 4]);
    expect(values(y).slice(0, 4)).toEqual([1, 2, 3, 4]);
  });
});

describe('embedding', () => {
  const w = tensor([0, 1, 10, 11, 20, 21], [3, 2]);
  it('gathers rows by i32 and i64 ids, keeping the ids shape', () => {
    expect(ops.embedding(tensor([2, 0], [2], 'i32'), w).toNested()).toEqual([[20, 21], [0, 1]]);
    const e = ops.embedding(tensor([1, 1, 2, 0], [2, 2], 'i64'), w);
    expect(e.shape).toEqual([2, 2, 2]);
    expect(values(e)).toEqual([10, 11, 10, 11, 20, 21, 0, 1]);
    expect(e.dtype).toBe('f32');
  });

  it('throws a RangeError naming the id and the vocab size', () => {
    expect(() => ops.embedding(tensor([0, 3], [2], 'i32'), w)).toThrow(/id 3 .*vocab size 3/);
    expect(() => ops.embedding(tensor([-1], [1], 'i64'), w)).toThrow(RangeError);
    expect(() => ops.embedding(tensor([0.5], [1], 'f32'), w)).toThrow(/integer/);
  });
});

describe('embeddingMasked (a vocabulary shard: rows [start, start + V) of the full table)', () => {
  const w = tensor([0, 1, 10, 11, 20, 21], [3, 2]); // rows 4, 5, 6 of the full table
  it('ids of the shard read row id - start; every other id (other shards, negative) gives a zero row', () => {
    const e = ops.embeddingMasked(tensor([6, 3, 4, 7, 5, -1, 0], [7], 'i64'), w, 4);
    expect(e.toNested()).toEqual([[20, 21], [0, 0], [0, 1], [0, 0], [10, 11], [0, 0], [0, 0]]);
    expect(ops.embeddingMasked(tensor([2, 5], [1, 2], 'i32'), w, 0).toNested()).toEqual([[[20, 21], [0, 0]]]);
    expect(ops.embeddingMasked(tensor([1, 2], [2], 'i32'), w, 0).toNested()).toEqual(ops.embedding(tensor([1, 2], [2], 'i32'), w).toNested());
  });

  it('rejects a bad start and non-integer ids', () => {
    expect(() => ops.embeddingMasked(tensor([0], [1], 'i64'), w, -1)).toThrow(/start -1/);
    expect(() => ops.embeddingMasked(tensor([0], [1], 'i64'), w, 1.5)).toThrow(RangeError);
    expect(() => ops.embeddingMasked(tensor([0.5], [1], 'f32'), w, 0)).toThrow(/integer/);
  });
});
