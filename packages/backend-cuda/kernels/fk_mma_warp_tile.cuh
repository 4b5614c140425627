// One warp's share of a k16 step of a shared-memory tile GEMM on mma.sync.m16n8k16 (shared by the tensor-core grouped
// GEMMs: grouped_gemm_tc.cu). A is [rows][PITCH] and B is [n][PITCH] (k contiguous: W [N, K] row-major is the mma's
// column-major B); `sa` / `sb` point at the warp's first row / column, `k0` at the step's first k. acc[i][j] is the m16
// x n8 tile (i, j) of the warp, in the mma's accumulator layout (rows lane / 4 and + 8, columns 2 (lane % 4) and + 1).
// Needs fk_mma.cuh (Mma, ldsm_x4, smem_u32) included before it.
#pragma once

template <typename T, int MI, int NI, int PITCH>
__device__ __forceinline__ void warp_tile_k16(float (&acc)[MI][NI][4], const T* sa, const T* sb, int k0, int lane) {
  static_assert(NI % 2 == 0, "n8 tiles come in pairs (one ldmatrix.x4 loads two)");
  u32 af[MI][4];
#pragma unroll
  for (int i = 0; i < MI; ++i) {
    const int r = i * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
    ldsm_x4(smem_u32(sa + r * PITCH + k0 + (lane >> 4) * 8), af[i][0], af[i][1], af[i][2], af[i][3]);
  }
  u32 bf[NI][2];
#pragma unroll
  for (int j = 0; j < NI / 2; ++j) {
    // matrices (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15): b0 / b1 of two n8 tiles
    const int n = j * 16 + (lane >> 4) * 8 + (lane & 7);
    ldsm_x4(smem_u32(sb + n * PITCH + k0 + ((lane >> 3) & 1) * 8), bf[2 * j][0], bf[2 * j][1], bf[2 * j + 1][0], bf[2 * j + 1][1]);
  }
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NI; ++j) Mma<T>::mma(acc[i][j], af[i], bf[j][0], bf[j][1]);
}
