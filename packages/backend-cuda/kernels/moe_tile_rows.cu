// FastKernels: moe_align's rows as 128-row one-expert tiles, for the Hopper MoE GEMM (fused_moe_wgmma.cu, issue #31).
// That GEMM loads a tile's rows with one TMA box, so they must be contiguous in memory and share one expert:
//
// - fk_moe_gather_rows copies the token rows of A into A_sorted [rows, K] in sorted order: row p holds
//   a[sorted id / top_k] of its entry (zeros for padding, sorted id >= slots). The entry is p itself when moe_align's
//   block size is a multiple of 128 (tile_block null); below that, the tile map's (and the entry's sorted id is
//   written to sorted_tiles[p], which the GEMM then reads as its sorted_token_ids).
// - fk_moe_tile_map, for a block size bs that divides 128 (16, 32, 64: G = 128 / bs blocks a tile), packs each
//   expert's run of blocks into tiles of G consecutive blocks: tile_block[t G + g] = the block in part g of tile t (-1:
//   none, the last tile of a run that is not a multiple of G), tile_expert[t] = its expert (-1 past the live tiles),
//   post_tiles[0] = 128 x the live tiles (the GEMM's num_tokens_post_padded at block size 128). moe_align lays each
//   expert's blocks out consecutively, so a run is a maximal stretch of equal expert ids (adjacent non-local experts'
//   -1 blocks merge into one run: they only write zero rows). One CTA: each thread walks a contiguous chunk of the
//   live blocks three times (the last run start before it by a CTA max scan, the tiles started before it by a CTA sum
//   scan, then the writes).
//
// Both read the routing on the device (the host sizes the grids from shapes: graph-safe). The gather copies 16-byte
// pieces (chunks = K x element bytes / 16, A's row stride in pieces: rows 16-byte aligned), whatever the element type.
#ifndef FK_TILE_ROWS
#define FK_TILE_ROWS 128  // rows a GEMM tile (fkmoewg::BM)
#endif

namespace fktiles {

constexpr unsigned FULL = 0xffffffffu;

struct SumOp {
  __device__ __forceinline__ int operator()(int a, int b) const { return a + b; }
};
struct MaxOp {
  __device__ __forceinline__ int operator()(int a, int b) const { return a > b ? a : b; }
};

// The CTA's exclusive scan of one int a thread under op (identity: op's neutral value), in thread order; every thread
// of the CTA (whole warps, at most 1024) calls it. warp_tot: 32 ints of shared memory, free again on return.
template <class Op>
__device__ __forceinline__ int cta_exclusive_scan(int v, int identity, Op op, int* warp_tot) {
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, warps = blockDim.x >> 5;
  int inc = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int y = __shfl_up_sync(FULL, inc, o);
    if (lane >= o) inc = op(inc, y);
  }
  if (lane == 31) warp_tot[w] = inc;
  __syncthreads();
  if (w == 0) {
    int t = lane < warps ? warp_tot[lane] : identity;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int y = __shfl_up_sync(FULL, t, o);
      if (lane >= o) t = op(t, y);
    }
    warp_tot[lane] = t;  // inclusive over the warps
  }
  __syncthreads();
  int before = __shfl_up_sync(FULL, inc, 1);
  if (lane == 0) before = identity;
  const int r = op(w > 0 ? warp_tot[w - 1] : identity, before);
  __syncthreads();
  return r;
}

}  // namespace fktiles

extern "C" __global__ void __launch_bounds__(1024) fk_moe_tile_map(int* __restrict__ tile_expert, int* __restrict__ tile_block, int* __restrict__ post_tiles,
                                                                   const int* __restrict__ expert_ids, const int* __restrict__ num_tokens_post_padded, int bs,
                                                                   int m_tiles) {
  using namespace fktiles;
  __shared__ int warp_tot[32];
  const int G = FK_TILE_ROWS / bs, tid = threadIdx.x, threads = blockDim.x;
  for (int i = tid; i < m_tiles; i += threads) tile_expert[i] = -1;
  for (int i = tid; i < m_tiles * G; i += threads) tile_block[i] = -1;
  const int nb = num_tokens_post_padded[0] / bs;  // live blocks
  const int chunk = (nb + threads - 1) / threads, lo = min(nb, tid * chunk), hi = min(nb, lo + chunk);
  auto starts_run = [&](int b) { return b == 0 || expert_ids[b] != expert_ids[b - 1]; };
  int last = -1;
  for (int b = lo; b < hi; ++b)
    if (starts_run(b)) last = b;
  const int run0 = cta_exclusive_scan(last, -1, MaxOp(), warp_tot);  // the last run start before the chunk (the -1s above are ordered before the writes below by its barriers)
  int rs = run0, count = 0;
  for (int b = lo; b < hi; ++b) {
    if (starts_run(b)) rs = b;
    if ((b - rs) % G == 0) ++count;
  }
  const int tile0 = cta_exclusive_scan(count, 0, SumOp(), warp_tot);  // tiles started before the chunk
  rs = run0;
  int t = tile0 - 1;  // a chunk that starts inside a tile continues the previous chunk's last one
  for (int b = lo; b < hi; ++b) {
    if (starts_run(b)) rs = b;
    const int j = b - rs;
    if (j % G == 0 && ++t < m_tiles) tile_expert[t] = expert_ids[b];
    if (t < m_tiles) tile_block[t * G + j % G] = b;
  }
  if (tid == threads - 1) post_tiles[0] = min(tile0 + count, m_tiles) * FK_TILE_ROWS;
}

extern "C" __global__ void __launch_bounds__(256) fk_moe_gather_rows(uint4* __restrict__ a_sorted, int* __restrict__ sorted_tiles, const uint4* __restrict__ a,
                                                                     const int* __restrict__ sorted_token_ids, const int* __restrict__ tile_block,
                                                                     const int* __restrict__ post, int chunks, long long stride_chunks, int top_k, int slots,
                                                                     int bs) {
  const int p = blockIdx.x;
  if (p >= post[0]) return;
  int entry = p;
  if (tile_block) {
    const int q = p % FK_TILE_ROWS, b = tile_block[(p / FK_TILE_ROWS) * (FK_TILE_ROWS / bs) + q / bs];
    entry = b >= 0 ? b * bs + q % bs : -1;
  }
  const int id = entry >= 0 ? sorted_token_ids[entry] : slots;
  if (sorted_tiles && threadIdx.x == 0) sorted_tiles[p] = id;
  const bool live = id >= 0 && id < slots;
  const uint4* src = a + (live ? (long long)(id / top_k) * stride_chunks : 0);
  uint4* dst = a_sorted + (long long)p * chunks;
  const uint4 zero = make_uint4(0, 0, 0, 0);
  for (int i = threadIdx.x; i < chunks; i += blockDim.x) dst[i] = live ? src[i] : zero;
}
