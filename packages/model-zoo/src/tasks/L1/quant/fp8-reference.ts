import { hostArray, type HostArray } from '@fastkernels/core';

/** Largest finite float8 e4m3fn value. */
export const E4M3_MAX = 448;

/**
 * Float64 rounding to float8 e4m3fn, written from the format (not the dtype codec the kernels store through): 3
 * mantissa bits, normal exponents down to 2^-6, subnormal steps of 2^-9, nearest-even, saturating at +-448.
 */
export function roundE4m3(x: number): number {
  if (Number.isNaN(x)) return x;
  const a = Math.min(Math.abs(x), E4M3_MAX);
  const exp = Math.max(Math.floor(Math.log2(a || 1)), -6);
  const step = 2 ** (exp - 3);
  const q = a / step;
  let r = Math.round(q);
  if (q % 1 === 0.5 && r % 2 !== 0) r -= 1; // a tie goes to even
  return Math.sign(x) * Math.min(r * step, E4M3_MAX);
}

/**
 * Per-token-group fp8 quantisation in float64 (vLLM's per_token_group_quant_fp8): each run of `groupSize` values along
 * the last dim gets scale = max(amax, eps) / 448 (UE8M0: the next power of two up) and q = e4m3(x / scale).
 * Returns q (as its float values) and the scales [..., H / groupSize], row-major. The scale and x / scale are rounded to
 * float32 as production computes them: bf16 inputs often land x / scale on an exact e4m3 tie (42 = 448 * 3 / 32), which
 * the float32 scale's rounding decides, so a float64 scale would round those elements the other way.
 */
export function groupQuantFp8Reference(x: HostArray, groupSize: number, useUe8m0 = false, eps = 1e-10): [HostArray, HostArray] {
  const H = x.shape[x.shape.length - 1]!;
  const q = hostArray(x.shape);
  const scales = hostArray([...x.shape.slice(0, -1), H / groupSize]);
  for (let g = 0; g < scales.data.length; g++) {
    let amax = 0;
    for (let i = g * groupSize; i < (g + 1) * groupSize; i++) amax = Math.max(amax, Math.abs(x.data[i]!));
    let s = Math.fround(Math.max(amax, eps) / E4M3_MAX);
    if (useUe8m0) s = 2 ** Math.ceil(Math.log2(s));
    scales.data[g] = s;
    for (let i = g * groupSize; i < (g + 1) * groupSize; i++) q.data[i] = roundE4m3(Math.fround(x.data[i]! / s));
  }
  return [q, scales];
}

/** q * scale per group of `groupSize` along the last dim (the dequantised values the fp8 GEMM multiplies). */
export function groupDequantReference(q: HostArray, scales: HostArray, groupSize: number): Float64Array {
  return q.data.map((v, i) => v * scales.data[Math.floor(i / groupSize)]!);
}
