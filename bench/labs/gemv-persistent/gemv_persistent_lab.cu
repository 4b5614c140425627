// Issue 7, bs-1 decode: do the kernel boundaries between the step's matrix-vector products cost what the profile says?
// Run 16's decode-profile has each GEMV launch ~3-4 us over its share of the read floor (qkv 3006 GB/s, o 2875, against
// lm_head's 4379), and no launch overlap tried so far (PDL triggers, early or at the last loads, grids capped at their
// fair share of an SM) recovered it. This standalone program (built on the GPU host by bench/labs/gemv-persistent/run.sh
// with nvcc; no Node) times the 129 products of one Llama-3-8B decode step at M 1, bf16, each reading the RMS-normalised
// output of the one before (real data flow), two ways:
//   - ref: per product a one-block norm kernel and fk_gemv_stream (the product's own kernel), PDL launches in a CUDA
//     graph: the kernel boundaries the engine has (its norm runs inside the GEMV, a smaller cost than this one-block
//     kernel, so ref is an upper bound on the engine's products);
//   - persistent: one cooperative launch for the whole chain, and (as the engine could adopt it: the attention kernels
//     sit between qkv and o) launches of a layer's o, gate_up and down, or of its gate_up and down only. Each warp
//     streams its rows of every product in turn; its loads run on across product ends into its first chunks of the
//     next product (weights need nothing from the product before), and only the block's use of x waits: a block
//     arrives on a counter when its rows are stored and, at the next product, waits until every block has arrived,
//     then normalises x into shared memory.
// Both give the same bits (checked before timing: the same per-lane sums, the same block norm of 256 threads), so
// persistent - ref is what the boundaries cost. Prints one line per measurement and a table last.
// Run 17: the whole chain in one launch took 4074 us against ref's 4078: the boundaries cost nothing a register-fed
// launch recovers. With LAB_RING=1 it also times lab_ring_chain.cuh, whose weights stream through a shared-memory ring
// (bulk copies up to 80 KB a block ahead), whole chain and one launch a product in a PDL graph.
// Run 18 (gemv-persistent-run18-ring*.log, same bits everywhere): whole chain 3921-3976 us at 2 blocks an SM with 20
// slots, one launch a product 3932 us at 3 blocks with 11 slots, against ref's 4096-4146. Mind what ref is: its norm is
// a kernel of its own before every product, while the ring cases (like the engine's fk_gemv_stream) normalise inside
// the product. The engine kernel built on it (fk_gemv_ring; docs/experiments.md, commit 7473e96) had the stream's
// bits but was slower in the decode step at every setting (4.43-5.92 ms against 4.19-4.23), and no faster one product
// at a time as PDL launches (gpu-tests-run18-linear-speed.log: qkv 15.1 us against 14.7, o 11.1 / 11.0, gate_up 58.3 /
// 58.8, lm_head 245.4 / 241.4). So the lab's gain did not carry over; part of it is ref's separate norm launches.
//   Build: nvcc -std=c++17 -O3 -arch=sm_90a -DFK_PDL=1 -DFK_UNR=4 [-DLAB_MINB=6] bench/labs/gemv-persistent/gemv_persistent_lab.cu
//   Run: ./gemv_persistent_lab [blocks-per-SM ...]  (persistent grids to try; default: 2 3 4 and what fits)
// compile-cu: -DFK_PDL=1 -DFK_UNR=4 -DLAB_MINB=6
#include "../../../packages/backend-cuda/kernels/gemv.cu"
#define LAB_NAME "gemv-persistent"
#include "../gemv/gemv_lab_common.cuh"
#include "lab_grid_sync.cuh"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

static_assert(FK_M == 1 && FK_VEC == 8, "the lab is bf16 at M 1");
constexpr int kThreads = FK_WARPS * 32;  // the norm's block size: ref's norm kernel and the persistent blocks alike

// One product of the chain: y [N] = W [N, K] . rmsnorm(x [0, K)).
struct Phase {
  const T* w;
  int N, K;
};

