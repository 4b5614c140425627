// FastKernels paged decode attention (one query token per sequence over a paged KV cache).
//
// fk_paged_decode: grid (splits, nQ / FK_HG, B), FK_WARPS warps. One CTA takes FK_HG query heads that share
// one kv head (GQA: every K/V byte is loaded once for the whole group) and one split of the sequence's
// (windowed) keys. Lanes are grouped in "rows" of TPR lanes; a row reads one token's K (then V) head vector
// with FK_VB-byte loads, every lane holding NV vectors of VEC elements. Each thread keeps the query slice,
// a running max / sum (log2 domain) and an fp32 accumulator per head; FK_UNROLL tokens per row are loaded
// (K and V, all independent) before the first use. Page ids come from the block table once per 32 pages
// per warp (a coalesced load, then shuffles). At the end the rows of the CTA merge through shared memory;
// with one split the CTA writes the normalised output, else fp32 partials (acc, max, sum) that
// fk_paged_decode_combine merges.
//
// Specialised by NVRTC with -DFK_T=<element> -DFK_D=<head dim> -DFK_VB=<vector bytes> -DFK_HG=<heads per CTA>
// -DFK_UNROLL=<tokens per row in flight> -DFK_BS=<cache block size> -DFK_WARPS=<warps>; the defaults below
// make the file compile standalone with `nvcc -std=c++17 -arch=sm_90a -c`.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#ifndef FK_T
#define FK_T __nv_bfloat16
#endif
#ifndef FK_D
#define FK_D 128
#endif
#ifndef FK_VB
#define FK_VB 16
#endif
#ifndef FK_HG
#define FK_HG 4
#endif
#ifndef FK_UNROLL
#define FK_UNROLL 4
#endif
#ifndef FK_BS
#define FK_BS 16
#endif
#ifndef FK_WARPS
#define FK_WARPS 4
#endif

namespace fkdec {

typedef FK_T T;
constexpr int D = FK_D;
constexpr int VB = FK_VB;
constexpr int VEC = VB / (int)sizeof(T);             // elements per vector
static_assert(VEC >= 1 && VB % sizeof(T) == 0, "vector bytes must be a multiple of the element size");
static_assert(D % VEC == 0, "head dim must be a multiple of the vector width");
constexpr int NVEC = D / VEC;                          // vectors per head row
constexpr int tpr_of(int n) { return n >= 32 ? 32 : n > 16 ? 32 : n > 8 ? 16 : n > 4 ? 8 : n > 2 ? 4 : n > 1 ? 2 : 1; }
constexpr int TPR = tpr_of(NVEC);                      // lanes per token row (power of two <= 32)
constexpr int NV = (NVEC + TPR - 1) / TPR;             // vectors per lane
constexpr int E = NV * VEC;                            // elements per lane
constexpr int RPW = 32 / TPR;                          // token rows per warp
constexpr int ROWS = FK_WARPS * RPW;                   // token rows per CTA
constexpr int HG = FK_HG;
constexpr int U = FK_UNROLL;
constexpr int TPI = ROWS * U;                          // tokens per CTA iteration
constexpr int THREADS = FK_WARPS * 32;

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ void st(float* p, float x) { *p = x; }
__device__ __forceinline__ void st(__half* p, float x) { *p = __float2half_rn(x); }
__device__ __forceinline__ void st(__nv_bfloat16* p, float x) { *p = __float2bfloat16_rn(x); }

// One vector of VB bytes, loaded in one instruction.
template <int B> struct Raw;
template <> struct Raw<16> { typedef uint4 type; };
template <> struct Raw<8> { typedef uint2 type; };
template <> struct Raw<4> { typedef unsigned int type; };
template <> struct Raw<2> { typedef unsigned short type; };
typedef typename Raw<VB>::type RawT;

union Vec {
  RawT raw;
  T e[VEC];
};

__device__ __forceinline__ RawT ldg_vec(const T* p) { return __ldg(reinterpret_cast<const RawT*>(p)); }
__device__ __forceinline__ RawT zero_raw() {
  Vec v;
#pragma unroll
  for (int i = 0; i < (int)(sizeof(RawT) / 2); i++) reinterpret_cast<unsigned short*>(&v.raw)[i] = 0;
  return v.raw;
}

}  // namespace fkdec

using namespace fkdec;

