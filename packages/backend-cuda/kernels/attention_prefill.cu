// FastKernels variable-length prefill attention (flash_attn_varlen_func semantics).
//
// fk_varlen_prefill (bf16 / fp16, head dim 64 or 128): FlashAttention-2 style. Grid (nQ, tiles): one CTA per
// (query head, tile of BM = 16 * FK_WARPS query rows of one sequence); each warp owns 16 rows. The CTA finds
// its (sequence, tile) from cu_seqlens_q on the device (a warp-parallel prefix sum; no host sync, so the op
// is graph-capturable); the grid's tile count is an upper bound (ceil(Tq / BM) + B) and spare CTAs exit.
// Tiles of a sequence run last-first (the causal tiles with most keys start first). K/V tiles of BN = 64 keys
// stream through shared memory with cp.async (16-byte, zero-filled past the end), double-buffered; Q, K and V
// are read with ldmatrix (V transposed) from an XOR-swizzled layout (conflict-free), S = QK^T and O += PV
// run on mma.sync.m16n8k16 with fp32 accumulation; the online softmax is in the log2 domain in registers
// (P is re-packed from the S accumulators into A fragments without shared memory). Masking (bottom-right
// causal, left sliding window, the sequence end) is applied only on tiles that need it. Rows that see no
// key are written as zeros.
//
// fk_varlen_prefill_wgmma (sm_90a, bf16 / fp16, head dim 128; the host's choice there): the same work and semantics on
// Hopper's warpgroup MMA. CTAs of 128 query rows, two warpgroups of 64, share each K / V tile; S = Q K^T and O += P V are
// wgmma from shared memory (fk_wgmma.cuh: 128-byte swizzled tiles, P from registers); the softmax, the masks and the
// stores are the mma kernel's (the helpers below), and on the H200 its outputs have the same bits (run 19).
//
// fk_varlen_prefill_simple (fp32, or any head dim up to 256): one warp per (query row, head); lanes split the
// head dim; keys one group of FK_UNROLL at a time with warp reductions. Correct for every case, not fast.
//
// FK_SINKS=1 (gpt-oss's learned sinks, flash-attn's s_aux): each kernel takes a last parameter, a pointer to one float
// logit per query head (natural-log units), that joins every row's softmax denominator with no value. The parameter is
// declared only in that build, so the default build is the code from before sinks; the host's signature (parsed from
// this text, preprocessor lines skipped) always has it and the launcher always passes it (0 without sinks): the driver
// reads only the parameters a kernel declares. With the row's max m and sum l (log2 domain) the output is
// O / (l + exp2(sink * log2(e) - m)), computed with the larger of m and the sink as the max (no overflow). A row that
// sees no key is zero, as without sinks.
//
// NVRTC specialisation: -DFK_T=<element> -DFK_D=<head dim> -DFK_WARPS=<warps> -DFK_SKIP_RESCALE=<0|1> [-DFK_SINKS=1];
// defaults compile standalone.
// compile-cu: -DFK_SINKS=1
// compile-cu: -DFK_SINKS=1 -DFK_PDL=1 -DFK_D=64
#include <cuda_fp16.h>
#include "fk_pdl.cuh"
#include <cuda_bf16.h>
#include "fk_varlen_tiles.cuh"  // fkvar: which (sequence, query tile) a CTA owns, each row's keys, the uncovered rows

#ifndef FK_T
#define FK_T __nv_bfloat16
#endif
#ifndef FK_D
#define FK_D 128
#endif
#ifndef FK_WARPS
#define FK_WARPS 4
#endif
#ifndef FK_UNROLL
#define FK_UNROLL 4
#endif
// 1: skip the O rescale of a key tile when no row max of the warp moved (exact; tuning attention.prefillSkipRescale).
#ifndef FK_SKIP_RESCALE
#define FK_SKIP_RESCALE 1
#endif
#ifndef FK_SINKS
#define FK_SINKS 0  // 1: the per-head sink logits join the softmax denominator (see above)
#endif

