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
// fk_paged_decode_mma (bf16/f16, head dim 64/128, 16-byte aligned caches): grid (splits, nQ / FK_MHG, B),
// FK_MWARPS warps. The FK_MHG (<= 16) query heads of one kv head are the 16 rows of an mma.sync m16n8k16 A
// operand (rows past FK_MHG are zero and never written). The split's keys are cut in tiles of 16 tokens; warp w
// takes tiles w, w + W, ... and streams them through its own FK_STAGES-deep cp.async ring (K and V of a tile:
// 16 rows of one kv head, each row found through the block table, stored XOR-swizzled for ldmatrix), so
// FK_STAGES - 1 tiles per warp stay in flight while it computes S = Q K^T, the online softmax (log2 domain) and
// O += P V on the tensor cores. Only warp-level sync in the loop; the warps merge through shared memory at
// the end. A sequence whose keys fit one split writes its output directly (the combine kernel skips it).
// FK_EARLY_KV=1 (tuning attention.decodeEarlyKv): under PDL the page ids and the cp.async of the first FK_STAGES - 1
// tiles are issued before the wait for the kernel before, so the cache's DRAM latency overlaps it (at bs 1 the kernel
// is ~6 us of mostly latency). Everything but the newest key of each sequence (position seq_lens[b] - 1, which that
// kernel, the step's rotary + KV write, has just written) was in the cache before; the newest row of those tiles is
// skipped then and loaded after the wait. The contract: the kernel just before wrote no other row of these caches.
//
// FK_SINKS=1 (gpt-oss's learned sinks, flash-attn's s_aux): every kernel takes a last parameter, a pointer to one float
// logit per query head (natural-log units), that joins the softmax denominator with no value. The parameter is declared
// only in that build, so the default build is the code from before sinks; the host's signature (parsed from this text,
// preprocessor lines skipped) always has it and the launcher always passes it (0 without sinks): the driver reads only
// the parameters a kernel declares. With the row's max m and sum l (log2 domain) the output is
// acc / (l + exp2(sink * log2(e) - m)), computed with the larger of m and the sink as the max (no overflow). The sink is
// added once a row: by the kernel that writes the output (one split, or the mma kernel's sequences that fit one split),
// else by the combine kernel. A row with no key is zero, as without sinks.
//
// Specialised by NVRTC with -DFK_T=<element> -DFK_D=<head dim> -DFK_VB=<vector bytes> -DFK_HG=<heads per CTA>
// -DFK_UNROLL=<tokens per row in flight> -DFK_BS=<cache block size> -DFK_WARPS=<warps>; the defaults below
// make the file compile standalone with `nvcc -std=c++17 -arch=sm_90a -c`.
// compile-cu: -DFK_DEC_PATH=2 -DFK_PDL=1 -DFK_EARLY_KV=1 -DFK_STAGES=2
// compile-cu: -DFK_SINKS=1
// compile-cu: -DFK_SINKS=1 -DFK_DEC_PATH=2 -DFK_PDL=1 -DFK_EARLY_KV=1 -DFK_STAGES=2
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include "fk_pdl.cuh"

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
#ifndef FK_MHG
#define FK_MHG 4
#endif
#ifndef FK_MWARPS
#define FK_MWARPS 4
#endif
#ifndef FK_STAGES
#define FK_STAGES 3
#endif
#ifndef FK_EARLY_KV
#define FK_EARLY_KV 0  // fk_paged_decode_mma: the first tiles' cached keys load before the PDL wait (see there)
#endif
// 0: every kernel of the file (standalone compile); 1: fk_paged_decode + combine; 2: fk_paged_decode_mma + combine.
#ifndef FK_DEC_PATH
#define FK_DEC_PATH 0
#endif
#ifndef FK_SINKS
#define FK_SINKS 0  // 1: the per-head sink logits join the softmax denominator (see above)
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

