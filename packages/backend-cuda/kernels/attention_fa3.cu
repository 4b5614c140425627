// FastKernels varlen prefill attention, FlashAttention-3 style (sm_90a, bf16 / fp16, head dim 128 or 64): issue #28.
// flash_attn_varlen_func semantics as fk_varlen_prefill_wgmma (attention_prefill.cu): [T, H, D] q / k / v (any 16-byte
// row and head strides: the tensor maps carry them), cu_seqlens, GQA, bottom-right causal or not, a left sliding window,
// output [Tq, nQ, D] through a row and a head stride (elements; packed: nQ D and D, dense SDPA's [nQ, Tq, D]: D and
// Tq D, written in place), optionally the rows' LSE.
// The prefill route on sm_90a (src/ops/attention/prefill-fa3.ts; attention.prefillFa3 in the tuning turns it off): on an
// H100 1.65 to 2.6x fk_varlen_prefill_wgmma / the mma.sync kernel (bench/labs/attention-fa3/README.md, the decision).
//
// One CTA per (query head, tile of BM = 128 query rows of one sequence), 384 threads in three warpgroups:
//   - warpgroup 0, the producer (setmaxnreg down to 24 registers): one thread issues every copy. Q's tile once, then
//     each BN = 128-key tile of K and of V into a STAGES-deep ring in shared memory, by TMA (cp.async.bulk.tensor with
//     a 3-D tensor map per tensor over [T, heads, D]: box 64 columns x 1 head x rows, 128-byte swizzle, which is the
//     layout wgmma's descriptors read, so no thread touches the data). K and V have their own "full" mbarriers (the
//     TMA completes their byte counts) and "empty" mbarriers (the consumer warps hand a stage back).
//     Why tensor maps and not 1-D cp.async.bulk per row: the swizzled layout places each 16-byte chunk of a row apart,
//     which only the tensor form writes; an unswizzled layout would cost wgmma bank conflicts.
//   - warpgroups 1 and 2, the consumers (setmaxnreg up to 240): each owns 64 query rows. S = Q K^T is wgmma with both
//     operands in shared memory (m64n128k16), the online softmax runs on the S accumulators in registers (log2 domain),
//     P is packed to 16-bit in registers and O += P V is wgmma with A from registers. Two overlaps hide the softmax:
//     - ping-pong between the consumers: named barriers hand the tensor cores back and forth, so one warpgroup issues
//       its GEMMs while the other does its softmax (warpgroup 1 goes first);
//     - within a warpgroup: S of tile j is issued together with P V of tile j - 1, and the softmax of S_j runs while
//       that P V is still in flight.
//   Masks are applied only on tiles that need them (the causal diagonal, the window edge, the sequence end); tiles
//   above the diagonal are never loaded. Both consumers walk the CTA's whole key-tile list (the barrier hand-offs stay
//   balanced); a tile a warpgroup's rows do not see is fully masked and adds nothing.
//   Output: O / l staged in the warpgroup's Q tile in shared memory (swizzled: conflict-free), then 16-byte rows to
//   global at out + row out_row_stride + head out_head_stride (rows past the sequence end are not written; the strides
//   are read only there, after the main loop). Rows that see no key are zeros (LSE -inf).
//
// FK_SINKS=1 (gpt-oss's learned sinks): a last parameter, one float logit per query head (natural-log units, not scaled
// by the softmax scale), joins every row's softmax denominator with no value, as in attention_prefill.cu (the same
// parameter convention: declared only in that build, so the default build is unchanged; the host always passes it).
// At the end of a row with max m and sum l (scaled log2 domain) and s2 = sink log2(e), M = max(m, s2): O is scaled by
// 2^(m - M) / (l 2^(m - M) + 2^(s2 - M)), and the LSE is that denominator's (natural) log. A row that sees no key is
// zeros with LSE -inf, as without sinks.
//
// Loads through a tensor map never fault at the end of a sequence: rows past the tensor's end arrive as zeros, rows of
// the next sequence are masked (keys) or not stored (queries).
//
// Grid (nQ, ceil(Tq / BM) + B): the tile count is an upper bound found on the device from cu_seqlens_q (no host sync);
// spare CTAs zero the rows no sequence covers (not their LSE). Dynamic shared memory: FA3_SMEM_BYTES.
// Host: tensor maps from cuTensorMapEncodeTiled (bf16 / fp16, 3-D {D, heads, T}, strides {head, row} in bytes, box
// {64, 1, BM / 2} for Q and {64, 1, BN} for K and V, CU_TENSOR_MAP_SWIZZLE_128B, zero OOB fill); see the lab and
// prefill-fa3.ts (fa3TensorMapSpec), which encodes them per launch through the addon's tensorMapEncodeTiled.
//
// NVRTC / nvcc specialisation: -DFK_T=<element> (bf16 default, __half), -DFK_D=<head dim> (128 default, 64),
// [-DFK_SINKS=1].
// compile-cu: -DFK_T=__half
// compile-cu: -DFK_D=64
// compile-cu: -DFK_T=__half -DFK_D=64
// compile-cu: -DFK_SINKS=1
// compile-cu: -DFK_SINKS=1 -DFK_T=__half -DFK_D=64
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "fk_mbarrier.cuh"
#include "fk_tma.cuh"
#include "fk_varlen_tiles.cuh"
#include "fk_wgmma_m64.cuh"