namespace fkpre {

typedef FK_T T;
typedef unsigned int u32;
constexpr int D = FK_D;
constexpr int NW = FK_WARPS;
constexpr int NT = NW * 32;
constexpr int BM = 16 * NW;  // query rows per CTA
constexpr int BN = 64;       // keys per tile
constexpr int CPR = D / 8;   // 16-byte chunks per row

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }
__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ void st(float* p, float x) { *p = x; }
__device__ __forceinline__ void st(__half* p, float x) { *p = __float2half_rn(x); }
__device__ __forceinline__ void st(__nv_bfloat16* p, float x) { *p = __float2bfloat16_rn(x); }

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

#include "fk_mma.cuh"
#include "fk_online_softmax.cuh"
#include "fk_wgmma.cuh"

// Element offset of 16-byte chunk ch of row r in a swizzled [rows][D] tile.
__device__ __forceinline__ int swz(int r, int ch) { return r * D + ((ch ^ (r & 7)) << 3); }

// Rows [row0, row0 + rows) of a [T, heads, D] tensor (head fixed) into a swizzled tile; rows >= n are zeros.
template <int ROWS>
__device__ __forceinline__ void load_tile(T* tile, const T* base, long long row_stride, int row0, int n, int tid) {
#pragma unroll
  for (int c = tid; c < ROWS * CPR; c += NT) {
    const int r = c / CPR;
    const int ch = c % CPR;
    const bool ok = row0 + r < n;
    const T* src = ok ? base + (long long)(row0 + r) * row_stride + ch * 8 : base;
    cp_async16(smem_u32(tile + swz(r, ch)), src, ok ? 16 : 0);
  }
}

// Both tensor-core kernels hold a warp's 16 query rows by the mma accumulator layout: this thread has rows rA and rA + 8
// (A and B), s[j][0..1] row A's keys n + 8 j + 2 t4 and + 1, s[j][2..3] row B's; o[j] likewise over the head dim.

// The online-softmax step of one key tile: scale S to the log2 domain, mask the keys outside [lo, hi] of each row unless
// the whole tile is inside every row's range (full), update the running maxima m and this thread's partial sums l, and
// leave P = exp2(S - max) in s; alpha gets the factors the rows' O is to be rescaled by.
__device__ __forceinline__ void online_softmax(float (&s)[BN / 8][4], bool full, int n, int t4, int loA, int hiA, int loB, int hiB,
                                               float scale_log2, float& mA, float& mB, float& lA, float& lB, float& alphaA, float& alphaB) {
  float mxA = mA, mxB = mB;
#pragma unroll
  for (int j = 0; j < BN / 8; j++) {
#pragma unroll
    for (int c = 0; c < 4; c++) {
      float x = s[j][c] * scale_log2;
      if (!full) {
        const int key = n + 8 * j + 2 * t4 + (c & 1);
        const bool ok = c < 2 ? (key >= loA && key <= hiA) : (key >= loB && key <= hiB);
        if (!ok) x = neg_inf();
      }
      s[j][c] = x;
    }
    mxA = fmaxf(mxA, fmaxf(s[j][0], s[j][1]));
    mxB = fmaxf(mxB, fmaxf(s[j][2], s[j][3]));
  }
  softmax_update(s, mxA, mxB, mA, mB, lA, lB, alphaA, alphaB);
}

// O *= alpha. With FK_SKIP_RESCALE the multiply is skipped when no row max of the warp moved (every alpha is exactly 1:
// exp2f(0)), a warp-uniform branch; the result is bit-identical either way.
__device__ __forceinline__ void rescale_o(float (&o)[D / 8][4], float alphaA, float alphaB) {
#if FK_SKIP_RESCALE
  if (!__all_sync(0xffffffffu, alphaA == 1.f && alphaB == 1.f))
#endif
  {
#pragma unroll
    for (int j = 0; j < D / 8; j++) {
      o[j][0] *= alphaA;
      o[j][1] *= alphaA;
      o[j][2] *= alphaB;
      o[j][3] *= alphaB;
    }
  }
}

