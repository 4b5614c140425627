// The online softmax of the mma.sync attention kernels (attention_prefill.cu's mma and wgmma kernels, attention_dense.cu),
// over a warp's 16 query rows in the m16n8k16 accumulator layout: this thread holds rows A and A + 8 (B), s[j][0..1]
// row A's scores of keys 8 j + 2 t4 and + 1 of the tile, s[j][2..3] row B's. Included inside each kernel's namespace,
// after fk_mma.cuh and its `neg_inf()` (and `T`, `u32`); scripts/embed-kernels.mjs inlines it for NVRTC.
#pragma once

// A key tile's softmax update, after the kernel has scaled its scores to the log2 domain and masked them (-inf) and
// folded this thread's maxima into mxA / mxB (started from the running maxima mA / mB): the maxima are reduced over
// the quad, alpha gets the factors the rows' O is to be rescaled by, P = exp2(S - max) is left in s, and this thread's
// partial sums lA / lB are updated (the quad is summed at the end: quad_sum).
template <int NJ>
__device__ __forceinline__ void softmax_update(float (&s)[NJ][4], float mxA, float mxB, float& mA, float& mB, float& lA, float& lB,
                                               float& alphaA, float& alphaB) {
  mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, 1));
  mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, 2));
  mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, 1));
  mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, 2));
  // a row with nothing seen yet keeps max -inf: subtract 0 so exp2 gives 0, not NaN
  const float bA = mxA == neg_inf() ? 0.f : mxA;
  const float bB = mxB == neg_inf() ? 0.f : mxB;
  alphaA = exp2f(mA - bA);
  alphaB = exp2f(mB - bB);
  mA = mxA;
  mB = mxB;
  float sumA = 0.f, sumB = 0.f;
#pragma unroll
  for (int j = 0; j < NJ; j++) {
    s[j][0] = exp2f(s[j][0] - bA);
    s[j][1] = exp2f(s[j][1] - bA);
    s[j][2] = exp2f(s[j][2] - bB);
    s[j][3] = exp2f(s[j][3] - bB);
    sumA += s[j][0] + s[j][1];
    sumB += s[j][2] + s[j][3];
  }
  lA = lA * alphaA + sumA;
  lB = lB * alphaB + sumB;
}

// P's keys 16 kk .. 16 kk + 15 as an A fragment of m16n8k16 (and of wgmma with A from registers), from the S accumulators.
template <int NJ>
__device__ __forceinline__ void pack_p(const float (&s)[NJ][4], int kk, u32 (&pa)[4]) {
  pa[0] = Mma<T>::pack(s[2 * kk][0], s[2 * kk][1]);
  pa[1] = Mma<T>::pack(s[2 * kk][2], s[2 * kk][3]);
  pa[2] = Mma<T>::pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
  pa[3] = Mma<T>::pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
}

// A row's softmax sum: the four partial sums of its quad added (every thread of the quad gets it).
__device__ __forceinline__ float quad_sum(float l) {
  l += __shfl_xor_sync(0xffffffffu, l, 1);
  l += __shfl_xor_sync(0xffffffffu, l, 2);
  return l;
}
