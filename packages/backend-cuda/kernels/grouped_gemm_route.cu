// FastKernels grouped GEMM routing (the first of the two launches of the tensor-core grouped GEMM, grouped_gemm_tc.cu):
// one CTA turns grouped_gemm's routing, expert_ids [T] or offsets [E + 1], into what the GEMM's CTAs read on the device:
// - perm [T]: the rows in position order, grouped by expert (expert e's rows at positions [off[e], off[e + 1])), then
//   the rows no expert takes (ids -1 or out of range; rows before offsets[0] or past offsets[E]): group E, zero rows;
// - tiles int4 [slots]: for each m-tile slot of the GEMM's grid, {group, first position, end of the group, 0}, or
//   {-1, 0, 0, 0} for a slot past the last tile. A group of c rows takes ceil(c / BM) slots; E + 1 groups of T rows in
//   all take at most ceil(T / BM) + E, the slot count the host launches the GEMM with (from shapes alone).
// Everything is read and written on the device (no host sync), so the two launches can be captured in a CUDA graph.
// The order of rows inside an expert's group follows shared-memory atomics (not stable); each output row is computed
// from its own input row alone, so the values do not depend on it.
//
// Offsets are clamped to [0, T] and made non-decreasing (the op's decomposition rejects other offsets; the kernel only
// has to stay in bounds). NVRTC specialisation: FK_IDX (the routing's int type), FK_ROUTE_IDS (1: expert_ids, 0: offsets).
// Dynamic shared memory: 3 (E + 2) ints.
// compile-cu: -DFK_IDX=int -DFK_ROUTE_IDS=0
#ifndef FK_IDX
#define FK_IDX long long
#endif
#ifndef FK_ROUTE_IDS
#define FK_ROUTE_IDS 1
#endif

#include "fk_warp_scan.cuh"

namespace fkroute {

constexpr int NT = 1024;
constexpr unsigned FULL = 0xffffffffu;

#if FK_ROUTE_IDS
// The group of a row: its expert, or E for a row no expert takes.
__device__ __forceinline__ int group_of(long long id, int E) { return id >= 0 && id < E ? (int)id : E; }
#endif

}  // namespace fkroute

extern "C" __global__ void __launch_bounds__(fkroute::NT) fk_grouped_gemm_route(const FK_IDX* __restrict__ route, int* __restrict__ perm,
                                                                                 int4* __restrict__ tiles, int T, int E, int BM, int slots) {
  using namespace fkroute;
  extern __shared__ int fk_route_smem[];
  int* cnt = fk_route_smem;  // [E + 1]: rows a group, then its tile count
  int* off = cnt + (E + 1);  // [E + 2]: each group's first position; off[E + 1] = T
  int* ts = off + (E + 2);   // [E + 2]: each group's first slot; ts[E + 1] = the slots used
  const int tid = threadIdx.x, lane = tid & 31;

#if FK_ROUTE_IDS
  for (int g = tid; g <= E; g += NT) cnt[g] = 0;
  __syncthreads();
  for (int t = tid; t < T; t += NT) atomicAdd(&cnt[group_of((long long)route[t], E)], 1);
  __syncthreads();
  if (tid < 32) fk_warp_exclusive_scan([&](int i) { return cnt[i]; }, off, E + 1, lane);
  __syncthreads();
  for (int g = tid; g <= E; g += NT) cnt[g] = off[g];  // cursors
  __syncthreads();
  for (int t = tid; t < T; t += NT) perm[atomicAdd(&cnt[group_of((long long)route[t], E)], 1)] = t;
  __syncthreads();
#else
  // o[e] = offsets[e] clamped to [0, T], non-decreasing (a running max), kept in cnt
  if (tid < 32) {
    int carry = 0;
    for (int base = 0; base <= E; base += 32) {
      const int e = base + lane;
      int inc = e <= E ? (int)min(max((long long)route[e], 0LL), (long long)T) : 0;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int y = __shfl_up_sync(FULL, inc, o);
        if (lane >= o) inc = max(inc, y);
      }
      inc = max(inc, carry);
      if (e <= E) cnt[e] = inc;
      carry = __shfl_sync(FULL, inc, 31);
    }
  }
  __syncthreads();
  const int o0 = cnt[0], oE = cnt[E], covered = oE - o0;
  for (int g = tid; g <= E + 1; g += NT) off[g] = g <= E ? cnt[g] - o0 : T;
  // positions [0, covered) are rows o0.. in order; then the uncovered rows [0, o0) and [oE, T)
  for (int p = tid; p < T; p += NT) {
    const int u = p - covered;
    perm[p] = u < 0 ? p + o0 : (u < o0 ? u : oE + (u - o0));
  }
  __syncthreads();
#endif
  for (int g = tid; g <= E; g += NT) cnt[g] = (off[g + 1] - off[g] + BM - 1) / BM;
  __syncthreads();
  if (tid < 32) fk_warp_exclusive_scan([&](int i) { return cnt[i]; }, ts, E + 1, lane);
  __syncthreads();
  for (int y = tid; y < slots; y += NT) {
    if (y >= ts[E + 1]) {
      tiles[y] = make_int4(-1, 0, 0, 0);
      continue;
    }
    int lo = 0, hi = E;  // the last group starting at or before slot y (groups without tiles start where the next does)
    while (lo < hi) {
      const int mid = (lo + hi + 1) >> 1;
      if (ts[mid] <= y) lo = mid; else hi = mid - 1;
    }
    tiles[y] = make_int4(lo, off[lo] + (y - ts[lo]) * BM, off[lo + 1], 0);
  }
}