// The rows' outputs: O / l (the quad's partial sums added), rows past the sequence end (i >= lq) not written, rows that
// saw no key as zeros. outA: row A's output at this thread's first column (2 t4); row B's is 8 rows on. With FK_SINKS,
// mA / mB are the rows' maxima and s2 the head's sink (log2 domain).
__device__ __forceinline__ void store_rows(T* outA, long long orow, const float (&o)[D / 8][4], float lA, float lB, int iA, int iB, int lq
#if FK_SINKS
                                           , float mA, float mB, float s2
#endif
) {
  lA = quad_sum(lA);
  lB = quad_sum(lB);
#if FK_SINKS
  const float invA = sink_inv(lA, mA, s2);
  const float invB = sink_inv(lB, mB, s2);
#else
  const float invA = lA > 0.f ? 1.f / lA : 0.f;
  const float invB = lB > 0.f ? 1.f / lB : 0.f;
#endif
  T* outB = outA + 8 * orow;
#pragma unroll
  for (int j = 0; j < D / 8; j++) {
    if (iA < lq) *reinterpret_cast<u32*>(outA + 8 * j) = Mma<T>::pack(o[j][0] * invA, o[j][1] * invA);
    if (iB < lq) *reinterpret_cast<u32*>(outB + 8 * j) = Mma<T>::pack(o[j][2] * invB, o[j][3] * invB);
  }
}

}  // namespace fkpre

using namespace fkpre;

