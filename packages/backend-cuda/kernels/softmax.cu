// FastKernels softmax / log_softmax over the last (contiguous) dim, fp32 accumulation, result in FK_OT (the input
// dtype unless told; FK_LOG=1: log_softmax).
//
// One block per row. Each thread keeps up to FK_NPT vectors of the row in registers and folds them into an
// online (max, sum of exp) pair; the pairs are merged across the block; the output is exp(x - max) / sum,
// rounded once. Rows longer than FK_NPT * blockDim vectors are read a second time (from L2).
// A row of -inf gives NaN (0/0), like the float64 reference. -DFK_T=<type> -DFK_VEC=<n> -DFK_NPT=<vectors a thread
// keeps>; the host's choices are in src/ops/reduction/softmax.ts (softmaxPlan).
// compile-cu: -DFK_NPT=8
// compile-cu: -DFK_NPT=8 -DFK_PDL=1
// compile-cu: -DFK_CS=4
// compile-cu: -DFK_LOG=1 -DFK_CS=2
// compile-cu: -DFK_OT=float -DFK_T=__half
// compile-cu: -DFK_LOG=1 -DFK_OT=float -DFK_VEC=4
// compile-cu: -DFK_T=float -DFK_VEC=1 -DFK_LOG=1
// compile-cu: -DFK_VEC=1 -DFK_OT=float
#include "fk_vec.cuh"
#include "fk_pdl.cuh"
#define FK_NEG_INF (-__int_as_float(0x7f800000))
#ifndef FK_OT
#define FK_OT FK_T
#endif
#ifndef FK_LOG
#define FK_LOG 0
#endif

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

// The block merge after fk_warp_merge, first half: lane 0 of every warp publishes its warp's (m, s) in rm / rsum[warp].
__device__ __forceinline__ void fk_publish_warp_pair(float m, float s, float* rm, float* rsum, int warp, int lane) {
  if (lane == 0) {
    rm[warp] = m;
    rsum[warp] = s;
  }
  __syncthreads();
}

// Second half: one warp merges the nw published pairs in warp order (every lane of it ends with the block's pair).
__device__ __forceinline__ void fk_merge_warp_pairs(float& m, float& s, const float* rm, const float* rsum, int lane, int nw) {
  m = lane < nw ? rm[lane] : FK_NEG_INF;
  s = lane < nw ? rsum[lane] : 0.f;
  fk_warp_merge(m, s);
}

// Every thread folds its vectors j = t, t + T, t + 2T, ... < n (T threads) in that order, and the block merges
// (warp xor tree, then warps in order; then cluster ranks in order): the bits depend on T, not on FK_NPT.
// The first FK_NPT vectors stay in registers raw (16 bytes each, not FK_VEC floats: converting again at the write
// is exact, so the bits are the same in fewer registers); the rest is read again for the write.
#ifndef FK_NPT
#define FK_NPT 4
#endif

template <class V>
__device__ __forceinline__ void fk_fold_vec(float& m, float& s, const V& a) {
  float f[FK_VEC];
#pragma unroll
  for (int e = 0; e < FK_VEC; ++e) f[e] = fk_f(a.v[e]);
  fk_fold<V>(m, s, f);
}

// The compiler would reuse the fold's conversions of a cached vector at the write (bf16's is a shift), keeping
// FK_VEC floats live instead of 16 raw bytes; an empty asm on the raw words makes it convert again.
__device__ __forceinline__ void fk_opaque1(__half& x) {
  unsigned short u = __half_as_ushort(x);
  asm volatile("" : "+h"(u));
  x = __ushort_as_half(u);
}
__device__ __forceinline__ void fk_opaque1(__nv_bfloat16& x) {
  unsigned short u = __bfloat16_as_ushort(x);
  asm volatile("" : "+h"(u));
  x = __ushort_as_bfloat16(u);
}
template <class V>
__device__ __forceinline__ V fk_opaque(V a) {
  if constexpr (sizeof(FK_T) == 4) {  // f32: no conversion to keep
  } else if constexpr (sizeof(V) % 4 == 0) {  // whole 32-bit words: 16-bit halves alone do not stop the reuse (ptxas)
    unsigned* w = reinterpret_cast<unsigned*>(&a);
#pragma unroll
    for (int i = 0; i < (int)(sizeof(V) / 4); ++i) asm volatile("" : "+r"(w[i]));
  } else {
#pragma unroll
    for (int e = 0; e < FK_VEC; ++e) fk_opaque1(a.v[e]);
  }
  return a;
}

typedef FkVec<FK_OT, FK_VEC> FkOutVec;

