// FastKernels dense scaled-dot-product attention (torch.nn.functional.scaled_dot_product_attention, inference).
//
// fk_sdpa_dense (bf16 / fp16 in, fp32 accumulation): FlashAttention-2 style on mma.sync.m16n8k16, written to be general
// (correct for every supported call; its speed is the attention issue's). Grid (query tiles, heads, batch): a CTA owns
// BM = 16 * FK_WARPS query rows of one (batch, head); each warp 16 rows. K / V tiles of BN keys stream through shared
// memory with cp.async (16-byte, zero-filled past the end), double-buffered; S = Q K^T and O += P V on tensor cores
// (ldmatrix, V transposed), the online softmax in the log2 domain in registers, P re-packed from the S accumulators.
//
// Generality:
// - head dims D (q, k) and DV (v, out) any multiples of 8 up to 256: tiles are padded to multiples of 16 (pad chunks
//   zero-filled) with a row pitch of 16 extra bytes, so ldmatrix's 8 rows land in 8 distinct 16-byte bank groups at
//   every width (no swizzle, which needs 8-chunk rows);
// - every tensor addressed by (batch, head, row) strides (the last dim contiguous): permuted / sliced views, broadcast
//   (stride 0) batch or head dims, GQA by kv head = head / group;
// - causal top-left (query i sees keys 0..i, torch's is_causal, also when L != S);
// - FK_MASK 1: a boolean mask (bytes, 0 = masked), 2: an additive bias of type FK_MT, read per (row, key) through its 4
//   strides (any broadcast);
// - rows whose every key is masked (or S = 0) give zeros, as the float64 CPU reference and torch's math path.
// Q is kept in registers (FK_QREG=1) up to 128 dims; wider heads read its fragments from shared memory every tile so
// the fp32 O accumulators (DV / 2 a thread) fit without spills; the host takes BN = 32 there.
//
// NVRTC specialisation (the host prepends #defines): FK_T, FK_D, FK_DV, FK_WARPS, FK_BN, FK_QREG, FK_MASK, FK_MT.
// The variants below are compiled by tools/compile-cu.sh; the defaults compile standalone.
// compile-cu: -DFK_D=32 -DFK_DV=32 -DFK_MASK=1
// compile-cu: -DFK_D=64 -DFK_DV=64 -DFK_MASK=2 -DFK_T=__half -DFK_MT=__half
// compile-cu: -DFK_D=80 -DFK_DV=80 -DFK_MASK=2 -DFK_MT=float
// compile-cu: -DFK_D=96 -DFK_DV=96
// compile-cu: -DFK_D=192 -DFK_DV=192 -DFK_BN=32 -DFK_QREG=0 -DFK_MASK=2 -DFK_MT=__nv_bfloat16
// compile-cu: -DFK_D=256 -DFK_DV=256 -DFK_BN=32 -DFK_QREG=0 -DFK_MASK=1
// compile-cu: -DFK_D=256 -DFK_DV=256 -DFK_BN=32 -DFK_QREG=0 -DFK_MASK=2 -DFK_MT=float -DFK_T=__half
// compile-cu: -DFK_D=128 -DFK_DV=64 -DFK_WARPS=1 -DFK_MASK=2 -DFK_MT=float
// compile-cu: -DFK_D=40 -DFK_DV=72 -DFK_WARPS=1
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#ifndef FK_T
#define FK_T __nv_bfloat16
#endif
#ifndef FK_D
#define FK_D 128
#endif
#ifndef FK_DV
#define FK_DV FK_D
#endif
#ifndef FK_WARPS
#define FK_WARPS 4
#endif
#ifndef FK_BN
#define FK_BN 64
#endif
#ifndef FK_QREG
#define FK_QREG 1
#endif
#ifndef FK_MASK
#define FK_MASK 0
#endif
#ifndef FK_MT
#define FK_MT float
#endif
#if FK_MASK == 1  // a bool tensor: one byte an element
#undef FK_MT
#define FK_MT unsigned char
#endif

