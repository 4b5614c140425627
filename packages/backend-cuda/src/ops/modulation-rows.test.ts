import { describe, expect, it } from 'vitest';
import { modulationRows } from './modulation-rows.js';

describe('modulationRows (layer_norm_modulate operand layouts)', () => {
  it('adaLN layouts: a row a sample, a chunk view of [B, 6L], one row for all, per token', () => {
    expect(modulationRows([2, 4096, 3072], [3072, 0, 1])).toEqual({ groupRows: 4096, stride: 3072 });
    expect(modulationRows([2, 4096, 3072], [6 * 3072, 0, 1])).toEqual({ groupRows: 4096, stride: 6 * 3072 });
    expect(modulationRows([2, 5, 7], [0, 0, 1])).toEqual({ groupRows: 10, stride: 0 });
    expect(modulationRows([2, 5, 7], [35, 7, 1])).toEqual({ groupRows: 1, stride: 7 });
    expect(modulationRows([1, 5, 7], [99, 0, 1])).toEqual({ groupRows: 5, stride: 0 });
    expect(modulationRows([3, 1, 4, 7], [28, 28, 7, 1])).toEqual({ groupRows: 1, stride: 7 });
    expect(modulationRows([7], [1])).toEqual({ groupRows: 1, stride: 0 });
    expect(modulationRows([2, 3, 5, 7], [21, 7, 0, 1])).toEqual({ groupRows: 5, stride: 7 }); // [2, 3, 1, 7] over 5 tokens
  });

  it('layouts one (groupRows, stride) pair cannot read: null', () => {
    expect(modulationRows([2, 5, 7], [7, 0, 2])).toBeNull(); // the last dim strided
    expect(modulationRows([2, 3, 5, 7], [0, 7, 0, 1])).toBeNull(); // an outer broadcast dim
    expect(modulationRows([2, 3, 7], [100, 7, 1])).toBeNull(); // rows not one stride apart
    expect(modulationRows([], [])).toBeNull();
  });
});