// What the write needs of a row's (max, sum): softmax 1 / sum; log_softmax the shift max + log(sum) (a row of -inf:
// -inf, so x - shift is NaN, as 0/0 is for softmax).
__device__ __forceinline__ float fk_row_post(float m, float s) {
#if FK_LOG
  return m + logf(s);
#else
  return 1.f / s;
#endif
}

template <class V>
__device__ __forceinline__ FkOutVec fk_out_vec(const V& a, float m, float post) {
  FkOutVec r;
#pragma unroll
  for (int e = 0; e < FK_VEC; ++e) {
#if FK_LOG
    fk_set(r.v[e], fk_f(a.v[e]) - post);
#else
    fk_set(r.v[e], __expf(fk_f(a.v[e]) - m) * post);
#endif
  }
  return r;
}

// (m, s) of this thread's vectors of xr[0, n); the first FK_NPT kept in a.
template <class V>
__device__ __forceinline__ void fk_fold_slice(const V* __restrict__ xr, int n, V (&a)[FK_NPT], float& m, float& s) {
  const int t = threadIdx.x, T = blockDim.x;
#pragma unroll
  for (int k = 0; k < FK_NPT; ++k)
    if (t + k * T < n) a[k] = xr[t + k * T];
#pragma unroll
  for (int k = 0; k < FK_NPT; ++k)
    if (t + k * T < n) fk_fold_vec<V>(m, s, a[k]);
  for (int j = t + FK_NPT * T; j < n; j += T) {
    const V av = xr[j];  // one 16-byte load (by reference it would be FK_VEC loads)
    fk_fold_vec<V>(m, s, av);
  }
}

template <class V>
__device__ __forceinline__ void fk_write_slice(FkOutVec* __restrict__ yr, const V* __restrict__ xr, int n, const V (&a)[FK_NPT], float m, float post) {
  const int t = threadIdx.x, T = blockDim.x;
#pragma unroll
  for (int k = 0; k < FK_NPT; ++k)
    if (t + k * T < n) yr[t + k * T] = fk_out_vec<V>(fk_opaque(a[k]), m, post);
  for (int j = t + FK_NPT * T; j < n; j += T) {
    const V av = xr[j];
    yr[j] = fk_out_vec<V>(av, m, post);
  }
}

