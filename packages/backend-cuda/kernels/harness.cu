// Device-side helpers for the bench harness: seeded normal fills, comparison statistics and byte
// equality. At production shapes (a 1 GiB embedding table, a 235M-element GEMM output) doing these on the
// host costs seconds per call; here they run at memory bandwidth.
//
// Compiled at run time by NVRTC, one specialisation per dtype through -DFK_T (fill), -DFK_A / -DFK_E
// (compare); the defaults make the file compile standalone with `nvcc -std=c++17 -arch=sm_90a -c`.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#ifndef FK_T
#define FK_T float
#endif
#ifndef FK_A
#define FK_A float
#endif
#ifndef FK_E
#define FK_E FK_A
#endif

__device__ __forceinline__ double fk_to_double(float v) { return (double)v; }
__device__ __forceinline__ double fk_to_double(double v) { return v; }
__device__ __forceinline__ double fk_to_double(__half v) { return (double)__half2float(v); }
__device__ __forceinline__ double fk_to_double(__nv_bfloat16 v) { return (double)__bfloat162float(v); }
__device__ __forceinline__ double fk_to_double(long long v) { return (double)v; }
__device__ __forceinline__ double fk_to_double(int v) { return (double)v; }
__device__ __forceinline__ double fk_to_double(short v) { return (double)v; }
__device__ __forceinline__ double fk_to_double(signed char v) { return (double)v; }
__device__ __forceinline__ double fk_to_double(unsigned char v) { return (double)v; }

__device__ __forceinline__ void fk_store(float* p, float v) { *p = v; }
__device__ __forceinline__ void fk_store(double* p, float v) { *p = (double)v; }
__device__ __forceinline__ void fk_store(__half* p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void fk_store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

#include "fk_hash.cuh"  // fk_fmix32, the mixing of core's counterUniform

// Uniform in (0, 1) with 24 bits from a 32-bit hash.
__device__ __forceinline__ float fk_unit(unsigned int h) { return ((float)(h >> 8) + 0.5f) * (1.0f / 16777216.0f); }

// out[i] = mean + scale * z_i, z_i standard normal from (seed, i) alone (Box-Muller on hashed pairs), so the
// values do not depend on the launch configuration.
extern "C" __global__ void fk_fill_normal(FK_T* __restrict__ out, long long n, unsigned int seed, float scale, float mean) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride) {
    const unsigned long long pair = (unsigned long long)i >> 1;
    unsigned int h = fk_fmix32((unsigned int)pair + 0x9e3779b9u);
    h = fk_fmix32((unsigned int)(pair >> 32) ^ h);
    h = fk_fmix32(seed ^ h);
    const float u1 = fk_unit(h);
    const float u2 = fk_unit(fk_fmix32(h ^ 0x85ebca6bu));
    const float r = sqrtf(-2.0f * logf(u1));
    float s, c;
    sincospif(2.0f * u2, &s, &c);
    fk_store(out + i, mean + scale * r * ((i & 1) ? s : c));
  }
}

// Comparison statistics, accumulated with one atomic per block. Mirrors core's compareStatsHost exactly:
// values widened to double; a non-finite actual matches only the same non-finite expected; a non-finite
// expected never matches a finite actual; |a - e| <= atol + rtol |e| with no fused multiply-add, so the
// verdict of every element is the host's bit for bit.
struct FkCompareStats {
  unsigned long long matched;
  unsigned long long nonFinite;        // non-finite actual where the expected is finite
  unsigned long long actualNonZero;
  unsigned long long expectedNonZero;
  unsigned long long maxAbsBits;       // max |a - e| over finite pairs (non-negative doubles order as their bits)
  unsigned long long maxRelBits;       // max |a - e| / max(|e|, DBL_TRUE_MIN) over finite pairs with |a - e| > 0
  double sumSqDiff;                    // sum (a - e)^2 over finite pairs (relative L2 error)
  double sumSqRef;                     // sum e^2 over finite pairs
};

__device__ __forceinline__ bool fk_finite(double x) { return isfinite(x); }

