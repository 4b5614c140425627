// Issue 7, bs-1 decode: how fast can the step's matrix-vector products go, and does PDL pay between them?
// A standalone CUDA program (built on the GPU host by bench/labs/gemv/run.sh with nvcc; no Node needed) that times,
// in CUDA graphs on the Llama-3-8B shapes at M = 1, bf16:
//   - fk_gemv (one warp per row), fk_gemv_stream (one wave, rows split evenly, loads always in flight), lab_gemv_dyn
//     (fk_gemv_stream with rows taken from a counter at run time: a candidate, here only) and cuBLAS,
//     each alone (8 distinct weight copies per graph, so L2 holds none of them), and after a one-block "norm" kernel
//     with and without programmatic dependent launch (the pair the decode graph has 64 times a step);
//   - the 32-layer chain of one decode step (norm, qkv, norm, o, norm, gate_up, act, down; lm_head last), per path and
//     PDL setting: what the step's products cost when the small kernels between them are as cheap as a norm can be;
//   - the read floor: a read-only stream over 2 GiB, and a 2 GiB device-to-device copy.
// The kernels under test are the product's own (kernels/gemv.cu, compiled here with -DFK_PDL=1: their waits are no-ops
// on ordinary launches). fk_gemv_stream must give fk_gemv's bits: checked on every shape before timing.
// Prints one line per measurement and a table last.
//   Build: nvcc -std=c++17 -O3 -arch=sm_90a -DFK_PDL=1 -DFK_UNR=8 bench/labs/gemv/gemv_lab.cu -lcublas (cuBLAS rows where its
//   headers are found). Run: ./gemv_lab [warps-per-SM ...] (default 8 16 32: the stream grid's size).
#include "../../../packages/backend-cuda/kernels/gemv.cu"
#define LAB_NAME "gemv-lab"
#include "gemv_lab_common.cuh"

#include <cuda_runtime.h>
#if __has_include(<cublas_v2.h>)
#include <cublas_v2.h>
#define LAB_CUBLAS 1
#else
#define LAB_CUBLAS 0  // a toolkit without cuBLAS's headers (CI's compile check): the cuBLAS rows are left out
#endif

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

// The stand-in for the norm between products: one block over the hidden vector, PDL entry like the product's kernels.
extern "C" __global__ void __launch_bounds__(256) lab_norm(T* __restrict__ out, const T* __restrict__ in, int n) {
  fk_pdl_entry();
  __shared__ float part[8];
  float s = 0.f;
  for (int i = threadIdx.x; i < n; i += 256) s += fk_f(in[i]) * fk_f(in[i]);
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = s;
  __syncthreads();
  float t = 0.f;
  for (int i = 0; i < 8; ++i) t += part[i];
  const float r = rsqrtf(t / n + 1e-5f);
  for (int i = threadIdx.x; i < n; i += 256) fk_set(out[i], fk_f(in[i]) * r);
}

// The stand-in for the small kernels between products that the norm does not stand for (rotary, kv store, attention,
// its combine, the activation): one block that reads and writes a few kilobytes, PDL entry like the product's kernels.
extern "C" __global__ void __launch_bounds__(256) lab_small(T* __restrict__ out, const T* __restrict__ in, int n) {
  fk_pdl_entry();
  for (int i = threadIdx.x; i < n; i += 256) fk_set(out[i], fk_f(in[i]) * 0.5f + 1.f);
}

// ---- lab_gemv_dyn: a candidate for the next fk_gemv_stream (run 11 left gate_up at 88% of the read rate, its warps
// ending unevenly). The same per-row work and order as fk_gemv (so the same bits), but rows are handed out at run time:
// warp w starts on row w (known before the PDL wait, so its first loads need nothing from the kernel before it), then
// takes the next free row from a counter as its prefetch crosses a row end (only after the wait), so warps that drew
// slow rows take fewer. The counter resets itself: the last warp to finish zeroes it for the next launch. Needs
// cpr >= FK_UNR (K >= 32 * FK_VEC * FK_UNR): the prefetch is then at most one row ahead of the row being summed.
__device__ unsigned lab_dyn_taken = 0;  // rows handed out after the first W
__device__ unsigned lab_dyn_done = 0;   // warps finished