extern "C" __global__ void __launch_bounds__(1024, 1) fk_softmax(FK_OT* __restrict__ y, const FK_T* __restrict__ x, int rows, int D, long long xs) {
  fk_pdl_entry();
  typedef FkVec<FK_T, FK_VEC> V;
  __shared__ float rm[32], rsum[32];
  const int row = blockIdx.x;
  if (row >= rows) return;
  const int nv = D / FK_VEC;
  const V* xr = reinterpret_cast<const V*>(x + row * xs);
  FkOutVec* yr = reinterpret_cast<FkOutVec*>(y + (long long)row * D);
  V a[FK_NPT];
  float m = FK_NEG_INF, s = 0.f;
  fk_fold_slice<V>(xr, nv, a, m, s);
  // NaN anywhere in the row makes the whole row NaN (as Math.max does in the reference).
  fk_warp_merge(m, s);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = (blockDim.x + 31) >> 5;
  fk_publish_warp_pair(m, s, rm, rsum, warp, lane);
  fk_merge_warp_pairs(m, s, rm, rsum, lane, nw);  // in every warp: every thread needs the row's pair
  fk_write_slice<V>(yr, xr, nv, a, m, fk_row_post(m, s));
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
// The two halves of a cluster barrier, for a wait that comes later than the arrive (work in between).
__device__ __forceinline__ void fk_cluster_arrive() { asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory"); }
__device__ __forceinline__ void fk_cluster_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory"); }
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

// After fk_warp_merge, the row's (m, s) over the cluster (fk_softmax_cluster and fk_softmax_smem): the block's pair,
// merged by warp 0, is published in this CTA's part[0..1]; after a cluster barrier every CTA merges the FK_CS parts in
// rank order (so every CTA gets the same bits), then arrives at a second barrier whose wait is the kernel's last
// statement (fk_cluster_wait): it keeps every CTA's shared memory alive until the others have read it, and the slice's
// write goes out before it instead of after (one cluster barrier less on the path of few long rows).
__device__ __forceinline__ void fk_cluster_merge(float& m, float& s, float* rm, float* rsum, float* part, int warp, int lane, int nw) {
  fk_publish_warp_pair(m, s, rm, rsum, warp, lane);
  if (warp == 0) {
    fk_merge_warp_pairs(m, s, rm, rsum, lane, nw);
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
  fk_cluster_arrive();  // this CTA's reads of the others' parts are done (the kernel waits for everyone's at its end)
}

extern "C" __global__ void __cluster_dims__(FK_CS, 1, 1) __launch_bounds__(1024, 1)
    fk_softmax_cluster(FK_OT* __restrict__ y, const FK_T* __restrict__ x, int rows, int D, long long xs) {
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
  FkOutVec* yr = reinterpret_cast<FkOutVec*>(y + (long long)row * D) + lo;
  V a[FK_NPT];
  float m = FK_NEG_INF, s = 0.f;
  fk_fold_slice<V>(xr, n, a, m, s);
  fk_warp_merge(m, s);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = (blockDim.x + 31) >> 5;
  fk_cluster_merge(m, s, rm, rsum, part, warp, lane, nw);
  fk_write_slice<V>(yr, xr, n, a, m, fk_row_post(m, s));
  fk_cluster_wait();  // no CTA leaves (freeing its shared memory) while another may still read it
}

// ---- long rows read once: one cluster of FK_CS CTAs a row, each CTA's slice in shared memory (Hopper, sm_90).
//
// fk_softmax_smem: grid rows * FK_CS, cluster (FK_CS, 1, 1) set at compile time, dynamic shared memory of one slice
// (ceil(nv / FK_CS) vectors, rounded up to 16 bytes; the host checks it fits a CTA) and then the block's merge scratch
// (a (max, sum) a warp, the CTA's pair: no static arrays sized for 32 warps, so 7 CTAs of 32 KiB slices fit an SM's
// 228 KiB with their 1 KiB each reserved). Every thread copies its vectors j = t, t + T, ... of the
// slice global -> shared with cp.async (no registers held, so the whole slice is in flight at once), waits for its own
// copies, folds them; the (max, sum) is merged over the block, then over the cluster through distributed shared memory
// as in fk_softmax_cluster, and the output is written from shared memory. One read and one write of the row at any
// length the cluster's shared memory holds (fk_softmax_cluster re-reads what its registers do not keep). A thread reads
// back only what it copied itself: no block barrier between the copies and the fold.
template <int B>
__device__ __forceinline__ void fk_copy_async(void* dst, const void* src) {
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  if constexpr (B == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src) : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(d), "l"(src), "n"(B) : "memory");
}

template <class V>
__device__ __forceinline__ void fk_copy_vec(V* dst, const V* src) {
  if constexpr (sizeof(V) == 16 || sizeof(V) == 8 || sizeof(V) == 4)
    fk_copy_async<(int)sizeof(V)>(dst, src);
  else
    *dst = *src;  // a 2-byte scalar (16-bit dtype, odd length): cp.async moves 4 bytes at least
}

extern "C" __global__ void __cluster_dims__(FK_CS, 1, 1) __launch_bounds__(1024)
    fk_softmax_smem(FK_OT* __restrict__ y, const FK_T* __restrict__ x, int rows, int D, long long xs) {
  fk_pdl_entry();
  typedef FkVec<FK_T, FK_VEC> V;
  extern __shared__ __align__(16) unsigned char fk_slice_bytes[];
  const unsigned rank = fk_cluster_rank();
  const int row = blockIdx.x / FK_CS;  // every CTA of a cluster has the same row (grid = rows * FK_CS exactly)
  const int nv = D / FK_VEC;
  const int per = (nv + FK_CS - 1) / FK_CS;
  const int t = threadIdx.x, T = blockDim.x;
  const int warp = t >> 5, lane = t & 31, nw = (T + 31) >> 5;
  // the layout the host sizes (oneReadSmemBytes): slice | rm[nw] | rsum[nw] | part[2]; the same in every CTA
  V* slice = reinterpret_cast<V*>(fk_slice_bytes);
  float* rm = reinterpret_cast<float*>(fk_slice_bytes + ((per * (int)sizeof(V) + 15) & ~15));
  float* rsum = rm + nw;
  float* part = rsum + nw;
  const int lo = min(nv, (int)rank * per);
  const int n = min(nv, lo + per) - lo;  // vectors of this CTA's slice (may be 0)
  const V* xr = reinterpret_cast<const V*>(x + row * xs) + lo;
  FkOutVec* yr = reinterpret_cast<FkOutVec*>(y + (long long)row * D) + lo;
#pragma unroll 4
  for (int j = t; j < n; j += T) fk_copy_vec<V>(slice + j, xr + j);
  asm volatile("cp.async.wait_all;" ::: "memory");
  float m = FK_NEG_INF, s = 0.f;
  for (int j = t; j < n; j += T) {
    const V av = slice[j];
    fk_fold_vec<V>(m, s, av);
  }
  fk_warp_merge(m, s);
  fk_cluster_merge(m, s, rm, rsum, part, warp, lane, nw);
  const float post = fk_row_post(m, s);
  for (int j = t; j < n; j += T) {
    const V av = slice[j];
    yr[j] = fk_out_vec<V>(av, m, post);
  }
  fk_cluster_wait();  // no CTA leaves (freeing its shared memory) while another may still read it
}
