// Varlen (cu_seqlens) tile bookkeeping of the prefill kernels (attention_prefill.cu's mma and wgmma kernels,
// attention_fa3.cu): which (sequence, query tile) a CTA owns, the keys each query row sees (bottom-right causal, left
// sliding window, last tile first), and the zeroing of rows no sequence covers; for any tile size. Included at file
// scope (its own namespace); scripts/embed-kernels.mjs inlines it for NVRTC.
#pragma once

namespace fkvar {

// Which (sequence, tile of ROWS query rows) linear tile index y is, from cu_seqlens_q (a warp-parallel prefix sum: no
// host sync, so launches stay graph-capturable; every lane gets the answer). Tiles of a sequence are numbered last
// first (under a causal mask the tiles with the most keys start first). On a miss, `tile` is the total tile count.
template <int ROWS>
__device__ __forceinline__ bool find_tile(const int* __restrict__ cu_q, int num_seqs, int y, int lane, int& seq, int& tile) {
  int before = 0;
  for (int base = 0; base < num_seqs; base += 32) {
    const int s = base + lane;
    const int nt = s < num_seqs ? (max(0, cu_q[s + 1] - cu_q[s]) + ROWS - 1) / ROWS : 0;
    int inc = nt;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int v = __shfl_up_sync(0xffffffffu, inc, o);
      if (lane >= o) inc += v;
    }
    const int excl = inc - nt;
    const unsigned hit = __ballot_sync(0xffffffffu, nt > 0 && y >= before + excl && y < before + inc);
    if (hit) {
      const int src = __ffs(hit) - 1;
      seq = base + src;
      const int ntile = __shfl_sync(0xffffffffu, nt, src);
      tile = ntile - 1 - (y - before - __shfl_sync(0xffffffffu, excl, src));
      return true;
    }
    before += __shfl_sync(0xffffffffu, inc, 31);
  }
  tile = before;
  return false;
}

// A sequence of the batch: query rows [q0, q0 + lq), keys [k0, k0 + lk), and each query row's key range (query i sits
// at key position i + lk - lq: bottom-right causal; window > 0 keeps the last `window` keys up to it).
struct SeqKeys {
  int q0, lq, k0, lk, off, causal, window;
  __device__ __forceinline__ int hi(int i) const { return causal ? min(i + off, lk - 1) : lk - 1; }
  __device__ __forceinline__ int lo(int i) const { return window > 0 ? max(0, i + off - window + 1) : 0; }
  // The BN-key tiles query rows [first, last] see: the first tile's start and how many (0: none).
  template <int BN>
  __device__ __forceinline__ void tiles(int first, int last, int& n_start, int& n_tiles) const {
    const int kbeg = lo(first), kend = hi(last);
    n_start = kend >= kbeg ? (kbeg / BN) * BN : 0;
    n_tiles = kend >= kbeg ? (kend - n_start) / BN + 1 : 0;
  }
};
__device__ __forceinline__ SeqKeys seq_keys(const int* __restrict__ cu_q, const int* __restrict__ cu_k, int seq, int causal, int window) {
  const int q0 = cu_q[seq], lq = cu_q[seq + 1] - q0, k0 = cu_k[seq], lk = max(0, cu_k[seq + 1] - k0);
  return {q0, lq, k0, lk, lk - lq, causal, window};
}

// A spare CTA (the grid's tile count is an upper bound): spare number e zeroes rows [e ROWS, e ROWS + ROWS) of those
// no sequence covers, [0, cu_q[0]) and [cu_q[B], Tq), of head h (there are always enough spare CTAs for them).
template <typename T, int D, int ROWS, int THREADS>
__device__ __forceinline__ void zero_uncovered(T* __restrict__ out, const int* __restrict__ cu_q, int num_seqs, int total_q, int n_q_heads,
                                               int h, int e, int tid) {
  const int c0 = min(max(cu_q[0], 0), total_q);
  const int cb = min(max(cu_q[num_seqs], c0), total_q);
  const int uncovered = c0 + (total_q - cb);
  for (int idx = tid; idx < ROWS * (D / 2); idx += THREADS) {
    const int u = e * ROWS + idx / (D / 2);
    if (u >= uncovered) break;
    const int r = u < c0 ? u : cb + (u - c0);
    *reinterpret_cast<unsigned*>(out + ((long long)r * n_q_heads + h) * D + 2 * (idx % (D / 2))) = 0u;
  }
}

// zero_uncovered for an output addressed through strides (the FA3 kernel: dense SDPA's [H, L, D] in place): row r of
// the head starts at out_h + r row_stride (elements). A function of its own, not zero_uncovered rewritten over it: the
// other prefill kernels' PTX stays byte for byte what attention-sinks-nvcc.test.ts pins.
template <typename T, int D, int ROWS, int THREADS>
__device__ __forceinline__ void zero_uncovered_rows(T* __restrict__ out_h, long long row_stride, const int* __restrict__ cu_q, int num_seqs,
                                                    int total_q, int e, int tid) {
  const int c0 = min(max(cu_q[0], 0), total_q);
  const int cb = min(max(cu_q[num_seqs], c0), total_q);
  const int uncovered = c0 + (total_q - cb);
  for (int idx = tid; idx < ROWS * (D / 2); idx += THREADS) {
    const int u = e * ROWS + idx / (D / 2);
    if (u >= uncovered) break;
    const int r = u < c0 ? u : cb + (u - c0);
    *reinterpret_cast<unsigned*>(out_h + (long long)r * row_stride + 2 * (idx % (D / 2))) = 0u;
  }
}

}  // namespace fkvar
