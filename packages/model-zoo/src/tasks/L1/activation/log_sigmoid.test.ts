import { hostArray } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { logSigmoidReference } from './log_sigmoid.js';

describe('L1/log_sigmoid reference', () => {
  it('log(sigmoid(x)) by hand, and stable at large |x|', () => {
    const y = logSigmoidReference(hostArray([4], [0, 2, -2, -800]));
    expect(y.data[0]).toBeCloseTo(Math.log(0.5), 14);
    expect(y.data[1]).toBeCloseTo(-Math.log(1 + Math.exp(-2)), 14);
    expect(y.data[2]).toBeCloseTo(-2 - Math.log(1 + Math.exp(-2)), 14);
    expect(y.data[3]).toBe(-800); // naive log(1 / (1 + e^800)) would be -Infinity
  });
});
