import { describe, expect, it } from 'vitest';
import { contiguousStrides, forEachOffset, formatShape, normalizeDim, numel, shapesEqual, type Shape } from './shape.js';

/** Reference walk: enumerate multi-indices in row-major order, offset = base + Σ idx·stride. */
function naiveOffsets(shape: Shape, strides: readonly number[], offset: number): number[] {
  const out: number[] = [];
  const n = numel(shape);
  for (let linear = 0; linear < n; linear++) {
    let rem = linear;
    let off = offset;
    for (let d = shape.length - 1; d >= 0; d--) {
      const i = rem % shape[d]!;
      rem = Math.floor(rem / shape[d]!);
      off += i * strides[d]!;
    }
    out.push(off);
  }
  return out;
}

function walk(shape: Shape, strides: readonly number[], offset: number): { offs: number[]; lins: number[] } {
  const offs: number[] = [];
  const lins: number[] = [];
  forEachOffset(shape, strides, offset, (o, l) => {
    offs.push(o);
    lins.push(l);
  });
  return { offs, lins };
}

describe('numel / contiguousStrides / helpers', () => {
  it('numel', () => {
    expect(numel([])).toBe(1);
    expect(numel([0])).toBe(0);
    expect(numel([3, 0, 2])).toBe(0);
    expect(numel([2, 3, 4])).toBe(24);
  });

  it('contiguousStrides', () => {
    expect(contiguousStrides([])).toEqual([]);
    expect(contiguousStrides([5])).toEqual([1]);
    expect(contiguousStrides([2, 3, 4])).toEqual([12, 4, 1]);
    expect(contiguousStrides([2, 1, 3])).toEqual([3, 3, 1]);
    expect(contiguousStrides([2, 0, 3])).toEqual([0, 3, 1]);
  });

  it('normalizeDim', () => {
    expect(normalizeDim(-1, 3)).toBe(2);
    expect(normalizeDim(0, 3)).toBe(0);
    expect(normalizeDim(-3, 3)).toBe(0);
    expect(() => normalizeDim(3, 3)).toThrow(/out of range for rank 3/);
    expect(() => normalizeDim(-4, 3)).toThrow(RangeError);
    expect(() => normalizeDim(0.5, 3)).toThrow(RangeError);
    expect(() => normalizeDim(0, 0)).toThrow(RangeError);
  });

  it('shapesEqual / formatShape', () => {
    expect(shapesEqual([2, 3], [2, 3])).toBe(true);
    expect(shapesEqual([2, 3], [3, 2])).toBe(false);
    expect(shapesEqual([2], [2, 1])).toBe(false);
    expect(shapesEqual([], [])).toBe(true);
    expect(formatShape([2, 3])).toBe('[2, 3]');
    expect(formatShape([])).toBe('[]');
  });
});

describe('forEachOffset', () => {
  it('rank 0 visits the offset once', () => {
    expect(walk([], [], 7)).toEqual({ offs: [7], lins: [0] });
  });

  it('empty shapes visit nothing', () => {
    expect(walk([0], [1], 0).offs).toEqual([]);
    expect(walk([3, 0], [0, 1], 5).offs).toEqual([]);
    expect(walk([0, 4, 2], [8, 2, 1], 0).offs).toEqual([]);
  });

  it('rank 1 with stride and offset', () => {
    expect(walk([4], [3], 2)).toEqual({ offs: [2, 5, 8, 11], lins: [0, 1, 2, 3] });
  });

  it('rank 2 transposed', () => {
    // a [2, 3] contiguous tensor transposed to [3, 2] with strides [1, 3]
    expect(walk([3, 2], [1, 3], 0).offs).toEqual([0, 3, 1, 4, 2, 5]);
  });

  it('broadcast (stride 0) dims repeat offsets', () => {
    expect(walk([2, 3], [0, 1], 10).offs).toEqual([10, 11, 12, 10, 11, 12]);
    expect(walk([2, 3], [1, 0], 0).offs).toEqual([0, 0, 0, 1, 1, 1]);
  });

  const layouts: [string, Shape, number[], number][] = [
    ['rank 3 contiguous', [2, 3, 4], [12, 4, 1], 0],
    ['rank 3 permuted (2,0,1)', [4, 2, 3], [1, 12, 4], 5],
    ['rank 3 with size-1 dims', [1, 3, 1], [99, 1, 7], 3],
    ['rank 4 contiguous', [2, 3, 2, 5], [30, 10, 5, 1], 0],
    ['rank 4 permuted (3,1,0,2)', [5, 3, 2, 2], [1, 10, 30, 5], 11],
    ['rank 4 sliced with steps', [2, 2, 3, 2], [120, 40, 6, 2], 17],
    ['rank 4 last dim 1', [3, 2, 4, 1], [8, 4, 1, 1], 1],
    ['rank 4 broadcast middle', [2, 4, 3, 2], [6, 0, 2, 1], 0],
  ];
  it.each(layouts)('%s matches the naive walk', (_name, shape, strides, offset) => {
    const { offs, lins } = walk(shape, strides, offset);
    expect(offs).toEqual(naiveOffsets(shape, strides, offset));
    expect(lins).toEqual([...Array(numel(shape)).keys()]);
  });

  it('permuting a contiguous buffer visits every element exactly once', () => {
    const shape = [3, 4, 5, 2];
    const strides = contiguousStrides(shape);
    const perm = [2, 0, 3, 1];
    const { offs } = walk(perm.map((p) => shape[p]!), perm.map((p) => strides[p]!), 0);
    expect([...offs].sort((a, b) => a - b)).toEqual([...Array(numel(shape)).keys()]);
  });
});