#if FK_SINKS
// The factor that turns a row's unnormalised output (sum l, max m, log2 domain) into its output with the sink s2 (the
// sink logit times log2(e)) in the denominator: exp2(m - M) / (l exp2(m - M) + exp2(s2 - M)), M = max(m, s2). 0 for a
// row with no key (l == 0).
__device__ __forceinline__ float sink_inv(float l, float m, float s2) {
  if (!(l > 0.f)) return 0.f;
  const float mx = fmaxf(m, s2);
  const float r = exp2f(m - mx);
  return r / fmaf(l, r, exp2f(s2 - mx));
}
// A volatile load, read after the kernel's PDL wait: sinks converted to fp32 by the kernel just before may still be
// being written when a PDL launch of this one starts, and a read-only-path load (what nvcc makes of a plain const read
// where it can) counts as invariant, free to move above the wait (fk_pdl.cuh).
__device__ __forceinline__ float sink_log2(const float* sinks, int h) {
  return *reinterpret_cast<const volatile float*>(sinks + h) * 1.4426950408889634f;
}
#endif

}  // namespace fkdec

using namespace fkdec;

#if FK_DEC_PATH != 2
extern "C" __global__ void __launch_bounds__(FK_WARPS * 32) fk_paged_decode(
    FK_T* __restrict__ out,             // [B, nQ, D] contiguous (written when num_splits == 1)
    float* __restrict__ part_acc,       // [B, nQ, num_splits, D] (num_splits > 1)
    float* __restrict__ part_ml,        // [B, nQ, num_splits, 2]: max (log2 domain), sum
    const FK_T* __restrict__ q, long long q_sb, long long q_sh,
    const FK_T* __restrict__ kc, long long k_sblk, long long k_stok, long long k_sh,
    const FK_T* __restrict__ vc, long long v_sblk, long long v_stok, long long v_sh,
    const int* __restrict__ block_tables, long long bt_stride, int max_blocks,
    const int* __restrict__ seq_lens, int n_q_heads, int group, int window, float scale_log2, int chunk, int num_splits
#if FK_SINKS
    , const float* sinks  // [nQ]; declared only with sinks (see FK_SINKS above)
#endif
    ) {
  fk_pdl_entry();
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
#if FK_SINKS
      st(out + bh * D + d, a * sink_inv(sum, M, sink_log2(sinks, h0 + g)));
#else
      st(out + bh * D + d, sum > 0.f ? a / sum : 0.f);
#endif
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
#endif  // FK_DEC_PATH != 2

// Merges the splits of fk_paged_decode: grid (nQ, B), any block size. Only the splits that hold keys
// (ceil(windowed length / chunk)) are read; a sequence with no keys gets zeros. With skip_single, a sequence
// whose keys fit one split (or none) is left alone: the main kernel wrote its output (fk_paged_decode_mma).
// The kernel is a chain of dependent loads (at bs 1 it is all latency), so it cuts the round trips: the length is read
// before the PDL wait (seq_lens is final then: the decode kernel before this one only reads it, and lets this grid start
// only after its own wait, i.e. once every kernel before it has finished), and with at most FK_COMBINE_UNROLL splits
// holding keys every (max, sum) pair and every partial a thread needs is loaded at once, then merged in split order.
// The merge is the same sequence of operations either way (max, then sum, then the weighted partials, each in split
// order, times 1 / sum): the same bits as the loops it replaces (FK_COMBINE_UNROLL=0 builds them alone).
#ifndef FK_COMBINE_UNROLL
#define FK_COMBINE_UNROLL 8
#endif
template <int U>
__device__ __forceinline__ void combine_splits(FK_T* __restrict__ out, const float* part_acc, const float* part_ml, int n, long long bh,
                                               int head_dim, int num_splits
#if FK_SINKS
                                               , float s2  // the sink logit times log2(e)
#endif
) {
  const float* ml = part_ml + bh * num_splits * 2;
  const float* pa = part_acc + bh * num_splits * head_dim;
  if (U > 0 && n <= U) {
    float mv[U > 0 ? U : 1], lv[U > 0 ? U : 1], av[U > 0 ? U : 1];
    int d = threadIdx.x;
#pragma unroll
    for (int s = 0; s < U; s++) {  // every load of the first column issued before any use
      if (s < n) {
        mv[s] = ml[2 * s];
        lv[s] = ml[2 * s + 1];
        if (d < head_dim) av[s] = pa[(long long)s * head_dim + d];
      }
    }
    float M = neg_inf();
#pragma unroll
    for (int s = 0; s < U; s++)
      if (s < n) M = fmaxf(M, mv[s]);
#if FK_SINKS
    if (n > 0) M = fmaxf(M, s2);  // the sink's share of the denominator, with the max over it too (no overflow)
#endif
    const float mb = M == neg_inf() ? 0.f : M;
    float sum = 0.f;
#pragma unroll
    for (int s = 0; s < U; s++)
      if (s < n) sum = fmaf(exp2f(mv[s] - mb), lv[s], sum);
#if FK_SINKS
    if (n > 0) sum += exp2f(s2 - mb);
#endif
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
    for (; d < head_dim; d += blockDim.x) {
      if (d != (int)threadIdx.x) {
#pragma unroll
        for (int s = 0; s < U; s++)
          if (s < n) av[s] = pa[(long long)s * head_dim + d];
      }
      float a = 0.f;
#pragma unroll
      for (int s = 0; s < U; s++)
        if (s < n) a = fmaf(exp2f(mv[s] - mb), av[s], a);
      st(out + bh * head_dim + d, a * inv);
    }
    return;
  }
  float M = neg_inf();
  for (int s = 0; s < n; s++) M = fmaxf(M, ml[2 * s]);
#if FK_SINKS
  if (n > 0) M = fmaxf(M, s2);
#endif
  const float mb = M == neg_inf() ? 0.f : M;
  float sum = 0.f;
  for (int s = 0; s < n; s++) sum = fmaf(exp2f(ml[2 * s] - mb), ml[2 * s + 1], sum);
#if FK_SINKS
  if (n > 0) sum += exp2f(s2 - mb);
#endif
  const float inv = sum > 0.f ? 1.f / sum : 0.f;
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float a = 0.f;
    for (int s = 0; s < n; s++) a = fmaf(exp2f(ml[2 * s] - mb), pa[(long long)s * head_dim + d], a);
    st(out + bh * head_dim + d, a * inv);
  }
}

