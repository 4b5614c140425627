// FastKernels fused MoE GEMM for prefill on Hopper (sm_90a): the registry op fused_moe_gemm (vLLM's fused_moe_kernel
// semantics, as fused_moe.cu) on wgmma tensor cores fed by TMA (issue #31). bf16 / fp16 in, fp32 accumulation.
//
// Layout ("m-grouped contiguous"): moe_tile_rows.cu's fk_moe_gather_rows first copies the token rows of A into
// A_sorted [rows, K] in moe_align's sorted order (padding entries are zero rows), so every 128-row tile is one expert's
// contiguous rows and the GEMM loads them with plain TMA boxes (the Hopper TMA has no row gather). fk_fused_moe_wgmma
// then multiplies row tiles of BM = 128 entries by the tile's expert's weight W[e] ([E, N, K], K-major) and scatters
// each valid row to C[slot] ([slots, N]). Its routing arguments describe 128-row tiles: moe_align's own where the block
// size is a multiple of 128 (bs), else fk_moe_tile_map's (blocks of 16 / 32 / 64 packed into one-expert tiles; bs 128).
//
// One CTA per (row tile, BN-column tile), 384 threads in three warpgroups:
//   - warpgroup 0, the producer (setmaxnreg down to 24 registers): one thread walks the k tiles (BK = 64: one
//     128-byte swizzle atom a row), loading A_sorted's [128 x 64] box and W[e]'s [BN x 64] box of each into a
//     STAGES-deep ring by TMA (3-D tensor maps: A {K, P, 1}, W {K, N, E}; 128-byte swizzle, which is the layout the
//     wgmma descriptors read). A "full" mbarrier a stage counts the bytes in; an "empty" one (8 arrivals: every
//     consumer warp) hands the stage back.
//   - warpgroups 1 and 2, the consumers (setmaxnreg up to 240): each owns 64 rows of the tile and issues m64nBNk16
//     wgmmas with both operands K-major in shared memory (4 a k tile), keeping one k tile's group in flight: after
//     issuing tile kt it waits for tile kt - 1's group and releases that stage.
//   Epilogue: both consumers wait for each other (the ring is reused), each stages its 64 x BN rows in shared memory
//   (times topk_weights[slot] when mul, rounded once to T), then copies each valid row to C[slot] in 16-byte pieces.
//   Padding entries (sorted id >= slots) are not stored.
//
// Everything the routing decides is read on the device (no host sync: the launches can be captured in a CUDA graph):
// CTAs whose row tile starts at or past num_tokens_post_padded exit; a block whose expert is -1 (or >= E) writes zero
// rows for its slots (vLLM's expert_map, as fused_moe.cu). The host sizes the grid from shapes (the live-blocks bound of
// fused-moe-plan.ts) and orders it in groups of group_m row tiles over every column tile (fk_tile_order.cuh).
//
// Host requirements: K % 8 == 0 and N % 8 == 0 (16-byte rows for the tensor maps and the epilogue's stores), A / W / C
// rows 16-byte aligned, bs % 128 == 0 (a tile in one block). Tensor maps (cuTensorMapEncodeTiled, 128-byte swizzle, zero OOB fill):
//   A_sorted: 3-D {K, P, 1}, strides {K * 2, P * K * 2} bytes, box {64, 128, 1}
//   W:        3-D {K, N, E}, strides {stride_n * 2, stride_e * 2} bytes, box {64, BN, 1}
// Dynamic shared memory: MOE_WG_SMEM_BYTES (opt in: above 48 KiB).
//
// FK_MOE_WG_PERSISTENT=1 (a lab variant; the route does not launch it yet): a persistent grid (the host launches
// min(tiles, SMs) CTAs), each CTA walking tiles pid, pid + gridDim.x, ... of the same grouped order. The ring's phases
// run on across tiles (a k-tile counter), the consumers hand back every stage (the last of a tile too), and the
// epilogue stages its rows in a region of its own after the ring, so the producer loads the next tile's first stages
// while the consumers store the last one (the non-persistent grid pays a fresh prologue and an idle epilogue a tile).
// The ring is one stage shorter to make room (3 stages at BN 256, 5 at BN 128).
//
// NVRTC / nvcc specialisation: -DFK_T=<element> (bf16 default, __half), -DFK_MOE_WG_BN=<256 default, 128>,
// -DFK_MOE_WG_STAGES=<ring depth; default 4 at BN 256, 6 at BN 128; persistent 3 / 5>, -DFK_MOE_WG_PERSISTENT=<0, 1>.
// compile-cu: -DFK_T=__half
// compile-cu: -DFK_MOE_WG_BN=128
// compile-cu: -DFK_MOE_WG_PERSISTENT=1
// compile-cu: -DFK_MOE_WG_PERSISTENT=1 -DFK_MOE_WG_BN=128 -DFK_T=__half
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "fk_mbarrier.cuh"
#include "fk_tile_order.cuh"
#include "fk_tma.cuh"
#include "fk_wgmma_m64.cuh"
#include "fk_wgmma_n256.cuh"

