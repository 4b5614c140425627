import { hostArray } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { conv2dReference } from './conv2d.js';
import { maxPool2dReference } from './max_pool2d.js';

const arr = (shape: number[], v: number[]) => hostArray(shape, Float64Array.from(v));

describe('conv2d / max_pool2d references on hand-computed values', () => {
  it('a 2x2 kernel with padding 1 and bias; a depthwise conv keeps channels apart', () => {
    const x = arr([1, 1, 2, 2], [1, 2, 3, 4]);
    const w = arr([1, 1, 2, 2], [1, 0, 0, 1]); // y = x[i-1, j-1] + x[i, j]
    const y = conv2dReference(x, w, arr([1], [10]), 1, 1);
    expect(y.shape).toEqual([1, 1, 3, 3]);
    expect([...y.data]).toEqual([11, 12, 10, 13, 15, 12, 10, 13, 14]);
    const dw = conv2dReference(arr([1, 2, 1, 1], [2, 3]), arr([2, 1, 1, 1], [5, 7]), null, 1, 0, 1, 2);
    expect([...dw.data]).toEqual([10, 21]);
  });

  it('stride 2 halves the map; SPPF-style 5x5 / stride 1 / padding 2 pooling keeps the size', () => {
    const x = arr([1, 1, 3, 3], [1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect([...conv2dReference(x, arr([1, 1, 1, 1], [2]), null, 2, 0).data]).toEqual([2, 6, 14, 18]);
    const p = maxPool2dReference(arr([1, 1, 1, 4], [3, -1, 0, 5]), 5, 1, 2);
    expect([...p.data]).toEqual([3, 5, 5, 5]);
  });
});