extern "C" __global__ void __launch_bounds__(FK_WARPS * 32)
    lab_gemv_dyn(FK_T* __restrict__ y, const FK_T* __restrict__ x, const FK_T* __restrict__ w, const FK_T* __restrict__ bias, int M, int N,
                 int K, long long xs) {
  const int lane = threadIdx.x & 31;
  const int W = gridDim.x * FK_WARPS;
  const int nv = K / FK_VEC, cpr = nv / 32;
  const uint4* w4 = reinterpret_cast<const uint4*>(w) + lane;
  int crow = blockIdx.x * FK_WARPS + (threadIdx.x >> 5);  // the row being summed
  int prow = crow, pk = 0, nextRow = N;                    // the row being prefetched and its chunk; the row after crow
  auto take = [&]() {                                      // the next free row (warp-uniform; after the wait only)
    unsigned r = 0;
    if (lane == 0) r = (unsigned)W + atomicAdd(&lab_dyn_taken, 1u);
    prow = nextRow = (int)min(__shfl_sync(0xffffffffu, r, 0), (unsigned)N);
    pk = 0;
  };
  auto refill = [&]() -> uint4 {
    const uint4 v = fk_ld_stream(w4 + (long long)(prow < N ? prow : 0) * nv + pk * 32);  // past the end: a harmless re-read
    if (prow < N && ++pk == cpr) take();
    return v;
  };
  uint4 buf[FK_UNR];
#pragma unroll
  for (int u = 0; u < FK_UNR; ++u) buf[u] = fk_ld_stream(w4 + (long long)(crow < N ? crow : 0) * nv + u * 32);  // before the wait
  pk = FK_UNR;
  fk_pdl_wait();
  fk_pdl_trigger();
  if (crow < N && pk == cpr) take();  // the first row was exactly one ring long
  float acc[FK_M];
#pragma unroll
  for (int m = 0; m < FK_M; ++m) acc[m] = 0.f;
  int inRow = 0;
  while (crow < N) {
#pragma unroll
    for (int u = 0; u < FK_UNR; ++u) {
      if (crow < N) {
        fk_gemv_step(acc, buf[u], x, xs, M, inRow * 32 + lane);
        if (++inRow == cpr) {
          fk_gemv_store_row(acc, M, lane, y, bias, N, crow);
#pragma unroll
          for (int m = 0; m < FK_M; ++m) acc[m] = 0.f;
          inRow = 0;
          crow = nextRow;
        }
      }
      buf[u] = refill();
    }
  }
  if (lane == 0) {
    __threadfence();
    if (atomicAdd(&lab_dyn_done, 1u) == (unsigned)W - 1) {  // the last warp: every take is done; reset for the next launch
      lab_dyn_taken = 0;
      lab_dyn_done = 0;
      __threadfence();
    }
  }
}

extern "C" __global__ void lab_copy(uint4* __restrict__ dst, const uint4* __restrict__ src, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) dst[i] = src[i];
}

enum Path { GEMV, STREAM, DYN, CUBLAS };
static const char* pathName(Path p) { return p == GEMV ? "gemv" : p == STREAM ? "stream" : p == DYN ? "dyn" : "cublas"; }

struct Lab {
  cudaStream_t s;
#if LAB_CUBLAS
  cublasHandle_t h;
#endif
  int sms = 0;
  int warpsPerSm = 16;
  bool pdl = false;