#ifndef FK_T
#define FK_T __nv_bfloat16
#endif
#ifndef FK_MOE_WG_BN
#define FK_MOE_WG_BN 256
#endif
#ifndef FK_MOE_WG_PERSISTENT
#define FK_MOE_WG_PERSISTENT 0
#endif
#ifndef FK_MOE_WG_STAGES
#define FK_MOE_WG_STAGES (FK_MOE_WG_BN == 256 ? 4 - FK_MOE_WG_PERSISTENT : 6 - FK_MOE_WG_PERSISTENT)
#endif

namespace fkmoewg {

typedef FK_T T;
typedef unsigned int u32;
typedef unsigned long long u64;

constexpr int BM = 128;                // sorted entries a CTA (one expert: bs % BM == 0)
constexpr int WG_ROWS = 64;            // rows a consumer warpgroup
constexpr int BN = FK_MOE_WG_BN;       // output columns a CTA
constexpr int BK = 64;                 // k a stage: 64 elements = one 128-byte swizzle row
constexpr int STAGES = FK_MOE_WG_STAGES;
constexpr int THREADS = 384;           // producer warpgroup + 2 consumer warpgroups
constexpr int PRODUCER_REGS = 24;
constexpr int CONSUMER_REGS = 240;     // 24 x 128 + 240 x 256 <= 64 K registers
constexpr int ACC = BN / 2;            // accumulator floats a consumer thread (64 x BN over 128 threads)
static_assert(BN == 128 || BN == 256, "BN: 128 or 256 (one wgmma's width)");

constexpr u32 A_BYTES = BM * BK * 2;           // [128 x 64]: 16 atoms of 8 rows x 128 B
constexpr u32 A_WG_BYTES = WG_ROWS * BK * 2;   // a consumer's 64 rows of it
constexpr u32 W_BYTES = BN * BK * 2;           // [BN x 64]
constexpr u32 STAGE_BYTES = A_BYTES + W_BYTES;
constexpr bool PERSISTENT = FK_MOE_WG_PERSISTENT != 0;
// The epilogue's staging rows: BN elements + 16 bytes a row, so a quad's 8 rows of a store hit distinct banks. They
// reuse the ring (non-persistent: nothing is loaded after the last k tile), or follow it (persistent).
constexpr u32 OUT_PITCH = BN * 2 + 16;
constexpr u32 OFF_OUT = PERSISTENT ? STAGES * STAGE_BYTES : 0;
constexpr u32 OFF_BAR = PERSISTENT ? OFF_OUT + BM * OUT_PITCH : STAGES * STAGE_BYTES;
constexpr u32 MOE_WG_SMEM_BYTES = OFF_BAR + 2 * STAGES * 8 + 1024;  // + room to align the base to 1024
static_assert(MOE_WG_SMEM_BYTES <= 227 * 1024, "one CTA an SM: the opt-in shared-memory limit of sm_90");
static_assert(OFF_OUT + BM * OUT_PITCH <= OFF_BAR, "the output tile fits below the mbarriers");

// Named barrier ids: 1, both consumers (the ring is free for the epilogue); 2 + c, consumer c alone.
[[maybe_unused]] constexpr u32 BAR_CONSUMERS = 1;  // (not used by the persistent build)
constexpr u32 BAR_WG = 2;

__device__ __forceinline__ u32 smem_u32(const void* p) { return (u32)__cvta_generic_to_shared(p); }

// The m64nBNk16 product for the tile width: d = (acc ? d : 0) + A B^T, both K-major descriptors.
template <int W> struct Mma;
template <> struct Mma<256> {
  static __device__ __forceinline__ void ss(float (&d)[128], u64 da, u64 db, int acc) { fkwg::M64N256<T>::ss(d, da, db, acc); }
};
template <> struct Mma<128> {
  static __device__ __forceinline__ void ss(float (&d)[64], u64 da, u64 db, int acc) { fkwg::M64N128<T>::ss(d, da, db, acc); }
};

// The mbarriers, by shared address.
struct Bars {
  u32 base;
  __device__ __forceinline__ u32 full(int s) const { return base + 8 * s; }
  __device__ __forceinline__ u32 empty(int s) const { return base + 8 * (STAGES + s); }
};

// The producer's thread: A_sorted's and W[e]'s boxes of one tile's k tiles through the ring; it0 counts the k tiles the
// ring carried before (0 but on a persistent CTA's later tiles): k tile i goes to stage i % STAGES, its fill number
// i / STAGES being that stage's phase. A stage is refilled once every consumer warp handed it back (its empty
// barrier's previous phase completed).
__device__ __forceinline__ void produce(const FkTensorMap* tm_a, const FkTensorMap* tm_w, u32 sm, const Bars& bars, int row0, int n0, int e, int KT, u32 it0) {
  for (int kt = 0; kt < KT; ++kt) {
    const u32 i = it0 + kt;
    const u32 st = i % STAGES;
    if (i >= STAGES) fkbar::wait(bars.empty(st), ((i / STAGES) + 1) & 1);
    const u32 dst = sm + st * STAGE_BYTES;
    fkbar::arrive_expect_tx(bars.full(st), STAGE_BYTES);
    fktma::load_3d(dst, tm_a, bars.full(st), kt * BK, row0, 0);
    fktma::load_3d(dst + A_BYTES, tm_w, bars.full(st), kt * BK, n0, e);
  }
}

// A consumer warp hands a stage back (one arrival a warp; the empty barriers expect all 8 consumer warps).
__device__ __forceinline__ void release(const Bars& bars, u32 st, int lane) {
  __syncwarp();
  if (lane == 0) fkbar::arrive(bars.empty(st));
}

// A consumer's main loop over one tile: d = A[its 64 rows] W^T over every k tile (it0: as produce's). Tile kt's 4
// wgmmas (16 k each, 32 B apart inside the swizzled 128-byte rows) are issued, then tile kt - 1's group is waited for
// and its stage handed back, so one group is always in flight while the next stage's wait runs. A persistent CTA hands
// back the last stage too (the producer refills every stage); a one-tile CTA's producer never needs it.
__device__ __forceinline__ void consume(float (&d)[ACC], u32 sm, const Bars& bars, int wg, int lane, int KT, u32 it0) {
#pragma unroll
  for (int i = 0; i < ACC; ++i) d[i] = 0.f;
  for (int kt = 0; kt < KT; ++kt) {
    const u32 i = it0 + kt;
    const u32 st = i % STAGES;
    fkbar::wait(bars.full(st), (i / STAGES) & 1);
    const u32 a = sm + st * STAGE_BYTES + wg * A_WG_BYTES, w = sm + st * STAGE_BYTES + A_BYTES;
    fkwg::fence();
#pragma unroll
    for (int ks = 0; ks < BK / 16; ++ks) Mma<BN>::ss(d, fkwg::desc(a + ks * 32, 16, 1024), fkwg::desc(w + ks * 32, 16, 1024), 1);
    fkwg::commit();
    fkwg::wait<1>();
    if (kt > 0) release(bars, (i - 1) % STAGES, lane);
  }
  fkwg::wait<0>();
  fkwg::pin(d);
  if (PERSISTENT && KT > 0) release(bars, (it0 + KT - 1) % STAGES, lane);
}

// Consumer wg's rows to C: its accumulators (scaled by the routed weight when mul) rounded to T into shared memory at
// `stage` (rows 64 wg .., OUT_PITCH bytes apart), then each valid row copied to C[slot] in 16-byte pieces.
__device__ __forceinline__ void store_rows(const float (&d)[ACC], unsigned char* stage, T* __restrict__ c, const float* __restrict__ topk_weights,
                                           const int* __restrict__ sorted_token_ids, int row0, int n0, int N, int slots, int mul, int wg, int t) {
  const int w = t / 32, l = t % 32;
  const int r_lo = wg * WG_ROWS + 16 * w + l / 4;  // the accumulator layout: row r_lo (registers 4 i, 4 i + 1), r_lo + 8
  float f[2] = {1.f, 1.f};
  if (mul) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int s = sorted_token_ids[row0 + r_lo + 8 * h];
      f[h] = (s >= 0 && s < slots) ? topk_weights[s] : 0.f;
    }
  }
