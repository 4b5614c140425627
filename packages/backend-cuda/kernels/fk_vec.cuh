// Shared by the memory-bound spine kernels (activation, norm, rotary, softmax, kvcache): the dtype defaults, fp32 conversions
// and the vector type. Included as a file by nvcc; scripts/embed-kernels.mjs inlines it for NVRTC.
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#ifndef FK_T
#define FK_T __nv_bfloat16
#endif
#ifndef FK_VEC
#define FK_VEC 8
#endif

// ---- float conversions (fp32 math inside every kernel)
__device__ __forceinline__ float fk_f(float x) { return x; }
__device__ __forceinline__ float fk_f(__half x) { return __half2float(x); }
__device__ __forceinline__ float fk_f(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ void fk_set(float& d, float x) { d = x; }
__device__ __forceinline__ void fk_set(__half& d, float x) { d = __float2half_rn(x); }
__device__ __forceinline__ void fk_set(__nv_bfloat16& d, float x) { d = __float2bfloat16_rn(x); }

// N elements of T loaded/stored as one access (16 bytes when N * sizeof(T) == 16; the host picks N so that
// every pointer and row stride is aligned to the vector size, else N = 1).
template <class T, int N>
struct alignas(sizeof(T) * N) FkVec {
  T v[N];
};
