/**
 * F.interpolate of channels-last inputs on CUDA (interpolate-source.ts interpolateChannelsLastSource): the output is
 * channels-last, as PyTorch's upsample (the YOLOv10 neck's concats and the C2f convs after them stay channels-last), and
 * matches the CPU backend's result of the same values; 16-byte vectors along C where channelsLastVec allows, scalar
 * where C, a stride or the pointer does not line up. Prints the neck's nearest 2x upsample, channels-last vs contiguous.
 */
import { F, stridesLikeChannelsLast, type DType, type InterpolateAttrs, type Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { G, expectClose, medianMs, printedAfterAll, randCpu, toGpu } from '../../../test/spine-helpers.js';

const GT = { ...G, timeout: 300_000 };

/** t [N, C, *spatial] stored channels-last. */
function channelsLast(t: Tensor): Tensor {
  const S = t.rank - 2;
  const toLast = [0, ...Array.from({ length: S }, (_, k) => k + 2), 1];
  const back = [0, S + 1, ...Array.from({ length: S }, (_, k) => k + 1)];
  const p = t.permute(toLast);
  const c = p.contiguous();
  p.dispose();
  const v = c.permute(back);
  c.dispose();
  return v;
}

interface Case {
  readonly label: string;
  readonly shape: number[];
  readonly dtype: DType;
  readonly attrs: NonNullable<Parameters<typeof F.interpolate>[1]> & Pick<InterpolateAttrs, 'mode'>;
  /** A channel slice [lo, lo + n) of the stored tensor instead of all of it. */
  readonly slice?: readonly [number, number];
}

const CASES: Case[] = [
  { label: 'nearest 2x f16 [2, 64, 10, 12] (8 halves a thread)', shape: [2, 64, 10, 12], dtype: 'f16', attrs: { scale_factor: 2, mode: 'nearest' } },
  { label: 'nearest to [7, 5] bf16 C 12 (4 a thread)', shape: [1, 12, 6, 9], dtype: 'bf16', attrs: { size: [7, 5], mode: 'nearest' } },
  { label: 'nearest-exact f16 C 3 (scalar)', shape: [2, 3, 5, 5], dtype: 'f16', attrs: { scale_factor: 3, mode: 'nearest-exact' } },
  { label: 'bilinear f16 [1, 24, 7, 9] -> [13, 17]', shape: [1, 24, 7, 9], dtype: 'f16', attrs: { size: [13, 17], mode: 'bilinear', align_corners: false } },
  { label: 'bilinear align_corners f32 [2, 8, 5, 6] -> 2x', shape: [2, 8, 5, 6], dtype: 'f32', attrs: { scale_factor: 2, mode: 'bilinear', align_corners: true } },
  { label: 'bicubic bf16 [1, 16, 6, 6] -> [9, 11]', shape: [1, 16, 6, 6], dtype: 'bf16', attrs: { size: [9, 11], mode: 'bicubic', align_corners: false } },
  { label: 'trilinear f16 5-d [1, 16, 3, 4, 5] -> 2x', shape: [1, 16, 3, 4, 5], dtype: 'f16', attrs: { scale_factor: 2, mode: 'trilinear', align_corners: false } },
  { label: 'nearest 2x of a channel slice [64, 128) of a channels-last f16 tensor (C2f split)', shape: [1, 128, 6, 7], dtype: 'f16', attrs: { scale_factor: 2, mode: 'nearest' }, slice: [64, 64] },
  { label: 'bilinear of a misaligned channel slice [3, 35) (scalar)', shape: [1, 40, 5, 5], dtype: 'f16', attrs: { scale_factor: 2, mode: 'bilinear', align_corners: false }, slice: [3, 32] },
];

describe('interpolate of channels-last inputs on CUDA', () => {
  const lines = printedAfterAll();

  it('channels-last out, values as the CPU backend (nearest bit-exact)', GT, () => {
    CASES.forEach((c, k) => {
      const host = randCpu(c.shape, c.dtype, k + 1);
      const dev = toGpu(host);
      const cl = channelsLast(dev);
      const x = c.slice ? cl.narrow(1, c.slice[0], c.slice[1]) : cl;
      const hx = c.slice ? host.narrow(1, c.slice[0], c.slice[1]) : host;
      const got = F.interpolate(x, c.attrs);
      const want = F.interpolate(hx, c.attrs);
      try {
        expect(stridesLikeChannelsLast(got.shape, got.strides) && !got.isContiguous(), `${c.label}: strides [${got.strides}]`).toBe(true);
        expect(got.shape).toEqual(want.shape);
        if (c.attrs.mode.startsWith('nearest')) expect(Array.from(got.toFloat64Array()), c.label).toEqual(Array.from(want.toFloat64Array()));
        else expectClose(got, want, { atol: c.dtype === 'f32' ? 1e-5 : 2e-2, rtol: c.dtype === 'f32' ? 1e-5 : 2e-2 }, c.label);
      } finally {
        for (const t of new Set([got, want, x, hx, cl, dev, host])) t.dispose();
      }
    });
  });

  it("the YOLOv10 neck's nearest 2x upsample [8, 256, 40, 40] f16: channels-last vs contiguous", GT, () => {
    const host = randCpu([8, 256, 40, 40], 'f16', 9);
    const dev = toGpu(host);
    const cl = channelsLast(dev);
    try {
      const ms = (x: Tensor) => medianMs(() => F.interpolate(x, { scale_factor: 2, mode: 'nearest' }).dispose(), 20);
      const [msCl, msNchw] = [ms(cl), ms(dev)];
      const bytes = 5 * 8 * 256 * 40 * 40 * 2; // read once, written 4x
      lines.push(`  nearest 2x [8, 256, 40, 40] f16: channels-last ${(msCl * 1e3).toFixed(1)} us (${(bytes / msCl / 1e6).toFixed(0)} GB/s), contiguous ${(msNchw * 1e3).toFixed(1)} us`);
    } finally {
      for (const t of [cl, dev, host]) t.dispose();
    }
  });
});
