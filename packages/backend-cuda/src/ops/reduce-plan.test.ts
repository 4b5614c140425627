import { describe, expect, it } from 'vitest';
import { normLaunch } from './norm.js';
import { planReduce, rowLaunch, rowVec, splitRows } from './reduce-plan.js';

describe('planReduce', () => {
  it('the last dim of a contiguous tensor: rows in place', () => {
    expect(planReduce([4, 5, 6], [30, 6, 1], [2])).toEqual({ kind: 'rows', rows: 20, D: 6, rowStride: 6 });
  });
  it('trailing dims merge into one row; a row-sliced view keeps its row stride', () => {
    expect(planReduce([4, 5, 6], [30, 6, 1], [1, 2])).toEqual({ kind: 'rows', rows: 4, D: 30, rowStride: 30 });
    expect(planReduce([4, 6], [10, 1], [1])).toEqual({ kind: 'rows', rows: 4, D: 6, rowStride: 10 });
  });
  it('all dims: one row', () => {
    expect(planReduce([3, 4], [4, 1], [0, 1])).toEqual({ kind: 'rows', rows: 1, D: 12, rowStride: 12 });
  });
  it('a middle dim with a contiguous inner part: columns, in place', () => {
    expect(planReduce([2, 7, 16], [112, 16, 1], [1])).toEqual({ kind: 'columns', outer: 2, R: 7, inner: 16, sOuter: 112, sR: 16 });
    expect(planReduce([7, 16], [16, 1], [0])).toEqual({ kind: 'columns', outer: 1, R: 7, inner: 16, sOuter: 0, sR: 16 });
  });
  it('a transposed tensor reduced over its last dim reads coalesced as columns; scattered reduced dims are copied', () => {
    expect(planReduce([5, 6], [1, 5], [1])).toEqual({ kind: 'columns', outer: 1, R: 6, inner: 5, sOuter: 0, sR: 5 });
    expect(planReduce([2, 3, 4], [12, 4, 1], [0, 2])).toEqual({ kind: 'copy', rows: 3, D: 8 });
  });
});

describe('splitRows', () => {
  it('few long contiguous rows are cut so the device fills; many rows, short rows or strided rows are not', () => {
    expect(splitRows(1, 4096 * 4096, 4096 * 4096, 132)).toBe(512);
    expect(splitRows(3, 100000, 100000, 132)).toBe(8);
    expect(splitRows(200, 1e6, 1e6, 132)).toBe(1);
    expect(splitRows(4, 8192, 8192, 132)).toBe(1);
    expect(splitRows(4, 65536, 70000, 132)).toBe(1);
  });
});

describe('row launch shapes', () => {
  it('vectors narrow to what D, the stride and the pointers allow', () => {
    expect(rowVec(2, 1024, 1024, [0, 256])).toBe(8);
    expect(rowVec(2, 1000, 1000, [0])).toBe(8);
    expect(rowVec(2, 1004, 1004, [0])).toBe(4);
    expect(rowVec(4, 7, 7, [0])).toBe(1);
    expect(rowVec(2, 1024, 1024, [2])).toBe(1);
  });
  it('a warp a row for short rows, a block a row of ~4 vectors a thread for long ones', () => {
    expect(rowLaunch(1000, 64, 8, 132)).toMatchObject({ tpr: 32, block: 256 });
    expect(rowLaunch(4096, 384, 8, 132)).toMatchObject({ tpr: 96, block: 96, grid: 4096 });
    expect(rowLaunch(1, 1e6, 8, 132)).toMatchObject({ tpr: 1024, block: 1024, grid: 1 });
  });
  it('norms keep the row in registers: BGE 1024 bf16 a warp a row, FLUX 3072 a block, YOLO group rows 6 of 6.25 vectors a thread', () => {
    expect(normLaunch(8192, 1024 / 8, 132)).toEqual({ tpr: 32, block: 256, npt: 4, grid: 1024 });
    expect(normLaunch(4096, 3072 / 8, 132)).toEqual({ tpr: 96, block: 96, npt: 4, grid: 4096 });
    expect(normLaunch(256, (8 * 80 * 80) / 8, 132)).toMatchObject({ tpr: 1024, npt: 6 });
    expect(normLaunch(2, 17500, 132)).toMatchObject({ tpr: 1024, npt: 6 }); // longer rows: the rest is read again
  });
});