// x [0, K) normalised (no weight, eps 1e-5) into xn by threads t < nt: thread t sums the squares of vectors t, t + nt,
// ... in order, then blockSum (fk_block_sum's tree), then sync; x is read through L2 (__ldcg: other SMs wrote it, L1 may
// hold an older copy). With the same nt and tree, every caller gets ref's bits.
template <class BlockSum, class Sync>
__device__ __forceinline__ void lab_norm(T* xn, const T* x, int K, int t, int nt, BlockSum blockSum, Sync sync) {
  typedef FkVec<T, FK_VEC> V;
  const int nv = K / FK_VEC;
  float ss = 0.f;
  for (int j = t; j < nv; j += nt) {
    const uint4 raw = __ldcg(reinterpret_cast<const uint4*>(x) + j);
    const V a = *reinterpret_cast<const V*>(&raw);
#pragma unroll
    for (int e = 0; e < FK_VEC; ++e) ss += fk_f(a.v[e]) * fk_f(a.v[e]);
  }
  const float inv = rsqrtf(blockSum(ss) / (float)K + 1e-5f);
  for (int j = t; j < nv; j += nt) {
    const uint4 raw = __ldcg(reinterpret_cast<const uint4*>(x) + j);
    const V a = *reinterpret_cast<const V*>(&raw);
    V o;
#pragma unroll
    for (int e = 0; e < FK_VEC; ++e) fk_set(o.v[e], fk_f(a.v[e]) * inv);
    reinterpret_cast<V*>(xn)[j] = o;
  }
  sync();
}

// lab_norm by the whole block.
__device__ __forceinline__ void lab_norm_block(T* xn, const T* x, int K, float* red) {
  lab_norm(xn, x, K, threadIdx.x, blockDim.x, [&](float v) { return fk_block_sum(v, red); }, [] { __syncthreads(); });
}

// ref's norm: one block, PDL entry like the product kernels.
extern "C" __global__ void __launch_bounds__(kThreads) lab_norm_ref(T* __restrict__ xn, const T* __restrict__ x, int K) {
  fk_pdl_entry();
  __shared__ float red[32];
  lab_norm_block(xn, x, K, red);
}

