/** Host float64 values to checkpoint bytes. */
import { DTYPE_INFO, elementAccessor, type DType } from '@fastkernels/core';

/**
 * Host values to little-endian bytes of `dtype`. f32 and bf16 take fast paths (a Float32Array's rounding; bf16 by
 * round-to-nearest-even on the float32 bits, corrected where the float32 rounding landed exactly on a bf16 tie, so
 * the result is the single rounding of the float64 value that core's numberToBf16 gives); others use the accessor.
 */
export function encodeValues(values: Float64Array, dtype: DType): Uint8Array {
  const n = values.length;
  if (dtype === 'f32') return new Uint8Array(Float32Array.from(values).buffer);
  if (dtype === 'bf16') {
    const f = Float32Array.from(values);
    const u = new Uint32Array(f.buffer);
    const out = new Uint16Array(n);
    for (let i = 0; i < n; i++) {
      const b = u[i]!;
      const x = values[i]!;
      const fi = f[i]!;
      if ((b & 0x7f800000) === 0x7f800000) {
        // inf or NaN after rounding to float32: overflow keeps the sign's infinity, NaN stays a quiet NaN
        out[i] = x !== x ? 0x7fc0 : (b >>> 16) & 0xff80;
      } else if ((b & 0xffff) === 0x8000 && fi !== x) {
        // float32 rounding landed on a bf16 tie: x itself is above or below it in magnitude
        out[i] = Math.abs(x) > Math.abs(fi) ? (b >>> 16) + 1 : b >>> 16;
      } else {
        out[i] = ((b + 0x7fff + ((b >>> 16) & 1)) >>> 16) & 0xffff;
      }
    }
    return new Uint8Array(out.buffer);
  }
  const bytes = new Uint8Array(n * DTYPE_INFO[dtype].itemsize);
  const acc = elementAccessor(dtype, bytes);
  for (let i = 0; i < n; i++) acc.set(i, values[i]!);
  return bytes;
}