extern "C" __global__ void __launch_bounds__(FK_WARPS * 32) fk_paged_decode(
    FK_T* __restrict__ out,             // [B, nQ, D] contiguous (written when num_splits == 1)
    float* __restrict__ part_acc,       // [B, nQ, num_splits, D] (num_splits > 1)
    float* __restrict__ part_ml,        // [B, nQ, num_splits, 2]: max (log2 domain), sum
    const FK_T* __restrict__ q, long long q_sb, long long q_sh,
    const FK_T* __restrict__ kc, long long k_sblk, long long k_stok, long long k_sh,
    const FK_T* __restrict__ vc, long long v_sblk, long long v_stok, long long v_sh,
    const int* __restrict__ block_tables, long long bt_stride, int max_blocks,
    const int* __restrict__ seq_lens, int n_q_heads, int group, int window, float scale_log2, int chunk, int num_splits) {
  const int split = blockIdx.x;
  const int h0 = blockIdx.y * HG;
  const int b = blockIdx.z;
  const int kvh = h0 / group;
  const int tid = threadIdx.x;
  const int warp = tid >> 5;
  const int lane = tid & 31;
  const int sub = lane % TPR;
  const int row = warp * RPW + lane / TPR;

  const int L = min(seq_lens[b], max_blocks * FK_BS);  // a length past the table is the caller's bug; never read past it
  const int lo = window > 0 ? max(0, L - window) : 0;
  const int s_begin = lo + split * chunk;
  const int s_end = min(L, s_begin + chunk);
  if (s_begin >= s_end) {
    // No keys in this split. With one split the output is zero (nothing to attend to); with several the
    // combine kernel only reads the splits that hold keys.
    if (num_splits == 1) {
      for (int i = tid; i < HG * D; i += THREADS) st(out + ((long long)b * n_q_heads + h0 + i / D) * D + i % D, 0.f);
    }
    return;
  }

  // Query slice of each head, pre-scaled by scale * log2(e).
  float qf[HG][E];
#pragma unroll
  for (int g = 0; g < HG; g++) {
    const T* qp = q + (long long)b * q_sb + (long long)(h0 + g) * q_sh;
#pragma unroll
    for (int i = 0; i < NV; i++) {
      const int vi = sub + i * TPR;
      Vec v;
      v.raw = vi < NVEC ? ldg_vec(qp + vi * VEC) : zero_raw();
#pragma unroll
      for (int e = 0; e < VEC; e++) qf[g][i * VEC + e] = to_f(v.e[e]) * scale_log2;
    }
  }

  float m[HG], l[HG], acc[HG][E];
#pragma unroll
  for (int g = 0; g < HG; g++) {
    m[g] = neg_inf();
    l[g] = 0.f;
#pragma unroll
    for (int e = 0; e < E; e++) acc[g][e] = 0.f;
  }

  const int* bt = block_tables + (long long)b * bt_stride;
  int win_page = -(1 << 30);  // first page of the 32 held by the warp's lanes
  int page_id = 0;

  for (int base = s_begin; base < s_end; base += TPI) {
    const int first_page = base / FK_BS;
    const int last_page = (min(base + TPI, s_end) - 1) / FK_BS;
    if (first_page < win_page || last_page >= win_page + 32) {  // uniform over the CTA
      win_page = first_page;
      const int p = win_page + lane;
      page_id = p < max_blocks ? __ldg(bt + p) : 0;
    }

    // Issue every K and V load of this iteration before the first use.
    RawT kr[U][NV], vr[U][NV];
    bool valid[U];
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int t = base + u * ROWS + row;
      valid[u] = t < s_end;
      const int tt = valid[u] ? t : s_begin;
      const int pidx = tt / FK_BS - win_page;
      int pg = __shfl_sync(0xffffffffu, page_id, pidx & 31);
      if (pidx < 0 || pidx >= 32) pg = __ldg(bt + tt / FK_BS);  // only when one iteration spans > 32 pages
      const int off = tt % FK_BS;
      const T* kp = kc + (long long)pg * k_sblk + (long long)off * k_stok + (long long)kvh * k_sh;
      const T* vp = vc + (long long)pg * v_sblk + (long long)off * v_stok + (long long)kvh * v_sh;
#pragma unroll
      for (int i = 0; i < NV; i++) {
        const int vi = sub + i * TPR;
        const bool ok = valid[u] && vi < NVEC;
        kr[u][i] = ok ? ldg_vec(kp + vi * VEC) : zero_raw();
        vr[u][i] = ok ? ldg_vec(vp + vi * VEC) : zero_raw();
      }
    }

    // Scores (log2 domain), reduced over the row's lanes.
    float s[U][HG];
#pragma unroll
    for (int u = 0; u < U; u++) {
      float kf[E];
#pragma unroll
      for (int i = 0; i < NV; i++) {
        Vec v;
        v.raw = kr[u][i];
#pragma unroll
        for (int e = 0; e < VEC; e++) kf[i * VEC + e] = to_f(v.e[e]);
      }
#pragma unroll
      for (int g = 0; g < HG; g++) {
        float d = 0.f;
#pragma unroll
        for (int e = 0; e < E; e++) d = fmaf(qf[g][e], kf[e], d);
        s[u][g] = d;
      }
    }
#pragma unroll
    for (int off = TPR / 2; off >= 1; off >>= 1) {
#pragma unroll
      for (int u = 0; u < U; u++)
#pragma unroll
        for (int g = 0; g < HG; g++) s[u][g] += __shfl_xor_sync(0xffffffffu, s[u][g], off);
    }

    // Online softmax and the V accumulation.
    float vf[U][E];
#pragma unroll
    for (int u = 0; u < U; u++) {
#pragma unroll
      for (int i = 0; i < NV; i++) {
        Vec v;
        v.raw = vr[u][i];
#pragma unroll
        for (int e = 0; e < VEC; e++) vf[u][i * VEC + e] = to_f(v.e[e]);
      }
    }
#pragma unroll
    for (int g = 0; g < HG; g++) {
      float mx = m[g];
#pragma unroll
      for (int u = 0; u < U; u++) {
        if (!valid[u]) s[u][g] = neg_inf();
        mx = fmaxf(mx, s[u][g]);
      }
      const float mb = mx == neg_inf() ? 0.f : mx;  // no key yet: nothing to rescale, every p is 0
      const float alpha = exp2f(m[g] - mb);
      m[g] = mx;
      float p[U];
      float ps = 0.f;
#pragma unroll
      for (int u = 0; u < U; u++) {
        p[u] = exp2f(s[u][g] - mb);
        ps += p[u];
      }
      l[g] = l[g] * alpha + ps;
#pragma unroll
      for (int e = 0; e < E; e++) {
        float a = acc[g][e] * alpha;
#pragma unroll
        for (int u = 0; u < U; u++) a = fmaf(p[u], vf[u][e], a);
        acc[g][e] = a;
      }
    }
  }

  // Merge the CTA's token rows.
  __shared__ float sm_acc[ROWS][HG][D];
  __shared__ float sm_m[ROWS][HG];
  __shared__ float sm_l[ROWS][HG];
