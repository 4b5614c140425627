import { hostArray } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { interpolateReference } from './interpolate.js';
import { padReference } from './tensor_ops.js';

const arr = (shape: number[], v: number[]) => hostArray(shape, Float64Array.from(v));

describe('interpolate / pad references on hand-computed values', () => {
  it('nearest x2 repeats each pixel; bilinear x2 blends with torch half-pixel centres', () => {
    const x = arr([1, 1, 1, 2], [1, 3]);
    expect([...interpolateReference(x, 2, 4, 'nearest', 2).data]).toEqual([1, 1, 3, 3, 1, 1, 3, 3]);
    // out x = 0..3 -> src (x + 0.5) / 2 - 0.5 = -0.25 (clamped 0), 0.25, 0.75, 1.25 (clamped to the edge)
    expect([...interpolateReference(x, 1, 4, 'bilinear', null).data]).toEqual([1, 1.5, 2.5, 3]);
  });

  it('pads the trailing dims: constant, reflect, replicate, circular', () => {
    const x = arr([1, 3], [1, 2, 3]);
    expect([...padReference(x, [1, 2], 'constant', 9).data]).toEqual([9, 1, 2, 3, 9, 9]);
    expect([...padReference(x, [2, 2], 'reflect', 0).data]).toEqual([3, 2, 1, 2, 3, 2, 1]);
    expect([...padReference(x, [1, 1], 'replicate', 0).data]).toEqual([1, 1, 2, 3, 3]);
    expect([...padReference(x, [1, 1], 'circular', 0).data]).toEqual([3, 1, 2, 3, 1]);
    expect(padReference(arr([2, 1], [4, 5]), [0, 0, 1, 0], 'constant', 0).data).toEqual(Float64Array.from([0, 4, 5]));
  });
});