namespace fksdpa {

typedef FK_T T;
typedef FK_MT MT;
typedef unsigned int u32;
constexpr int D = FK_D;
constexpr int DV = FK_DV;
constexpr int DP = (D + 15) / 16 * 16;    // head dims padded to the mma's k / n granularity
constexpr int DVP = (DV + 15) / 16 * 16;
constexpr int QP = DP + 8;                // row pitches (elements): 16 bytes past the row, no bank conflicts
constexpr int VP = DVP + 8;
constexpr int NW = FK_WARPS;
constexpr int NT = NW * 32;
constexpr int BM = 16 * NW;  // query rows per CTA
constexpr int BN = FK_BN;    // keys per tile
static_assert(D % 8 == 0 && DV % 8 == 0 && D >= 8 && DV >= 8 && D <= 256 && DV <= 256, "head dims: multiples of 8 in [8, 256]");
static_assert(BN % 16 == 0, "BN: a multiple of 16");

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }
__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }

#include "fk_mma.cuh"
#include "fk_online_softmax.cuh"

// Rows [row0, row0 + ROWS) of a row-major matrix (row stride rs elements, WIDTH valid elements a row) into a tile of
// pitch PITCH; rows >= n and the pad chunks past WIDTH are zero-filled.
template <int ROWS, int WIDTH, int PITCH>
__device__ __forceinline__ void load_tile(T* tile, const T* base, long long rs, int row0, int n, int tid) {
  constexpr int CPR = (PITCH - 8) / 8;  // 16-byte chunks a padded row
#pragma unroll
  for (int c = tid; c < ROWS * CPR; c += NT) {
    const int r = c / CPR;
    const int ch = c % CPR;
    const bool ok = row0 + r < n && ch < WIDTH / 8;
    const T* src = ok ? base + (long long)(row0 + r) * rs + ch * 8 : base;
    cp_async16(smem_u32(tile + r * PITCH + ch * 8), src, ok ? 16 : 0);
  }
}

// The A fragment of Q's dims 16 kc .. 16 kc + 15 for this warp's 16 rows.
__device__ __forceinline__ void load_qa(const T* sQ, int warp, int lane, int kc, u32 (&a)[4]) {
  const int r = warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
  ldsm_x4(smem_u32(sQ + r * QP + (2 * kc + (lane >> 4)) * 8), a[0], a[1], a[2], a[3]);
}

// This thread holds rows rA and rA + 8 of the warp's 16 (the mma accumulator layout): s[j][0..1] are row A's keys
// n + 8 j + 2 t4 and + 1, s[j][2..3] row B's; o[j] likewise over the value dims.
struct Rows {
  int iA, iB;          // query indices (may be >= L: computed, never stored, their mask never read)
  int hiA, hiB;        // last key each row sees
  const MT* mA;        // mask / bias row pointers (FK_MASK only)
  const MT* mB;
};

// One key tile's online-softmax step: scale to the log2 domain, add the bias or apply the mask, mask keys past each
// row's end (unless the tile is inside every row's range: `full`), update the running maxima and this thread's partial
// sums, leave P = exp2(S - max) in s and the factors O is to be rescaled by in alpha.
__device__ __forceinline__ void online_softmax(float (&s)[BN / 8][4], const Rows& rw, bool full, int n, int t4, int L, long long m_sc,
                                               float scale_log2, float& mA, float& mB, float& lA, float& lB, float& alphaA,
                                               float& alphaB) {
  float mxA = mA, mxB = mB;
#pragma unroll
  for (int j = 0; j < BN / 8; j++) {
#pragma unroll
    for (int c = 0; c < 4; c++) {
      const bool rowB = c >= 2;
      const int key = n + 8 * j + 2 * t4 + (c & 1);
      float x = s[j][c] * scale_log2;
      bool ok = full || key <= (rowB ? rw.hiB : rw.hiA);
#if FK_MASK
      const int i = rowB ? rw.iB : rw.iA;
      if (ok && i < L) {
        const MT mv = (rowB ? rw.mB : rw.mA)[(long long)key * m_sc];
#if FK_MASK == 1
        ok = mv != 0;
#else
        x += to_f(mv) * 1.4426950408889634f;  // the bias in the log2 domain
#endif
      }
#endif
      s[j][c] = ok ? x : neg_inf();
    }
    mxA = fmaxf(mxA, fmaxf(s[j][0], s[j][1]));
    mxB = fmaxf(mxB, fmaxf(s[j][2], s[j][3]));
  }
  softmax_update(s, mxA, mxB, mA, mB, lA, lB, alphaA, alphaB);
}

}  // namespace fksdpa

