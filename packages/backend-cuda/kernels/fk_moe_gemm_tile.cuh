// The CTA tile of the tensor-core MoE GEMMs (fused_moe.cu, grouped_gemm_tc.cu): its geometry from the file's FK_BM,
// FK_BN, FK_BK, FK_WM, FK_WN, FK_STAGES (each file sets its own defaults), the cp.async copies of gathered A rows and of
// k-contiguous weight rows, the ring's first tiles, the accumulator's zeros and the one-element stores. A thread copies
// chunk column ccol = (tid % CPR) * 8 of tile rows crow + i RSTEP (crow = tid / CPR) of every k tile. The per-tile
// refill and the epilogue's pair store stay in the kernels: as helpers they changed the machine code of most variants.
// Included inside a kernel's namespace after `typedef FK_T T; typedef unsigned int u32;` and fk_mma.cuh;
// scripts/embed-kernels.mjs inlines it for NVRTC.
#pragma once

constexpr int BM = FK_BM;
constexpr int BN = FK_BN;
constexpr int BK = FK_BK;
constexpr int WM = FK_WM;
constexpr int WN = FK_WN;
constexpr int STAGES = FK_STAGES;
constexpr int NT = 32 * WM * WN;  // threads
constexpr int WTM = BM / WM;      // rows of C a warp computes
constexpr int WTN = BN / WN;      // columns of C a warp computes
constexpr int MI = WTM / 16;      // m16 tiles a warp
constexpr int NI = WTN / 8;       // n8 tiles a warp
constexpr int PITCH = BK + 8;     // shared row pitch (elements): 16 bytes past the row, so ldmatrix's 8 rows hit distinct banks
constexpr int CPR = BK / 8;       // 16-byte chunks of a T row of a k tile
constexpr int RSTEP = NT / CPR;   // tile rows one pass of the threads copies
constexpr int A_CHUNKS = BM * CPR;
static_assert(BM % (16 * WM) == 0 && BN % (16 * WN) == 0, "warp tiles: multiples of 16 x 16");
static_assert(NT % CPR == 0 && A_CHUNKS % NT == 0, "every thread copies the same chunk column of A, the same number of chunks a stage");

__device__ __forceinline__ void store1(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }
__device__ __forceinline__ void store1(__half* p, float v) { *p = __float2half_rn(v); }

// The source of each of this thread's A chunks: tile row crow + i RSTEP holds output row rows[crow + i RSTEP] (-1: none,
// null), read from row rows[..] / per_row of a (fused_moe's slots: top_k a token), column ccol. Fixed over the k loop.
__device__ __forceinline__ void a_row_sources(const T* (&src)[A_CHUNKS / NT], const int* rows, const T* a, long long stride, int per_row, int crow, int ccol) {
#pragma unroll
  for (int i = 0; i < A_CHUNKS / NT; ++i) {
    const int s = rows[crow + i * RSTEP];
    src[i] = s >= 0 ? a + (long long)(s / per_row) * stride + ccol : nullptr;
  }
}

// A's chunks of k tile k0 into sa ([BM][PITCH]): src[i] is tile row crow + i RSTEP's source at column ccol (null past the
// rows: 16 zero bytes, as for k past K; `any` is a valid address the zero-byte copies name).
__device__ __forceinline__ void load_a_rows(T* sa, const T* const (&src)[A_CHUNKS / NT], const T* any, int crow, int ccol, int k0, bool kin) {
#pragma unroll
  for (int i = 0; i < A_CHUNKS / NT; ++i) {
    const bool ok = src[i] != nullptr && kin;
    cp_async16(smem_u32(sa + (crow + i * RSTEP) * PITCH + ccol), ok ? src[i] + k0 : any, ok ? 16 : 0);
  }
}

// A k-contiguous weight's chunks of k tile k0 into sb ([BN][PITCH]): tile row r is weight row n0 + r, base + r stride
// (base: row n0 + crow at column ccol); rows past N are zeros.
__device__ __forceinline__ void load_w_rows(T* sb, const T* base, long long stride, const T* any, int n0, int N, int crow, int ccol, int k0, bool kin) {
  constexpr int B_CHUNKS = BN * CPR;
  static_assert(B_CHUNKS % NT == 0, "every thread copies the same number of weight chunks a stage");
#pragma unroll
  for (int i = 0; i < B_CHUNKS / NT; ++i) {
    const bool ok = n0 + crow + i * RSTEP < N && kin;
    cp_async16(smem_u32(sb + (crow + i * RSTEP) * PITCH + ccol), ok ? base + (long long)i * RSTEP * stride + k0 : any, ok ? 16 : 0);
  }
}

// The ring's first STAGES - 1 k tiles (of KT), one commit group each: empty groups keep the count uniform.
template <typename Load>
__device__ __forceinline__ void ring_fill(int KT, Load&& load_stage) {
#pragma unroll
  for (int st = 0; st < STAGES - 1; ++st) {
    if (st < KT) load_stage(st, st);
    cp_async_commit();
  }
}

__device__ __forceinline__ void zero_acc(float (&acc)[MI][NI][4]) {
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NI; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.f;
}
