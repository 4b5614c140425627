/** The pure planning of the along-dim ops: lines over any strides, threads a line, the stages of a sort / topk. */
import { describe, expect, it } from 'vitest';
import { contiguousLines, lineThreads, planLines } from './lines.js';
import { planLongSort, planSort, pow2, sortThreads } from './sort-plan.js';

describe('planLines', () => {
  it('a contiguous tensor: outer, D, inner around the dim', () => {
    expect(planLines([4, 5, 6], [30, 6, 1], 1)).toEqual({ outer: 4, D: 5, inner: 6, sO: 30, sD: 6, sI: 1 });
    expect(planLines([4, 5, 6], [30, 6, 1], 2)).toEqual({ outer: 20, D: 6, inner: 1, sO: 6, sD: 1, sI: 0 });
    expect(planLines([4, 5, 6], [30, 6, 1], 0)).toEqual({ outer: 1, D: 4, inner: 30, sO: 0, sD: 30, sI: 1 });
    expect(contiguousLines([4, 5, 6], 1)).toEqual(planLines([4, 5, 6], [30, 6, 1], 1));
  });

  it('transposed, sliced and broadcast inputs are walked in place; a 0-d tensor is one line of one', () => {
    // [5, 4] transposed from [4, 5]: lines along dim 1 are stride 5 apart by 1
    expect(planLines([5, 4], [1, 5], 1)).toEqual({ outer: 5, D: 4, inner: 1, sO: 1, sD: 5, sI: 0 });
    // rows of 128 out of 136
    expect(planLines([20, 128], [136, 1], 1)).toEqual({ outer: 20, D: 128, inner: 1, sO: 136, sD: 1, sI: 0 });
    // a broadcast dim (stride 0) along the line
    expect(planLines([3, 7], [1, 0], 1)).toEqual({ outer: 3, D: 7, inner: 1, sO: 1, sD: 0, sI: 0 });
    expect(planLines([], [], 0)).toEqual({ outer: 1, D: 1, inner: 1, sO: 0, sD: 0, sI: 0 });
  });

  it('outer dims that do not merge give null (the caller copies)', () => {
    // [2, 3, 4] permuted (2, 0, 1) of a contiguous [3, 4, 2]: dims 0 and 1 of the view do not merge
    expect(planLines([2, 3, 4], [1, 8, 2], 2)).toBeNull();
    // [2, 3, 4] permuted (1, 0, 2) of a contiguous [3, 2, 4]
    expect(planLines([2, 3, 4], [4, 8, 1], 2)).toBeNull();
    // ... but its inner dims may still merge
    expect(planLines([2, 3, 4], [1, 8, 2], 0)).toEqual({ outer: 1, D: 2, inner: 12, sO: 0, sD: 1, sI: 2 });
  });

  it('threads a line: a thread a column for many inner lines, a warp for short lines, a block for long ones', () => {
    expect(lineThreads({ outer: 64, D: 50, inner: 4096, sO: 0, sD: 4096, sI: 1 }, 132).tpr).toBe(1);
    expect(lineThreads({ outer: 100, D: 1000, inner: 1, sO: 1000, sD: 1, sI: 0 }, 132)).toMatchObject({ tpr: 32, block: 256 });
    expect(lineThreads({ outer: 4, D: 128256, inner: 1, sO: 128256, sD: 1, sI: 0 }, 132)).toMatchObject({ tpr: 1024, block: 1024, grid: 4 });
    expect(lineThreads({ outer: 4, D: 2000, inner: 1, sO: 2000, sD: 1, sI: 0 }, 132)).toMatchObject({ tpr: 512, block: 512 });
  });
});

describe('planSort', () => {
  it('a line up to 4096: one stage, one segment, a power-of-two network', () => {
    expect(planSort(1000, 1000)).toEqual([{ D: 1000, segLen: 1000, nSeg: 1, K: 1000, P: 1024 }]);
    expect(planSort(1, 1)).toEqual([{ D: 1, segLen: 1, nSeg: 1, K: 1, P: 2 }]);
    expect(planSort(4096, 5)).toEqual([{ D: 4096, segLen: 4096, nSeg: 1, K: 5, P: 4096 }]);
    expect(pow2(33)).toBe(64);
    expect(sortThreads(2)).toBe(32);
    expect(sortThreads(4096)).toBe(1024);
  });

  it('topk of a vocabulary row in two stages; long rows in three; sort beyond 4096 and huge k are declined', () => {
    expect(planSort(128256, 50)).toEqual([
      { D: 128256, segLen: 4096, nSeg: 32, K: 50, P: 4096 },
      { D: 1600, segLen: 1600, nSeg: 1, K: 50, P: 2048 },
    ]);
    const three = planSort(4_000_000, 1000) as { D: number }[];
    expect(three.map((s) => s.D)).toEqual([4_000_000, 977_000, 239_000, 59_000, 15_000, 4_000]);
    expect(planSort(5000, 5000)).toMatch(/sort of a dim of 5000 > 4096/);
    expect(planSort(5000, 3000)).toMatch(/topk with k=3000 of a dim of 5000/);
  });
});

describe('planLongSort', () => {
  it('chunks sorted locally, then per stage the global steps down to the chunk and one local pass', () => {
    expect(planLongSort(9000)).toEqual({
      P: 16384,
      steps: [
        { local: true, kLo: 2, kHi: 4096 },
        { local: false, k: 8192, j: 4096 },
        { local: true, kLo: 8192, kHi: 8192 },
        { local: false, k: 16384, j: 8192 },
        { local: false, k: 16384, j: 4096 },
        { local: true, kLo: 16384, kHi: 16384 },
      ],
    });
    const vocab = planLongSort(128256) as { P: number; steps: unknown[] };
    expect(vocab.P).toBe(131072);
    expect(vocab.steps).toHaveLength(1 + (1 + 2 + 3 + 4 + 5) + 5);
    expect(planLongSort(2 ** 24 + 1)).toMatch(/at most 16777216/);
  });
});
