// FastKernels moe_align (vLLM's moe_align_block_size, the registry op moe_align) in one launch of one CTA: the
// flattened (token, k) slots of topk_ids grouped by expert, each expert's run padded to whole blocks of `bs` entries,
// which is what fused_moe.cu reads. Outputs (sizes from shapes alone, P = NB * bs):
// - sorted [P]: expert 0's slots, ascending, then the padding of its last block (value n, the slot count), expert 1's...;
//   entries past the padded total are padding too;
// - experts [NB]: each block's expert, -1 for blocks at or past the padded total;
// - post [1]: the padded total.
// Slots whose id is outside [0, E) (-1: a choice another rank serves) are in no block: fused_moe_gemm leaves them
// unwritten.
//
// The order within an expert is the slots' order (a stable sort, as the float64 reference), so every run writes the same
// outputs. Three passes over the slots, no global atomics, everything on the device (graph-capturable):
// 1. counts: warp w owns the w-th contiguous chunk of slots and counts its chunk's slots an expert in cnt[w][e]
//    (__match_any_sync groups a step's equal ids; the lowest lane of each group adds its size: no atomics), loading
//    AHEAD steps' ids at a time;
// 2. offsets: each expert's count per warp becomes that warp's first rank inside the expert (a scan over the W warps),
//    and warp 0 scans the experts' padded counts into start[e] (start[E] = the padded total);
// 3. scatter: each warp walks its chunk again, a slot's place = start[e] + its warp's rank + its rank among the step's
//    equal ids; padding entries and the block experts are written by position (a binary search over start).
// NVRTC specialisation: FK_IDX (topk_ids' int type). Launch: one CTA of 1024 threads (all of them write the padding);
// the first W warps own the chunks, W as many as the dynamic shared memory, (W E + 2 E + 1) ints, holds in 48 KiB
// (moe-align-plan.ts).
// compile-cu: -DFK_IDX=long
#ifndef FK_IDX
#define FK_IDX int
#endif

#include "fk_warp_scan.cuh"

namespace fkalign {

constexpr unsigned FULL = 0xffffffffu;
// steps of 32 slots whose ids a warp loads together before using them: a 4096-token prefill's chunks take 32 steps a
// pass, and one load in flight per step would make each pass a chain of 32 memory latencies
constexpr int AHEAD = 4;

// The experts of slots s0 + 32 u + lane (u < AHEAD): the id where it is a slot before hi and in [0, E), else -1.
__device__ __forceinline__ void experts_ahead(const FK_IDX* __restrict__ ids, int s0, int hi, int E, int lane, int (&e)[AHEAD]) {
  long long id[AHEAD];
#pragma unroll
  for (int u = 0; u < AHEAD; ++u) {
    const int s = s0 + 32 * u + lane;
    id[u] = s < hi ? (long long)ids[s] : -1;
  }
#pragma unroll
  for (int u = 0; u < AHEAD; ++u) e[u] = id[u] >= 0 && id[u] < E ? (int)id[u] : -1;
}

// The expert whose padded run holds position p: the last e with start[e] <= p (start non-decreasing, p < start[E]).
__device__ __forceinline__ int run_of(const int* start, int E, int p) {
  int lo = 0, hi = E - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (start[mid] <= p) lo = mid; else hi = mid - 1;
  }
  return lo;
}

}  // namespace fkalign

extern "C" __global__ void __launch_bounds__(1024) fk_moe_align(const FK_IDX* __restrict__ topk_ids, int* __restrict__ sorted,
                                                                 int* __restrict__ experts, int* __restrict__ post, int n, int E,
                                                                 int bs, int P, int W) {
  using namespace fkalign;
  extern __shared__ int fk_align_smem[];
  int* cnt = fk_align_smem;      // [W][E]: slots of expert e in warp w's chunk, then warp w's first rank inside e
  int* total = cnt + W * E;      // [E]: slots of expert e
  int* start = total + E;        // [E + 1]: each expert's first position; start[E] = the padded total
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const unsigned below = (1u << lane) - 1u;
  // warp w < W's chunk: [lo, hi), whole steps of 32 (lanes past hi hold no slot, id -1); the other warps' chunks are empty
  const int chunk = (n + W - 1) / W;
  const int lo = warp < W ? min(n, warp * chunk) : n, hi = min(n, lo + chunk);
  int* mine = cnt + min(warp, W - 1) * E;

  for (int i = tid; i < W * E; i += blockDim.x) cnt[i] = 0;
  __syncthreads();
  for (int s0 = lo; s0 < hi; s0 += 32 * AHEAD) {
    int e[AHEAD];
    experts_ahead(topk_ids, s0, hi, E, lane, e);
#pragma unroll
    for (int u = 0; u < AHEAD; ++u) {
      if (s0 + 32 * u >= hi) break;  // uniform over the warp
      const unsigned peers = __match_any_sync(FULL, e[u]);
      if (e[u] >= 0 && (peers & below) == 0) mine[e[u]] += __popc(peers);
      __syncwarp();
    }
  }
  __syncthreads();
  for (int e = tid; e < E; e += blockDim.x) {
    int run = 0;
    for (int w = 0; w < W; ++w) {
      const int c = cnt[w * E + e];
      cnt[w * E + e] = run;
      run += c;
    }
    total[e] = run;
  }
  __syncthreads();
  if (warp == 0) fk_warp_exclusive_scan([&](int e) { return (total[e] + bs - 1) / bs * bs; }, start, E, lane);  // padded counts
  __syncthreads();

  const int padded = start[E];
  if (tid == 0) post[0] = padded;
  for (int s0 = lo; s0 < hi; s0 += 32 * AHEAD) {
    int e[AHEAD];
    experts_ahead(topk_ids, s0, hi, E, lane, e);
#pragma unroll
    for (int u = 0; u < AHEAD; ++u) {
      if (s0 + 32 * u >= hi) break;  // uniform over the warp
      const unsigned peers = __match_any_sync(FULL, e[u]);
      if (e[u] >= 0) sorted[start[e[u]] + mine[e[u]] + __popc(peers & below)] = s0 + 32 * u + lane;
      __syncwarp();
      if (e[u] >= 0 && (peers & below) == 0) mine[e[u]] += __popc(peers);
      __syncwarp();
    }
  }
  // padding: past the padded total, or past its expert's slots inside the expert's run (never a slot's place)
  for (int p = tid; p < P; p += blockDim.x) {
    if (p >= padded) {
      sorted[p] = n;
      continue;
    }
    const int e = run_of(start, E, p);
    if (p - start[e] >= total[e]) sorted[p] = n;
  }
  for (int b = tid; b * bs < P; b += blockDim.x) experts[b] = b * bs < padded ? run_of(start, E, b * bs) : -1;
}