extern "C" __global__ void __launch_bounds__(FK_WARPS * 32) fk_varlen_prefill(
    FK_T* __restrict__ out,  // [Tq, nQ, D] contiguous
    const FK_T* __restrict__ q, long long q_sr, long long q_sh,
    const FK_T* __restrict__ k, long long k_sr, long long k_sh,
    const FK_T* __restrict__ v, long long v_sr, long long v_sh,
    const int* __restrict__ cu_q, const int* __restrict__ cu_k, int num_seqs, int total_q, int n_q_heads, int group, int causal,
    int window, float scale_log2
#if FK_SINKS
    , const float* sinks  // [nQ]; declared only with sinks (see FK_SINKS above)
#endif
    ) {
  fk_pdl_entry();
#if (FK_D % 32 == 0) && (FK_D <= 256)  // the mma path (the host launches it for head dim 64 and 128 only)
  extern __shared__ __align__(128) unsigned char fk_smem[];
  T* sQ = reinterpret_cast<T*>(fk_smem);
  T* sK = sQ + BM * D;  // 2 stages
  T* sV = sK + 2 * BN * D;

  const int h = blockIdx.x;
  const int tid = threadIdx.x;
  const int warp = tid >> 5;
  const int lane = tid & 31;
  int seq, tile;
  if (!fkvar::find_tile<BM>(cu_q, num_seqs, blockIdx.y, lane, seq, tile)) {
    fkvar::zero_uncovered<T, D, BM, NT>(out, cu_q, num_seqs, total_q, n_q_heads, h, blockIdx.y - tile, tid);
    return;
  }

  const fkvar::SeqKeys sk = fkvar::seq_keys(cu_q, cu_k, seq, causal, window);
  const int q0 = sk.q0, lq = sk.lq, k0 = sk.k0, lk = sk.lk;
  const int kvh = h / group;
  const int m0 = tile * BM;
  const int m_last = min(m0 + BM, lq) - 1;
  int n_start, n_tiles;
  sk.tiles<BN>(m0, m_last, n_start, n_tiles);
  // Tiles entirely inside every row's window need no mask.
  const int hi_first = sk.hi(m0);
  const int lo_last = sk.lo(m_last);

  const T* qh = q + (long long)q0 * q_sr + (long long)h * q_sh;
  const T* kh = k + (long long)k0 * k_sr + (long long)kvh * k_sh;
  const T* vh = v + (long long)k0 * v_sr + (long long)kvh * v_sh;

  load_tile<BM>(sQ, qh, q_sr, m0, lq, tid);
  if (n_tiles > 0) {
    load_tile<BN>(sK, kh, k_sr, n_start, lk, tid);
    load_tile<BN>(sV, vh, v_sr, n_start, lk, tid);
  }
  cp_async_commit();

  const int g = lane >> 2;  // row within the 8-row half of the fragment
  const int t4 = lane & 3;  // column pair
  const int rA = warp * 16 + g;  // tile rows owned by this thread: rA and rA + 8
  const int iA = m0 + rA;        // sequence-local query index
  const int iB = iA + 8;
  const int hiA = sk.hi(iA), hiB = sk.hi(iB), loA = sk.lo(iA), loB = sk.lo(iB);

  u32 qa[D / 16][4];
  float o[D / 8][4];
#pragma unroll
  for (int j = 0; j < D / 8; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
  float mA = neg_inf(), mB = neg_inf(), lA = 0.f, lB = 0.f;

  for (int it = 0; it < n_tiles; it++) {
    const int stage = it & 1;
    const int n = n_start + it * BN;
    if (it + 1 < n_tiles) {
      load_tile<BN>(sK + (stage ^ 1) * BN * D, kh, k_sr, n + BN, lk, tid);
      load_tile<BN>(sV + (stage ^ 1) * BN * D, vh, v_sr, n + BN, lk, tid);
    }
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();

    if (it == 0) {
#pragma unroll
      for (int kc = 0; kc < D / 16; kc++) {
        const int r = warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
        ldsm_x4(smem_u32(sQ + swz(r, 2 * kc + (lane >> 4))), qa[kc][0], qa[kc][1], qa[kc][2], qa[kc][3]);
      }
    }

    // S = Q K^T for 16 rows x 64 keys per warp.
    const T* sKs = sK + stage * BN * D;
    float s[BN / 8][4];
#pragma unroll
    for (int j = 0; j < BN / 8; j++) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 32; kk++) {
#pragma unroll
      for (int j = 0; j < BN / 8; j++) {
        u32 b0, b1, b2, b3;
        ldsm_x4(smem_u32(sKs + swz(8 * j + (lane & 7), 4 * kk + (lane >> 3))), b0, b1, b2, b3);
        Mma<T>::mma(s[j], qa[2 * kk], b0, b1);
        Mma<T>::mma(s[j], qa[2 * kk + 1], b2, b3);
      }
    }

    // Scale, mask, online softmax (log2 domain); O rescaled.
    const bool full = lo_last <= n && hi_first >= n + BN - 1;
    float alphaA, alphaB;
    online_softmax(s, full, n, t4, loA, hiA, loB, hiB, scale_log2, mA, mB, lA, lB, alphaA, alphaB);
    rescale_o(o, alphaA, alphaB);

    // O += P V: P re-packed from the S accumulators as A fragments.
    const T* sVs = sV + stage * BN * D;
#pragma unroll
    for (int kk = 0; kk < BN / 16; kk++) {
      u32 pa[4];
      pack_p(s, kk, pa);
#pragma unroll
      for (int dp = 0; dp < D / 16; dp++) {
        u32 b0, b1, b2, b3;
        ldsm_x4_t(smem_u32(sVs + swz(16 * kk + (lane & 7) + ((lane >> 3) & 1) * 8, 2 * dp + (lane >> 4))), b0, b1, b2, b3);
        Mma<T>::mma(o[2 * dp], pa, b0, b1);
        Mma<T>::mma(o[2 * dp + 1], pa, b2, b3);
      }
    }
    __syncthreads();  // the stage is refilled by the next iteration's copies
  }
  cp_async_wait<0>();

  const long long orow = (long long)n_q_heads * D;
  store_rows(out + (long long)(q0 + iA) * orow + (long long)h * D + 2 * t4, orow, o, lA, lB, iA, iB, lq
#if FK_SINKS
             , mA, mB, sink_log2(sinks, h)
#endif
  );
#endif
}