using namespace fksdpa;

extern "C" __global__ void __launch_bounds__(FK_WARPS * 32) fk_sdpa_dense(
    FK_T* __restrict__ out, long long o_sb, long long o_sh, long long o_sr,
    const FK_T* __restrict__ q, long long q_sb, long long q_sh, long long q_sr,
    const FK_T* __restrict__ k, long long k_sb, long long k_sh, long long k_sr,
    const FK_T* __restrict__ v, long long v_sb, long long v_sh, long long v_sr,
    const FK_MT* __restrict__ mask, long long m_sb, long long m_sh, long long m_sr, long long m_sc,
    int L, int S, int group, int causal, float scale_log2) {
  extern __shared__ __align__(128) unsigned char fk_smem[];
  T* sQ = reinterpret_cast<T*>(fk_smem);
  T* sK = sQ + BM * QP;      // 2 stages
  T* sV = sK + 2 * BN * QP;  // 2 stages

  const int tid = threadIdx.x;
  const int warp = tid >> 5;
  const int lane = tid & 31;
  const int h = blockIdx.y;
  const int b = blockIdx.z;
  const int m0 = (gridDim.x - 1 - blockIdx.x) * BM;  // last tiles first: under causal they see the most keys
  const int m_last = min(m0 + BM, L) - 1;
  // keys [0, kend] are seen by some row of the tile
  const int kend = causal ? min(m_last, S - 1) : S - 1;
  const int n_tiles = kend >= 0 ? kend / BN + 1 : 0;
  const int hi_first = causal ? min(m0, S - 1) : S - 1;  // every row of the tile sees keys [0, hi_first]

  const T* qh = q + (long long)b * q_sb + (long long)h * q_sh;
  const int kvh = h / group;
  const T* kh = k + (long long)b * k_sb + (long long)kvh * k_sh;
  const T* vh = v + (long long)b * v_sb + (long long)kvh * v_sh;

  load_tile<BM, D, QP>(sQ, qh, q_sr, m0, L, tid);
  if (n_tiles > 0) {
    load_tile<BN, D, QP>(sK, kh, k_sr, 0, S, tid);
    load_tile<BN, DV, VP>(sV, vh, v_sr, 0, S, tid);
  }
  cp_async_commit();

  const int g = lane >> 2;  // row within the 8-row half of the fragment
  const int t4 = lane & 3;  // column pair
  Rows rw;
  rw.iA = m0 + warp * 16 + g;
  rw.iB = rw.iA + 8;
  rw.hiA = causal ? min(rw.iA, S - 1) : S - 1;
  rw.hiB = causal ? min(rw.iB, S - 1) : S - 1;
  rw.mA = rw.mB = nullptr;
#if FK_MASK
  const MT* mh = mask + (long long)b * m_sb + (long long)h * m_sh;
  rw.mA = mh + (long long)rw.iA * m_sr;
  rw.mB = mh + (long long)rw.iB * m_sr;
#endif

#if FK_QREG
  u32 qa[DP / 16][4];
#endif
  float o[DVP / 8][4];
#pragma unroll
  for (int j = 0; j < DVP / 8; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
  float mA = neg_inf(), mB = neg_inf(), lA = 0.f, lB = 0.f;

  for (int it = 0; it < n_tiles; it++) {
    const int stage = it & 1;
    const int n = it * BN;
    if (it + 1 < n_tiles) {
      load_tile<BN, D, QP>(sK + (stage ^ 1) * BN * QP, kh, k_sr, n + BN, S, tid);
      load_tile<BN, DV, VP>(sV + (stage ^ 1) * BN * VP, vh, v_sr, n + BN, S, tid);
    }
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();

#if FK_QREG
    if (it == 0) {
#pragma unroll
      for (int kc = 0; kc < DP / 16; kc++) load_qa(sQ, warp, lane, kc, qa[kc]);
    }
#endif

    // S = Q K^T: 16 rows x BN keys a warp.
    const T* sKs = sK + stage * BN * QP;
    float s[BN / 8][4];
#pragma unroll
    for (int j = 0; j < BN / 8; j++) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
#pragma unroll
    for (int kc = 0; kc < DP / 16; kc++) {
#if FK_QREG
      const u32(&a)[4] = qa[kc];
#else
      u32 a[4];
      load_qa(sQ, warp, lane, kc, a);
#endif
#pragma unroll
      for (int jj = 0; jj < BN / 16; jj++) {
        // keys 16 jj .. + 7 and + 8 .. + 15, dims 16 kc .. + 7 and + 8 .. + 15: the B fragments of two n-tiles
        u32 b0, b1, b2, b3;
        const int r = 16 * jj + (lane & 7) + ((lane >> 4) << 3);
        ldsm_x4(smem_u32(sKs + r * QP + (2 * kc + ((lane >> 3) & 1)) * 8), b0, b1, b2, b3);
        Mma<T>::mma(s[2 * jj], a, b0, b1);
        Mma<T>::mma(s[2 * jj + 1], a, b2, b3);
      }
    }

    const bool full = n + BN - 1 <= hi_first;
    float alphaA, alphaB;
    online_softmax(s, rw, full, n, t4, L, m_sc, scale_log2, mA, mB, lA, lB, alphaA, alphaB);
#pragma unroll
    for (int j = 0; j < DVP / 8; j++) {
      o[j][0] *= alphaA;
      o[j][1] *= alphaA;
      o[j][2] *= alphaB;
      o[j][3] *= alphaB;
    }

    // O += P V: P re-packed from the S accumulators as A fragments, V read transposed.
    const T* sVs = sV + stage * BN * VP;
#pragma unroll
    for (int kk = 0; kk < BN / 16; kk++) {
      u32 pa[4];
      pack_p(s, kk, pa);
#pragma unroll
      for (int dp = 0; dp < DVP / 16; dp++) {
        u32 b0, b1, b2, b3;
        const int r = 16 * kk + (lane & 7) + ((lane >> 3) & 1) * 8;
        ldsm_x4_t(smem_u32(sVs + r * VP + (2 * dp + (lane >> 4)) * 8), b0, b1, b2, b3);
        Mma<T>::mma(o[2 * dp], pa, b0, b1);
        Mma<T>::mma(o[2 * dp + 1], pa, b2, b3);
      }
    }
    __syncthreads();  // the stage is refilled by the next iteration's copies
  }
  cp_async_wait<0>();

  // O / l (the quad's partial sums added); rows that saw no key (l = 0) are zeros; rows >= L are not written.
  lA = quad_sum(lA);
  lB = quad_sum(lB);
  const float invA = lA > 0.f ? 1.f / lA : 0.f;
  const float invB = lB > 0.f ? 1.f / lB : 0.f;
  T* oA = out + (long long)b * o_sb + (long long)h * o_sh + (long long)rw.iA * o_sr + 2 * t4;
  T* oB = oA + 8 * o_sr;
#pragma unroll
  for (int j = 0; j < DVP / 8; j++) {
    if (8 * j >= DV) continue;  // the pad columns
    if (rw.iA < L) *reinterpret_cast<u32*>(oA + 8 * j) = Mma<T>::pack(o[j][0] * invA, o[j][1] * invA);
    if (rw.iB < L) *reinterpret_cast<u32*>(oB + 8 * j) = Mma<T>::pack(o[j][2] * invB, o[j][3] * invB);
  }
}