  void launch(const void* fn, dim3 g, dim3 b, void** args) { lab_launch(s, fn, g, b, args, pdl); }
  void norm(T* out, const T* in, int n) {
    void* a[] = {&out, &in, &n};
    launch((const void*)lab_norm, dim3(1), dim3(256), a);
  }
  void small(T* out, const T* in, int n) {
    void* a[] = {&out, &in, &n};
    launch((const void*)lab_small, dim3(1), dim3(256), a);
  }
  // y[N] = W[N, K] x[K]
  void product(Path p, T* y, const T* x, const T* w, int N, int K) {
    const T* bias = nullptr;
    int M = 1;
    long long xs = K;
    if (p == GEMV) {
      void* a[] = {&y, &x, &w, &bias, &M, &N, &K, &xs};
      launch((const void*)fk_gemv, dim3((N + FK_WARPS - 1) / FK_WARPS), dim3(FK_WARPS * 32), a);
    } else if (p == STREAM) {
      // one wave of warps, each an equal share of rows (rows w, w + W, ...): the product's gemvStreamGrid
      const int rows = (N + sms * warpsPerSm - 1) / (sms * warpsPerSm);
      const int warps = (N + rows - 1) / rows;
      const int blocks = (warps + FK_WARPS - 1) / FK_WARPS;
      // fk_gemv_stream's FK_NORM parameters (read only by those builds): every parameter needs its slot in `a`
      const T *resIn = nullptr, *normW = nullptr;
      T* resOut = nullptr;
      float eps = 0.f;
      void* a[] = {&y, &x, &w, &bias, &M, &N, &K, &xs, &resIn, &resOut, &normW, &eps};
      launch((const void*)fk_gemv_stream, dim3(blocks), dim3(FK_WARPS * 32), a);
    } else if (p == DYN) {
      // one wave of sms * warpsPerSm warps in whole blocks (the kernel's W is the grid's), never more than N rows' worth
      const int blocks = (std::min(N, sms * warpsPerSm) + FK_WARPS - 1) / FK_WARPS;
      void* a[] = {&y, &x, &w, &bias, &M, &N, &K, &xs};
      launch((const void*)lab_gemv_dyn, dim3(blocks), dim3(FK_WARPS * 32), a);
    } else {
#if LAB_CUBLAS
      const float one = 1.f, zero = 0.f;
      if (cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, 1, K, &one, w, CUDA_R_16BF, K, x, CUDA_R_16BF, K, &zero, y, CUDA_R_16BF, N,
                       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS) {
        std::fprintf(stderr, "gemv-lab: cublasGemmEx failed (N %d K %d)\n", N, K);
        std::exit(1);
      }
#endif
    }
  }
  // median ms of one replay of a graph captured from `body`
  template <class F>
  float graphMs(F body, int reps = 30) {
    cudaGraphExec_t ge = lab_capture(s, body);
    const float ms = lab_median_ms(s, [&] { CK(cudaGraphLaunch(ge, s)); }, reps, 3);
    CK(cudaGraphExecDestroy(ge));
    return ms;
  }
};

struct Shape {
  const char* name;
  int N, K;
};
static const Shape kShapes[] = {{"qkv", 6144, 4096}, {"o", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336}, {"lm_head", 128256, 4096}};

int main(int argc, char** argv) {
  std::vector<int> wps;
  bool chainOnly = false;  // --chain-only: the bits check and the step chains, not each shape alone
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--chain-only") chainOnly = true;
    else wps.push_back(std::atoi(argv[i]));
  }
  if (wps.empty()) wps = {8, 16, 32};
  Lab L;
  CK(cudaStreamCreateWithFlags(&L.s, cudaStreamNonBlocking));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  L.sms = prop.multiProcessorCount;
#if LAB_CUBLAS
  if (cublasCreate(&L.h) != CUBLAS_STATUS_SUCCESS) return std::fprintf(stderr, "gemv-lab: cublasCreate failed\n"), 1;
  cublasSetStream(L.h, L.s);
  void* ws;
  CK(cudaMalloc(&ws, 64 << 20));
  cublasSetWorkspace(L.h, ws, 64 << 20);