#pragma unroll
  for (int i = 0; i < ACC / 4; ++i) {
    const u32 col_bytes = (8 * i + 2 * (l % 4)) * 2;
#pragma unroll
    for (int h = 0; h < 2; ++h)
      *reinterpret_cast<u32*>(stage + (r_lo + 8 * h) * OUT_PITCH + col_bytes) = fkwg::pack2<T>(d[4 * i + 2 * h] * f[h], d[4 * i + 2 * h + 1] * f[h]);
  }
  fkbar::named_sync(BAR_WG + wg, 128);
  constexpr int CPR = BN / 8;           // 16-byte pieces a row
  constexpr int ROWS_PER_PASS = 128 / CPR;
  const int ch = t % CPR, n = n0 + 8 * ch;
#pragma unroll 4
  for (int r = wg * WG_ROWS + t / CPR; r < (wg + 1) * WG_ROWS; r += ROWS_PER_PASS) {
    const int s = sorted_token_ids[row0 + r];
    if (s < 0 || s >= slots || n >= N) continue;
    *reinterpret_cast<uint4*>(c + (long long)s * N + n) = *reinterpret_cast<const uint4*>(stage + r * OUT_PITCH + ch * 16);
  }
  if (PERSISTENT) fkbar::named_sync(BAR_WG + wg, 128);  // the rows are read before the next tile's are staged
}