// The wgmma path (sm_90a, head dim 128): grid (nQ, tiles) as above with tiles of 128 query rows, 256 threads: two
// warpgroups of 64 rows each share every K / V tile. Dynamic shared memory: WGMMA_SMEM_BYTES.
namespace fkpre {
constexpr int WG_BM = 2 * wg::ROWS;  // query rows a CTA
constexpr int WG_NT = 256;
// Q (a tile a warpgroup), K and V (2 stages each), and room to align the base to 1024 bytes (the swizzle atoms)
constexpr int WGMMA_SMEM_BYTES = 6 * wg::TILE_BYTES + 1024;

// Rows [row0, row0 + 64) of a [T, heads, 128] tensor (head fixed) into a swizzled wgmma tile; rows >= n are zeros.
__device__ __forceinline__ void load_wg_tile(unsigned char* tile, const T* base, long long row_stride, int row0, int n, int tid) {
#pragma unroll
  for (int i = tid; i < wg::ROWS * 16; i += WG_NT) {
    const int r = i >> 4, c = i & 15;
    const bool ok = row0 + r < n;
    cp_async16(smem_u32(tile + wg::tile_off(r, c)), ok ? base + (long long)(row0 + r) * row_stride + c * 8 : base, ok ? 16 : 0);
  }
}
}  // namespace fkpre

