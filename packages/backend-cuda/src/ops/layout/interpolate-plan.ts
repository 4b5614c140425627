/**
 * The per-dim source mapping of F.interpolate (pure, CPU-tested), as PyTorch and the CPU reference compute it:
 * - nearest / nearest-exact: src = floor(dst * s) / floor((dst + 0.5) * s) in float32, s = float32(1 / scale_factor)
 *   or float32(in / out);
 * - linear / bilinear / trilinear / bicubic: s = (in - 1) / (out - 1) with align_corners (0 for one output), else
 *   1 / scale_factor or in / out; the kernel takes src = s * dst or s * (dst + 0.5) - 0.5.
 */
import type { InterpolateAttrs } from '@fastkernels/core';

export type InterpMode = InterpolateAttrs['mode'];

export function interpolateScale(mode: InterpMode, alignCorners: boolean, inSize: number, outSize: number, scale: number | null): number {
  const given = scale !== null && scale > 0;
  if (mode === 'nearest' || mode === 'nearest-exact') return given ? Math.fround(1 / scale) : Math.fround(inSize / outSize);
  if (alignCorners) return outSize > 1 ? (inSize - 1) / (outSize - 1) : 0;
  return given ? 1 / scale : inSize / outSize;
}

/** Source taps a spatial dim reads per output coordinate. */
export function interpolateTaps(mode: InterpMode): 1 | 2 | 4 {
  return mode === 'nearest' || mode === 'nearest-exact' ? 1 : mode === 'bicubic' ? 4 : 2;
}

/**
 * Elements a thread moves along C in the channels-last kernel (interpolate-source.ts interpolateChannelsLastSource):
 * 16 bytes' worth where C is contiguous in x and the pointers, C and x's other strides (dims of size > 1) line up on
 * that many elements; halved until they do (1: one element, C read at its stride).
 */
export function channelsLastVec(shape: readonly number[], strides: readonly number[], itemsize: number, xPtr: number, outPtr: number): number {
  const C = shape[1]!;
  const fits = (v: number) =>
    C % v === 0 && strides[1] === 1 && xPtr % (v * itemsize) === 0 && outPtr % (v * itemsize) === 0 && strides.every((s, d) => d === 1 || shape[d] === 1 || s % v === 0);
  let v = 16 / itemsize;
  while (v > 1 && !fits(v)) v >>= 1;
  return v;
}
