/**
 * The dtypes the generated kernels read and write, their C++ types, and the load / store conversions to and from the
 * compute type, emitted as small named device functions (fk_ld_<dtype>, fk_st_<dtype>) so a kernel source carries only
 * the ones it uses.
 */
import type { DType } from '@fastkernels/core';

export type GenDType = 'f32' | 'f16' | 'bf16' | 'f64' | 'bool' | 'u8' | 'i8' | 'i16' | 'i32' | 'i64';

export const GEN_CTYPE: Readonly<Record<GenDType, string>> = {
  f64: 'double', f32: 'float', f16: '__half', bf16: '__nv_bfloat16',
  bool: 'unsigned char', u8: 'unsigned char', i8: 'signed char', i16: 'short', i32: 'int', i64: 'long long',
};

export const GEN_ITEMSIZE: Readonly<Record<GenDType, number>> = { f64: 8, f32: 4, f16: 2, bf16: 2, bool: 1, u8: 1, i8: 1, i16: 2, i32: 4, i64: 8 };

/** A small number per dtype, for numeric kernel-cache keys (1..10: four bits). */
export const DCODE: Readonly<Record<GenDType, number>> = { f32: 1, f16: 2, bf16: 3, f64: 4, bool: 5, u8: 6, i8: 7, i16: 8, i32: 9, i64: 10 };

export function isGenDType(d: DType): d is GenDType {
  return Object.hasOwn(GEN_CTYPE, d);
}

export function genDType(d: DType, what: string): GenDType {
  if (!isGenDType(d)) throw new TypeError(`${what}: dtype ${d} is not supported by the generated CUDA kernels (${Object.keys(GEN_CTYPE).join(', ')})`);
  return d;
}

/**
 * float, unless a dtype's values are not all exact in float (f64, i32, i64): then double, as the strided copy kernels
 * do. The math is PyTorch's opmath: float for bf16 / f16 / f32.
 */
export function computeType(dtypes: readonly GenDType[]): 'float' | 'double' {
  return dtypes.some((d) => d === 'f64' || d === 'i32' || d === 'i64') ? 'double' : 'float';
}

/** `C fk_ld_<d>(T x)`: the value in the compute type C. */
export function loadFn(d: GenDType, c: string): string {
  const T = GEN_CTYPE[d];
  const body = d === 'f16' ? `${c}(__half2float(x))` : d === 'bf16' ? `${c}(__bfloat162float(x))` : d === 'bool' ? `(x != 0 ? ${c}(1) : ${c}(0))` : `${c}(x)`;
  return `__device__ __forceinline__ ${c} fk_ld_${d}(${T} x) { return ${body}; }`;
}

/** `T fk_st_<d>(C x)`: round to nearest even for floats, 0 / 1 for bool, C++ conversion (truncation) for integers. */
export function storeFn(d: GenDType, c: string): string {
  const T = GEN_CTYPE[d];
  const body =
    d === 'f16' ? '__float2half_rn(float(x))'
    : d === 'bf16' ? '__float2bfloat16_rn(float(x))'
    : d === 'bool' ? `(x != ${c}(0) ? 1 : 0)`
    : d === 'f32' || d === 'f64' ? `(${T})x`
    : `(${T})(long long)x`; // C casts: 'unsigned char(x)' is not C++
  return `__device__ __forceinline__ ${T} fk_st_${d}(${c} x) { return ${body}; }`;
}

/** The conversion helpers for every dtype in `loads` / `stores`, each once. */
export function conversionHelpers(loads: readonly GenDType[], stores: readonly GenDType[], c: string): string[] {
  return [...[...new Set(loads)].map((d) => loadFn(d, c)), ...[...new Set(stores)].map((d) => storeFn(d, c))];
}

/** Includes, the vector type and the NaN/inf-safe basics every generated source starts with. */
export const PRELUDE = [
  '#include <cuda_fp16.h>',
  '#include <cuda_bf16.h>',
  '// N elements of T as one access (16 bytes at most; the host checks the alignment).',
  'template <class T, int N> struct alignas(sizeof(T) * N) FkV { T v[N]; };',
].join('\n');
