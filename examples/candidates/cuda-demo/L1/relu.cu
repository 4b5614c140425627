// A FAULTING ReLU: the store index is offset by 2^40 elements, far past any allocation, so the first store is an
// illegal address. The CUDA context of the worker is lost with it (a sticky error): the harness reports
// RUNTIME_ERROR for this task and replaces the worker, and the rest of the run goes on unharmed.
// Expected: RUNTIME_ERROR
#include <cuda_bf16.h>

namespace {
__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

template <typename T>
__device__ __forceinline__ void relu(const T* __restrict__ x, T* __restrict__ y, long long n) {
  const long long bad = 1ll << 40;  // bug: not an index of y
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    store(&y[i + bad], fmaxf(to_f32(x[i]), 0.f));
  }
}
}  // namespace

extern "C" __global__ void relu_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, long long n) { relu(x, y, n); }
extern "C" __global__ void relu_f32(const float* x, float* y, long long n) { relu(x, y, n); }
