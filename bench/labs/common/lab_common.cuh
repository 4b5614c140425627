// What the standalone labs (bench/labs/*/*_lab.cu) share: the CUDA error check, seeded bf16 fills, launches (PDL or not), graph
// capture and event timing. Include with LAB_NAME defined (the prefix of the error lines).
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                                \
  do {                                                                                       \
    cudaError_t e_ = (x);                                                                    \
    if (e_ != cudaSuccess) {                                                                 \
      std::fprintf(stderr, LAB_NAME ": %s: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__); \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

// p[0, n) = seeded values in [-amp, amp), rounded to bf16 (a hash of the index: the same values in every run).
extern "C" __global__ void lab_fill_bf16(__nv_bfloat16* p, long long n, unsigned seed, float amp) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = __float2bfloat16_rn(((h & 0xffff) / 65536.f - 0.5f) * 2.f * amp);
  }
}

// fn<<<grid, block, smem, s>>>(args...) as a programmatic dependent launch when `pdl` (inside a captured graph: an edge
// that lets fn start while the kernel before it runs), else an ordinary one.
static void lab_launch(cudaStream_t s, const void* fn, dim3 grid, dim3 block, void** args, bool pdl, size_t smem = 0) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = at;
  cfg.numAttrs = pdl ? 1 : 0;
  CK(cudaLaunchKernelExC(&cfg, fn, args));
}

// The launches `body` makes on s, captured once into an executable graph (the caller destroys it).
template <class F>
static cudaGraphExec_t lab_capture(cudaStream_t s, F body) {
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  body();
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  CK(cudaGraphDestroy(g));
  return ge;
}

// The ms of `body` on s over `reps` runs timed with events, after `warmups` untimed ones, sorted; `before` runs untimed
// before each of them (e.g. an L2 flush).
template <class F, class G>
static std::vector<float> lab_times_ms(cudaStream_t s, F body, int reps, int warmups, G before) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < warmups; ++i) {
    before();
    body();
  }
  std::vector<float> t;
  for (int i = 0; i < reps; ++i) {
    before();
    CK(cudaEventRecord(a, s));
    body();
    CK(cudaEventRecord(b, s));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  std::sort(t.begin(), t.end());
  return t;
}

// Median ms of `body` on s over `reps` runs timed with events, after `warmups` untimed ones.
template <class F>
static float lab_median_ms(cudaStream_t s, F body, int reps, int warmups = 2) {
  const std::vector<float> t = lab_times_ms(s, body, reps, warmups, [] {});
  return t[t.size() / 2];
}
