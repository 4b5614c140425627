import { describe, expect, it } from 'vitest';
import { denseLayout, encodeGeometry, planElementwise, type EwOperand } from './elementwise-plan.js';
import type { GenDType } from './ctypes.js';

const contiguous = (shape: number[]) => {
  const s = new Array<number>(shape.length);
  let acc = 1;
  for (let d = shape.length - 1; d >= 0; d--) {
    s[d] = acc;
    acc *= shape[d]!;
  }
  return s;
};
const op = (shape: number[], dtype: GenDType = 'bf16', strides = contiguous(shape), ptr = 4096): EwOperand => ({ shape, strides, ptr, dtype });

describe('planElementwise', () => {
  it('same-shape contiguous operands take the contiguous class with 16-byte vectors', () => {
    const p = planElementwise(op([64, 1000]), [op([64, 1000]), op([64, 1000])]);
    expect(p.cls).toEqual({ kind: 'contig', vec: 8 });
    expect(p.n).toBe(64000);
  });

  it('the vector narrows to what every pointer is aligned to, and to the widest dtype', () => {
    expect(planElementwise(op([100]), [op([100], 'bf16', [1], 4096 + 4)]).cls).toEqual({ kind: 'contig', vec: 2 });
    expect(planElementwise(op([100], 'f32'), [op([100], 'bf16')]).cls).toEqual({ kind: 'contig', vec: 4 });
    expect(planElementwise(op([100], 'bool'), [op([100], 'f16')]).cls).toEqual({ kind: 'contig', vec: 8 });
  });

  it('size-1 dims do not break the contiguous class', () => {
    expect(planElementwise(op([1, 8, 1, 4]), [op([8, 4])]).cls.kind).toBe('contig');
  });

  it('a bias broadcast over rows is strided, rank 2, vectorised, the bias contiguous along the inner dim', () => {
    const p = planElementwise(op([4096, 3072]), [op([4096, 3072]), op([3072])]);
    if (p.cls.kind !== 'strided') throw new Error('expected strided');
    expect(p.cls).toEqual({ kind: 'strided', rank: 2, vec: 8, innerContig: [true, true], index: 'i32' });
    expect('sizes' in p && p.sizes).toEqual([4096, 384]);
    expect('strides' in p && p.strides).toEqual([[3072, 8], [3072, 8], [0, 8]]);
    expect(p.n).toBe(4096 * 384);
  });

  it('a per-row scale ([N, 1]) is broadcast along the inner dim: one load a vector', () => {
    const p = planElementwise(op([32, 64]), [op([32, 64]), op([32, 1])]);
    expect(p.cls).toEqual({ kind: 'strided', rank: 2, vec: 8, innerContig: [true, false], index: 'i32' });
    expect('strides' in p && p.strides[2]).toEqual([1, 0]);
  });

  it('a transposed input falls back to one element a thread with its strides', () => {
    const p = planElementwise(op([6, 5]), [op([6, 5], 'f32', [1, 6])]);
    expect(p.cls).toEqual({ kind: 'strided', rank: 2, vec: 1, innerContig: [true], index: 'i32' });
    expect('strides' in p && p.strides).toEqual([[5, 1], [1, 6]]);
  });

  it('a sliced row (odd row stride) is not vectorised; a permuted tensor keeps its rank after coalescing', () => {
    const sliced = planElementwise(op([4, 10]), [op([4, 10], 'bf16', [13, 1])]);
    expect(sliced.cls).toMatchObject({ kind: 'strided', vec: 1 });
    const perm = planElementwise(op([2, 3, 4]), [op([2, 3, 4], 'bf16', [4, 8, 1])]);
    expect(perm.cls).toMatchObject({ kind: 'strided', rank: 3 });
  });

  it('64-bit index math past 2^31 elements of offset', () => {
    const p = planElementwise(op([3, 2 ** 30]), [op([3, 2 ** 30]), op([2 ** 30])]);
    expect(p.cls).toMatchObject({ kind: 'strided', index: 'i64' });
  });

  it('denseLayout ignores size-1 dims', () => {
    expect(denseLayout([1, 3], [99, 1])).toBe(true);
    expect(denseLayout([2, 3], [1, 2])).toBe(false);
  });

  it('encodeGeometry writes sizes then strides per operand, 32- or 64-bit', () => {
    const b = encodeGeometry(new Uint8Array(4 * 2 * 3), [5, 7], [[7, 1], [0, 1]], 'i32');
    expect([...new Int32Array(b.buffer)]).toEqual([5, 7, 7, 1, 0, 1]);
    const w = encodeGeometry(new Uint8Array(8 * 2 * 2), [3, 2 ** 33], [[2 ** 33, 1]], 'i64');
    expect([...new BigInt64Array(w.buffer)]).toEqual([3n, 2n ** 33n, 2n ** 33n, 1n]);
  });
});
