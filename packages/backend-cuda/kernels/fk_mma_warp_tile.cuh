// One warp's share of a k16 step of a shared-memory tile GEMM on mma.sync.m16n8k16 (shared by the tensor-core MoE
// GEMMs: fused_moe.cu, grouped_gemm_tc.cu). A is [rows][PITCH_A] (k contiguous); B is either [n][PITCH_B] (k contiguous:
// W [N, K] row-major is the mma's column-major B; warp_tile_k16) or [k][PITCH_B] (n contiguous: a transposed weight
// view; warp_tile_k16_kn, through ldmatrix.trans). The warp's rows start at row `a0` of `sa`, its columns at column
// `b0` of `sb`, the step at k `k0`. acc[i][j] is the m16 x n8 tile (i, j) of the warp, in the mma's accumulator layout
// (rows lane / 4 and + 8, columns 2 (lane % 4) and + 1). Needs fk_mma.cuh (Mma, ldsm_x4, ldsm_x4_t, smem_u32) first.
#pragma once

template <typename T, int MI, int PITCH_A>
__device__ __forceinline__ void warp_a_frags(u32 (&af)[MI][4], const T* sa, int a0, int k0, int lane) {
#pragma unroll
  for (int i = 0; i < MI; ++i) {
    const int r = a0 + i * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
    ldsm_x4(smem_u32(sa + r * PITCH_A + k0 + (lane >> 4) * 8), af[i][0], af[i][1], af[i][2], af[i][3]);
  }
}

template <typename T, int MI, int NI>
__device__ __forceinline__ void warp_mma(float (&acc)[MI][NI][4], const u32 (&af)[MI][4], const u32 (&bf)[NI][2]) {
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NI; ++j) Mma<T>::mma(acc[i][j], af[i], bf[j][0], bf[j][1]);
}

template <typename T, int MI, int NI, int PITCH>
__device__ __forceinline__ void warp_tile_k16(float (&acc)[MI][NI][4], const T* sa, const T* sb, int a0, int b0, int k0, int lane) {
  static_assert(NI % 2 == 0, "n8 tiles come in pairs (one ldmatrix.x4 loads two)");
  u32 af[MI][4];
  warp_a_frags<T, MI, PITCH>(af, sa, a0, k0, lane);
  u32 bf[NI][2];
#pragma unroll
  for (int j = 0; j < NI / 2; ++j) {
    // matrices (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15): b0 / b1 of two n8 tiles
    const int n = b0 + j * 16 + (lane >> 4) * 8 + (lane & 7);
    ldsm_x4(smem_u32(sb + n * PITCH + k0 + ((lane >> 3) & 1) * 8), bf[2 * j][0], bf[2 * j][1], bf[2 * j + 1][0], bf[2 * j + 1][1]);
  }
  warp_mma<T, MI, NI>(acc, af, bf);
}

template <typename T, int MI, int NI, int PITCH_A, int PITCH_B>
__device__ __forceinline__ void warp_tile_k16_kn(float (&acc)[MI][NI][4], const T* sa, const T* sb, int a0, int b0, int k0, int lane) {
  static_assert(NI % 2 == 0, "n8 tiles come in pairs (one ldmatrix.x4 loads two)");
  u32 af[MI][4];
  warp_a_frags<T, MI, PITCH_A>(af, sa, a0, k0, lane);
  u32 bf[NI][2];
#pragma unroll
  for (int j = 0; j < NI / 2; ++j) {
    // transposed 8 x 8 matrices (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15): lane l addresses
    // k row l % 8 of matrix l / 8; .trans hands each lane the (k 2 (l % 4), + 1; n l / 4) pairs b0 / b1 hold
    const int k = k0 + (lane & 7) + ((lane >> 3) & 1) * 8;
    ldsm_x4_t(smem_u32(sb + k * PITCH_B + b0 + j * 16 + (lane >> 4) * 8), bf[2 * j][0], bf[2 * j][1], bf[2 * j + 1][0], bf[2 * j + 1][1]);
  }
  warp_mma<T, MI, NI>(acc, af, bf);
}