#ifndef FK_T
#define FK_T __nv_bfloat16
#endif
#ifndef FK_D
#define FK_D 128
#endif
#ifndef FK_SINKS
#define FK_SINKS 0  // 1: the per-head sink logits join the softmax denominator (see above)
#endif

namespace fkfa3 {

typedef FK_T T;
typedef unsigned int u32;
typedef unsigned long long u64;

constexpr int D = FK_D;         // head dim: 128, or 64
static_assert(D == 64 || D == 128, "head dim 64 or 128");
constexpr int D_BLOCKS = D / 64;  // 64-column (128-byte) blocks of a row: TMA boxes and swizzle atoms
constexpr int O_REGS = D / 2;     // O accumulator floats a thread (m64nD)
constexpr int BM = 128;         // query rows a CTA
constexpr int WG_ROWS = 64;     // query rows a consumer warpgroup
constexpr int BN = 128;         // keys a tile
constexpr int STAGES = 2;       // K / V ring depth (head dim 128: 2 x 64 KB + Q's 32 KB, one CTA an SM)
constexpr int THREADS = 384;    // producer warpgroup + 2 consumer warpgroups
constexpr int PRODUCER_REGS = 24;
constexpr int CONSUMER_REGS = 240;  // 24 x 128 + 240 x 256 <= 64 K registers

constexpr u32 Q_WG_BYTES = WG_ROWS * D * 2;    // one consumer's Q: D_BLOCKS 64-column blocks of 64 rows x 128 B
constexpr u32 Q_BLOCK_BYTES = WG_ROWS * 128;
constexpr u32 KV_BYTES = BN * D * 2;           // one K or V tile: D_BLOCKS 64-column blocks of 128 rows x 128 B
constexpr u32 KV_BLOCK_BYTES = BN * 128;
// Shared memory from the 1024-byte-aligned base: Q (both consumers), K stages, V stages, then the mbarriers.
constexpr u32 OFF_Q = 0;
constexpr u32 OFF_K = OFF_Q + 2 * Q_WG_BYTES;
constexpr u32 OFF_V = OFF_K + STAGES * KV_BYTES;
constexpr u32 OFF_BAR = OFF_V + STAGES * KV_BYTES;
constexpr int NUM_BARS = 1 + 4 * STAGES;  // q_full, k_full[], v_full[], k_empty[], v_empty[]
constexpr u32 FA3_SMEM_BYTES = OFF_BAR + NUM_BARS * 8 + 1024;  // + room to align the base
static_assert(FA3_SMEM_BYTES <= 227 * 1024, "one CTA an SM: the opt-in shared-memory limit of sm_90");

// Named barrier ids: 1 + c, consumer c's turn at the tensor cores; 3 + c, consumer c's own warpgroup sync.
constexpr u32 BAR_TURN = 1;
constexpr u32 BAR_WG = 3;

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }
// 2^x on the special-function unit (ex2.approx: 2 ulp, flushes denormals; exp2(-inf) = 0).
__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
// Two floats as a packed pair of T (low half = first): a P fragment register, or two output elements.
__device__ __forceinline__ u32 pack(float lo, float hi) { return fkwg::pack2<T>(lo, hi); }
__device__ __forceinline__ u32 smem_u32(const void* p) { return (u32)__cvta_generic_to_shared(p); }