extern "C" __global__ void fk_paged_decode_combine(FK_T* __restrict__ out, const float* __restrict__ part_acc, const float* __restrict__ part_ml,
                                                   const int* __restrict__ seq_lens, int max_tokens, int n_q_heads, int head_dim, int window, int chunk,
                                                   int num_splits, int skip_single
#if FK_SINKS
                                                   , const float* sinks  // [nQ] (see FK_SINKS above)
#endif
                                                   ) {
  const int h = blockIdx.x;
  const int b = blockIdx.y;
  const int L = min(seq_lens[b], max_tokens);
  fk_pdl_entry();  // every CTA waits, the ones with nothing to merge too: this grid must not end before the decode kernel
  const int lo = window > 0 ? max(0, L - window) : 0;
  const int n = min(num_splits, max(0, (L - lo + chunk - 1) / chunk));
  if (skip_single && n <= 1) return;
  combine_splits<FK_COMBINE_UNROLL>(out, part_acc, part_ml, n, (long long)b * n_q_heads + h, head_dim, num_splits
#if FK_SINKS
                                    , sink_log2(sinks, h)
#endif
  );
}

// ------------------------------------------------------------------------------------- tensor-core decode

#if FK_DEC_PATH != 1
namespace fkdm {

typedef unsigned int u32;
constexpr int BN = 16;            // keys per tile
constexpr int CPR = D / 8;        // 16-byte chunks per head row (2-byte elements)
constexpr int TILE = BN * D;      // elements of one K (or V) tile
constexpr int MW = FK_MWARPS;
constexpr int NS = FK_STAGES;
constexpr int MHG = FK_MHG;
static_assert(MHG >= 1 && MHG <= 16, "the heads of a CTA are the 16 rows of one mma tile");
static_assert(NS >= 2, "at least two stages");

#include "fk_mma.cuh"
// Element offset of 16-byte chunk ch of row r in a swizzled [rows][D] tile.
__device__ __forceinline__ int swz(int r, int ch) { return r * D + ((ch ^ (r & 7)) << 3); }
// Two elements as one packed register (first in the low half).
__device__ __forceinline__ u32 pack_raw(const T* p) {
  const unsigned short* u = reinterpret_cast<const unsigned short*>(p);
  return (u32)u[0] | ((u32)u[1] << 16);
}

}  // namespace fkdm

