import { describe, expect, it } from 'vitest';
import { denseLayout, denseMemoryOrder, encodeGeometry, outputMemoryOrder, planElementwise, type EwOperand } from './elementwise-plan.js';
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

describe('channels-last operands', () => {
  // [N, C, H, W] viewed over [N, H, W, C] memory, as the conv ops' channels-last outputs are
  const cl = (n: number, c: number, h: number, w: number) => [h * w * c, 1, w * c, c];

  it('denseMemoryOrder: row-major, channels-last, a transpose; null for a slice or a broadcast', () => {
    expect(denseMemoryOrder([2, 3, 4], contiguous([2, 3, 4]))).toEqual([0, 1, 2]);
    expect(denseMemoryOrder([2, 16, 5, 7], cl(2, 16, 5, 7))).toEqual([0, 2, 3, 1]);
    expect(denseMemoryOrder([1, 16, 5, 7], cl(1, 16, 5, 7))).toEqual([0, 2, 3, 1]);
    expect(denseMemoryOrder([3, 4], [1, 3])).toEqual([1, 0]);
    expect(denseMemoryOrder([4, 3], [6, 1])).toBeNull(); // every other row
    expect(denseMemoryOrder([4, 3], [0, 1])).toBeNull();
  });

  it('outputMemoryOrder: a channels-last input of the output shape gives a channels-last output; row-major, transposes and broadcasts do not', () => {
    expect(outputMemoryOrder([2, 16, 5, 7], [{ shape: [2, 16, 5, 7], strides: cl(2, 16, 5, 7) }])).toEqual([0, 2, 3, 1]);
    expect(outputMemoryOrder([1, 16, 5, 7], [{ shape: [1, 16, 5, 7], strides: cl(1, 16, 5, 7) }])).toEqual([0, 2, 3, 1]);
    // a bias [1, C, 1, 1] first does not decide: the channels-last input after it does
    expect(outputMemoryOrder([2, 16, 5, 7], [{ shape: [1, 16, 1, 1], strides: [16, 1, 1, 1] }, { shape: [2, 16, 5, 7], strides: cl(2, 16, 5, 7) }])).toEqual([0, 2, 3, 1]);
    // the first full-shape input decides: row-major first, row-major out (as TensorIterator)
    expect(outputMemoryOrder([2, 16, 5, 7], [{ shape: [2, 16, 5, 7], strides: contiguous([2, 16, 5, 7]) }, { shape: [2, 16, 5, 7], strides: cl(2, 16, 5, 7) }])).toBeNull();
    expect(outputMemoryOrder([5, 7], [{ shape: [5, 7], strides: [1, 5] }])).toBeNull(); // a transposed view stays contiguous
    expect(outputMemoryOrder([2, 16, 5, 7], [{ shape: [2, 7, 5, 16], strides: contiguous([2, 7, 5, 16]) }])).toBeNull();
    // a channel slice of a channels-last tensor (C2f's split: 16 of 32 channels) is channels-last too, as torch's suggest_memory_format says
    expect(outputMemoryOrder([2, 16, 5, 7], [{ shape: [2, 16, 5, 7], strides: cl(2, 32, 5, 7) }])).toEqual([0, 2, 3, 1]);
    // C = 1 is both layouts: plainly contiguous
    expect(outputMemoryOrder([2, 1, 5, 7], [{ shape: [2, 1, 5, 7], strides: [35, 1, 7, 1] }])).toBeNull();
  });

  it('channels-last output and inputs take the contiguous class (one flat vectorised pass), not a strided transpose', () => {
    const s = [2, 64, 20, 20];
    const p = planElementwise(op(s, 'f16', cl(2, 64, 20, 20)), [op(s, 'f16', cl(2, 64, 20, 20)), op(s, 'f16', cl(2, 64, 20, 20))]);
    expect(p.cls).toEqual({ kind: 'contig', vec: 8 });
    expect(p.n).toBe(2 * 64 * 400);
    // a channels-last output over a row-major input is a real transpose: strided
    expect(planElementwise(op(s, 'f16', cl(2, 64, 20, 20)), [op(s, 'f16')]).cls.kind).toBe('strided');
    // and a channels-last input into a row-major output (what every SiLU of a channels-last net did before)
    expect(planElementwise(op(s, 'f16'), [op(s, 'f16', cl(2, 64, 20, 20))]).cls.kind).toBe('strided');
  });
});