// The chain in one launch (cooperative: every block resident). Product p reads out[(p - 1) % 2] (x0 for p = 0) and
// writes out[p % 2]; a buffer is written again two products later, after every block has read it (each block reads its
// x at a product's start and arrives only at its end). `arrived`: blocks that finished a product, summed over the
// launch (zeroed by the host; one counter a launch).
// LAB_MINB: blocks an SM the build must fit (__launch_bounds__' second argument; 57 registers without it: 4 blocks)
#ifdef LAB_MINB
#define LAB_CHAIN_BOUNDS __launch_bounds__(kThreads, LAB_MINB)
#else
#define LAB_CHAIN_BOUNDS __launch_bounds__(kThreads)
#endif
extern "C" __global__ void LAB_CHAIN_BOUNDS lab_chain(const Phase* __restrict__ ph, int P, const T* __restrict__ x0, T* out0, T* out1, unsigned* arrived) {
  extern __shared__ __align__(16) unsigned char lab_smem[];
  T* xn = reinterpret_cast<T*>(lab_smem);  // [max K]
  __shared__ float red[32];
  const int lane = threadIdx.x & 31;
  const int w0 = blockIdx.x * FK_WARPS + (threadIdx.x >> 5);
  const int W = gridDim.x * FK_WARPS;
  // this warp's chunks of product q (rows w0, w0 + W, ...), and that count rounded up to a whole ring (FK_UNR): each
  // product then starts on ring slot 0; the padding re-reads the warp's last chunk (an L2 hit) and is never summed
  auto chunks = [&](int q) { return ph[q].N > w0 ? ((ph[q].N - 1 - w0) / W + 1) * (ph[q].K / FK_VEC / 32) : 0; };
  auto padded = [&](int n) { return (n + FK_UNR - 1) / FK_UNR * FK_UNR; };

  // the prefetch cursor: product q, chunks emitted of it, its count and padded count, the chunk in its row, the address
  int q = -1, emitted = 0, total = 0, pad = 0, pk = 0, cpr = 1;
  long long rowJump = 0;
  const uint4* pp = reinterpret_cast<const uint4*>(ph[0].w) + lane;  // any valid address until the first product
  auto enter = [&]() {  // on to the next product this warp has chunks of (past the last: stays on its last chunk)
    while (++q < P) {
      total = chunks(q);
      pad = padded(total);
      if (pad == 0) continue;
      const int nv = ph[q].K / FK_VEC;
      cpr = nv / 32;
      rowJump = (long long)(W - 1) * nv;
      pp = reinterpret_cast<const uint4*>(ph[q].w) + (long long)w0 * nv + lane;
      emitted = pk = 0;
      return;
    }
    pad = 1 << 30;  // done: re-read forever (never summed)
  };
  auto refill = [&]() -> uint4 {
    const uint4 v = fk_ld_stream(pp);
    if (++emitted < total) {  // the next real chunk; else stay on the last one through the padding
      pp += 32;
      if (++pk == cpr) {
        pk = 0;
        pp += rowJump;
      }
    }
    if (emitted == pad) enter();
    return v;
  };
  enter();
  uint4 buf[FK_UNR];
#pragma unroll
  for (int u = 0; u < FK_UNR; ++u) buf[u] = refill();

  for (int p = 0; p < P; ++p) {
    const int K = ph[p].K, N = ph[p].N;
    const T* x = p == 0 ? x0 : ((p - 1) % 2 ? out1 : out0);
    T* y = p % 2 ? out1 : out0;
    if (p > 0) lab_grid_wait(arrived, p * gridDim.x);  // every block stored product p - 1 (this warp's loads of p fly meanwhile)
    lab_norm_block(xn, x, K, red);
    const int n = chunks(p), npad = padded(n), c = K / FK_VEC / 32;
    float acc[1] = {0.f};
    int row = w0, inRow = 0;
    for (int c0 = 0; c0 < npad; c0 += FK_UNR) {
#pragma unroll
      for (int u = 0; u < FK_UNR; ++u) {
        if (c0 + u < n) {
          acc[0] = fk_dot16(buf[u], reinterpret_cast<const uint4*>(xn)[inRow * 32 + lane], acc[0]);
          if (++inRow == c) {
            fk_gemv_store_row(acc, 1, lane, y, nullptr, N, row);
            acc[0] = 0.f;
            inRow = 0;
            row += W;
          }
        }
        buf[u] = refill();
      }
    }
    lab_grid_arrive(arrived);  // the block's rows are stored, and xn is free for the next product's norm
  }
}