extern "C" __global__ void __launch_bounds__(FK_MWARPS * 32) fk_paged_decode_mma(
    FK_T* __restrict__ out,             // [B, nQ, D] contiguous
    float* __restrict__ part_acc,       // [B, nQ, num_splits, D] (sequences spread over > 1 split)
    float* __restrict__ part_ml,        // [B, nQ, num_splits, 2]: max (log2 domain), sum
    const FK_T* __restrict__ q, long long q_sb, long long q_sh,
    const FK_T* __restrict__ kc, long long k_sblk, long long k_stok, long long k_sh,
    const FK_T* __restrict__ vc, long long v_sblk, long long v_stok, long long v_sh,
    const int* __restrict__ block_tables, long long bt_stride, int max_blocks,
    const int* __restrict__ seq_lens, int n_q_heads, int group, int window, float scale_log2, int chunk, int num_splits
#if FK_SINKS
    , const float* sinks  // [nQ]; declared only with sinks (see FK_SINKS above)
#endif
    ) {
#if !FK_EARLY_KV
  fk_pdl_entry();
#endif
#if (FK_D == 64) || (FK_D == 128)  // the host launches it for these only (the swizzle needs D / 8 >= 8)
  using namespace fkdm;
  extern __shared__ __align__(128) unsigned char fk_smem[];
  __shared__ float sm_m[MW][MHG];
  __shared__ float sm_l[MW][MHG];
  const int split = blockIdx.x;
  const int h0 = blockIdx.y * MHG;
  const int b = blockIdx.z;
  const int kvh = h0 / group;
  const int tid = threadIdx.x;
  const int warp = tid >> 5;
  const int lane = tid & 31;

  const int L = min(seq_lens[b], max_blocks * FK_BS);
  const int lo = window > 0 ? max(0, L - window) : 0;
  const int s_begin = lo + split * chunk;
  const int s_end = min(L, s_begin + chunk);
  const int nsp = (L - lo + chunk - 1) / chunk;  // splits that hold keys (0 when none)
  const bool direct = num_splits == 1 || nsp <= 1;
  if (s_begin >= s_end) {
    if (split == 0 && direct) {
#if FK_EARLY_KV
      fk_pdl_entry();  // a write: never before the kernel before has finished (it may still read this memory)
#endif
      for (int i = tid; i < MHG * D; i += MW * 32) st(out + ((long long)b * n_q_heads + h0 + i / D) * D + i % D, 0.f);
    }
    return;
  }

  const int g = lane >> 2;   // fragment row (head) g and g + 8
  const int t4 = lane & 3;   // fragment column pair
  // Q as A fragments (rows >= MHG are zero).
  u32 qa[D / 16][4];
  auto load_q = [&]() {
    const T* qA = q + (long long)b * q_sb + (long long)(h0 + g) * q_sh;
    const T* qB = qA + 8 * q_sh;
    const bool okA = g < MHG, okB = g + 8 < MHG;
#pragma unroll
    for (int kc2 = 0; kc2 < D / 16; kc2++) {
      qa[kc2][0] = okA ? pack_raw(qA + 16 * kc2 + 2 * t4) : 0u;
      qa[kc2][1] = okB ? pack_raw(qB + 16 * kc2 + 2 * t4) : 0u;
      qa[kc2][2] = okA ? pack_raw(qA + 16 * kc2 + 8 + 2 * t4) : 0u;
      qa[kc2][3] = okB ? pack_raw(qB + 16 * kc2 + 8 + 2 * t4) : 0u;
    }
  };
#if !FK_EARLY_KV
  load_q();
#endif

  const int n_tiles = (s_end - s_begin + BN - 1) / BN;
  const int my_n = warp < n_tiles ? (n_tiles - 1 - warp) / MW + 1 : 0;  // tiles warp, warp + MW, ...
  T* ring = reinterpret_cast<T*>(fk_smem) + warp * NS * 2 * TILE;
  const int* bt = block_tables + (long long)b * bt_stride;
  const long long k_head = (long long)kvh * k_sh;
  const long long v_head = (long long)kvh * v_sh;

  // Page of row (lane & 15) of the warp's j-th tile (0 past the end).
  auto page_of = [&](int j) -> int {
    const int t = s_begin + (warp + j * MW) * BN + (lane & 15);
    return j < my_n && t < s_end ? __ldg(bt + t / FK_BS) : 0;
  };
#if FK_EARLY_KV
  bool before_wait = true;  // the newest key is skipped while the kernel before may still be writing it
#endif
  // cp.async of the warp's j-th tile (K and V) into ring slot `slot`; pg from page_of(j).
  auto issue = [&](int j, int slot, int pg) {
    const int t0 = s_begin + (warp + j * MW) * BN;
    T* sk = ring + slot * 2 * TILE;
    T* sv = sk + TILE;
#pragma unroll
    for (int c = lane; c < BN * CPR; c += 32) {
      const int r = c / CPR;
      const int ch = c % CPR;
      const int page = __shfl_sync(0xffffffffu, pg, r);
      const int t = t0 + r;
      const bool ok = t < s_end;
#if FK_EARLY_KV
      if (before_wait && ok && t == L - 1) continue;  // loaded after the wait (no zero fill either: it would race that store)
#endif
      const long long row = (long long)page * k_sblk + (long long)(t % FK_BS) * k_stok;
      const long long rowv = (long long)page * v_sblk + (long long)(t % FK_BS) * v_stok;
      cp_async16(smem_u32(sk + swz(r, ch)), ok ? kc + row + k_head + ch * 8 : kc, ok ? 16 : 0);
      cp_async16(smem_u32(sv + swz(r, ch)), ok ? vc + rowv + v_head + ch * 8 : vc, ok ? 16 : 0);
    }
  };

  float o[D / 8][4];
#pragma unroll
  for (int j = 0; j < D / 8; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
  float mA = neg_inf(), mB = neg_inf(), lA = 0.f, lB = 0.f;

  // Prologue: page ids of the first NS tiles (independent loads), then tiles 0 .. NS-2 in flight.
  int pgs[NS];
#pragma unroll
  for (int s = 0; s < NS; s++) pgs[s] = page_of(s);
#pragma unroll
  for (int s = 0; s < NS - 1; s++) {
    if (s < my_n) issue(s, s, pgs[s]);
    cp_async_commit();
  }
  int pg_next = pgs[NS - 1];
#if FK_EARLY_KV
  fk_pdl_entry();
  before_wait = false;
  load_q();
  // the newest key and value, where a prologue tile holds them (warp-uniform): plain loads, now that they are written
#pragma unroll
  for (int j = 0; j < NS - 1; j++) {
    const int r = L - 1 - (s_begin + (warp + j * MW) * BN);
    const int page = __shfl_sync(0xffffffffu, pgs[j], r & 15);  // row r's page, loaded before the wait (full warp)
    if (j < my_n && r >= 0 && r < BN && L - 1 < s_end) {
      const long long row = (long long)page * k_sblk + (long long)((L - 1) % FK_BS) * k_stok + k_head;
      const long long rowv = (long long)page * v_sblk + (long long)((L - 1) % FK_BS) * v_stok + v_head;
      T* sk = ring + j * 2 * TILE;
      for (int ch = lane; ch < CPR; ch += 32) {
        // through L2 (__ldcg), as the cp.async copies read: no L1 line of this kernel can be older than the write
        *reinterpret_cast<uint4*>(sk + swz(r, ch)) = __ldcg(reinterpret_cast<const uint4*>(kc + row + ch * 8));
        *reinterpret_cast<uint4*>(sk + TILE + swz(r, ch)) = __ldcg(reinterpret_cast<const uint4*>(vc + rowv + ch * 8));
      }
    }
  }
#endif

  for (int j = 0; j < my_n; j++) {
    const int jn = j + NS - 1;
    if (jn < my_n) issue(jn, jn % NS, pg_next);
    cp_async_commit();
    pg_next = page_of(jn + 1);  // lands while this tile is computed
    cp_async_wait<NS - 1>();    // tile j (group j) has landed for this thread
    __syncwarp();               // ... and for every lane of the warp

    const T* sKs = ring + (j % NS) * 2 * TILE;
    const T* sVs = sKs + TILE;
    const int n0 = s_begin + (warp + j * MW) * BN;

    // S = Q K^T: 16 head rows x 16 keys.
    float s[2][4];
#pragma unroll
    for (int jj = 0; jj < 2; jj++) s[jj][0] = s[jj][1] = s[jj][2] = s[jj][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 32; kk++) {
#pragma unroll
      for (int jj = 0; jj < 2; jj++) {
        u32 b0, b1, b2, b3;
        ldsm_x4(smem_u32(sKs + swz(8 * jj + (lane & 7), 4 * kk + (lane >> 3))), b0, b1, b2, b3);
        Mma<T>::mma(s[jj], qa[2 * kk], b0, b1);
        Mma<T>::mma(s[jj], qa[2 * kk + 1], b2, b3);
      }
    }

    // Scale, mask the keys past the split's end, online softmax (log2 domain).
    const bool full = n0 + BN <= s_end;
    float mxA = mA, mxB = mB;
#pragma unroll
    for (int jj = 0; jj < 2; jj++) {
#pragma unroll
      for (int c = 0; c < 4; c++) {
        float x = s[jj][c] * scale_log2;
        if (!full && n0 + 8 * jj + 2 * t4 + (c & 1) >= s_end) x = neg_inf();
        s[jj][c] = x;
      }
      mxA = fmaxf(mxA, fmaxf(s[jj][0], s[jj][1]));
      mxB = fmaxf(mxB, fmaxf(s[jj][2], s[jj][3]));
    }
    mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, 1));
    mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, 2));
    mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, 1));
    mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, 2));
    const float bA = mxA == neg_inf() ? 0.f : mxA;
    const float bB = mxB == neg_inf() ? 0.f : mxB;
    const float alphaA = exp2f(mA - bA);
    const float alphaB = exp2f(mB - bB);
    mA = mxA;
    mB = mxB;