// The mbarriers, by shared address.
struct Bars {
  u32 base;
  __device__ __forceinline__ u32 q_full() const { return base; }
  __device__ __forceinline__ u32 k_full(int s) const { return base + 8 * (1 + s); }
  __device__ __forceinline__ u32 v_full(int s) const { return base + 8 * (1 + STAGES + s); }
  __device__ __forceinline__ u32 k_empty(int s) const { return base + 8 * (1 + 2 * STAGES + s); }
  __device__ __forceinline__ u32 v_empty(int s) const { return base + 8 * (1 + 3 * STAGES + s); }
};

// The producer's thread: Q's tile once, then K and V of every key tile through the ring. A stage is refilled once both
// consumers handed it back (its empty barrier's previous phase completed).
__device__ __forceinline__ void produce(const FkTensorMap* tm_q, const FkTensorMap* tm_k, const FkTensorMap* tm_v, u32 sm, const Bars& bars,
                                        int q_row, int h, int kvh, int k_row, int n_tiles) {
  fktma::prefetch_map(tm_q);
  fktma::prefetch_map(tm_k);
  fktma::prefetch_map(tm_v);
  fkbar::arrive_expect_tx(bars.q_full(), 2 * Q_WG_BYTES);
#pragma unroll
  for (int half = 0; half < 2; ++half)
#pragma unroll
    for (int blk = 0; blk < D_BLOCKS; ++blk)
      fktma::load_3d(sm + OFF_Q + half * Q_WG_BYTES + blk * Q_BLOCK_BYTES, tm_q, bars.q_full(), 64 * blk, h, q_row + WG_ROWS * half);
  for (int it = 0; it < n_tiles; ++it) {
    const int st = it % STAGES;
    const u32 reuse_parity = ((it / STAGES) + 1) & 1;  // the phase the consumers completed when they released it last
    const int row = k_row + it * BN;
    if (it >= STAGES) fkbar::wait(bars.k_empty(st), reuse_parity);
    fkbar::arrive_expect_tx(bars.k_full(st), KV_BYTES);
#pragma unroll
    for (int blk = 0; blk < D_BLOCKS; ++blk) fktma::load_3d(sm + OFF_K + st * KV_BYTES + blk * KV_BLOCK_BYTES, tm_k, bars.k_full(st), 64 * blk, kvh, row);
    if (it >= STAGES) fkbar::wait(bars.v_empty(st), reuse_parity);
    fkbar::arrive_expect_tx(bars.v_full(st), KV_BYTES);
#pragma unroll
    for (int blk = 0; blk < D_BLOCKS; ++blk) fktma::load_3d(sm + OFF_V + st * KV_BYTES + blk * KV_BLOCK_BYTES, tm_v, bars.v_full(st), 64 * blk, kvh, row);
  }
}

// A consumer warp hands a stage back (one arrival a warp; the barriers expect 8, every warp of both consumers).
__device__ __forceinline__ void release(u32 bar, int lane) {
  __syncwarp();
  if (lane == 0) fkbar::arrive(bar);
}

// S = Q K^T issued (not waited for): D / 16 steps of 16 along the head dim, 32 B a step inside a 64-column block.
__device__ __forceinline__ void issue_qk(float (&s)[64], u32 q, u32 k) {
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks)
    fkwg::M64N128<T>::ss(s, fkwg::desc(q + (ks >> 2) * Q_BLOCK_BYTES + (ks & 3) * 32, 16, 1024),
                         fkwg::desc(k + (ks >> 2) * KV_BLOCK_BYTES + (ks & 3) * 32, 16, 1024), ks);
}
// The P V instruction for the head dim: m64nDk16.
template <int DD> struct PvMma;
template <> struct PvMma<128> {
  static __device__ __forceinline__ void rs(float (&o)[64], const u32 (&a)[4], u64 dv) { fkwg::M64N128<T>::rs(o, a, dv); }
};
template <> struct PvMma<64> {
  static __device__ __forceinline__ void rs(float (&o)[32], const u32 (&a)[4], u64 dv) { fkwg::M64N64<T>::rs(o, a, dv); }
};
// O += P V issued (not waited for): BN / 16 steps of 16 keys (16 rows of 128 B), V N-major: the next 64 columns a
// block on (leading offset), the next 8 keys an atom on (stride offset).
__device__ __forceinline__ void issue_pv(float (&o)[O_REGS], const u32 (&pa)[BN / 16][4], u32 v) {
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk) {
    PvMma<D>::rs(o, pa[kk], fkwg::desc(v + kk * 16 * 128, KV_BLOCK_BYTES, 1024));
  }
}