extern "C" __global__ void __launch_bounds__(fkpre::WG_NT, 2) fk_varlen_prefill_wgmma(
    FK_T* __restrict__ out,  // [Tq, nQ, D] contiguous
    const FK_T* __restrict__ q, long long q_sr, long long q_sh,
    const FK_T* __restrict__ k, long long k_sr, long long k_sh,
    const FK_T* __restrict__ v, long long v_sr, long long v_sh,
    const int* __restrict__ cu_q, const int* __restrict__ cu_k, int num_seqs, int total_q, int n_q_heads, int group, int causal,
    int window, float scale_log2
#if FK_SINKS
    , const float* sinks  // [nQ]; declared only with sinks (see FK_SINKS above)
#endif
    ) {
  fk_pdl_entry();
#if defined(__CUDA_ARCH_FEAT_SM90_ALL) && FK_D == 128  // (the host launches it on compute capability 9.0 only)
  extern __shared__ __align__(128) unsigned char fk_wg_smem[];
  unsigned char* sm = fk_wg_smem + ((1024 - (smem_u32(fk_wg_smem) & 1023)) & 1023);
  unsigned char* sQ = sm;                      // a tile a warpgroup
  unsigned char* sK = sm + 2 * wg::TILE_BYTES;  // 2 stages
  unsigned char* sV = sm + 4 * wg::TILE_BYTES;  // 2 stages

  const int h = blockIdx.x;
  const int tid = threadIdx.x;
  const int wgi = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31;
  int seq, tile;
  if (!fkvar::find_tile<WG_BM>(cu_q, num_seqs, blockIdx.y, lane, seq, tile)) {
    fkvar::zero_uncovered<T, D, WG_BM, WG_NT>(out, cu_q, num_seqs, total_q, n_q_heads, h, blockIdx.y - tile, tid);
    return;
  }

  const fkvar::SeqKeys sk = fkvar::seq_keys(cu_q, cu_k, seq, causal, window);
  const int q0 = sk.q0, lq = sk.lq, lk = sk.lk;
  const int kvh = h / group;
  // the CTA's key tiles
  const int m0 = tile * WG_BM;
  int n_start, n_tiles;
  sk.tiles<BN>(m0, min(m0 + WG_BM, lq) - 1, n_start, n_tiles);
  // this warpgroup's rows [w0, w_last] and the keys they see (none when the sequence ends before its rows)
  const int w0 = m0 + wgi * wg::ROWS;
  const int w_last = min(w0 + wg::ROWS, lq) - 1;
  const int wkbeg = w_last >= w0 ? sk.lo(w0) : 0;
  const int wkend = w_last >= w0 ? sk.hi(w_last) : -1;
  const int hi_first = sk.hi(w0), lo_last = sk.lo(w_last);  // tiles inside both need no mask

  const T* qh = q + (long long)q0 * q_sr + (long long)h * q_sh;
  const T* kh = k + (long long)sk.k0 * k_sr + (long long)kvh * k_sh;
  const T* vh = v + (long long)sk.k0 * v_sr + (long long)kvh * v_sh;
  load_wg_tile(sQ, qh, q_sr, m0, lq, tid);
  load_wg_tile(sQ + wg::TILE_BYTES, qh, q_sr, m0 + wg::ROWS, lq, tid);
  if (n_tiles > 0) {
    load_wg_tile(sK, kh, k_sr, n_start, lk, tid);
    load_wg_tile(sV, vh, v_sr, n_start, lk, tid);
  }
  cp_async_commit();

  const int g = lane >> 2, t4 = lane & 3;
  const int iA = w0 + warp * 16 + g;  // sequence-local query rows of this thread (the accumulator layout)
  const int iB = iA + 8;
  const int hiA = sk.hi(iA), hiB = sk.hi(iB), loA = sk.lo(iA), loB = sk.lo(iB);
  const u32 qs = smem_u32(sQ + wgi * wg::TILE_BYTES);

  float o[D / 8][4];
#pragma unroll
  for (int j = 0; j < D / 8; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
  float mA = neg_inf(), mB = neg_inf(), lA = 0.f, lB = 0.f;

  for (int it = 0; it < n_tiles; it++) {
    const int stage = it & 1;
    const int n = n_start + it * BN;
    if (it + 1 < n_tiles) {
      load_wg_tile(sK + (stage ^ 1) * wg::TILE_BYTES, kh, k_sr, n + BN, lk, tid);
      load_wg_tile(sV + (stage ^ 1) * wg::TILE_BYTES, vh, v_sr, n + BN, lk, tid);
    }
    cp_async_commit();
    cp_async_wait<1>();  // this thread's copies of the tile (and of Q) landed
    wg::fence_async_smem();
    __syncthreads();  // ... and every thread's

    if (n <= wkend && n + BN - 1 >= wkbeg) {  // warpgroup-uniform (wgmma takes the whole warpgroup)
      float s[BN / 8][4];
      wg::qk_tile<T>(s, qs, smem_u32(sK + stage * wg::TILE_BYTES));  // S = Q K^T
      const bool full = lo_last <= n && hi_first >= n + BN - 1;
      float alphaA, alphaB;
      online_softmax(s, full, n, t4, loA, hiA, loB, hiB, scale_log2, mA, mB, lA, lB, alphaA, alphaB);
      rescale_o(o, alphaA, alphaB);
      u32 pa[BN / 16][4];
#pragma unroll
      for (int kk = 0; kk < BN / 16; kk++) pack_p(s, kk, pa[kk]);
      wg::pv_tile<T>(o, pa, smem_u32(sV + stage * wg::TILE_BYTES));  // O += P V
    }
    __syncthreads();  // the stage is refilled by the next iteration's copies
  }
  cp_async_wait<0>();

  const long long orow = (long long)n_q_heads * D;
  store_rows(out + (long long)(q0 + iA) * orow + (long long)h * D + 2 * t4, orow, o, lA, lB, iA, iB, lq
#if FK_SINKS
             , mA, mB, sink_log2(sinks, h)
#endif
  );
#endif
}

// The simple path: grid (ceil(total_q / FK_WARPS), nQ), FK_WARPS warps, one warp per (query row, head).
// Rows outside every sequence are written as zeros.
extern "C" __global__ void __launch_bounds__(FK_WARPS * 32) fk_varlen_prefill_simple(
    FK_T* __restrict__ out,  // [Tq, nQ, D] contiguous
    const FK_T* __restrict__ q, long long q_sr, long long q_sh,
    const FK_T* __restrict__ k, long long k_sr, long long k_sh,
    const FK_T* __restrict__ v, long long v_sr, long long v_sh,
    const int* __restrict__ cu_q, const int* __restrict__ cu_k, int num_seqs, int total_q, int n_q_heads, int group, int causal,
    int window, float scale_log2
#if FK_SINKS
    , const float* sinks  // [nQ]; declared only with sinks (see FK_SINKS above)
#endif
    ) {
  fk_pdl_entry();
  constexpr int NPL = (D + 31) / 32;  // dims per lane: lane + 32 * i
  constexpr int U = FK_UNROLL;
  const int lane = threadIdx.x & 31;
  const int r = blockIdx.x * NW + (threadIdx.x >> 5);
  const int h = blockIdx.y;
  if (r >= total_q) return;
  T* orow = out + ((long long)r * n_q_heads + h) * D;
  // Last sequence s with cu_q[s] <= r (s == num_seqs: past the last sequence).
  int lo_s = 0, hi_s = num_seqs;
  if (num_seqs <= 0 || r < cu_q[0]) lo_s = num_seqs;
  else {
    while (lo_s < hi_s) {
      const int mid = (lo_s + hi_s + 1) >> 1;
      if (cu_q[mid] <= r) lo_s = mid;
      else hi_s = mid - 1;
    }
  }
  const int seq = lo_s;
  if (seq >= num_seqs) {
#pragma unroll
    for (int i = 0; i < NPL; i++)
      if (lane + 32 * i < D) st(orow + lane + 32 * i, 0.f);
    return;
  }
  const int q0 = cu_q[seq];
  const int lq = cu_q[seq + 1] - q0;
  const int k0 = cu_k[seq];
  const int lk = max(0, cu_k[seq + 1] - k0);
  const int i = r - q0;
  const int pos = i + lk - lq;
  const int hi = causal ? min(pos, lk - 1) : lk - 1;
  const int lo = window > 0 ? max(0, pos - window + 1) : 0;
  const int kvh = h / group;

  float qf[NPL], acc[NPL];
  const T* qp = q + (long long)r * q_sr + (long long)h * q_sh;
#pragma unroll
  for (int e = 0; e < NPL; e++) {
    const int d = lane + 32 * e;
    qf[e] = d < D ? to_f(qp[d]) * scale_log2 : 0.f;
    acc[e] = 0.f;
  }
  float m = neg_inf(), l = 0.f;
  const T* kb = k + (long long)k0 * k_sr + (long long)kvh * k_sh;
  const T* vb = v + (long long)k0 * v_sr + (long long)kvh * v_sh;
  for (int j0 = lo; j0 <= hi; j0 += U) {
    float sc[U], vv[U][NPL];
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int j = j0 + u;
      const bool ok = j <= hi;
      float d = 0.f;
#pragma unroll
      for (int e = 0; e < NPL; e++) {
        const int dd = lane + 32 * e;
        const bool in = ok && dd < D;
        d = fmaf(qf[e], in ? to_f(kb[(long long)j * k_sr + dd]) : 0.f, d);
        vv[u][e] = in ? to_f(vb[(long long)j * v_sr + dd]) : 0.f;
      }
      sc[u] = d;
    }
#pragma unroll
    for (int o2 = 16; o2 >= 1; o2 >>= 1)
#pragma unroll
      for (int u = 0; u < U; u++) sc[u] += __shfl_xor_sync(0xffffffffu, sc[u], o2);
    float mx = m;
#pragma unroll
    for (int u = 0; u < U; u++) {
      if (j0 + u > hi) sc[u] = neg_inf();
      mx = fmaxf(mx, sc[u]);
    }
    const float alpha = exp2f(m - mx);  // mx is finite: key j0 is visible
    m = mx;
    float p[U], ps = 0.f;
#pragma unroll
    for (int u = 0; u < U; u++) {
      p[u] = exp2f(sc[u] - mx);
      ps += p[u];
    }
    l = l * alpha + ps;
#pragma unroll
    for (int e = 0; e < NPL; e++) {
      float a = acc[e] * alpha;
#pragma unroll
      for (int u = 0; u < U; u++) a = fmaf(p[u], vv[u][e], a);
      acc[e] = a;
    }
  }
#if FK_SINKS
  const float inv = sink_inv(l, m, sink_log2(sinks, h));
#else
  const float inv = l > 0.f ? 1.f / l : 0.f;
#endif
#pragma unroll
  for (int e = 0; e < NPL; e++)
    if (lane + 32 * e < D) st(orow + lane + 32 * e, acc[e] * inv);
}
