// FastKernels elementwise kernels: strided fill, strided copy with dtype conversion, broadcast add/mul.
//
// Compiled at run time by NVRTC, one specialisation per dtype combination through macros
// (-DFK_DST=... -DFK_SRC=... -DFK_SRC2=... -DFK_ACC=...); the defaults below make the file compile
// standalone with `nvcc -std=c++17 -arch=sm_90a -c`. Only headers NVRTC ships are used.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#ifndef FK_DST
#define FK_DST float
#endif
#ifndef FK_SRC
#define FK_SRC float
#endif
#ifndef FK_SRC2
#define FK_SRC2 FK_SRC
#endif
#ifndef FK_ACC
#define FK_ACC float
#endif

#define FK_MAX_RANK 6

// Our `bool` dtype: one byte holding 0 or 1 (distinct from u8 so stores normalise to 0/1).
struct fk_bool_t {
  unsigned char v;
};

// Shapes and strides (in elements) of up to three operands, passed by value (208 bytes).
struct FkStrided {
  long long sizes[FK_MAX_RANK];
  long long stride0[FK_MAX_RANK];  // destination / output
  long long stride1[FK_MAX_RANK];  // source / a
  long long stride2[FK_MAX_RANK];  // b
  long long numel;
  int rank;
};

// ---- loads into the accumulation type
__device__ __forceinline__ FK_ACC fk_ld(double x) { return (FK_ACC)x; }
__device__ __forceinline__ FK_ACC fk_ld(float x) { return (FK_ACC)x; }
__device__ __forceinline__ FK_ACC fk_ld(__half x) { return (FK_ACC)__half2float(x); }
__device__ __forceinline__ FK_ACC fk_ld(__nv_bfloat16 x) { return (FK_ACC)__bfloat162float(x); }
__device__ __forceinline__ FK_ACC fk_ld(__nv_fp8_e4m3 x) { return (FK_ACC)(float)x; }
__device__ __forceinline__ FK_ACC fk_ld(__nv_fp8_e5m2 x) { return (FK_ACC)(float)x; }
__device__ __forceinline__ FK_ACC fk_ld(long long x) { return (FK_ACC)x; }
__device__ __forceinline__ FK_ACC fk_ld(int x) { return (FK_ACC)x; }
__device__ __forceinline__ FK_ACC fk_ld(short x) { return (FK_ACC)x; }
__device__ __forceinline__ FK_ACC fk_ld(signed char x) { return (FK_ACC)x; }
__device__ __forceinline__ FK_ACC fk_ld(unsigned char x) { return (FK_ACC)x; }
__device__ __forceinline__ FK_ACC fk_ld(fk_bool_t x) { return x.v ? (FK_ACC)1 : (FK_ACC)0; }

// ---- stores from the accumulation type (round to nearest even for floats; integers truncate and wrap)
__device__ __forceinline__ void fk_st(double* p, FK_ACC x) { *p = (double)x; }
__device__ __forceinline__ void fk_st(float* p, FK_ACC x) { *p = (float)x; }
__device__ __forceinline__ void fk_st(__half* p, FK_ACC x) { *p = __float2half_rn((float)x); }
__device__ __forceinline__ void fk_st(__nv_bfloat16* p, FK_ACC x) { *p = __float2bfloat16_rn((float)x); }
__device__ __forceinline__ void fk_st(__nv_fp8_e4m3* p, FK_ACC x) { *p = __nv_fp8_e4m3((float)x); }
__device__ __forceinline__ void fk_st(__nv_fp8_e5m2* p, FK_ACC x) { *p = __nv_fp8_e5m2((float)x); }
__device__ __forceinline__ void fk_st(long long* p, FK_ACC x) { *p = (long long)x; }
__device__ __forceinline__ void fk_st(int* p, FK_ACC x) { *p = (int)(long long)x; }
__device__ __forceinline__ void fk_st(short* p, FK_ACC x) { *p = (short)(long long)x; }
__device__ __forceinline__ void fk_st(signed char* p, FK_ACC x) { *p = (signed char)(long long)x; }
__device__ __forceinline__ void fk_st(unsigned char* p, FK_ACC x) { *p = (unsigned char)(long long)x; }
__device__ __forceinline__ void fk_st(fk_bool_t* p, FK_ACC x) { p->v = x != (FK_ACC)0 ? 1 : 0; }

// Element offsets of linear index i in up to three strided operands.
__device__ __forceinline__ void fk_offsets(const FkStrided& s, long long i, long long& o0, long long& o1, long long& o2) {
  o0 = 0;
  o1 = 0;
  o2 = 0;
#pragma unroll
  for (int d = FK_MAX_RANK - 1; d >= 0; --d) {
    if (d < s.rank) {
      const long long n = s.sizes[d];
      const long long idx = i % n;
      i /= n;
      o0 += idx * s.stride0[d];
      o1 += idx * s.stride1[d];
      o2 += idx * s.stride2[d];
    }
  }
}

extern "C" __global__ void fk_fill(FK_DST* __restrict__ dst, FkStrided s, double value) {
  const FK_ACC v = (FK_ACC)value;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < s.numel; i += (long long)gridDim.x * blockDim.x) {
    long long o0, o1, o2;
    fk_offsets(s, i, o0, o1, o2);
    fk_st(dst + o0, v);
  }
}

extern "C" __global__ void fk_copy(FK_DST* __restrict__ dst, const FK_SRC* __restrict__ src, FkStrided s) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < s.numel; i += (long long)gridDim.x * blockDim.x) {
    long long o0, o1, o2;
    fk_offsets(s, i, o0, o1, o2);
    fk_st(dst + o0, fk_ld(src[o1]));
  }
}

extern "C" __global__ void fk_add(FK_DST* __restrict__ out, const FK_SRC* __restrict__ a, const FK_SRC2* __restrict__ b, FkStrided s) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < s.numel; i += (long long)gridDim.x * blockDim.x) {
    long long o0, o1, o2;
    fk_offsets(s, i, o0, o1, o2);
    fk_st(out + o0, fk_ld(a[o1]) + fk_ld(b[o2]));
  }
}

extern "C" __global__ void fk_mul(FK_DST* __restrict__ out, const FK_SRC* __restrict__ a, const FK_SRC2* __restrict__ b, FkStrided s) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < s.numel; i += (long long)gridDim.x * blockDim.x) {
    long long o0, o1, o2;
    fk_offsets(s, i, o0, o1, o2);
    fk_st(out + o0, fk_ld(a[o1]) * fk_ld(b[o2]));
  }
}