#pragma unroll
  for (int g = 0; g < HG; g++) {
#pragma unroll
    for (int i = 0; i < NV; i++) {
      const int vi = sub + i * TPR;
      if (vi < NVEC) {
#pragma unroll
        for (int e = 0; e < VEC; e++) sm_acc[row][g][vi * VEC + e] = acc[g][i * VEC + e];
      }
    }
    if (sub == 0) {
      sm_m[row][g] = m[g];
      sm_l[row][g] = l[g];
    }
  }
  __syncthreads();
  for (int idx = tid; idx < HG * D; idx += THREADS) {
    const int g = idx / D;
    const int d = idx % D;
    float M = neg_inf();
#pragma unroll 4
    for (int r = 0; r < ROWS; r++) M = fmaxf(M, sm_m[r][g]);
    const float mb = M == neg_inf() ? 0.f : M;
    float sum = 0.f, a = 0.f;
#pragma unroll 4
    for (int r = 0; r < ROWS; r++) {
      const float w = exp2f(sm_m[r][g] - mb);
      sum = fmaf(w, sm_l[r][g], sum);
      a = fmaf(w, sm_acc[r][g][d], a);
    }
    const long long bh = (long long)b * n_q_heads + h0 + g;
    if (num_splits == 1) {
      st(out + bh * D + d, sum > 0.f ? a / sum : 0.f);
    } else {
      const long long ps = bh * num_splits + split;
      part_acc[ps * D + d] = a;
      if (d == 0) {
        part_ml[ps * 2] = M;
        part_ml[ps * 2 + 1] = sum;
      }
    }
  }
}

// Merges the splits of fk_paged_decode: grid (nQ, B), any block size. Only the splits that hold keys
// (ceil(windowed length / chunk)) are read; a sequence with no keys gets zeros.
extern "C" __global__ void fk_paged_decode_combine(FK_T* __restrict__ out, const float* __restrict__ part_acc, const float* __restrict__ part_ml,
                                                   const int* __restrict__ seq_lens, int max_tokens, int n_q_heads, int head_dim, int window, int chunk,
                                                   int num_splits) {
  const int h = blockIdx.x;
  const int b = blockIdx.y;
  const int L = min(seq_lens[b], max_tokens);
  const int lo = window > 0 ? max(0, L - window) : 0;
  const int n = min(num_splits, max(0, (L - lo + chunk - 1) / chunk));
  const long long bh = (long long)b * n_q_heads + h;
  const float* ml = part_ml + bh * num_splits * 2;
  float M = neg_inf();
  for (int s = 0; s < n; s++) M = fmaxf(M, ml[2 * s]);
  const float mb = M == neg_inf() ? 0.f : M;
  float sum = 0.f;
  for (int s = 0; s < n; s++) sum = fmaf(exp2f(ml[2 * s] - mb), ml[2 * s + 1], sum);
  const float inv = sum > 0.f ? 1.f / sum : 0.f;
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float a = 0.f;
    for (int s = 0; s < n; s++) a = fmaf(exp2f(ml[2 * s] - mb), part_acc[(bh * num_splits + s) * head_dim + d], a);
    st(out + bh * head_dim + d, a * inv);
  }
}
