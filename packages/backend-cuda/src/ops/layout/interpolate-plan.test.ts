/** The source mapping of F.interpolate per spatial dim, as the CPU reference computes it. */
import { describe, expect, it } from 'vitest';
import { channelsLastVec, interpolateScale, interpolateTaps } from './interpolate-plan.js';

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

describe('channelsLastVec', () => {
  // [N, C, H, W] channels-last strides: C innermost
  const cl = (n: number, c: number, h: number, w: number) => [h * w * c, 1, w * c, c];
  it('16 bytes along C where C, the pointers and the other strides line up (YOLOv10 neck f16: 8 halves)', () => {
    expect(channelsLastVec([8, 256, 40, 40], cl(8, 256, 40, 40), 2, 0, 4096)).toBe(8);
    expect(channelsLastVec([8, 256, 40, 40], cl(8, 256, 40, 40), 4, 0, 4096)).toBe(4);
    expect(channelsLastVec([1, 64, 3, 3], cl(1, 64, 3, 3), 8, 0, 0)).toBe(2);
  });
  it('narrower where they do not: C 12 (4), a pointer 2 bytes in (1), C not contiguous (1), a channel slice (its stride)', () => {
    expect(channelsLastVec([1, 12, 5, 5], cl(1, 12, 5, 5), 2, 0, 0)).toBe(4);
    expect(channelsLastVec([1, 64, 5, 5], cl(1, 64, 5, 5), 2, 2, 0)).toBe(1);
    expect(channelsLastVec([1, 64, 5, 5], [1600, 2, 320, 64], 2, 0, 0)).toBe(1);
    // the upper half of a 128-channel channels-last tensor (C2f's split): strides of the whole, pointer 64 halves in
    expect(channelsLastVec([1, 64, 5, 5], [3200, 1, 640, 128], 2, 128, 0)).toBe(8);
    expect(channelsLastVec([1, 64, 5, 5], [3200, 1, 640, 132], 2, 0, 0)).toBe(4);
  });
});