#if FK_SINKS
// The factor that turns a row's unnormalised output (sum l > 0, max m, scaled log2 domain) into its output with the
// sink s2 (log2 domain) in the denominator: 2^(m - M) / (l 2^(m - M) + 2^(s2 - M)), M = max(m, s2) (no overflow
// whichever is larger). The denominator's log2 relative to m goes to lse2 (for the LSE).
__device__ __forceinline__ float sink_inv(float l, float m, float s2, float& lse2) {
  const float mx = fmaxf(m, s2);
  const float r = ex2(m - mx);
  const float den = fmaf(l, r, ex2(s2 - mx));
  lse2 = mx + __log2f(den);
  return r / den;
}
#endif

// A thread's two query rows (A and B = A + 8) by the accumulator layout: the keys each sees and its softmax state (max
// m in the scaled log2 domain, this thread's partial sum l; the quad's four partials are added at the end).
struct Rows {
  int loA, hiA, loB, hiB;
  float mA, mB, lA, lB;
};

// The online-softmax step of one key tile n: mask the keys outside each row's range unless the tile is inside every
// row's range (full), update the maxima and sums, leave P = 2^(S scale - m) in s, and the factors O is to be rescaled
// by in alphaA / alphaB. A row with no key so far keeps m = -inf and P = 0.
__device__ __forceinline__ void softmax_tile(float (&s)[64], bool full, int n, int t4, float scale_log2, Rows& r, float& alphaA, float& alphaB) {
  if (!full) {
#pragma unroll
    for (int j = 0; j < BN / 8; ++j)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int key = n + 8 * j + 2 * t4 + (c & 1);
        const bool ok = c < 2 ? (key >= r.loA && key <= r.hiA) : (key >= r.loB && key <= r.hiB);
        if (!ok) s[4 * j + c] = neg_inf();
      }
  }
  float mxA = neg_inf(), mxB = neg_inf();
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
    mxA = fmaxf(mxA, fmaxf(s[4 * j], s[4 * j + 1]));
    mxB = fmaxf(mxB, fmaxf(s[4 * j + 2], s[4 * j + 3]));
  }
  mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, 1));
  mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, 2));
  mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, 1));
  mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, 2));
  const float newA = fmaxf(r.mA, mxA * scale_log2), newB = fmaxf(r.mB, mxB * scale_log2);
  const float bA = newA == neg_inf() ? 0.f : newA, bB = newB == neg_inf() ? 0.f : newB;
  alphaA = ex2(r.mA - bA);
  alphaB = ex2(r.mB - bB);
  r.mA = newA;
  r.mB = newB;
  float sumA = 0.f, sumB = 0.f;
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
    s[4 * j] = ex2(fmaf(s[4 * j], scale_log2, -bA));
    s[4 * j + 1] = ex2(fmaf(s[4 * j + 1], scale_log2, -bA));
    s[4 * j + 2] = ex2(fmaf(s[4 * j + 2], scale_log2, -bB));
    s[4 * j + 3] = ex2(fmaf(s[4 * j + 3], scale_log2, -bB));
    sumA += s[4 * j] + s[4 * j + 1];
    sumB += s[4 * j + 2] + s[4 * j + 3];
  }
  r.lA = r.lA * alphaA + sumA;
  r.lB = r.lB * alphaB + sumB;
}

__device__ __forceinline__ void rescale(float (&o)[O_REGS], float alphaA, float alphaB) {
#pragma unroll
  for (int j = 0; j < D / 8; ++j) {
    o[4 * j] *= alphaA;
    o[4 * j + 1] *= alphaA;
    o[4 * j + 2] *= alphaB;
    o[4 * j + 3] *= alphaB;
  }
}