#include "lab_ring_chain.cuh"  // lab_ring_chain (uses Phase)

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a line at a time: a run cut by a time limit keeps what it printed
  std::vector<int> bps;
  for (int i = 1; i < argc; ++i) bps.push_back(std::atoi(argv[i]));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  const int warpsPerSm = 48;  // the engine's fk_gemv_stream grids (LINEAR_TUNING.gemvStreamWarpsPerSm)

  // read floor: a read-only stream over 2 GiB
  const long long big = 1LL << 30;
  T* a = alloc(big, 1);
  unsigned* sink;
  CK(cudaMalloc(&sink, 4));
  const float readMs = lab_median_ms(s, [&] { lab_read<<<sms * 8, 512, 0, s>>>(reinterpret_cast<const uint4*>(a), big / 8, sink); }, 10);
  const double readGBs = 2.0 * big / readMs / 1e6;
  CK(cudaFree(a));

  // the step's products: 32 layers (qkv, o, gate_up, down) and the LM head, Llama-3-8B shapes
  std::vector<Phase> phases;
  double bytes = 0;
  int maxK = 0;
  const int layer[4][2] = {{6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336}};  // qkv, o, gate_up, down: N, K
  for (int l = 0; l < 32; ++l)
    for (const auto& nk : layer) phases.push_back({alloc((long long)nk[0] * nk[1], 100 + (unsigned)phases.size()), nk[0], nk[1]});
  phases.push_back({alloc(128256LL * 4096, 99), 128256, 4096});
  for (const Phase& p : phases) bytes += 2.0 * p.N * p.K, maxK = std::max(maxK, p.K);
  const int P = (int)phases.size();
  Phase* dph;
  CK(cudaMalloc(&dph, sizeof(Phase) * P));
  CK(cudaMemcpy(dph, phases.data(), sizeof(Phase) * P, cudaMemcpyHostToDevice));
  T* x0 = alloc(4096, 3);
  T* out[2] = {alloc(128256, 4), alloc(128256, 5)};
  T* xn = alloc(14336, 6);
  const double floorUs = bytes / readGBs / 1e3;
  std::printf("gemv-persistent: %s, %d SMs, FK_UNR %d, FK_WARPS %d; read floor %.0f GB/s: the %d products' %.2f GB take %.1f us\n", prop.name, sms,
              FK_UNR, FK_WARPS, readGBs, P, bytes / 1e9, floorUs);

  // ref: norm kernel + fk_gemv_stream per product, PDL launches, in a graph
  auto launch = [&](const void* fn, int blocks, void** args) { lab_launch(s, fn, dim3(blocks), dim3(kThreads), args, true); };
  auto refChain = [&] {
    for (int p = 0; p < P; ++p) {
      const T* x = p == 0 ? x0 : out[(p - 1) % 2];
      T* y = out[p % 2];
      int K = phases[p].K, N = phases[p].N, M = 1;
      void* na[] = {&xn, &x, &K};
      launch((const void*)lab_norm_ref, 1, na);
      // the engine's grid (gemvStreamGrid at 48 warps an SM)
      const int rows = (N + sms * warpsPerSm - 1) / (sms * warpsPerSm);
      const int blocks = ((N + rows - 1) / rows + FK_WARPS - 1) / FK_WARPS;
      const T* w = phases[p].w;
      const T *bias = nullptr, *resIn = nullptr, *normW = nullptr;
      T* resOut = nullptr;
      long long xs = K;
      float eps = 0.f;
      const T* xa = xn;
      void* ga[] = {&y, &xa, &w, &bias, &M, &N, &K, &xs, &resIn, &resOut, &normW, &eps};
      launch((const void*)fk_gemv_stream, blocks, ga);
    }
  };
  cudaGraphExec_t ge = lab_capture(s, refChain);
  std::vector<unsigned short> ref(128256), got(128256);
  CK(cudaGraphLaunch(ge, s));
  CK(cudaStreamSynchronize(s));
  CK(cudaMemcpy(ref.data(), out[(P - 1) % 2], 128256 * 2, cudaMemcpyDeviceToHost));
  const float refMs = lab_median_ms(s, [&] { CK(cudaGraphLaunch(ge, s)); }, 10);
  struct Row {
    std::string what;
    double us;
  };
  std::vector<Row> table = {{"ref: norm + fk_gemv_stream, PDL graph", refMs * 1e3}};
  std::printf("gemv-persistent: ref %.1f us (%.1f%% of the read floor)\n", refMs * 1e3, 100 * floorUs / (refMs * 1e3));

  // persistent: cooperative launches (every block resident), at each grid size asked for
  const size_t smem = (size_t)maxK * sizeof(T);
  int fit = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, lab_chain, kThreads, smem));
  if (bps.empty()) bps = {2, 3, 4, fit};
  std::sort(bps.begin(), bps.end());
  bps.erase(std::unique(bps.begin(), bps.end()), bps.end());
  int bad = 0;  // runs whose logits differ from ref's
  // logits of `run` (one chain) that differ from ref's; counted in `bad`. A chain is ~4 ms: one still running after
  // 10 s has hung (a persistent launch whose blocks wait on each other), and the program exits (2) rather than let
  // the GPU call's time limit take the rest of the call.
  auto logitsDiffering = [&](const auto& run) {
    CK(cudaMemset(out[(P - 1) % 2], 0xff, 128256 * 2));
    run();
    const auto t0 = std::chrono::steady_clock::now();
    for (cudaError_t e; (e = cudaStreamQuery(s)) == cudaErrorNotReady;) {
      if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(10)) {
        std::printf("gemv-persistent: HUNG: the chain did not finish in 10 s\n");
        std::exit(2);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    CK(cudaStreamSynchronize(s));
    CK(cudaMemcpy(got.data(), out[(P - 1) % 2], 128256 * 2, cudaMemcpyDeviceToHost));
    int diff = 0;
    for (int i = 0; i < 128256; ++i) diff += got[i] != ref[i];
    bad += diff != 0;
    return diff;
  };
  unsigned* arrived;  // a counter a launch: [0] for the whole chain, [1 + l] for the per-layer launches
  CK(cudaMalloc(&arrived, 4 * (P + 1)));
  for (int b : bps) {
    if (b < 1 || b > fit) {
      std::printf("gemv-persistent: %d blocks an SM do not fit (at most %d): skipped\n", b, fit);
      continue;
    }
    const int blocks = b * sms;
    // products [first, first + n) in one launch: product first + i writes out[(first + i) % 2], reads the other buffer
    auto part = [&](int first, int n, unsigned* ctr) {
      const Phase* sub = dph + first;
      const T* x = first == 0 ? x0 : out[(first - 1) % 2];
      T* o0 = out[first % 2];
      T* o1 = out[(first + 1) % 2];
      void* args[] = {&sub, &n, &x, &o0, &o1, &ctr};
      CK(cudaLaunchCooperativeKernel((const void*)lab_chain, dim3(blocks), dim3(kThreads), args, smem, s));
    };
    // how the products are grouped into launches: the whole chain in one; per layer qkv alone and o, gate_up, down in
    // one (the attention kernels sit between qkv and o in the engine); or qkv, o alone and gate_up + down in one (the
    // first step the engine could take: LlamaMLP's norm + gate_up + silu and down); the LM head alone in both
    struct Grouping {
      const char* name;
      std::vector<int> layer;  // products a launch takes, in a layer's order (qkv, o, gate_up, down)
    };
    const Grouping groupings[] = {{"whole chain", {}}, {"per layer (qkv | o+gu+down)", {1, 3}}, {"per layer (qkv | o | gu+down)", {1, 1, 2}}};
    for (const Grouping& gr : groupings) {
      int launches = 0;
      auto run = [&] {
        CK(cudaMemsetAsync(arrived, 0, 4 * (P + 1), s));
        launches = 0;
        if (gr.layer.empty()) {
          part(0, P, arrived);
          launches = 1;
          return;
        }
        for (int first = 0; first + 4 <= P; first += 4)
          for (int i = 0, at = first; i < (int)gr.layer.size(); at += gr.layer[i++]) part(at, gr.layer[i], arrived + ++launches);
        part(P - 1, 1, arrived + ++launches);
      };
      const int diff = logitsDiffering(run);
      std::printf("gemv-persistent: bits %s (%d launches), %d blocks an SM vs ref: %d of 128256 logits differ\n", gr.name, launches, b, diff);
      const float ms = lab_median_ms(s, run, 10);
      std::printf("gemv-persistent: persistent %s (%d launches), %d blocks an SM (%d warps) %.1f us (%.1f%% of the read floor)\n", gr.name, launches, b,
                  b * FK_WARPS, ms * 1e3, 100 * floorUs / (ms * 1e3));
      table.push_back({std::string(gr.name) + ", " + std::to_string(b) + " blocks/SM" + (diff ? " (BITS DIFFER)" : ""), ms * 1e3});
    }
  }
  // the chain fed through a shared-memory ring by bulk copies (lab_ring_chain.cuh): blocks an SM x ring slots of 4 KB;
  // only with LAB_RING=1 until it has run once (its first version hung in run 17: see the header)
  const char* ringEnv = std::getenv("LAB_RING");
  const bool ringOn = ringEnv && std::string(ringEnv) == "1";
  if (!ringOn) std::printf("gemv-persistent: the ring cases are skipped (LAB_RING=1 runs them)\n");
  // whole chain (cooperative, blocks meet on `arrived`) or per product (P 1 launches, PDL, in a graph: what an engine
  // kernel could do, the producer streaming a product's weights while the product before finishes)
  struct RingCase {
    int perSm, stages;
    bool perProduct;
  };
  const std::vector<RingCase> ringCases = {{2, 16, false}, {2, 20, false}, {3, 11, false}, {1, 48, true}, {2, 20, true}, {3, 11, true}};
  for (const RingCase& rc : ringOn ? ringCases : std::vector<RingCase>{}) {
    const int perSm = rc.perSm, stages = rc.stages;
    const size_t ringSmem = (size_t)stages * kRingSlotBytes + (size_t)maxK * sizeof(T) + (2 * sizeof(unsigned long long) + sizeof(unsigned)) * stages;
    CK(cudaFuncSetAttribute(lab_ring_chain, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)ringSmem));
    int ringFit = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ringFit, lab_ring_chain, kRingThreads, ringSmem));
    const std::string name = std::string(rc.perProduct ? "ring per product (PDL graph): " : "ring: ") + std::to_string(perSm) + " block/SM, " +
                             std::to_string(stages) + " x 4 KB";
    if (ringFit < perSm) {
      std::printf("gemv-persistent: %s does not fit (%d an SM): skipped\n", name.c_str(), ringFit);
      continue;
    }
    const int blocks = perSm * sms;
    int maxKArg = maxK, stagesArg = stages;
    std::function<void()> run;
    cudaGraphExec_t ringGraph = nullptr;
    if (rc.perProduct) {
      ringGraph = lab_capture(s, [&] {
        for (int p = 0; p < P; ++p) {
          const Phase* sub = dph + p;
          int one = 1, pdl = 1;
          const T* x = p == 0 ? x0 : out[(p - 1) % 2];
          T* y = out[p % 2];
          unsigned* none = nullptr;
          void* args[] = {&sub, &one, &x, &y, &y, &none, &stagesArg, &maxKArg, &pdl};
          lab_launch(s, (const void*)lab_ring_chain, dim3(blocks), dim3(kRingThreads), args, true, ringSmem);
        }
      });
      run = [&] { CK(cudaGraphLaunch(ringGraph, s)); };
    } else {
      run = [&] {
        CK(cudaMemsetAsync(arrived, 0, 4, s));
        const T* x = x0;
        T *o0 = out[0], *o1 = out[1];
        int pdl = 0;
        void* args[] = {&dph, (void*)&P, &x, &o0, &o1, &arrived, &stagesArg, &maxKArg, &pdl};
        CK(cudaLaunchCooperativeKernel((const void*)lab_ring_chain, dim3(blocks), dim3(kRingThreads), args, ringSmem, s));
      };
    }
    const int diff = logitsDiffering(run);
    const float ms = lab_median_ms(s, run, 10);
    std::printf("gemv-persistent: %s %.1f us (%.1f%% of the read floor), %d of 128256 logits differ from ref\n", name.c_str(), ms * 1e3,
                100 * floorUs / (ms * 1e3), diff);
    table.push_back({name + (diff ? " (BITS DIFFER)" : ""), ms * 1e3});
    if (ringGraph) CK(cudaGraphExecDestroy(ringGraph));
  }
  std::printf("\ngemv-persistent table (FK_UNR %d; %d products, read floor %.1f us at %.0f GB/s; blocks fit: %d an SM)\n%-52s %10s %8s\n", FK_UNR, P,
              floorUs, readGBs, fit, "case", "us", "floor");
  for (const Row& r : table) std::printf("%-52s %10.1f %7.1f%%\n", r.what.c_str(), r.us, 100 * floorUs / r.us);
  return bad ? 1 : 0;
}
