// FastKernels softmax over the last (contiguous) dim, fp32 accumulation, result in the input dtype.
//
// One block per row. Each thread keeps up to FK_NPT vectors of the row in registers and folds them into an
// online (max, sum of exp) pair; the pairs are merged across the block; the output is exp(x - max) / sum,
// rounded once. Rows longer than FK_NPT * blockDim vectors are read a second time (from L2).
// A row of -inf gives NaN (0/0), like the float64 reference. -DFK_T=<type> -DFK_VEC=<n>.
#include "fk_vec.cuh"
#include "fk_pdl.cuh"
#define FK_NPT 4
#define FK_NEG_INF (-__int_as_float(0x7f800000))

// Merge (m2, s2) into (m, s): s = s e^(m - M) + s2 e^(m2 - M), M = max(m, m2); -inf maxima contribute nothing.
__device__ __forceinline__ void fk_merge(float& m, float& s, float m2, float s2) {
  const float M = fmaxf(m, m2);
  if (M == FK_NEG_INF) return;
  s = (m == FK_NEG_INF ? 0.f : s * __expf(m - M)) + (m2 == FK_NEG_INF ? 0.f : s2 * __expf(m2 - M));
  m = M;
}

template <class VT>
__device__ __forceinline__ void fk_fold(float& m, float& s, const float (&v)[FK_VEC]) {
  float vm = v[0];
#pragma unroll
  for (int e = 1; e < FK_VEC; ++e) vm = fmaxf(vm, v[e]);
  const float M = fmaxf(m, vm);
  if (M == FK_NEG_INF) return;
  float acc = m == FK_NEG_INF ? 0.f : s * __expf(m - M);
#pragma unroll
  for (int e = 0; e < FK_VEC; ++e) acc += __expf(v[e] - M);
  s = acc;
  m = M;
}

// (m, s) merged across the 32 lanes of the warp (every lane ends with the same pair).
__device__ __forceinline__ void fk_warp_merge(float& m, float& s) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, o);
    const float s2 = __shfl_xor_sync(0xffffffffu, s, o);
    fk_merge(m, s, m2, s2);
  }
}

extern "C" __global__ void __launch_bounds__(1024) fk_softmax(FK_T* __restrict__ y, const FK_T* __restrict__ x, int rows, int D, long long xs) {
  fk_pdl_entry();
  typedef FkVec<FK_T, FK_VEC> V;
  __shared__ float rm[32], rsum[32];
  const int row = blockIdx.x;
  if (row >= rows) return;
  const int nv = D / FK_VEC;
  const V* xr = reinterpret_cast<const V*>(x + row * xs);
  V* yr = reinterpret_cast<V*>(y + (long long)row * D);
  float cache[FK_NPT][FK_VEC];
  V a[FK_NPT];
#pragma unroll
  for (int k = 0; k < FK_NPT; ++k) {
    const int j = threadIdx.x + k * blockDim.x;
    if (j < nv) a[k] = xr[j];
  }
  float m = FK_NEG_INF, s = 0.f;
#pragma unroll
  for (int k = 0; k < FK_NPT; ++k) {
    const int j = threadIdx.x + k * blockDim.x;
    if (j < nv) {
#pragma unroll
      for (int e = 0; e < FK_VEC; ++e) cache[k][e] = fk_f(a[k].v[e]);
      fk_fold<V>(m, s, cache[k]);
    }
  }
  for (int j = threadIdx.x + FK_NPT * blockDim.x; j < nv; j += blockDim.x) {
    const V av = xr[j];
    float f[FK_VEC];
#pragma unroll
    for (int e = 0; e < FK_VEC; ++e) f[e] = fk_f(av.v[e]);
    fk_fold<V>(m, s, f);
  }
  // NaN anywhere in the row makes the whole row NaN (as Math.max does in the reference).
  fk_warp_merge(m, s);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = (blockDim.x + 31) >> 5;
  if (lane == 0) {
    rm[warp] = m;
    rsum[warp] = s;
  }
  __syncthreads();
  m = lane < nw ? rm[lane] : FK_NEG_INF;
  s = lane < nw ? rsum[lane] : 0.f;
  fk_warp_merge(m, s);
  const float inv = 1.f / s;
#pragma unroll
  for (int k = 0; k < FK_NPT; ++k) {
    const int j = threadIdx.x + k * blockDim.x;
    if (j < nv) {
      V r;
#pragma unroll
      for (int e = 0; e < FK_VEC; ++e) fk_set(r.v[e], __expf(cache[k][e] - m) * inv);
      yr[j] = r;
    }
  }
  for (int j = threadIdx.x + FK_NPT * blockDim.x; j < nv; j += blockDim.x) {
    const V av = xr[j];
    V r;
#pragma unroll
    for (int e = 0; e < FK_VEC; ++e) fk_set(r.v[e], __expf(fk_f(av.v[e]) - m) * inv);
    yr[j] = r;
  }
}