// P (keys 16 kk .. 16 kk + 15) as m64k16 A fragments, straight from the S accumulators.
__device__ __forceinline__ void pack_p(const float (&s)[64], u32 (&pa)[BN / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk) {
    pa[kk][0] = pack(s[8 * kk], s[8 * kk + 1]);
    pa[kk][1] = pack(s[8 * kk + 2], s[8 * kk + 3]);
    pa[kk][2] = pack(s[8 * kk + 4], s[8 * kk + 5]);
    pa[kk][3] = pack(s[8 * kk + 6], s[8 * kk + 7]);
  }
}

// The warpgroup's output: O / l into its Q tile in shared memory (swizzled 16-byte chunks: a warp's 4-byte writes hit
// 32 banks), a warpgroup barrier, then 16-byte chunks of whole rows to global (rows i >= lq not written); the rows'
// LSE (natural log) too when lse is given.
__device__ __forceinline__ void store_out(T* __restrict__ out, float* __restrict__ lse, u32 stage, unsigned char* stage_ptr, const Rows& r,
                                          const float (&o)[O_REGS], int c, int ctid, int w0, int q0, int lq, int h, int total_q,
                                          long long out_row_stride, long long out_head_stride
#if FK_SINKS
                                          , float s2  // the head's sink logit times log2(e)
#endif
) {
  const int warp = ctid >> 5, lane = ctid & 31, g = lane >> 2, t4 = lane & 3;
  float lA = r.lA, lB = r.lB;
  lA += __shfl_xor_sync(0xffffffffu, lA, 1);
  lA += __shfl_xor_sync(0xffffffffu, lA, 2);
  lB += __shfl_xor_sync(0xffffffffu, lB, 1);
  lB += __shfl_xor_sync(0xffffffffu, lB, 2);
#if FK_SINKS
  // rows that saw no key (l == 0) stay zeros with LSE -inf, as without sinks
  float lseA = neg_inf(), lseB = neg_inf();
  const float invA = lA > 0.f ? sink_inv(lA, r.mA, s2, lseA) : 0.f, invB = lB > 0.f ? sink_inv(lB, r.mB, s2, lseB) : 0.f;
#else
  const float invA = lA > 0.f ? 1.f / lA : 0.f, invB = lB > 0.f ? 1.f / lB : 0.f;
#endif
  const int rA = 16 * warp + g, rB = rA + 8;
  // chunk j (columns 8 j .. 8 j + 7) of row rr in a [64 x 128] tile: the 128-byte-swizzled TMA layout
  auto chunk = [](int rr, int j) { return (u32)((j >> 3) * Q_BLOCK_BYTES + rr * 128 + (((j & 7) ^ (rr & 7)) << 4)); };
#pragma unroll
  for (int j = 0; j < D / 8; ++j) {
    asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(stage + chunk(rA, j) + 4 * t4), "r"(pack(o[4 * j] * invA, o[4 * j + 1] * invA)) : "memory");
    asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(stage + chunk(rB, j) + 4 * t4), "r"(pack(o[4 * j + 2] * invB, o[4 * j + 3] * invB)) : "memory");
  }
  if (lse != nullptr && t4 == 0) {
    constexpr float LN2 = 0.6931471805599453f;
#if FK_SINKS
    if (w0 + rA < lq) lse[(long long)h * total_q + q0 + w0 + rA] = lseA * LN2;
    if (w0 + rB < lq) lse[(long long)h * total_q + q0 + w0 + rB] = lseB * LN2;
#else
    if (w0 + rA < lq) lse[(long long)h * total_q + q0 + w0 + rA] = lA > 0.f ? (r.mA + __log2f(lA)) * LN2 : neg_inf();
    if (w0 + rB < lq) lse[(long long)h * total_q + q0 + w0 + rB] = lB > 0.f ? (r.mB + __log2f(lB)) * LN2 : neg_inf();
#endif
  }
  fkbar::named_sync(BAR_WG + c, 128);
  T* out_h = out + (long long)h * out_head_stride;
#pragma unroll 4
  for (int i = ctid; i < WG_ROWS * (D / 8); i += 128) {
    const int rr = i / (D / 8), j = i % (D / 8);
    if (w0 + rr >= lq) continue;
    const uint4 v = *reinterpret_cast<const uint4*>(stage_ptr + chunk(rr, j));
    *reinterpret_cast<uint4*>(out_h + (long long)(q0 + w0 + rr) * out_row_stride + 8 * j) = v;
  }
}


