import { describe, expect, it } from 'vitest';
import { normLaunch } from './norm.js';
import { columnVec, planColumns, planReduce, rowLaunch, rowVec, splitRows } from './reduce-plan.js';

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

describe('column launch shapes', () => {
  /** The launch of a column reduction of [outer, R, inner] of `itemsize`-byte elements at pointer `ptr`, on 132 SMs. */
  const plan = (outer: number, R: number, inner: number, itemsize = 2, sOuter = R * inner, sR = inner, ptr = 0) => {
    const vec = columnVec(itemsize, inner, sOuter, sR, [ptr]);
    const p = planColumns(outer, R, inner, vec, itemsize, 132);
    return { ...p.launch, ...p.split, ctas: p.launch.grid * p.split.S };
  };
  /** The second stage of a split: its [S, outer * inner] f32 partials folded in one pass. */
  const stage2 = (S: number, n: number) => planColumns(1, S, n, columnVec(4, n, 0, n, [0]), 4, 132, { split: false });

  it('mean over dim 0 of [8192, 8192] bf16: 16-byte loads, 32 x 8 threads, R cut so >= 2 waves of 132 SMs run', () => {
    const p = plan(1, 8192, 8192);
    // as measured on the H100 (0.94x eager): even 8-wide tiles make only 128 CTAs, and R is long, so R is cut
    expect(p).toMatchObject({ vec: 8, tx: 32, ty: 8, block: 256, colTiles: 32, tiles: 32, grid: 32 });
    expect(p.tiles * p.S).toBeGreaterThanOrEqual(2 * 132);
    expect(p).toMatchObject({ S: 64, rChunk: 128, ctas: 2048 }); // 16 rows a thread
    expect(p.rChunk * p.S).toBeGreaterThanOrEqual(8192);
    // its second stage: [64, 8192] f32 partials in one pass of 256 CTAs (was 64 of 32 x 8), 2 rows a thread
    expect(stage2(64, 8192)).toMatchObject({ launch: { vec: 4, tx: 8, ty: 32, grid: 256 }, split: { S: 1 } });
  });

  it('[4, 4096, 1024] over dim 1: few columns, a long R split into slices of >= 32 rows on wide tiles, none empty', () => {
    expect(plan(4, 4096, 1024)).toMatchObject({ vec: 8, tx: 32, ty: 8, tiles: 16, S: 128, rChunk: 32 });
    expect(plan(2, 32 * 32, 512)).toMatchObject({ tiles: 4, S: 32, rChunk: 32 });
  });

  it('mean over the tokens of [64, 512, 1024] bf16 (BGE-M3-like pooling): narrow tiles over outer x inner, one pass', () => {
    // wide 32 x 8 tiles were 64 x 4 = 256 CTAs, split in 8 slices (2048 CTAs, 2 MB of f32 partials, a second launch)
    const p = plan(64, 512, 1024);
    expect(p).toMatchObject({ vec: 8, tx: 8, ty: 32, block: 256, colTiles: 16, tiles: 1024, grid: 1024, S: 1, rChunk: 512 });
    expect(p.ctas).toBeGreaterThanOrEqual(4 * 132); // > 7 CTAs an SM
    expect(p.tx * p.vec * 2).toBe(128); // a thread row reads whole 128-byte lines
  });

  it("ConvNeXt-V2's global pool, [32, 12, 12, 1024] f16 over H, W ([32, 144, 1024]): one pass, R too short to cut", () => {
    expect(planReduce([32, 12, 12, 1024], [147456, 12288, 1024, 1], [1, 2])).toEqual({ kind: 'columns', outer: 32, R: 144, inner: 1024, sOuter: 147456, sR: 1024 });
    // wide tiles were 32 x 4 = 128 CTAs, split in 4 slices of 40 rows (5 rows a thread) plus a second launch
    const p = plan(32, 144, 1024);
    expect(p).toMatchObject({ vec: 8, tx: 8, ty: 32, block: 256, tiles: 512, grid: 512, S: 1, rChunk: 144 });
    expect(p.ctas).toBeGreaterThanOrEqual(3 * 132); // ~4 CTAs of 256 threads an SM, 4 or 5 rows a thread, all loads in flight
  });

  it('smaller channels-last pools: narrow tiles, one pass', () => {
    expect(plan(8, 14 * 14, 2048)).toMatchObject({ tx: 8, ty: 32, tiles: 256, S: 1, rChunk: 196 }); // was 64 x 5 CTAs, split
    expect(plan(8, 7 * 7, 2048)).toMatchObject({ tx: 8, ty: 32, tiles: 256, S: 1, rChunk: 49 }); // was 64 CTAs
    expect(plan(32, 7 * 7, 768)).toMatchObject({ tx: 8, ty: 32, tiles: 384, S: 1 });
  });

  it('vectors narrow to what inner, both strides and the pointer allow; at most 8 elements', () => {
    expect(columnVec(2, 8192, 0, 8192, [256])).toBe(8);
    expect(columnVec(4, 8192, 0, 8192, [256])).toBe(4);
    expect(columnVec(1, 4096, 0, 4096, [0])).toBe(8);
    expect(columnVec(2, 1000, 0, 1000, [0])).toBe(8);
    expect(columnVec(2, 1004, 0, 1004, [0])).toBe(4);
    expect(columnVec(2, 1024, 1030, 1024, [0])).toBe(2); // a non-contiguous outer stride
    expect(columnVec(2, 1024, 0, 1028, [0])).toBe(4);
    expect(columnVec(2, 8192, 0, 8192, [2])).toBe(1); // a misaligned pointer
    expect(columnVec(4, 8192, 0, 8192, [8])).toBe(2);
  });

  it('small odd inner: scalar loads, the CTA mostly along R (inner 1..7)', () => {
    for (const inner of [1, 2, 3, 4, 5, 6, 7]) {
      const p = plan(2, 10000, inner, 4);
      const vec = inner % 4 === 0 ? 4 : inner % 2 === 0 ? 2 : 1;
      expect(p.vec, `inner ${inner}`).toBe(vec);
      expect(p.tx * p.vec, `inner ${inner}`).toBeGreaterThanOrEqual(inner); // one tile covers the row
      expect(p.tx * p.vec, `inner ${inner}`).toBeLessThan(2 * inner);
      expect(p.block, `inner ${inner}`).toBe(256);
      expect(p.colTiles, `inner ${inner}`).toBe(1);
      expect(p.S, `inner ${inner}`).toBeGreaterThan(1);
    }
    expect(plan(1, 1000, 3, 4)).toMatchObject({ vec: 1, tx: 4, ty: 64 });
  });

  it('huge outer: the tiles fill the device, grid-strided past sms * 64, no split', () => {
    expect(plan(1_000_000, 16, 64)).toMatchObject({ vec: 8, tx: 8, ty: 16, block: 128, tiles: 1_000_000, grid: 132 * 64, S: 1, rChunk: 16 });
    expect(plan(64, 2048, 4096)).toMatchObject({ tx: 32, tiles: 64 * 16, S: 1 }); // 1024 CTAs: about a wave at 8 an SM
    expect(plan(16, 2048, 4096)).toMatchObject({ tx: 8, ty: 32, tiles: 1024, S: 1 }); // was 256 x 9, split
  });

  it('tiles narrow no further than 128-byte rows, nor when R is too short to take the threads', () => {
    expect(plan(4, 4096, 1024, 4)).toMatchObject({ vec: 4, tx: 32, ty: 8, tiles: 32, S: 64 }); // f32: 8-wide tiles still too few
    expect(plan(64, 512, 1024, 4)).toMatchObject({ vec: 4, tx: 16, ty: 16, tiles: 1024, S: 1 }); // f32 tokens: 16 wide fills
    expect(plan(64, 512, 1022)).toMatchObject({ vec: 2, tx: 32, ty: 8, tiles: 1024, S: 1 }); // 4-byte vectors: no narrowing
    expect(plan(64, 4, 1024)).toMatchObject({ vec: 8, tx: 64, ty: 4, tiles: 128, S: 1 }); // R = 4 keeps the CTA along inner
    expect(stage2(3, 1 << 16)).toMatchObject({ launch: { tx: 64, ty: 4 }, split: { S: 1 } });
  });

  it('short R gives the threads to inner; R = 1 (a split second stage never cuts its few rows)', () => {
    expect(plan(1, 2, 1 << 22)).toMatchObject({ vec: 8, tx: 128, ty: 2, block: 256, S: 1 });
    expect(plan(1, 1, 8192, 4)).toMatchObject({ vec: 4, tx: 256, ty: 1, S: 1, rChunk: 1 });
    expect(planReduce([1, 64], [64, 1], [0]).kind).toBe('rows'); // a reduction over a size-1 dim is never columns
    expect(plan(1, 32, 8192, 4)).toMatchObject({ vec: 4, tx: 8, ty: 32, tiles: 256, S: 1 }); // too short to cut: narrow tiles
    expect(plan(3, 5, 16)).toMatchObject({ vec: 8, tx: 2, ty: 8, block: 16, tiles: 3, S: 1 });
  });

  it('inner not a multiple of the widest vector: a narrower one covering inner exactly', () => {
    const p = plan(2, 4096, 1020);
    expect(p.vec).toBe(4);
    expect(p.colTiles * p.tx * p.vec).toBeGreaterThanOrEqual(1020);
    expect(plan(2, 4096, 1021).vec).toBe(1);
  });
});
