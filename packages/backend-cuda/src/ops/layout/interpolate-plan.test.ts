/** The source mapping of F.interpolate per spatial dim, as the CPU reference computes it. */
import { describe, expect, it } from 'vitest';
import { interpolateScale, interpolateTaps } from './interpolate-plan.js';

describe('interpolateScale', () => {
  it('nearest modes: float32 of 1 / scale_factor, else of in / out', () => {
    expect(interpolateScale('nearest', false, 10, 25, 2.5)).toBe(Math.fround(0.4));
    expect(interpolateScale('nearest', false, 10, 3, null)).toBe(Math.fround(10 / 3));
    expect(interpolateScale('nearest-exact', false, 7, 14, null)).toBe(0.5);
  });

  it('linear modes: (in - 1) / (out - 1) with align_corners (0 for one output), else 1 / scale or in / out', () => {
    expect(interpolateScale('bilinear', true, 5, 9, null)).toBe(0.5);
    expect(interpolateScale('bilinear', true, 5, 1, null)).toBe(0);
    expect(interpolateScale('bilinear', false, 5, 9, null)).toBe(5 / 9);
    expect(interpolateScale('bicubic', false, 5, 10, 2)).toBe(0.5);
    expect(interpolateTaps('trilinear')).toBe(2);
    expect(interpolateTaps('bicubic')).toBe(4);
    expect(interpolateTaps('nearest-exact')).toBe(1);
  });
});