// The kernel's body (a function of the namespace, so its names win over any other kernel file's in the same build,
// e.g. the lab's, which includes attention_prefill.cu too). The tensor maps stay in parameter space: passed by address.
__device__ __forceinline__ void forward(const FkTensorMap* tm_q, const FkTensorMap* tm_k, const FkTensorMap* tm_v, T* __restrict__ out,
                                        float* __restrict__ lse, const int* __restrict__ cu_q, const int* __restrict__ cu_k, int num_seqs,
                                        int total_q, int group, int causal, int window, float scale_log2, long long out_row_stride,
                                        long long out_head_stride
#if FK_SINKS
                                        , const float* __restrict__ sinks
#endif
) {
  extern __shared__ __align__(1024) unsigned char fk_fa3_smem[];
  unsigned char* smp = fk_fa3_smem + ((1024 - (smem_u32(fk_fa3_smem) & 1023)) & 1023);
  const u32 sm = smem_u32(smp);
  const Bars bars{sm + OFF_BAR};

  const int h = blockIdx.x;
  const int tid = threadIdx.x, wgi = tid >> 7, lane = tid & 31;
  int seq, tile;
  if (!fkvar::find_tile<BM>(cu_q, num_seqs, blockIdx.y, lane, seq, tile)) {
    fkvar::zero_uncovered_rows<T, D, BM, THREADS>(out + (long long)h * out_head_stride, out_row_stride, cu_q, num_seqs, total_q, blockIdx.y - tile, tid);
    return;
  }
  const fkvar::SeqKeys sk = fkvar::seq_keys(cu_q, cu_k, seq, causal, window);
  const int m0 = tile * BM;
  int n_start, n_tiles;
  sk.tiles<BN>(m0, min(m0 + BM, sk.lq) - 1, n_start, n_tiles);

  if (tid == 0) {
    fkbar::init(bars.q_full(), 1);
    for (int s = 0; s < STAGES; ++s) {
      fkbar::init(bars.k_full(s), 1);
      fkbar::init(bars.v_full(s), 1);
      fkbar::init(bars.k_empty(s), 8);  // a warp of each consumer warpgroup
      fkbar::init(bars.v_empty(s), 8);
    }
    fkbar::init_fence();
  }
  __syncthreads();

  if (wgi == 0) {  // the producer
    fkwg::regs_dec<PRODUCER_REGS>();  // registers to the consumers: S, O and P fit without spills
    if (tid == 0 && n_tiles > 0) produce(tm_q, tm_k, tm_v, sm, bars, sk.q0 + m0, h, h / group, sk.k0 + n_start, n_tiles);
    return;
  }

  fkwg::regs_inc<CONSUMER_REGS>();
#if FK_SINKS
  const float s2 = sinks[h] * 1.4426950408889634f;  // loaded now, used at the end: its latency hides behind the loop
#endif
  const int c = wgi - 1, ctid = tid & 127, warp = ctid >> 5, g = lane >> 2, t4 = lane & 3;
  const int w0 = m0 + c * WG_ROWS;  // this warpgroup's first (sequence-local) query row
  Rows r;
  const int iA = w0 + 16 * warp + g, iB = iA + 8;
  r.loA = sk.lo(iA), r.hiA = sk.hi(iA), r.loB = sk.lo(iB), r.hiB = sk.hi(iB);
  r.mA = r.mB = neg_inf();
  r.lA = r.lB = 0.f;
  // a tile inside [lo(last row), hi(first row)] needs no mask (rows past the sequence end count: a stricter test)
  const int hi_first = sk.hi(w0), lo_last = sk.lo(w0 + WG_ROWS - 1);
  const u32 q_s = sm + OFF_Q + c * Q_WG_BYTES;

  float o[O_REGS];
#pragma unroll
  for (int i = 0; i < O_REGS; ++i) o[i] = 0.f;
  if (n_tiles > 0) {
    float s[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) s[i] = 0.f;
    u32 pa[BN / 16][4];
    float alphaA = 1.f, alphaB = 1.f;
    const u32 my_turn = BAR_TURN + c, their_turn = BAR_TURN + (c ^ 1);
    if (c == 1) fkbar::named_arrive(BAR_TURN, 256);  // consumer 0 goes first
    fkbar::wait(bars.q_full(), 0);
    // S of tile `it` issued on this consumer's turn at the tensor cores (after `before_handoff`: the previous tile's P V
    // when there is one), then the turn handed over; consumer 1 leaves out its last hand-off, so that every sync has
    // exactly one arrival.
    auto turn = [&](int it, auto&& before_handoff) {
      const int st = it % STAGES;
      fkbar::wait(bars.k_full(st), (it / STAGES) & 1);
      fkbar::named_sync(my_turn, 256);
      fkwg::fence();
      issue_qk(s, q_s, sm + OFF_K + st * KV_BYTES);
      fkwg::commit();
      before_handoff();
      if (!(c == 1 && it == n_tiles - 1)) fkbar::named_arrive(their_turn, 256);
    };
    auto softmax = [&](int it) {
      const int n = n_start + it * BN;
      const bool full = lo_last <= n && hi_first >= n + BN - 1;
      softmax_tile(s, full, n, t4, scale_log2, r, alphaA, alphaB);
    };
    // the first tile: S alone
    turn(0, [] {});
    fkwg::wait<0>();
    fkwg::pin(s);
    release(bars.k_empty(0), lane);
    softmax(0);
    pack_p(s, pa);
    // the others: S of this tile and P V of the previous one in flight together; the softmax overlaps the P V
    for (int it = 1; it < n_tiles; ++it) {
      const int st = it % STAGES, pst = (it - 1) % STAGES;
      turn(it, [&] {
        rescale(o, alphaA, alphaB);
        fkbar::wait(bars.v_full(pst), ((it - 1) / STAGES) & 1);
        fkwg::fence();
        issue_pv(o, pa, sm + OFF_V + pst * KV_BYTES);
        fkwg::commit();
      });
      fkwg::wait<1>();  // S landed (groups complete in order)
      fkwg::pin(s);
      release(bars.k_empty(st), lane);
      softmax(it);
      fkwg::wait<0>();  // P V landed: pa and the V stage are free
      fkwg::pin(o);
      release(bars.v_empty(pst), lane);
      pack_p(s, pa);
    }
    // the last tile's P V
    const int lst = (n_tiles - 1) % STAGES;
    rescale(o, alphaA, alphaB);
    fkbar::wait(bars.v_full(lst), ((n_tiles - 1) / STAGES) & 1);
    fkwg::fence();
    issue_pv(o, pa, sm + OFF_V + lst * KV_BYTES);
    fkwg::commit();
    fkwg::wait<0>();
    fkwg::pin(o);
    release(bars.v_empty(lst), lane);
  }
  // (with no key tile, Q was never loaded and its tile is free for the staging as well)
  store_out(out, lse, q_s, smp + OFF_Q + c * Q_WG_BYTES, r, o, c, ctid, w0, sk.q0, sk.lq, h, total_q, out_row_stride, out_head_stride
#if FK_SINKS
            , s2
#endif
  );
}

}  // namespace fkfa3

