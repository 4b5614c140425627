// FastKernels topk_softmax (the registry op; vLLM's topkGatingSoftmax): MoE routing of T tokens over E experts in one
// launch. For each row of gating logits [T, E] (f32 / bf16 / f16, experts contiguous, any row stride): the softmax in
// float32, the K largest probabilities (descending; ties: the lower expert id) into weights f32 [T, K] and their ids
// into ids i32 [T, K], the weights divided by their sum when `renormalize`.
//
// A group of FK_LANES lanes (32, or the power of two covering E when E < 32: several rows a warp) owns a row; lane g
// holds experts g, g + LANES, ... in registers (VPT of them), so the row is read once, coalesced. The max and the sum
// of exponentials are xor-butterfly reductions inside the group. The top K are K rounds of a group argmax over one
// 64-bit candidate per expert, (order-preserving key of the logit) << 32 | ~id: the largest candidate is the largest
// logit and, among equal logits, the lowest id; the winner's slot is then zeroed (0 is below every real candidate).
// Ranking the logits rather than the float32 probabilities keeps distinct logits apart where their rounded
// probabilities would tie (softmax is monotone, so the order is the float64 reference's). A chosen expert's weight is
// exp(x - max) / sum. Lane j % LANES keeps result j; the group writes its row's K results at the end.
//
// No host reads, no atomics, a grid from shapes alone (ceil(T / rows a CTA)): graph-capturable. Lanes of a row past T
// compute on -inf and write nothing (every lane of a warp takes part in the shuffles).
//
// NVRTC specialisation (src/ops/moe/topk-softmax.ts; limits in topk-softmax-plan.ts): -DFK_T=<float | __nv_bfloat16 |
// __half> -DFK_E=<experts, <= 512> -DFK_K=<top k, <= 32> -DFK_LANES=<lanes a row>. The defaults below (Qwen3-30B-A3B)
// compile standalone; a host replay (FK_HOST_REPLAY=1, topk-softmax-host.test.ts) supplies the CUDA built-ins.
// compile-cu: -DFK_T=float -DFK_E=8 -DFK_K=2 -DFK_LANES=8
// compile-cu: -DFK_T=__half -DFK_E=32 -DFK_K=4
// compile-cu: -DFK_E=512 -DFK_K=10
#include "fk_host_replay.cuh"

#ifndef FK_T
#define FK_T __nv_bfloat16
#endif
#ifndef FK_E
#define FK_E 128
#endif
#ifndef FK_K
#define FK_K 8
#endif
#ifndef FK_LANES
#define FK_LANES 32
#endif

namespace fktopk {

constexpr int E = FK_E;
constexpr int K = FK_K;
constexpr int LANES = FK_LANES;
constexpr int VPT = (E + LANES - 1) / LANES;  // logits a lane holds
constexpr int KPL = (K + LANES - 1) / LANES;  // results a lane keeps
constexpr int THREADS = 128;
constexpr int ROWS = THREADS / LANES;         // rows a CTA
constexpr unsigned FULL = 0xffffffffu;
static_assert(LANES >= 1 && LANES <= 32 && (LANES & (LANES - 1)) == 0, "FK_LANES: a power of two up to 32");
static_assert(K >= 1 && K <= E, "FK_K: 1 to FK_E");

__device__ __forceinline__ float to_float(float x) { return x; }
#if !FK_HOST_REPLAY
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
#endif

// An order-preserving key of a float: a larger float has a larger key (-0 as +0, NaN above +inf); 0 is below every
// number and marks a taken or padding slot.
__device__ __forceinline__ unsigned key_of(float x) {
  unsigned u = __float_as_uint(x);
  if (u == 0x80000000u) u = 0;
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ float float_of(unsigned key) { return __uint_as_float((key & 0x80000000u) ? (key & 0x7fffffffu) : ~key); }

__device__ __forceinline__ unsigned long long larger(unsigned long long a, unsigned long long b) { return a > b ? a : b; }

}  // namespace fktopk

extern "C" __global__ void __launch_bounds__(128) fk_moe_topk_softmax(const FK_T* __restrict__ logits, float* __restrict__ weights,
                                                                       int* __restrict__ ids, int T, long long row_stride,
                                                                       int renormalize) {
  using namespace fktopk;
  const int g = threadIdx.x % LANES;
  const int row = blockIdx.x * ROWS + threadIdx.x / LANES;
  const bool live = row < T;
  const FK_T* x = logits + (long long)row * row_stride;
  const float neg_inf = __int_as_float(0xff800000);

  float v[VPT];
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const int e = g + LANES * i;
    v[i] = live && e < E ? to_float(x[e]) : neg_inf;
  }
  float m = v[0];
#pragma unroll
  for (int i = 1; i < VPT; ++i) m = fmaxf(m, v[i]);
#pragma unroll
  for (int o = LANES / 2; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(FULL, m, o));
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < VPT; ++i) sum += g + LANES * i < E ? expf(v[i] - m) : 0.f;
#pragma unroll
  for (int o = LANES / 2; o > 0; o >>= 1) sum += __shfl_xor_sync(FULL, sum, o);

  unsigned long long cand[VPT];
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const unsigned e = g + LANES * i;
    cand[i] = e < (unsigned)E ? (unsigned long long)key_of(v[i]) << 32 | ~e : 0ull;
  }
  float w[KPL];
  int id[KPL];
  float kept = 0.f;
#pragma unroll
  for (int j = 0; j < K; ++j) {
    unsigned long long best = cand[0];
#pragma unroll
    for (int i = 1; i < VPT; ++i) best = larger(best, cand[i]);
#pragma unroll
    for (int o = LANES / 2; o > 0; o >>= 1) best = larger(best, __shfl_xor_sync(FULL, best, o));
    const int e = (int)~(unsigned)best;
    const float p = expf(float_of((unsigned)(best >> 32)) - m) / sum;
    kept += p;
#pragma unroll
    for (int i = 0; i < VPT; ++i)
      if (g + LANES * i == e) cand[i] = 0ull;
    if (j % LANES == g) {
      w[j / LANES] = p;
      id[j / LANES] = e;
    }
  }
  if (!live) return;
#pragma unroll
  for (int q = 0; q < KPL; ++q) {
    const int j = g + LANES * q;
    if (j < K) {
      weights[(long long)row * K + j] = renormalize ? w[q] / kept : w[q];
      ids[(long long)row * K + j] = id[q];
    }
  }
}
