// An RMSNorm that DOES NOT COMPILE: the scale is computed into inv_rms and used as inv_rsm (a typo), so NVRTC
// stops with `identifier "inv_rsm" is undefined`. The load fails with that error at this file's line; bench reports
// it (with --keep-going, as a RUNTIME_ERROR row "failed to load: does not compile: ...") and benches the rest.
// Expected: RUNTIME_ERROR
// compile-cu: expect-error
#include <cuda_bf16.h>

namespace {
__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

// One block per row; with a residual, s = x + residual is rounded to T, stored, and normalised (vLLM's fused form).
template <typename T>
__device__ void rms_norm(const T* x, const T* residual, const T* w, T* y, T* residual_out, int h, float eps) {
  __shared__ float partial[32];
  const long long row = blockIdx.x;
  float ss = 0.f;
  for (int j = threadIdx.x; j < h; j += blockDim.x) {
    float v = to_f32(x[row * h + j]);
    if (residual) {
      store(&residual_out[row * h + j], v + to_f32(residual[row * h + j]));
      v = to_f32(residual_out[row * h + j]);
    }
    ss += v * v;
  }
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = ss;
  __syncthreads();
  if (threadIdx.x < 32) {
    ss = threadIdx.x < blockDim.x / 32 ? partial[threadIdx.x] : 0.f;
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if (threadIdx.x == 0) partial[0] = ss;
  }
  __syncthreads();
  const float inv_rms = rsqrtf(partial[0] / h + eps);
  for (int j = threadIdx.x; j < h; j += blockDim.x) {
    const float v = to_f32(residual ? residual_out[row * h + j] : x[row * h + j]);
    store(&y[row * h + j], v * inv_rsm * to_f32(w[j]));  // bug: inv_rsm is not declared
  }
}
}  // namespace

extern "C" __global__ void rms_norm_bf16(const __nv_bfloat16* x, const __nv_bfloat16* residual, const __nv_bfloat16* w,
                                         __nv_bfloat16* y, __nv_bfloat16* residual_out, int h, float eps) {
  rms_norm(x, residual, w, y, residual_out, h, eps);
}
extern "C" __global__ void rms_norm_f32(const float* x, const float* residual, const float* w, float* y, float* residual_out, int h,
                                        float eps) {
  rms_norm(x, residual, w, y, residual_out, h, eps);
}
