// Shared by the kernels that normalise a row (norm.cu, and gemv.cu's FK_NORM prologue): a float summed over the whole
// block in one fixed order (each warp's shuffle tree, then the warps' sums through `red` [32] by warp 0's lanes), so
// that both reduce a row's squares to the same bits when their blocks have the same size. Every thread gets the sum.
// Included as a file by nvcc; scripts/embed-kernels.mjs inlines it for NVRTC.

// The same tree over the first NW warps of the block (0: all of them), which meet at `sync` (a barrier they all reach:
// __syncthreads, or a named barrier when other warps of the block do something else, as bench/lab_ring_chain.cuh's
// producer warp).
template <int NW, class Sync>
__device__ __forceinline__ float fk_block_sum_over(float v, float* red, Sync sync) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = NW ? NW : (blockDim.x + 31) >> 5;
  if (lane == 0) red[warp] = v;
  sync();
  v = lane < nw ? red[lane] : 0.f;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float fk_block_sum(float v, float* red) {
  return fk_block_sum_over<0>(v, red, [] { __syncthreads(); });
}