extern "C" __global__ void __launch_bounds__(fkfa3::THREADS, 1) fk_varlen_prefill_fa3(
    const __grid_constant__ FkTensorMap tm_q,  // q [Tq, nQ, D]: box {64, 1, 64}
    const __grid_constant__ FkTensorMap tm_k,  // k [Tk, nKv, D]: box {64, 1, 128}
    const __grid_constant__ FkTensorMap tm_v,  // v [Tk, nKv, D]: box {64, 1, 128}
    FK_T* __restrict__ out,                    // [Tq, nQ, D]: row r of head h at out + r out_row_stride + h out_head_stride
    float* __restrict__ lse,                   // [nQ, Tq] natural-log LSE of each row, or null
    const int* __restrict__ cu_q, const int* __restrict__ cu_k, int num_seqs, int total_q, int n_q_heads, int group, int causal,
    int window, float scale_log2,
    long long out_row_stride,   // elements, multiples of 8 (16-byte stores): packed nQ D
    long long out_head_stride   // packed D
#if FK_SINKS
    , const float* __restrict__ sinks  // [nQ] fp32; declared only with sinks (see FK_SINKS above)
#endif
    ) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  (void)n_q_heads;  // the grid's x; kept in the signature (the heads of a launch, as the other prefill kernels take it)
  fkfa3::forward(&tm_q, &tm_k, &tm_v, out, lse, cu_q, cu_k, num_seqs, total_q, group, causal, window, scale_log2, out_row_stride, out_head_stride
#if FK_SINKS
                 , sinks
#endif
  );
#endif
}
