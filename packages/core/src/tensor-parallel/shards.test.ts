import { describe, expect, it } from 'vitest';
import { columnParallelSlice, mergedColumnPartPiece, mergedColumnPieces, qkvLayout, qkvPartPiece, qkvPieces, rowParallelSlice } from './shards.js';

describe('tensor-parallel shard arithmetic (what each rank reads of a full tensor)', () => {
  it('column and row slices', () => {
    expect(columnParallelSlice(128, 1, 2)).toEqual({ dim: 0, start: 64, length: 64 });
    expect(rowParallelSlice(96, 2, 3)).toEqual({ dim: 1, start: 64, length: 32 });
    expect(() => columnParallelSlice(10, 0, 4)).toThrow(/output size 10 is not divisible by the tensor-parallel size 4/);
  });

  it('merged column: each part split, pieces stacked in part order', () => {
    expect(mergedColumnPieces([8, 8], 1, 2)).toEqual([{ dim: 0, start: 4, length: 4, rowOffset: 0 }, { dim: 0, start: 12, length: 4, rowOffset: 4 }]);
    expect(mergedColumnPartPiece([8, 8], 1, 1, 2)).toEqual({ dim: 0, start: 4, length: 4, rowOffset: 4 });
    expect(() => mergedColumnPartPiece([8, 8], 2, 0, 2)).toThrow(/part 2/);
  });

  it('qkv: q heads split, kv heads split or replicated (rank r takes kv group floor(r / replicas))', () => {
    const l2 = qkvLayout(16, 4, 2, 2);
    expect(qkvPartPiece(l2, 'q', 1)).toEqual({ dim: 0, start: 32, length: 32, rowOffset: 0 });
    expect(qkvPartPiece(l2, 'k', 1)).toEqual({ dim: 0, start: 16, length: 16, rowOffset: 32 });
    expect(qkvPartPiece(l2, 'v', 1)).toEqual({ dim: 0, start: 16, length: 16, rowOffset: 48 });
    const l4 = qkvLayout(16, 4, 2, 4);
    expect([l4.numHeads, l4.numKvHeads, l4.numKvHeadReplicas]).toEqual([1, 1, 2]);
    expect(qkvPartPiece(l4, 'k', 3)).toEqual({ dim: 0, start: 16, length: 16, rowOffset: 16 });
    // in the fused [q | k | v] tensor: k starts after the 4 q heads, v after the 2 k heads
    expect(qkvPieces(l4, 3).map((p) => p.start)).toEqual([48, 64 + 16, 96 + 16]);
    expect(() => qkvLayout(16, 4, 3, 2)).toThrow(/kv heads/);
  });
});