extern "C" __global__ void fk_compare_stats(const FK_A* __restrict__ a, const FK_E* __restrict__ e, long long n, double atol, double rtol, FkCompareStats* __restrict__ out) {
  unsigned long long matched = 0, nonFinite = 0, aNz = 0, eNz = 0;
  double maxAbs = 0.0, maxRel = 0.0, sd = 0.0, se = 0.0;
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride) {
    const double av = fk_to_double(a[i]);
    const double ev = fk_to_double(e[i]);
    if (av != 0.0) aNz = 1;  // NaN != 0 too, as in JavaScript
    if (ev != 0.0) eNz = 1;
    if (!fk_finite(av)) {
      const bool same = (isnan(av) && isnan(ev)) || av == ev;
      if (same) matched++;
      else if (fk_finite(ev)) nonFinite++;
      continue;
    }
    if (!fk_finite(ev)) continue;
    const double diff = __dsub_rn(av, ev);
    const double abs_ = fabs(diff);
    const double rel = __ddiv_rn(abs_, fmax(fabs(ev), 4.9406564584124654e-324));
    maxAbs = fmax(maxAbs, abs_);
    if (abs_ > 0.0) maxRel = fmax(maxRel, rel);
    if (abs_ <= __dadd_rn(atol, __dmul_rn(rtol, fabs(ev)))) matched++;
    sd = __fma_rn(diff, diff, sd);
    se = __fma_rn(ev, ev, se);
  }
  // warp, then block reduction
  for (int o = 16; o > 0; o >>= 1) {
    matched += __shfl_down_sync(0xffffffffu, matched, o);
    nonFinite += __shfl_down_sync(0xffffffffu, nonFinite, o);
    aNz |= __shfl_down_sync(0xffffffffu, aNz, o);
    eNz |= __shfl_down_sync(0xffffffffu, eNz, o);
    maxAbs = fmax(maxAbs, __shfl_down_sync(0xffffffffu, maxAbs, o));
    maxRel = fmax(maxRel, __shfl_down_sync(0xffffffffu, maxRel, o));
    sd += __shfl_down_sync(0xffffffffu, sd, o);
    se += __shfl_down_sync(0xffffffffu, se, o);
  }
  __shared__ unsigned long long sM[32], sN[32], sA[32], sE[32];
  __shared__ double sMa[32], sMr[32], sSd[32], sSe[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  if (lane == 0) {
    sM[warp] = matched; sN[warp] = nonFinite; sA[warp] = aNz; sE[warp] = eNz;
    sMa[warp] = maxAbs; sMr[warp] = maxRel; sSd[warp] = sd; sSe[warp] = se;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < warps; w++) {
      matched += sM[w]; nonFinite += sN[w]; aNz |= sA[w]; eNz |= sE[w];
      maxAbs = fmax(maxAbs, sMa[w]); maxRel = fmax(maxRel, sMr[w]); sd += sSd[w]; se += sSe[w];
    }
    if (matched) atomicAdd(&out->matched, matched);
    if (nonFinite) atomicAdd(&out->nonFinite, nonFinite);
    if (aNz) atomicOr(&out->actualNonZero, 1ull);
    if (eNz) atomicOr(&out->expectedNonZero, 1ull);
    atomicMax(&out->maxAbsBits, (unsigned long long)__double_as_longlong(maxAbs));
    atomicMax(&out->maxRelBits, (unsigned long long)__double_as_longlong(maxRel));
    atomicAdd(&out->sumSqDiff, sd);
    atomicAdd(&out->sumSqRef, se);
  }
}

// Counts the 16-byte words (then the tail bytes) where a and b differ: 0 means the ranges are equal.
extern "C" __global__ void fk_count_diff(const unsigned char* __restrict__ a, const unsigned char* __restrict__ b, long long n, unsigned long long* __restrict__ out) {
  unsigned long long diff = 0;
  const long long words = n >> 4;
  const long long stride = (long long)gridDim.x * blockDim.x;
  const long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  const bool aligned = ((((unsigned long long)a) | ((unsigned long long)b)) & 15ull) == 0;
  if (aligned) {
    const uint4* wa = reinterpret_cast<const uint4*>(a);
    const uint4* wb = reinterpret_cast<const uint4*>(b);
    for (long long i = tid; i < words; i += stride) {
      const uint4 x = wa[i], y = wb[i];
      diff += (x.x != y.x) | (x.y != y.y) | (x.z != y.z) | (x.w != y.w);
    }
    for (long long i = (words << 4) + tid; i < n; i += stride) diff += a[i] != b[i];
  } else {
    for (long long i = tid; i < n; i += stride) diff += a[i] != b[i];
  }
  for (int o = 16; o > 0; o >>= 1) diff += __shfl_down_sync(0xffffffffu, diff, o);
  if ((threadIdx.x & 31) == 0 && diff) atomicAdd(out, diff);
}
