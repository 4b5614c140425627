// FastKernels RMSNorm (vLLM rms_norm / fused_add_rms_norm), out of place.
//
// One block per row; each thread keeps up to FK_NPT vectors of its row in registers (one read of x, one write
// of y), fp32 sum of squares reduced across the block. Fused form: s = x + residual is rounded to the
// activation dtype and stored (the new residual), and the norm reads that rounded value, as vLLM's kernel
// and the CPU reference do; y = s * rsqrt(mean(s^2) + eps) * w is rounded once at the store.
// Specialised with -DFK_T=<act type> -DFK_W=<weight type> -DFK_VEC=<elements per access> (-DFK_GROUPED=1: below).
// compile-cu: -DFK_GROUPED=1
#include "fk_vec.cuh"
#include "fk_pdl.cuh"
#include "fk_block_sum.cuh"
#ifndef FK_W
#define FK_W FK_T
#endif
#ifndef FK_NPT
#define FK_NPT 2  // vectors per thread (tuning norm.vecsPerThread in src/ops/norm/rms-norm.ts; the host always passes it)
#endif

#ifndef FK_GROUPED
#define FK_GROUPED 0  // 1: x's rows in two levels (group, xgs); 0: plain rows xs apart (group, xgs unread)
#endif

// y [rows, H] (contiguous); x's rows xs apart, or (FK_GROUPED) in groups of `group` rows xs apart, the groups xgs apart
// (row r at (r / group) xgs + (r % group) xs: a per-head view [T, heads, d] of a fused projection, whose tokens are not
// heads x d apart, is read in place); residual (nullptr = plain norm) at stride rs; res_out [rows, H]. The plain build
// keeps the division out: its 6 more registers cost the 256-thread rows of a 4096-wide norm one block an SM.
extern "C" __global__ void __launch_bounds__(512) fk_rms_norm(FK_T* __restrict__ y, FK_T* __restrict__ res_out, const FK_T* __restrict__ x,
                                       const FK_T* __restrict__ res_in, const FK_W* __restrict__ w, int rows, int H,
                                       long long xs, int group, long long xgs, long long rs, float eps) {
  fk_pdl_entry();
  typedef FkVec<FK_T, FK_VEC> V;
  typedef FkVec<FK_W, FK_VEC> WV;
  __shared__ float red[32];
  const int row = blockIdx.x;
  if (row >= rows) return;
  const int nv = H / FK_VEC;
#if FK_GROUPED
  const V* xr = reinterpret_cast<const V*>(x + (long long)(row / group) * xgs + (long long)(row % group) * xs);
#else
  (void)group;
  (void)xgs;
  const V* xr = reinterpret_cast<const V*>(x + row * xs);
#endif
  const V* rr = res_in ? reinterpret_cast<const V*>(res_in + row * rs) : nullptr;
  V* ro = res_out ? reinterpret_cast<V*>(res_out + (long long)row * H) : nullptr;
  V* yr = reinterpret_cast<V*>(y + (long long)row * H);
  const WV* wv = reinterpret_cast<const WV*>(w);

  float ss = 0.f;
  // Loads first (several in flight), then the arithmetic. The row stays in registers in its own dtype (for the
  // fused form: the rounded sum, exactly what is stored and normalised), 4 registers per 16-byte vector.
  V a[FK_NPT], b[FK_NPT];
#pragma unroll
  for (int k = 0; k < FK_NPT; ++k) {
    const int j = threadIdx.x + k * blockDim.x;
    if (j < nv) {
      a[k] = xr[j];
      if (rr) b[k] = rr[j];
    }
  }
#pragma unroll
  for (int k = 0; k < FK_NPT; ++k) {
    const int j = threadIdx.x + k * blockDim.x;
    if (j < nv) {
      if (rr) {
        V s;
#pragma unroll
        for (int e = 0; e < FK_VEC; ++e) fk_set(s.v[e], fk_f(a[k].v[e]) + fk_f(b[k].v[e]));
        ro[j] = s;
        a[k] = s;
      }
#pragma unroll
      for (int e = 0; e < FK_VEC; ++e) {
        const float f = fk_f(a[k].v[e]);
        ss += f * f;
      }
    }
  }
  // Rows longer than FK_NPT * blockDim vectors: the rest is read twice (the second time from L1/L2).
  for (int j = threadIdx.x + FK_NPT * blockDim.x; j < nv; j += blockDim.x) {
    V av = xr[j];
    if (rr) {
      const V bv = rr[j];
      V s;
#pragma unroll
      for (int e = 0; e < FK_VEC; ++e) fk_set(s.v[e], fk_f(av.v[e]) + fk_f(bv.v[e]));
      ro[j] = s;
      av = s;
    }
#pragma unroll
    for (int e = 0; e < FK_VEC; ++e) {
      const float f = fk_f(av.v[e]);
      ss += f * f;
    }
  }
  ss = fk_block_sum(ss, red);
  const float inv = rsqrtf(ss / (float)H + eps);
#pragma unroll
  for (int k = 0; k < FK_NPT; ++k) {
    const int j = threadIdx.x + k * blockDim.x;
    if (j < nv) {
      const WV wk = wv[j];
      V o;
#pragma unroll
      for (int e = 0; e < FK_VEC; ++e) fk_set(o.v[e], fk_f(a[k].v[e]) * inv * fk_f(wk.v[e]));
      yr[j] = o;
    }
  }
  for (int j = threadIdx.x + FK_NPT * blockDim.x; j < nv; j += blockDim.x) {
    const V av = rr ? ro[j] : xr[j];  // the fused form re-reads the rounded sum this thread stored
    const WV wk = wv[j];
    V o;
#pragma unroll
    for (int e = 0; e < FK_VEC; ++e) fk_set(o.v[e], fk_f(av.v[e]) * inv * fk_f(wk.v[e]));
    yr[j] = o;
  }
}