#endif
  std::printf("gemv-lab: %s, %d SMs, L2 %d MiB, FK_UNR %d, FK_WARPS %d\n", prop.name, L.sms, prop.l2CacheSize >> 20, FK_UNR, FK_WARPS);

  // read floor
  const long long big = 1LL << 30;  // elements: 2 GiB
  T* a = alloc(big, 1);
  T* b = alloc(big, 2);
  unsigned* sink;
  CK(cudaMalloc(&sink, 4));
  // an SM copy kernel (a memcpy node in a graph may go to the copy engines, which are slower)
  const float copyMs = L.graphMs([&] { lab_copy<<<L.sms * 8, 512, 0, L.s>>>(reinterpret_cast<uint4*>(b), reinterpret_cast<const uint4*>(a), big / 8); }, 10);
  const float readMs = L.graphMs([&] { lab_read<<<L.sms * 8, 512, 0, L.s>>>(reinterpret_cast<const uint4*>(a), big / 8, sink); }, 10);
  const double copyGBs = 2.0 * big * sizeof(T) / copyMs / 1e6, readGBs = 1.0 * big * sizeof(T) / readMs / 1e6;
  std::printf("gemv-lab: floor copy %.0f GB/s (read + write), read-only stream %.0f GB/s (2 GiB)\n", copyGBs, readGBs);
  CK(cudaFree(a));
  CK(cudaFree(b));

  T* xa = alloc(14336, 3);
  T* xb = alloc(14336, 4);
  T* y = alloc(128256, 5);
  T* y2 = alloc(128256, 6);

  // correctness: the stream kernel gives fk_gemv's bits on every shape (and every grid size tried)
  for (const Shape& sh : kShapes) {
    T* w = alloc((long long)sh.N * sh.K, 7);
    std::vector<unsigned short> r1(sh.N), r2(sh.N);
    L.product(GEMV, y, xa, w, sh.N, sh.K);
    CK(cudaStreamSynchronize(L.s));
    CK(cudaMemcpy(r1.data(), y, sh.N * 2, cudaMemcpyDeviceToHost));
    for (int wp : wps) {
      L.warpsPerSm = wp;
      CK(cudaMemset(y2, 0xff, sh.N * 2));
      CK(cudaDeviceSynchronize());
      for (Path p : {STREAM, DYN}) {
        if (p == DYN && sh.K / 8 / 32 < FK_UNR) continue;  // lab_gemv_dyn needs K >= 32 * 8 * FK_UNR
        for (int rep = 0; rep < (p == DYN ? 3 : 1); ++rep) {  // dyn: its counter must have reset between launches
          CK(cudaMemset(y2, 0xff, sh.N * 2));
          CK(cudaDeviceSynchronize());
          L.product(p, y2, xa, w, sh.N, sh.K);
          CK(cudaStreamSynchronize(L.s));
          CK(cudaMemcpy(r2.data(), y2, sh.N * 2, cudaMemcpyDeviceToHost));
          int bad = 0;
          for (int i = 0; i < sh.N; ++i) bad += r1[i] != r2[i];
          std::printf("gemv-lab: bits %s %s(%d warps/SM) launch %d vs gemv: %d of %d differ\n", sh.name, pathName(p), wp, rep + 1, bad, sh.N);
          if (bad) return 1;
        }
      }
    }
    CK(cudaFree(w));
  }

  struct Row {
    std::string what;
    double us, floorFrac;
  };
  std::vector<Row> table;
  // alone and after the norm: 8 weight copies in the graph (never an L2 hit), time per product
  for (const Shape& sh : kShapes) {
    if (chainOnly) break;
    const int copies = sh.N > 100000 ? 2 : 8;
    std::vector<T*> ws8;
    for (int i = 0; i < copies; ++i) ws8.push_back(alloc((long long)sh.N * sh.K, 10 + i));
    const double bytes = (double)sh.N * sh.K * 2;
    std::vector<std::pair<Path, int>> variants = {{GEMV, 0}};
    if (LAB_CUBLAS) variants.push_back({CUBLAS, 0});
    for (int wp : wps) variants.push_back({STREAM, wp});
    if (sh.K / 8 / 32 >= FK_UNR)
      for (int wp : wps) variants.push_back({DYN, wp});
    for (const auto& v : variants) {
      const Path p = v.first;
      const int wp = v.second;
      L.warpsPerSm = wp;
      for (int mode = 0; mode < 3; ++mode) {  // 0 alone, 1 after norm, 2 after norm with PDL
        if (mode == 2 && p == CUBLAS) continue;
        L.pdl = mode == 2;
        const float ms = L.graphMs([&] {
          for (int i = 0; i < copies; ++i) {
            if (mode) L.norm(xa, xb, sh.K);
            L.product(p, y, xa, ws8[i], sh.N, sh.K);
          }
        });
        L.pdl = false;
        const double us = ms * 1e3 / copies;
        char what[96];
        std::snprintf(what, sizeof what, "%s %s%s%s", sh.name, pathName(p), (p == STREAM || p == DYN) ? ("(" + std::to_string(wp) + ")").c_str() : "",
                      mode == 0 ? "" : mode == 1 ? " +norm" : " +norm pdl");
        const double floorUs = bytes / readGBs / 1e3;
        std::printf("gemv-lab: %-34s %8.2f us  %5.1f%% of read floor (%.2f us)\n", what, us, 100 * floorUs / us, floorUs);
        table.push_back({what, us, floorUs / us});
      }
    }
    for (T* w : ws8) CK(cudaFree(w));
  }

  // the step's products: 32 layers with their own weights, norms between, lm_head last
  {
    const int layers = 32;
    struct LayerW {
      T *qkv, *o, *gu, *down;
    };
    std::vector<LayerW> lw(layers);
    for (int l = 0; l < layers; ++l)
      lw[l] = {alloc(6144LL * 4096, 100 + l), alloc(4096LL * 4096, 200 + l), alloc(28672LL * 4096, 300 + l), alloc(4096LL * 14336, 400 + l)};
    T* head = alloc(128256LL * 4096, 99);
    double bytes = 128256.0 * 4096 * 2 + layers * 2.0 * (6144.0 * 4096 + 4096.0 * 4096 + 28672.0 * 4096 + 4096.0 * 14336);
    std::vector<std::pair<Path, int>> variants = {{GEMV, 0}};
    if (LAB_CUBLAS) variants.insert(variants.begin(), {CUBLAS, 0});
    for (int wp : wps) variants.push_back({STREAM, wp});
    if (4096 / 8 / 32 >= FK_UNR)  // lab_gemv_dyn: every K of the step is at least 4096
      for (int wp : wps) variants.push_back({DYN, wp});
    for (const auto& v : variants) {
      const Path p = v.first;
      const int wp = v.second;
      L.warpsPerSm = wp;
      for (int pdl = 0; pdl < 2; ++pdl) {
        if (pdl && p == CUBLAS) continue;
        L.pdl = pdl;
        const float ms = L.graphMs(
            [&] {
              for (int l = 0; l < layers; ++l) {
                L.norm(xa, xb, 4096);
                L.product(p, y, xa, lw[l].qkv, 6144, 4096);
                L.norm(xa, xb, 4096);
                L.product(p, y, xa, lw[l].o, 4096, 4096);
                L.norm(xa, xb, 4096);
                L.product(p, y, xa, lw[l].gu, 28672, 4096);
                L.norm(xb, xa, 14336);
                L.product(p, y, xb, lw[l].down, 4096, 14336);
              }
              L.norm(xa, xb, 4096);
              L.product(p, y, xa, head, 128256, 4096);
            },
            10);
        L.pdl = false;
        char what[96];
        std::snprintf(what, sizeof what, "step chain %s%s%s", pathName(p), (p == STREAM || p == DYN) ? ("(" + std::to_string(wp) + ")").c_str() : "",
                      pdl ? " pdl" : "");
        const double floorUs = bytes / readGBs / 1e3;
        std::printf("gemv-lab: %-34s %8.1f us  %5.1f%% of read floor (%.1f us, 161 norms + 129 products)\n", what, ms * 1e3, 100 * floorUs / (ms * 1e3),
                    floorUs);
        table.push_back({what, ms * 1e3, floorUs / (ms * 1e3)});
      }
    }
    // The step as the engine runs it: the small kernels between products too (rotary, kv store, attention and its
    // combine between qkv and o; the activation between gate_up and down), stream products with PDL. Against the chain
    // above, what 160 more one-block kernels cost a step: the price of a launch that a fusion saves.
    for (int wp : wps) {
      L.warpsPerSm = wp;
      L.pdl = true;
      for (int smalls : {0, 1, 2, 4}) {  // small kernels between qkv and o (the activation's stays when smalls > 0)
        const float ms = L.graphMs(
            [&] {
              for (int l = 0; l < layers; ++l) {
                L.norm(xa, xb, 4096);
                L.product(STREAM, y, xa, lw[l].qkv, 6144, 4096);
                for (int i = 0; i < smalls; ++i) L.small(xb, y, 4096);
                L.product(STREAM, y, smalls ? xb : xa, lw[l].o, 4096, 4096);
                L.norm(xa, xb, 4096);
                L.product(STREAM, y, xa, lw[l].gu, 28672, 4096);
                if (smalls) L.small(xb, y, 14336);
                L.product(STREAM, y, xb, lw[l].down, 4096, 14336);
              }
              L.norm(xa, xb, 4096);
              L.product(STREAM, y, xa, head, 128256, 4096);
            },
            10);
        char what[96];
        std::snprintf(what, sizeof what, "step+%d small stream(%d) pdl", smalls ? smalls + 1 : 0, wp);
        const double floorUs = bytes / readGBs / 1e3;
        std::printf("gemv-lab: %-34s %8.1f us  %5.1f%% of read floor (%.1f us; %d one-block kernels between products a layer)\n", what, ms * 1e3,
                    100 * floorUs / (ms * 1e3), floorUs, 2 + (smalls ? smalls + 1 : 0));
        table.push_back({what, ms * 1e3, floorUs / (ms * 1e3)});
      }
      L.pdl = false;
    }
  }
  std::printf("\ngemv-lab table (FK_UNR %d; read floor %.0f GB/s, copy %.0f GB/s)\n%-36s %10s %8s\n", FK_UNR, readGBs, copyGBs, "case", "us", "floor");
  for (const Row& r : table) std::printf("%-36s %10.2f %7.1f%%\n", r.what.c_str(), r.us, 100 * r.floorFrac);
  return 0;
}
