// FastKernels fused MoE grouped GEMM: vLLM's fused_moe_kernel (the registry op fused_moe_gemm), bf16 / fp16 in, fp32
// accumulation on mma.sync.m16n8k16 tensor cores.
//
// The rows are the (token, k) slots moe_align sorted by expert and padded to blocks of `bs` entries (sorted_token_ids,
// one expert id per block in expert_ids, the padded count in num_tokens_post_padded). One launch covers every block:
// a CTA takes R consecutive sorted entries (R divides bs, so they share one expert) and FK_BN output columns, gathers the
// R token rows of A (row = slot / top_k) straight from global memory with cp.async, streams that expert's weight rows
// [FK_BN, K] beside them through an FK_STAGES-deep shared-memory ring of FK_BK-wide k tiles, and multiplies on tensor
// cores (fk_mma_warp_tile.cuh: ldmatrix; W is [N, K] row-major, which is the mma's column-major B). The epilogue multiplies by the routed
// weight (FK_MUL: topk_weights.flatten()[slot], fp32), rounds once and scatters each row to C[slot] ([M * top_k, N]).
//
// Everything the routing decides is read on the device (no host sync: the launch can be captured in a CUDA graph):
// CTAs whose entries start at or past num_tokens_post_padded exit, as do CTAs whose R entries are all padding; a block
// whose expert is -1 (or >= E) writes zero rows for its slots (vLLM's expert_map). The host sizes the grid from shapes
// alone (fused-moe-plan.ts: the most blocks a moe_align layout can have live) and orders it in groups of group_m row
// tiles over all column tiles (Triton's GROUP_SIZE_M), so CTAs sharing an expert's weight tiles run together.
//
// Requirements the host checks (else the op's decomposition runs): K % 8 == 0, A / W rows 16-byte aligned (pointers
// and row strides). C is contiguous [slots, N]; column pairs are stored packed where N is even.
// Rows past R, columns past N and k past K are zero-filled in shared memory, never read from global memory.
//
// NVRTC specialisation (the host prepends #defines): FK_T, FK_BM, FK_BN, FK_BK, FK_WM, FK_WN, FK_STAGES, FK_MUL.
// The tile configurations the planner can choose are listed below for tools/compile-cu.sh (and compiled with no spills
// by src/ops/moe/fused-moe-nvcc.test.ts); the defaults compile standalone.
// compile-cu: -DFK_BM=16 -DFK_BN=32 -DFK_BK=64 -DFK_WM=1 -DFK_WN=2 -DFK_STAGES=5 -DFK_MUL=1
// compile-cu: -DFK_BM=16 -DFK_BN=128 -DFK_BK=64 -DFK_WM=1 -DFK_WN=4 -DFK_STAGES=4 -DFK_T=__half
// compile-cu: -DFK_BM=32 -DFK_BN=128 -DFK_BK=64 -DFK_WM=2 -DFK_WN=2 -DFK_STAGES=4
// compile-cu: -DFK_BM=64 -DFK_BN=128 -DFK_BK=64 -DFK_WM=2 -DFK_WN=2 -DFK_STAGES=3 -DFK_MUL=1
// compile-cu: -DFK_BM=128 -DFK_BN=128 -DFK_BK=32 -DFK_WM=2 -DFK_WN=4 -DFK_STAGES=4
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#include "fk_tile_order.cuh"  // fktile::tile_of: the grouped launch order

#ifndef FK_T
#define FK_T __nv_bfloat16
#endif
#ifndef FK_BM
#define FK_BM 16
#endif
#ifndef FK_BN
#define FK_BN 64
#endif
#ifndef FK_BK
#define FK_BK 64
#endif
#ifndef FK_WM
#define FK_WM 1
#endif
#ifndef FK_WN
#define FK_WN 4
#endif
#ifndef FK_STAGES
#define FK_STAGES 5
#endif
#ifndef FK_MUL
#define FK_MUL 0
#endif

namespace fkmoe {

typedef FK_T T;
typedef unsigned int u32;

#include "fk_mma.cuh"
#include "fk_moe_gemm_tile.cuh"  // BM .. STAGES, the warp tile (MI x NI), the chunk loaders, the ring fill
#include "fk_mma_warp_tile.cuh"

constexpr int STAGE_ELEMS = (BM + BN) * PITCH;
static_assert(BK % 16 == 0 && STAGES >= 2, "BK: a multiple of 16; at least 2 stages");

}  // namespace fkmoe