// A non-local expert's tile (-1, or >= E): zero rows for its slots, as vLLM writes; threads `t` of `threads`.
__device__ __forceinline__ void zero_rows(T* __restrict__ c, const int* __restrict__ sorted_token_ids, int row0, int n0, int N, int slots, int t, int threads) {
  for (int i = t; i < BM * (BN / 8); i += threads) {
    const int r = i / (BN / 8), n = n0 + 8 * (i % (BN / 8));
    const int s = sorted_token_ids[row0 + r];
    if (s >= 0 && s < slots && n < N) *reinterpret_cast<uint4*>(c + (long long)s * N + n) = make_uint4(0, 0, 0, 0);
  }
}

// What a tile asks: nothing (it starts at or past the padded count), zero rows (a non-local expert), or the GEMM.
enum TileWork { TILE_NONE, TILE_ZERO, TILE_GEMM };
struct Tile {
  int row0, n0, e;
  TileWork work;
};
__device__ __forceinline__ Tile tile_at(int pid, int m_tiles, int n_tiles, int group_m, const int* __restrict__ expert_ids, int post, int bs, int E) {
  int pm, pn;
  fktile::tile_of(pid, m_tiles, n_tiles, group_m, pm, pn);
  Tile t{pm * BM, pn * BN, -1, TILE_NONE};
  if (t.row0 >= post) return t;
  t.e = expert_ids[t.row0 / bs];
  t.work = t.e < 0 || t.e >= E ? TILE_ZERO : TILE_GEMM;
  return t;
}

}  // namespace fkmoewg