#pragma unroll
    for (int jj = 0; jj < 2; jj++) {
      s[jj][0] = exp2f(s[jj][0] - bA);
      s[jj][1] = exp2f(s[jj][1] - bA);
      s[jj][2] = exp2f(s[jj][2] - bB);
      s[jj][3] = exp2f(s[jj][3] - bB);
    }
    lA = lA * alphaA + (s[0][0] + s[0][1]) + (s[1][0] + s[1][1]);  // per-thread partial; the quad sums at the end
    lB = lB * alphaB + (s[0][2] + s[0][3]) + (s[1][2] + s[1][3]);

    // O = O * alpha + P V (P re-packed from the S accumulators as one A fragment).
    u32 pa[4];
    pa[0] = Mma<T>::pack(s[0][0], s[0][1]);
    pa[1] = Mma<T>::pack(s[0][2], s[0][3]);
    pa[2] = Mma<T>::pack(s[1][0], s[1][1]);
    pa[3] = Mma<T>::pack(s[1][2], s[1][3]);
#pragma unroll
    for (int dp = 0; dp < D / 16; dp++) {
      u32 b0, b1, b2, b3;
      ldsm_x4_t(smem_u32(sVs + swz((lane & 7) + ((lane >> 3) & 1) * 8, 2 * dp + (lane >> 4))), b0, b1, b2, b3);
      o[2 * dp][0] *= alphaA;
      o[2 * dp][1] *= alphaA;
      o[2 * dp][2] *= alphaB;
      o[2 * dp][3] *= alphaB;
      o[2 * dp + 1][0] *= alphaA;
      o[2 * dp + 1][1] *= alphaA;
      o[2 * dp + 1][2] *= alphaB;
      o[2 * dp + 1][3] *= alphaB;
      Mma<T>::mma(o[2 * dp], pa, b0, b1);
      Mma<T>::mma(o[2 * dp + 1], pa, b2, b3);
    }
    __syncwarp();  // this slot is refilled by the next iteration's copies
  }
  cp_async_wait<0>();

  lA += __shfl_xor_sync(0xffffffffu, lA, 1);
  lA += __shfl_xor_sync(0xffffffffu, lA, 2);
  lB += __shfl_xor_sync(0xffffffffu, lB, 1);
  lB += __shfl_xor_sync(0xffffffffu, lB, 2);

  // Merge the warps through shared memory (the rings are free once every warp is past its loop).
  __syncthreads();
  float* so = reinterpret_cast<float*>(fk_smem);  // [MW][MHG][D]
  if (g < MHG) {
    float* r = so + (warp * MHG + g) * D + 2 * t4;
#pragma unroll
    for (int j = 0; j < D / 8; j++) *reinterpret_cast<float2*>(r + 8 * j) = make_float2(o[j][0], o[j][1]);
    if (t4 == 0) {
      sm_m[warp][g] = mA;
      sm_l[warp][g] = lA;
    }
  }
  if (g + 8 < MHG) {
    float* r = so + (warp * MHG + g + 8) * D + 2 * t4;
#pragma unroll
    for (int j = 0; j < D / 8; j++) *reinterpret_cast<float2*>(r + 8 * j) = make_float2(o[j][2], o[j][3]);
    if (t4 == 0) {
      sm_m[warp][g + 8] = mB;
      sm_l[warp][g + 8] = lB;
    }
  }
  __syncthreads();
  for (int idx = tid; idx < MHG * D; idx += MW * 32) {
    const int hh = idx / D;
    const int d = idx % D;
    float M = neg_inf();
#pragma unroll
    for (int w = 0; w < MW; w++) M = fmaxf(M, sm_m[w][hh]);
    const float mb = M == neg_inf() ? 0.f : M;
    float sum = 0.f, a = 0.f;
#pragma unroll
    for (int w = 0; w < MW; w++) {
      const float wt = exp2f(sm_m[w][hh] - mb);
      sum = fmaf(wt, sm_l[w][hh], sum);
      a = fmaf(wt, so[(w * MHG + hh) * D + d], a);
    }
    const long long bh = (long long)b * n_q_heads + h0 + hh;
    if (direct) {
#if FK_SINKS
      st(out + bh * D + d, a * sink_inv(sum, M, sink_log2(sinks, h0 + hh)));
#else
      st(out + bh * D + d, sum > 0.f ? a / sum : 0.f);
#endif
    } else {
      const long long ps = bh * num_splits + split;
      part_acc[ps * D + d] = a;
      if (d == 0) {
        part_ml[ps * 2] = M;
        part_ml[ps * 2 + 1] = sum;
      }
    }
  }
#endif
}
#endif  // FK_DEC_PATH != 1