extern "C" __global__ void __launch_bounds__(fkmoe::NT) fk_fused_moe(
    FK_T* __restrict__ c, const FK_T* __restrict__ a, const FK_T* __restrict__ b, const float* __restrict__ topk_weights,
    const int* __restrict__ sorted_token_ids, const int* __restrict__ expert_ids, const int* __restrict__ num_tokens_post_padded,
    int N, int K, int E, int top_k, int slots, int R, int bs, int m_tiles, int n_tiles, int group_m,
    long long stride_am, long long stride_be, long long stride_bn) {
  using namespace fkmoe;
  extern __shared__ __align__(16) unsigned char fk_smem[];
  __shared__ int s_slot[BM];
  T* smem = reinterpret_cast<T*>(fk_smem);

  int pm, pn;
  fktile::tile_of(blockIdx.x, m_tiles, n_tiles, group_m, pm, pn);
  const int row0 = pm * R;
  if (row0 >= num_tokens_post_padded[0]) return;  // past the padded count: uniform over the CTA
  const int n0 = pn * BN;
  const int tid = threadIdx.x;
  if (tid < BM) {
    const int s = tid < R ? sorted_token_ids[row0 + tid] : -1;
    s_slot[tid] = (s >= 0 && s < slots) ? s : -1;
  }
  const int e = expert_ids[row0 / bs];
  const bool any = __syncthreads_or(tid < BM && s_slot[tid] >= 0);
  if (!any) return;  // every entry is padding

  if (e < 0 || e >= E) {
    // a non-local expert (-1): zero rows for the block's slots, as vLLM writes
    for (int i = tid; i < BM * BN; i += NT) {
      const int r = i / BN, n = n0 + i % BN;
      const int s = s_slot[r];
      if (s >= 0 && n < N) store1(c + (long long)s * N + n, 0.f);
    }
    return;
  }

  // this thread's chunks: column ccol of rows crow + i * RSTEP of each tile (fixed over the k loop). A's rows are
  // gathered (one source row each, computed once); W's rows are consecutive (one base pointer, a stride per row).
  const int ccol = (tid % CPR) * 8, crow = tid / CPR;
  const T* a_src[A_CHUNKS / NT];
  a_row_sources(a_src, s_slot, a, stride_am, top_k, crow, ccol);
  const T* b_base = b + (long long)e * stride_be + (long long)(n0 + crow) * stride_bn + ccol;

  const int KT = (K + BK - 1) / BK;
  // k tile kt into ring slot st (chunks past K, rows past R or N: 16 zero bytes, nothing read)
  auto load_stage = [&](int st, int kt) {
    T* sa = smem + st * STAGE_ELEMS;
    const int k0 = kt * BK;
    const bool kin = k0 + ccol < K;
    load_a_rows(sa, a_src, a, crow, ccol, k0, kin);
    load_w_rows(sa + BM * PITCH, b_base, stride_bn, b, n0, N, crow, ccol, k0, kin);
  };

  float acc[MI][NI][4];
  zero_acc(acc);
  ring_fill(KT, load_stage);

  const int warp = tid / 32, lane = tid % 32;
  const int wm = warp / WN, wn = warp % WN;
  for (int kt = 0; kt < KT; ++kt) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();  // tile kt landed for every thread; every warp is done with the slot refilled next
    {
      const int next = kt + STAGES - 1;
      if (next < KT) load_stage(next % STAGES, next);
      cp_async_commit();
    }
    const T* sa = smem + (kt % STAGES) * STAGE_ELEMS;
    const T* sb = sa + BM * PITCH;
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) warp_tile_k16<T, MI, NI, PITCH>(acc, sa, sb, wm * WTM, wn * WTN, kk * 16, lane);
  }
  cp_async_wait<0>();

  // epilogue: rows g and g + 8 of each m16 tile, columns 2 t4 and 2 t4 + 1 of each n8 tile
  const int g = lane >> 2, t4 = lane & 3;
#pragma unroll
  for (int i = 0; i < MI; ++i) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int s = s_slot[wm * WTM + i * 16 + g + 8 * h];
      if (s < 0) continue;
#if FK_MUL
      const float f = topk_weights[s];
#else
      const float f = 1.f;
#endif
      T* crow = c + (long long)s * N;
#pragma unroll
      for (int j = 0; j < NI; ++j) {
        const int n = n0 + wn * WTN + j * 8 + 2 * t4;
        const float v0 = acc[i][j][2 * h] * f, v1 = acc[i][j][2 * h + 1] * f;
        if (n + 1 < N && !(N & 1)) {
          *reinterpret_cast<u32*>(crow + n) = Mma<T>::pack(v0, v1);  // N even: the pair is 4-byte aligned
        } else {
          if (n < N) store1(crow + n, v0);
          if (n + 1 < N) store1(crow + n + 1, v1);
        }
      }
    }
  }
}
