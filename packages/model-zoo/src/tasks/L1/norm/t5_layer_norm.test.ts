import { hostArray } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { quickGeluReference } from '../activation/quickgelu.js';
import { t5LayerNormReference } from './t5_layer_norm.js';

describe('T5LayerNorm / QuickGELU references', () => {
  it('T5LayerNorm divides by the RMS (no mean subtraction) and scales', () => {
    // row [3, 4]: mean square 12.5; with eps 0 -> x / sqrt(12.5)
    const y = t5LayerNormReference(hostArray([1, 2], [3, 4]), hostArray([2], [1, 2]), 0);
    expect(y.data[0]).toBeCloseTo(3 / Math.sqrt(12.5), 12);
    expect(y.data[1]).toBeCloseTo((2 * 4) / Math.sqrt(12.5), 12);
    // a constant row is not centred to zero (LayerNorm would give 0)
    expect(t5LayerNormReference(hostArray([1, 2], [2, 2]), hostArray([2], [1, 1]), 0).data[0]).toBeCloseTo(1, 12);
  });

  it('QuickGELU at hand-computed points', () => {
    const q = quickGeluReference(hostArray([2], [1, -2])).data;
    expect(q[0]).toBeCloseTo(1 / (1 + Math.exp(-1.702)), 12);
    expect(q[1]).toBeCloseTo(-2 / (1 + Math.exp(3.404)), 12);
  });
});