// ---- long rows: one thread-block cluster of FK_CS CTAs per row (Hopper, sm_90).
//
// fk_softmax_cluster: grid rows * FK_CS, cluster (FK_CS, 1, 1) set at compile time (so a plain launch works).
// CTA `rank` of a cluster keeps the rank-th contiguous slice of the row in registers (up to FK_NPT vectors
// per thread; a longer slice re-reads its rest), folds it into an online (max, sum), reduces that over the
// block, and publishes it in its shared memory. After a cluster barrier every CTA merges the FK_CS pairs read
// through distributed shared memory, in rank order (so every CTA gets the same bits), then writes its slice.
// The row is read once and written once, by FK_CS SMs in parallel. A second cluster barrier keeps every
// CTA's shared memory alive until the others have read it.
#ifndef FK_CS
#define FK_CS 8
#endif

__device__ __forceinline__ void fk_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
__device__ __forceinline__ unsigned fk_cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
// f32 at the same shared-memory offset in CTA `rank` of the cluster.
__device__ __forceinline__ float fk_ld_cluster(const float* p, unsigned rank) {
  const unsigned a = (unsigned)__cvta_generic_to_shared(p);
  unsigned ra;
  float v;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(ra) : "r"(a), "r"(rank));
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(ra) : "memory");
  return v;
}

extern "C" __global__ void __cluster_dims__(FK_CS, 1, 1) __launch_bounds__(1024)
    fk_softmax_cluster(FK_T* __restrict__ y, const FK_T* __restrict__ x, int rows, int D, long long xs) {
  fk_pdl_entry();
  typedef FkVec<FK_T, FK_VEC> V;
  __shared__ float rm[32], rsum[32];
  __shared__ float part[2];
  const unsigned rank = fk_cluster_rank();
  const int row = blockIdx.x / FK_CS;  // every CTA of a cluster has the same row (grid = rows * FK_CS exactly)
  const int nv = D / FK_VEC;
  const int per = (nv + FK_CS - 1) / FK_CS;
  const int lo = min(nv, (int)rank * per);
  const int n = min(nv, lo + per) - lo;  // vectors of this CTA's slice (may be 0)
  const V* xr = reinterpret_cast<const V*>(x + row * xs) + lo;
  V* yr = reinterpret_cast<V*>(y + (long long)row * D) + lo;
  float cache[FK_NPT][FK_VEC];
  V a[FK_NPT];
#pragma unroll
  for (int k = 0; k < FK_NPT; ++k) {
    const int j = threadIdx.x + k * blockDim.x;
    if (j < n) a[k] = xr[j];
  }
  float m = FK_NEG_INF, s = 0.f;
#pragma unroll
  for (int k = 0; k < FK_NPT; ++k) {
    const int j = threadIdx.x + k * blockDim.x;
    if (j < n) {
#pragma unroll
      for (int e = 0; e < FK_VEC; ++e) cache[k][e] = fk_f(a[k].v[e]);
      fk_fold<V>(m, s, cache[k]);
    }
  }
  for (int j = threadIdx.x + FK_NPT * blockDim.x; j < n; j += blockDim.x) {
    const V av = xr[j];
    float f[FK_VEC];
#pragma unroll
    for (int e = 0; e < FK_VEC; ++e) f[e] = fk_f(av.v[e]);
    fk_fold<V>(m, s, f);
  }
  fk_warp_merge(m, s);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = (blockDim.x + 31) >> 5;
  if (lane == 0) {
    rm[warp] = m;
    rsum[warp] = s;
  }
  __syncthreads();
  if (warp == 0) {
    m = lane < nw ? rm[lane] : FK_NEG_INF;
    s = lane < nw ? rsum[lane] : 0.f;
    fk_warp_merge(m, s);
    if (lane == 0) {
      part[0] = m;
      part[1] = s;
    }
  }
  fk_cluster_sync();  // every CTA's part is written (release / acquire at cluster scope)
  m = FK_NEG_INF;
  s = 0.f;
#pragma unroll
  for (int r = 0; r < FK_CS; ++r) fk_merge(m, s, fk_ld_cluster(&part[0], r), fk_ld_cluster(&part[1], r));
  fk_cluster_sync();  // no CTA leaves (freeing its shared memory) while another may still read it
  const float inv = 1.f / s;
#pragma unroll
  for (int k = 0; k < FK_NPT; ++k) {
    const int j = threadIdx.x + k * blockDim.x;
    if (j < n) {
      V r;
#pragma unroll
      for (int e = 0; e < FK_VEC; ++e) fk_set(r.v[e], __expf(cache[k][e] - m) * inv);
      yr[j] = r;
    }
  }
  for (int j = threadIdx.x + FK_NPT * blockDim.x; j < n; j += blockDim.x) {
    const V av = xr[j];
    V r;
#pragma unroll
    for (int e = 0; e < FK_VEC; ++e) fk_set(r.v[e], __expf(fk_f(av.v[e]) - m) * inv);
    yr[j] = r;
  }
}
