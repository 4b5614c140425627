import { describe, expect, it } from 'vitest';
import { cpu, tensor, values } from './test-helpers.js';

const ops = cpu.ops;

describe('fill', () => {
  it('fills strided views and converts the value to the dtype', () => {
    const t = tensor([0, 0, 0, 0, 0, 0], [2, 3]);
    ops.fill(t.select(1, 1), 2.5);
    expect(values(t)).toEqual([0, 2.5, 0, 0, 2.5, 0]);
    const i = tensor([0, 0], [2], 'i32');
    ops.fill(i, -3.9);
    expect(values(i)).toEqual([-3, -3]);
    const b = tensor([0, 0], [2], 'bool');
    ops.fill(b, NaN);
    expect(values(b)).toEqual([1, 1]);
    const h = tensor([0], [1], 'bf16');
    ops.fill(h, 1 / 3);
    expect(values(h)).toEqual([0.333984375]);
  });
});

describe('copy', () => {
  it('copies between dtypes: floats truncate toward zero into ints, bool is != 0', () => {
    const src = tensor([-1.9, -0.5, 0, 0.5, 2.9, 300], [6], 'f32');
    const i8 = tensor([0, 0, 0, 0, 0, 0], [6], 'i8');
    ops.copy(i8, src);
    expect(values(i8)).toEqual([-1, 0, 0, 0, 2, 44]); // 300 wraps like a C cast
    const i64 = tensor([0, 0, 0, 0, 0, 0], [6], 'i64');
    ops.copy(i64, src);
    expect(values(i64)).toEqual([-1, 0, 0, 0, 2, 300]);
    const b = tensor([0, 0, 0, 0, 0, 0], [6], 'bool');
    ops.copy(b, src);
    expect(values(b)).toEqual([1, 1, 0, 1, 1, 1]);
    const f = tensor([0, 0, 0], [3], 'f32');
    ops.copy(f, tensor([1, 0, 1], [3], 'bool'));
    expect(values(f)).toEqual([1, 0, 1]);
  });

  it('handles overlapping source and destination views', () => {
    const t = tensor([1, 2, 3, 4, 5], [5]);
    ops.copy(t.narrow(0, 1, 4), t.narrow(0, 0, 4));
    expect(values(t)).toEqual([1, 1, 2, 3, 4]);
  });

  it('rejects mismatched shapes', () => {
    expect(() => ops.copy(tensor([0, 0], [2]), tensor([1, 2, 3], [3]))).toThrow(/does not match/);
  });
});

describe('add / mul', () => {
  it('computes elementwise with broadcasting of size-1 and missing leading dims', () => {
    const a = tensor([1, 2, 3, 4, 5, 6], [2, 3]);
    expect(ops.add(a, tensor([10, 20, 30], [3])).toNested()).toEqual([[11, 22, 33], [14, 25, 36]]);
    expect(ops.mul(a, tensor([2, 3], [2, 1])).toNested()).toEqual([[2, 4, 6], [12, 15, 18]]);
    const outer = ops.mul(tensor([1, 2], [2, 1]), tensor([1, 10, 100], [1, 3]));
    expect(outer.toNested()).toEqual([[1, 10, 100], [2, 20, 200]]);
    expect(ops.add(tensor([5], [], 'f32'), a).shape).toEqual([2, 3]);
  });

  it("returns a's dtype, rounded once", () => {
    const a = tensor([1, 256], [2], 'bf16');
    const b = tensor([1 / 3, 1.5], [2], 'f64');
    const r = ops.add(a, b);
    expect(r.dtype).toBe('bf16');
    expect(values(r)).toEqual([1.3359375, 258]); // 257.5 rounds to even 258 in bf16 (step 2)
    const m = ops.mul(tensor([3, 5], [2], 'i32'), tensor([0.5, 0.5], [2], 'f32'));
    expect(m.dtype).toBe('i32');
    expect(values(m)).toEqual([1, 2]);
  });

  it('rejects shapes that do not broadcast', () => {
    expect(() => ops.add(tensor([1, 2, 3], [3]), tensor([1, 2], [2]))).toThrow(/do not broadcast/);
    expect(() => ops.mul(tensor([1, 2, 3, 4], [2, 2]), tensor([1, 2, 3], [3, 1]))).toThrow(/do not broadcast/);
  });
});