extern "C" __global__ void __launch_bounds__(fkmoewg::THREADS, 1) fk_fused_moe_wgmma(
    const __grid_constant__ FkTensorMap tm_a, const __grid_constant__ FkTensorMap tm_w, FK_T* __restrict__ c,
    const float* __restrict__ topk_weights, const int* __restrict__ sorted_token_ids, const int* __restrict__ expert_ids,
    const int* __restrict__ num_tokens_post_padded, int N, int K, int E, int slots, int bs, int m_tiles, int n_tiles, int group_m, int mul) {
  using namespace fkmoewg;
  extern __shared__ __align__(1024) unsigned char fk_moe_wg_smem[];
  // the swizzled tiles need a 1024-byte-aligned base (the dynamic window's alignment is not guaranteed)
  const u32 raw = smem_u32(fk_moe_wg_smem);
  const u32 pad = ((raw + 1023) & ~1023u) - raw;
  unsigned char* base = fk_moe_wg_smem + pad;
  const u32 sm = raw + pad;

  const int tid = threadIdx.x;
  const int KT = (K + BK - 1) / BK;
  const int post = num_tokens_post_padded[0];
#if !FK_MOE_WG_PERSISTENT
  const Tile tile = tile_at(blockIdx.x, m_tiles, n_tiles, group_m, expert_ids, post, bs, E);
  if (tile.work == TILE_NONE) return;  // past the padded count: uniform over the CTA
  if (tile.work == TILE_ZERO) {
    zero_rows(c, sorted_token_ids, tile.row0, tile.n0, N, slots, tid, THREADS);
    return;
  }
#endif
  const Bars bars{sm + OFF_BAR};
  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      fkbar::init(bars.full(s), 1);
      fkbar::init(bars.empty(s), 8);  // every consumer warp
    }
    fkbar::init_fence();
  }
  __syncthreads();

  const int wg = tid / 128;
  if (wg == 0) {
    fkwg::regs_dec<PRODUCER_REGS>();
    if (tid == 0) {
      fktma::prefetch_map(&tm_a);
      fktma::prefetch_map(&tm_w);
#if FK_MOE_WG_PERSISTENT
      u32 it = 0;  // k tiles the ring carried
      for (int pid = blockIdx.x; pid < m_tiles * n_tiles; pid += gridDim.x) {
        const Tile tile = tile_at(pid, m_tiles, n_tiles, group_m, expert_ids, post, bs, E);
        if (tile.work != TILE_GEMM) continue;
        produce(&tm_a, &tm_w, sm, bars, tile.row0, tile.n0, tile.e, KT, it);
        it += KT;
      }
#else
      produce(&tm_a, &tm_w, sm, bars, tile.row0, tile.n0, tile.e, KT, 0);
#endif
    }
    return;
  }
  fkwg::regs_inc<CONSUMER_REGS>();
  const int cw = wg - 1, t = tid % 128;
  float d[ACC];
#if FK_MOE_WG_PERSISTENT
  u32 it = 0;  // as the producer's: both walk the same tiles and skip the same ones
  for (int pid = blockIdx.x; pid < m_tiles * n_tiles; pid += gridDim.x) {
    const Tile tile = tile_at(pid, m_tiles, n_tiles, group_m, expert_ids, post, bs, E);
    if (tile.work == TILE_NONE) continue;
    if (tile.work == TILE_ZERO) {
      zero_rows(c, sorted_token_ids, tile.row0, tile.n0, N, slots, tid - 128, 256);
      continue;
    }
    consume(d, sm, bars, cw, t % 32, KT, it);
    it += KT;
    store_rows(d, base + OFF_OUT, c, topk_weights, sorted_token_ids, tile.row0, tile.n0, N, slots, mul, cw, t);
  }
#else
  consume(d, sm, bars, cw, t % 32, KT, 0);
  fkbar::named_sync(BAR_CONSUMERS, 256);  // both consumers are done reading the ring: it becomes the output tile
  store_rows(d, base + OFF_OUT, c, topk_weights, sorted_token_ids, tile.row0, tile.n0, N, slots, mul, cw, t);
#endif
}
