// Shared by the kernels that normalise a row (norm.cu, and gemv.cu's FK_NORM prologue): a float summed over the whole
// block in one fixed order (each warp's shuffle tree, then the warps' sums through `red` [32] by warp 0's lanes), so
// that both reduce a row's squares to the same bits when their blocks have the same size. Every thread gets the sum.
// Included as a file by nvcc; scripts/embed-kernels.mjs inlines it for NVRTC.
__device__ __forceinline__ float fk_block_sum(float v, float* red) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = (blockDim.x + 31) >> 5;
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < nw ? red[lane] : 0.f;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
