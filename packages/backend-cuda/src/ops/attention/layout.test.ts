/** How the dense SDPA kernel addresses permuted, sliced and broadcast operands (batch / head / row / column strides). */
import { describe, expect, it } from 'vitest';
import { chunkAligned, operandStrides } from './layout.js';

describe('operandStrides', () => {
  it('contiguous [B, H, L, D]; [B, L, H, D] permuted to [B, H, L, D] is read in place', () => {
    expect(operandStrides([2, 4, 5, 64], [1280, 320, 64, 1], [2], 4, 5, 64)).toEqual({ batch: 1280, head: 320, row: 64, col: 1 });
    // [B, L, H, D] contiguous strides [L H D, H D, D, 1], permuted (0, 2, 1, 3)
    expect(operandStrides([2, 4, 5, 64], [1280, 64, 256, 1], [2], 4, 5, 64)).toEqual({ batch: 1280, head: 64, row: 256, col: 1 });
  });

  it('several leading dims collapse into one batch stride; ones are skipped; a gap returns null (the runner copies)', () => {
    expect(operandStrides([2, 3, 4, 5, 8], [480, 160, 40, 8, 1], [2, 3], 4, 5, 8)).toEqual({ batch: 160, head: 40, row: 8, col: 1 });
    expect(operandStrides([2, 1, 3, 4, 5, 8], [480, 7, 160, 40, 8, 1], [2, 1, 3], 4, 5, 8)).toEqual({ batch: 160, head: 40, row: 8, col: 1 });
    expect(operandStrides([2, 3, 4, 5, 8], [999, 160, 40, 8, 1], [2, 3], 4, 5, 8)).toBeNull();
  });

  it('broadcast: missing and size-1 dims read with stride 0 (a mask [L, S], a key shared by the heads)', () => {
    expect(operandStrides([5, 7], [7, 1], [2, 3], 4, 5, 7)).toEqual({ batch: 0, head: 0, row: 7, col: 1 });
    expect(operandStrides([2, 1, 1, 7], [7, 7, 7, 1], [2], 4, 5, 7)).toEqual({ batch: 7, head: 0, row: 0, col: 1 });
    expect(operandStrides([1, 5, 7], [35, 1, 5], [], 1, 5, 7)).toEqual({ batch: 0, head: 0, row: 1, col: 5 }); // a transposed mask
    // a batch dim broadcast inside a real one does not collapse
    expect(operandStrides([2, 1, 4, 5, 8], [160, 160, 40, 8, 1], [2, 3], 4, 5, 8)).toBeNull();
    expect(() => operandStrides([2, 3, 5, 8], [120, 40, 8, 1], [2], 4, 5, 8)).toThrow(/dim 1 is 3, expected 4 or 1/);
  });

  it('chunkAligned: 16-byte address and batch / head / row strides', () => {
    expect(chunkAligned(4096, { batch: 1280, head: 64, row: 256, col: 1 }, 2)).toBe(true);
    expect(chunkAligned(4098, { batch: 1280, head: 64, row: 256, col: 1 }, 2)).toBe(false);
    expect(chunkAligned(4096, { batch: 0, head: 0, row: 100, col: 1 }, 2)).toBe(false);
  });
});
