// A WRONG SiluAndMul: silu(g) is g * sigmoid(g) = g / (1 + exp(-g)); this kernel drops the minus sign, so it computes
// g * sigmoid(-g). It compiles, runs and writes the right shape, but the values are off.
// Expected: INCORRECT_NUMERICAL
#include <cuda_bf16.h>

namespace {
__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

// x [T, 2D] (gate | up) -> y [T, D]; one thread per output element, a grid-stride loop.
template <typename T>
__device__ __forceinline__ void silu_and_mul(const T* __restrict__ x, T* __restrict__ y, long long n, int d) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const long long row = i / d;
    const int j = (int)(i % d);
    const float g = to_f32(x[row * 2 * d + j]);
    const float u = to_f32(x[row * 2 * d + d + j]);
    store(&y[i], g / (1.f + __expf(g)) * u);  // bug: silu needs __expf(-g)
  }
}
}  // namespace

extern "C" __global__ void silu_and_mul_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, long long n, int d) { silu_and_mul(x, y, n, d); }
extern "C" __global__ void silu_and_mul_f32(const float* x, float* y, long long n, int d) { silu_and_mul(x, y, n, d); }
