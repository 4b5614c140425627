// Issue 31, the MoE GEMM at prefill on Hopper: the wgmma + TMA route (fk_fused_moe_wgmma,
// packages/backend-cuda/kernels/fused_moe_wgmma.cu, after moe_tile_rows.cu's fk_moe_gather_rows, and fk_moe_tile_map
// where moe_align's blocks are 64 rows) against the engine's mma.sync fused MoE GEMM (fk_fused_moe,
// kernels/fused_moe.cu, compiled here with the tile fused-moe-plan.ts picks at prefill for its block size, below) and
// cuBLAS on the dense-equivalent GEMM ([slots, K] x [K, N], one weight), bf16, one case a run. Routing: T tokens, each
// to top_k distinct experts drawn uniformly (seeded), laid out as moe_align does (sorted by expert, each expert's run
// padded to whole blocks with the id `slots`), built on the host: block sizes 128 (the wgmma route reads the blocks as
// tiles) and 64 (the tile map packs two blocks a tile first) for the wgmma route, LAB_ENGINE_BS for fk_fused_moe (the
// same slots, so the same outputs).
//   small        T 300, E 8, top 2, K 512, N 768; expert 3 is non-local (expert_ids -1: zero rows), mul: the edges
//   mixtral-w13  T 4096, E 8, top 2, K 4096, N 28672 (Mixtral-8x7B's gate_up; bench/results/h100: fk_fused_moe 7.0 ms)
//   mixtral-w2   A = the [T top_k, 14336] intermediate (top_k 1 for the GEMM), N 4096, mul_routed_weight
//   qwen3-w13    T 4096, E 128, top 8, K 2048, N 1536 (Qwen3-30B-A3B's gate_up)
//   qwen3-w2     A = [T top_k, 768], N 2048, mul_routed_weight
// Checks: no output element left unwritten (outputs start as NaN; every slot is live), the wgmma output (bs 128) against
// a float32 reference on the GPU (up to 8 slots an expert, every column: max |diff| / max |ref|), the bs-64 route's
// output against it on every element (expected equal: the same rows, the same k order), and, without mul, against
// fk_fused_moe on every element. Times: CUDA events, median of 20 after 3 warm-ups, L2 not flushed: at bs 128 the
// gather, the GEMM and both (the route's cost), the whole route at bs 64 (tile map + gather + GEMM), fk_fused_moe,
// cuBLAS. TFLOP/s count 2 slots N K (padding rows are not work).
// Prints check lines, a table row ("moe-wgmma row:") and a JSON line ("moe-wgmma json:"); exit 1 when a check fails,
// 3 when the wgmma kernel's launch fails (a fault: run.sh runs each case in its own process, under a timeout).
//   Build: nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a [-DFK_MOE_WG_BN=128] [-DFK_MOE_WG_PERSISTENT=1] bench/labs/moe-wgmma/moe_wgmma_lab.cu -lcublas
//   Run: ./moe_wgmma_lab CASE
// The engine's mma.sync kernel as fused-moe-plan.ts launches it at prefill, on its own routing of block size
// LAB_ENGINE_BS: 128 by default (tile m128 = BM 128, BN 128, BK 32, 2 x 4 warps, 4 stages: bench/results/h100/ops.json's
// fused_moe-mixtral-w13-T4096-bs128, 7.0 ms = 274 TFLOP/s), or 64 (-DLAB_ENGINE_BS=64: tile m64 = BM 64, BN 128, BK 64,
// 2 x 2 warps, 3 stages; the ops bench's -bs64 rows, 222 TFLOP/s there); group_m 8 both. Without the routed-weight
// multiply (FK_MUL 0: a per-row scale in the epilogue, no cost worth another build; its output is compared only where
// the case has no mul).
#ifndef LAB_ENGINE_BS
#define LAB_ENGINE_BS 128
#endif
#if LAB_ENGINE_BS == 64
#define FK_BM 64
#define FK_BN 128
#define FK_BK 64
#define FK_WM 2
#define FK_WN 2
#define FK_STAGES 3
#elif LAB_ENGINE_BS == 128
#define FK_BM 128
#define FK_BN 128
#define FK_BK 32
#define FK_WM 2
#define FK_WN 4
#define FK_STAGES 4
#else
#error "LAB_ENGINE_BS: 64 or 128"
#endif
#define FK_MUL 0
#include "../../../packages/backend-cuda/kernels/fused_moe.cu"        // fk_fused_moe
#include "../../../packages/backend-cuda/kernels/fused_moe_wgmma.cu"  // fk_fused_moe_wgmma
#include "../../../packages/backend-cuda/kernels/moe_tile_rows.cu"    // fk_moe_tile_map, fk_moe_gather_rows
#define LAB_NAME "moe-wgmma"
#include "../common/lab_common.cuh"
#include "../common/lab_tma.cuh"

#if __has_include(<cublas_v2.h>)
#include <cublas_v2.h>
#define LAB_CUBLAS 1
#else
#define LAB_CUBLAS 0
#endif

#include <cmath>
#include <cstring>
#include <random>
#include <string>

namespace lab {
typedef __nv_bfloat16 T;
constexpr int BS = 128;           // the wgmma kernel's moe_align block size (it needs bs % 128 == 0)
constexpr int SAMPLES = 8;        // reference slots an expert
constexpr int ENGINE_GROUP_M = 8;  // fused-moe-plan.ts's m128 tile

struct Case {
  const char* name;
  int T, E, topK, K, N;
  bool w2;          // A is the [T top_k, K] intermediate: the GEMM's top_k is 1 (rows are slots)
  bool mul;         // mul_routed_weight
  int nonLocal;     // an expert whose blocks get expert id -1 (zero rows), or -1 for none
};
static const Case CASES[] = {
    {"small", 300, 8, 2, 512, 768, false, true, 3},
    {"mixtral-w13", 4096, 8, 2, 4096, 28672, false, false, -1},
    {"mixtral-w2", 4096, 8, 2, 14336, 4096, true, true, -1},
    {"qwen3-w13", 4096, 128, 8, 2048, 1536, false, false, -1},
    {"qwen3-w2", 4096, 128, 8, 768, 2048, true, true, -1},
};

static float bf(unsigned short u) {
  unsigned int x = (unsigned int)u << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

// float32 reference of the sampled slots: one CTA an (expert, 8 columns), one warp a column; the expert's samples
// (sample_rows[e][0 .. count[e]): rows of A) are dotted with the column's weight row in one pass over k (W read once).
// ref[e][j][n] = sum_k A[row][k] W[e][n][k] (x scale[e][j] where given).
__global__ void __launch_bounds__(256) ref32(float* __restrict__ ref, const T* __restrict__ a, const T* __restrict__ w, const int* __restrict__ sample_rows,
                                             const int* __restrict__ count, const float* __restrict__ scale, int N, int K) {
  const int e = blockIdx.y, n = blockIdx.x * 8 + threadIdx.x / 32, lane = threadIdx.x % 32;
  const int cnt = count[e];
  if (n >= N || cnt == 0) return;
  float acc[SAMPLES];
#pragma unroll
  for (int j = 0; j < SAMPLES; ++j) acc[j] = 0.f;
  const T* wr = w + ((long long)e * N + n) * K;
  for (int k = lane; k < K; k += 32) {
    const float x = __bfloat162float(wr[k]);
#pragma unroll
    for (int j = 0; j < SAMPLES; ++j)
      if (j < cnt) acc[j] += x * __bfloat162float(a[(long long)sample_rows[e * SAMPLES + j] * K + k]);
  }
#pragma unroll
  for (int j = 0; j < SAMPLES; ++j) {
    float v = acc[j];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0 && j < cnt) ref[((long long)e * SAMPLES + j) * N + n] = v * (scale ? scale[e * SAMPLES + j] : 1.f);
  }
}

// Non-finite elements of p[0, n) (an output element no kernel wrote is NaN).
__global__ void count_nonfinite(const T* __restrict__ p, long long n, unsigned long long* __restrict__ out) {
  unsigned long long c = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    c += !isfinite(__bfloat162float(p[i]));
  if (c) atomicAdd(out, c);
}

// A bf16 tensor [d2, d1, K] (K contiguous, rows of K elements) as the kernel's 3-D map {K, d1, d2}: boxes of 64 k x
// box_rows rows x 1, 128-byte swizzle, zeros past the ends.
static FkTensorMap tensor_map(LabEncodeTiled encode, const T* base, int K, long long d1, long long d2, int box_rows) {
  return lab_tensor_map_3d(encode, base, {(cuuint64_t)K, (cuuint64_t)d1, (cuuint64_t)d2}, {(cuuint64_t)K * 2, (cuuint64_t)d1 * K * 2},
                           {64, (cuuint32_t)box_rows, 1});
}

// moe_align's layout on the host: slots sorted by expert (slot order within one), each expert's run padded to whole
// blocks of bs with the id `slots`; entries past the padded count hold `slots` too. sorted has P entries, expertIds P / bs.
struct Routing {
  std::vector<int> topk;         // [slots]: the expert of each slot
  std::vector<float> weights;    // [slots]
  std::vector<int> sorted, expertIds;
  int post = 0;                  // num_tokens_post_padded
  int liveBound = 0;             // fused-moe-plan.ts's liveBlocksBound: the blocks the grids cover
};

// The cases' expert choices (seeded: every build and block size sees the same ones).
static void choose(const Case& c, Routing& r) {
  const int slots = c.T * c.topK;
  r.topk.resize(slots);
  r.weights.resize(slots);
  std::mt19937 rng(31);
  std::uniform_real_distribution<float> uw(0.05f, 1.f);
  for (int t = 0; t < c.T; ++t) {
    for (int k = 0; k < c.topK; ++k) {
      int e;
      bool dup;
      do {
        e = (int)(rng() % c.E);
        dup = false;
        for (int j = 0; j < k; ++j) dup |= r.topk[t * c.topK + j] == e;
      } while (dup);
      r.topk[t * c.topK + k] = e;
      r.weights[t * c.topK + k] = uw(rng);
    }
  }
}

static Routing route(const Case& c, int BS) {
  const int slots = c.T * c.topK;
  Routing r;
  choose(c, r);
  const int P = ((slots + c.E * (BS - 1)) + BS - 1) / BS * BS;
  r.sorted.assign(P, slots);
  r.expertIds.assign(P / BS, -1);
  int pos = 0;
  for (int e = 0; e < c.E; ++e) {
    const int start = pos;
    for (int s = 0; s < slots; ++s)
      if (r.topk[s] == e) r.sorted[pos++] = s;
    pos = start + (pos - start + BS - 1) / BS * BS;
    for (int b = start / BS; b < pos / BS; ++b) r.expertIds[b] = e == c.nonLocal ? -1 : e;
  }
  r.post = pos;
  const int hit = std::min(c.E, slots), NB = P / BS;
  r.liveBound = std::min(std::min(NB, slots), (slots + hit * (BS - 1)) / BS);
  return r;
}

// A routing on the device, and for blocks below 128 rows the tile map's outputs (written by fk_moe_tile_map), sized as
// fused-moe-wgmma-plan.ts sizes them: mTiles row tiles of 128.
struct DevRouting {
  int *sorted, *experts, *post;
  int bs, mTiles;
  int *tileExpert = nullptr, *tileBlock = nullptr, *postTiles = nullptr, *sortedTiles = nullptr;
};

static int* upload_ints(const std::vector<int>& v) {
  int* d;
  CK(cudaMalloc(&d, std::max<size_t>(1, v.size()) * 4));
  CK(cudaMemcpy(d, v.data(), v.size() * 4, cudaMemcpyHostToDevice));
  return d;
}

static DevRouting upload(const Routing& r, int bs, int E, int slots) {
  DevRouting d{upload_ints(r.sorted), upload_ints(r.expertIds), upload_ints({r.post}), bs, 0};
  if (bs % 128 == 0) {
    d.mTiles = r.liveBound * bs / 128;
  } else {
    const int G = 128 / bs;  // each hit expert's run of n blocks fills ceil(n / G) tiles
    d.mTiles = std::min(r.liveBound, (r.liveBound + std::min(E, slots) * (G - 1)) / G);
    CK(cudaMalloc(&d.tileExpert, d.mTiles * 4));
    CK(cudaMalloc(&d.tileBlock, d.mTiles * G * 4));
    CK(cudaMalloc(&d.postTiles, 4));
    CK(cudaMalloc(&d.sortedTiles, d.mTiles * 128 * 4));
  }
  return d;
}

}  // namespace lab

int main(int argc, char** argv) {
  const lab::Case* cs = nullptr;
  for (const lab::Case& c : lab::CASES)
    if (argc > 1 && std::strcmp(argv[1], c.name) == 0) cs = &c;
  if (!cs) {
    std::fprintf(stderr, "usage: %s CASE (", argv[0]);
    for (const lab::Case& c : lab::CASES) std::fprintf(stderr, " %s", c.name);
    std::fprintf(stderr, ")\n");
    return 2;
  }
  using lab::T;
  cudaDeviceProp prop;
  const LabEncodeTiled encode = lab_tma_setup(prop);

  const lab::Case& c = *cs;
  const int slots = c.T * c.topK, E = c.E, K = c.K, N = c.N;
  const int gemmTopK = c.w2 ? 1 : c.topK, aRows = c.w2 ? slots : c.T;
  const lab::Routing r = lab::route(c, lab::BS), r64 = lab::route(c, 64), re = lab::route(c, LAB_ENGINE_BS);
  const int nTilesWg = (N + fkmoewg::BN - 1) / fkmoewg::BN;
  const int mTilesEng = re.liveBound, nTilesEng = (N + FK_BN - 1) / FK_BN;  // the engine's tile: R = bs = BM, a block a row tile
  const double flops = 2.0 * slots * N * K;

  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const lab::DevRouting d128 = lab::upload(r, lab::BS, E, slots), d64 = lab::upload(r64, 64, E, slots), dEng = lab::upload(re, LAB_ENGINE_BS, E, slots);
  const int aSortedRows = std::max(d128.mTiles, d64.mTiles) * fkmoewg::BM;
  T *a, *w, *aSorted, *outWg, *outWg64, *outEng, *outDense;
  float* tw;
  const long long nA = (long long)aRows * K, nW = (long long)E * N * K, nOut = (long long)slots * N;
  CK(cudaMalloc(&a, nA * 2));
  CK(cudaMalloc(&w, nW * 2));
  CK(cudaMalloc(&aSorted, (long long)aSortedRows * K * 2));
  CK(cudaMalloc(&outWg, nOut * 2));
  CK(cudaMalloc(&outWg64, nOut * 2));
  CK(cudaMalloc(&outEng, nOut * 2));
  CK(cudaMalloc(&outDense, nOut * 2));
  CK(cudaMalloc(&tw, slots * 4));
  CK(cudaMemcpy(tw, r.weights.data(), slots * 4, cudaMemcpyHostToDevice));
  lab_fill_bf16<<<1024, 256, 0, s>>>(a, nA, 1, 1.f);
  lab_fill_bf16<<<4096, 256, 0, s>>>(w, nW, 2, 0.05f);
  CK(cudaMemsetAsync(aSorted, 0xff, (long long)aSortedRows * K * 2, s));  // NaN rows: a live entry the gather misses shows
  for (T* o : {outWg, outWg64, outEng}) CK(cudaMemsetAsync(o, 0xff, nOut * 2, s));  // NaN: an element no kernel writes shows
  CK(cudaStreamSynchronize(s));

  const FkTensorMap tmA = lab::tensor_map(encode, aSorted, K, aSortedRows, 1, fkmoewg::BM);
  const FkTensorMap tmW = lab::tensor_map(encode, w, K, N, E, fkmoewg::BN);
  int mul = c.mul ? 1 : 0, groupM = 8;
  int Ka = K, Na = N, Ea = E, topKa = gemmTopK, slotsA = slots, nT = nTilesWg;
  const float* twArg = tw;
  CK(cudaFuncSetAttribute(fk_fused_moe_wgmma, cudaFuncAttributeMaxDynamicSharedMemorySize, fkmoewg::MOE_WG_SMEM_BYTES));

  // The route on one routing, as fused-moe-wgmma.ts launches it: the tile map (blocks below 128 rows), the gather, the
  // GEMM into out. The GEMM's routing: moe_align's, or the tile map's (block size 128).
  auto runTileMap = [&](const lab::DevRouting& d) {
    if (d.tileBlock) fk_moe_tile_map<<<1, 1024, 0, s>>>(d.tileExpert, d.tileBlock, d.postTiles, d.experts, d.post, d.bs, d.mTiles);
  };
  auto runGather = [&](const lab::DevRouting& d) {
    fk_moe_gather_rows<<<d.mTiles * fkmoewg::BM, 256, 0, s>>>(reinterpret_cast<uint4*>(aSorted), d.sortedTiles, reinterpret_cast<const uint4*>(a), d.sorted,
                                                            d.tileBlock, d.tileBlock ? d.postTiles : d.post, K / 8, K / 8, gemmTopK, slots, d.bs);
  };
  auto launchGemm = [&](const lab::DevRouting& d, T* out) {
    const int* sortedArg = d.tileBlock ? d.sortedTiles : d.sorted;
    const int* expertsArg = d.tileBlock ? d.tileExpert : d.experts;
    const int* postArg = d.tileBlock ? d.postTiles : d.post;
    int bsArg = d.tileBlock ? fkmoewg::BM : d.bs, mT = d.mTiles;
    void* args[] = {(void*)&tmA, (void*)&tmW, &out, &twArg, &sortedArg, &expertsArg, &postArg, &Na, &Ka, &Ea, &slotsA, &bsArg, &mT, &nT, &groupM, &mul};
    // the persistent build: a CTA an SM at most, each walking the tiles gridDim.x apart
    const int grid = fkmoewg::PERSISTENT ? std::min(d.mTiles * nTilesWg, prop.multiProcessorCount) : d.mTiles * nTilesWg;
    return cudaLaunchKernel((const void*)fk_fused_moe_wgmma, dim3(grid), dim3(fkmoewg::THREADS), args, fkmoewg::MOE_WG_SMEM_BYTES, s);
  };
  auto runRoute = [&](const lab::DevRouting& d, T* out) {
    runTileMap(d);
    runGather(d);
    CK(launchGemm(d, out));
  };
  // the engine's kernel on its routing: R = LAB_ENGINE_BS rows a CTA (the largest divisor of bs at most BM), group_m 8
  const int engSmem = fkmoe::STAGES * (fkmoe::BM + fkmoe::BN) * fkmoe::PITCH * 2;
  CK(cudaFuncSetAttribute(fk_fused_moe, cudaFuncAttributeMaxDynamicSharedMemorySize, engSmem));
  auto runEngine = [&] {
    int R = LAB_ENGINE_BS, bsE = LAB_ENGINE_BS, mTe = mTilesEng, nTe = nTilesEng, gm = lab::ENGINE_GROUP_M;
    long long sam = K, sbe = (long long)N * K, sbn = K;
    const int *se = dEng.sorted, *ee = dEng.experts, *pe = dEng.post;
    void* args[] = {&outEng, &a, &w, &twArg, (void*)&se, (void*)&ee, (void*)&pe, &Na, &Ka, &Ea, &topKa, &slotsA, &R, &bsE, &mTe, &nTe, &gm, &sam, &sbe, &sbn};
    CK(cudaLaunchKernel((const void*)fk_fused_moe, dim3(mTilesEng * nTilesEng), dim3(fkmoe::NT), args, engSmem, s));
  };

  const std::string head = std::string("moe-wgmma: ") + prop.name + ", " + c.name + " (T " + std::to_string(c.T) + ", E " + std::to_string(E) + ", top " +
                           std::to_string(c.topK) + ", K " + std::to_string(K) + ", N " + std::to_string(N) + (c.mul ? ", mul" : "") + ", bs 128 and 64 (engine " +
                           std::to_string(LAB_ENGINE_BS) + "), BN " + std::to_string(fkmoewg::BN) + ", " + std::to_string(fkmoewg::STAGES) + " stages" +
                           (fkmoewg::PERSISTENT ? ", persistent" : "") + ", bf16)";
  runEngine();
  CK(cudaGetLastError());
  CK(cudaStreamSynchronize(s));
  // the wgmma route's first launches, bs 128 then bs 64 (through the tile map): a fault ends this case with a line
  cudaError_t err = cudaSuccess;
  for (const auto& [d, out] : {std::pair<const lab::DevRouting*, T*>{&d128, outWg}, {&d64, outWg64}}) {
    runTileMap(*d);
    runGather(*d);
    err = cudaGetLastError();
    if (err == cudaSuccess) err = launchGemm(*d, out);
    if (err == cudaSuccess) err = cudaStreamSynchronize(s);
    if (err != cudaSuccess) break;
  }
  if (err != cudaSuccess) {
    std::printf("%s: the wgmma route FAILED to run: %s\n", head.c_str(), cudaGetErrorString(err));
    std::printf("moe-wgmma row: %-12s %s\n", c.name, "FAULT");
    std::printf("moe-wgmma json: {\"case\":\"%s\",\"device\":\"%s\",\"ok\":false,\"error\":\"%s\"}\n", c.name, prop.name, cudaGetErrorString(err));
    return 3;
  }

  // checks: nothing left unwritten, the sampled slots against float32, the engine's output (no mul) everywhere
  unsigned long long* nfDev;
  CK(cudaMalloc(&nfDev, 24));
  CK(cudaMemset(nfDev, 0, 24));
  lab::count_nonfinite<<<1024, 256, 0, s>>>(outWg, nOut, nfDev);
  lab::count_nonfinite<<<1024, 256, 0, s>>>(outEng, nOut, nfDev + 1);
  lab::count_nonfinite<<<1024, 256, 0, s>>>(outWg64, nOut, nfDev + 2);
  unsigned long long nf[3];
  CK(cudaMemcpy(nf, nfDev, 24, cudaMemcpyDeviceToHost));

  std::vector<int> sampleSlot(E * lab::SAMPLES, -1), sampleRow(E * lab::SAMPLES, 0), count(E, 0);
  std::vector<float> sampleScale(E * lab::SAMPLES, 1.f);
  {
    std::vector<std::vector<int>> per(E);
    for (int p = 0; p < r.post; ++p)
      if (r.sorted[p] < slots) per[r.topk[r.sorted[p]]].push_back(r.sorted[p]);
    for (int e = 0; e < E; ++e) {
      const int n = (int)per[e].size(), m = std::min(n, lab::SAMPLES);
      for (int j = 0; j < m; ++j) {  // spread over the expert's run, its first and last slot included
        const int sl = per[e][m == 1 ? 0 : (long long)j * (n - 1) / (m - 1)];
        sampleSlot[e * lab::SAMPLES + j] = sl;
        sampleRow[e * lab::SAMPLES + j] = sl / gemmTopK;
        sampleScale[e * lab::SAMPLES + j] = e == c.nonLocal ? 0.f : c.mul ? r.weights[sl] : 1.f;
      }
      count[e] = m;
    }
  }
  int *rowsDev, *countDev;
  float *scaleDev, *refDev;
  CK(cudaMalloc(&rowsDev, sampleRow.size() * 4));
  CK(cudaMalloc(&countDev, E * 4));
  CK(cudaMalloc(&scaleDev, sampleScale.size() * 4));
  CK(cudaMalloc(&refDev, (long long)E * lab::SAMPLES * N * 4));
  CK(cudaMemcpy(rowsDev, sampleRow.data(), sampleRow.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(countDev, count.data(), E * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(scaleDev, sampleScale.data(), sampleScale.size() * 4, cudaMemcpyHostToDevice));
  lab::ref32<<<dim3((N + 7) / 8, E), 256, 0, s>>>(refDev, a, w, rowsDev, countDev, scaleDev, N, K);
  CK(cudaGetLastError());
  CK(cudaStreamSynchronize(s));
  std::vector<float> ref((size_t)E * lab::SAMPLES * N);
  CK(cudaMemcpy(ref.data(), refDev, ref.size() * 4, cudaMemcpyDeviceToHost));
  std::vector<unsigned short> rowOut(N);
  double maxRef = 0, maxDiff = 0;
  int worstSlot = -1, worstCol = -1;
  for (int e = 0; e < E; ++e)
    for (int j = 0; j < count[e]; ++j) {
      const int sl = sampleSlot[e * lab::SAMPLES + j];
      CK(cudaMemcpy(rowOut.data(), outWg + (long long)sl * N, N * 2, cudaMemcpyDeviceToHost));
      const float* rr = &ref[((size_t)e * lab::SAMPLES + j) * N];
      for (int n = 0; n < N; ++n) {
        maxRef = std::max(maxRef, (double)std::fabs(rr[n]));
        const double d = std::fabs((double)lab::bf(rowOut[n]) - rr[n]);
        if (!(d <= maxDiff)) maxDiff = d, worstSlot = sl, worstCol = n;  // NaN counts as the worst
      }
    }
  const double relRef = maxDiff / std::max(maxRef, 1e-30);
  // every element: max |x - y| / max |y| (NaN counts as the worst)
  auto relEvery = [&](const T* xDev, const T* yDev) {
    std::vector<unsigned short> x(nOut), y(nOut);
    CK(cudaMemcpy(x.data(), xDev, nOut * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(y.data(), yDev, nOut * 2, cudaMemcpyDeviceToHost));
    double md = 0, mr = 0;
    for (long long i = 0; i < nOut; ++i) {
      const double u = lab::bf(x[i]), v = lab::bf(y[i]);
      mr = std::max(mr, std::fabs(v));
      const double d = std::fabs(u - v);
      if (!(d <= md)) md = d;
    }
    return md / std::max(mr, 1e-30);
  };
  const double relEng = c.mul ? -1 : relEvery(outWg, outEng);
  const double rel64 = relEvery(outWg64, outWg);  // the same rows in the same tiles' k order: expected 0
  // bf16 outputs: each rounded once (2^-9 relative), the sums in f32 in different orders
  const double TOL = 1e-2;
  const bool ok = nf[0] == 0 && nf[2] == 0 && relRef <= TOL && (relEng < 0 || relEng <= TOL) && rel64 <= TOL;
  std::printf("%s: %s: unwritten/non-finite %llu (bs 64 %llu, engine %llu); vs float32 (%d slots x %d cols) max|diff|/max|ref| %.3g (max|ref| %.3g; worst slot %d col %d); "
              "bs 64 vs bs 128 every element %.3g%s\n",
              head.c_str(), ok ? "OK" : "WRONG", nf[0], nf[2], nf[1], (int)std::count_if(sampleSlot.begin(), sampleSlot.end(), [](int v) { return v >= 0; }), N,
              relRef, maxRef, worstSlot, worstCol, rel64, relEng >= 0 ? (" ; vs fk_fused_moe every element " + std::to_string(relEng)).c_str() : "");

  // times
  const int reps = 20;
  const float msGather = lab_median_ms(s, [&] { runGather(d128); }, reps, 3);
  const float msGemm = lab_median_ms(s, [&] { CK(launchGemm(d128, outWg)); }, reps, 3);
  const float msBoth = lab_median_ms(s, [&] { runRoute(d128, outWg); }, reps, 3);
  const float ms64 = lab_median_ms(s, [&] { runRoute(d64, outWg64); }, reps, 3);
  const float msEng = lab_median_ms(s, runEngine, reps, 3);
  // the GEMM alone at other launch orders (row tiles grouped over the column tiles: L2 reuse of W and A tiles), and the
  // padding it multiplies (live rows / slots), for tuning without a rebuild
  std::printf("moe-wgmma tuning: %s: live rows %d for %d slots (%.1f%% padding); GEMM ms by group_m:", c.name, r.post, slots, 100.0 * (r.post - slots) / r.post);
  for (int gm : {1, 4, 8, 16, 32}) {
    groupM = gm;
    std::printf(" %d: %.4f", gm, lab_median_ms(s, [&] { CK(launchGemm(d128, outWg)); }, reps, 3));
  }
  groupM = 8;
  std::printf("\n");
  float msDense = -1;
#if LAB_CUBLAS
  {
    cublasHandle_t h;
    if (cublasCreate(&h) == CUBLAS_STATUS_SUCCESS) {
      cublasSetStream(h, s);
      const float one = 1.f, zero = 0.f;
      // C [slots, N] = A_sorted[:slots] [slots, K] x W[0]^T: column-major C^T [N, slots] = W0 [N, K] (op T of K x N) x A^T
      auto runDense = [&] {
        if (cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, slots, K, &one, w, CUDA_R_16BF, K, aSorted, CUDA_R_16BF, K, &zero, outDense, CUDA_R_16BF, N,
                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS) {
          std::fprintf(stderr, "moe-wgmma: cublasGemmEx failed\n");
          std::exit(1);
        }
      };
      msDense = lab_median_ms(s, runDense, reps, 3);
      cublasDestroy(h);
    }
  }
#endif
  CK(cudaGetLastError());
  auto tf = [&](float ms) { return ms > 0 ? flops / (ms * 1e-3) / 1e12 : -1.0; };
  std::printf("moe-wgmma row: %-12s %9.4f %9.4f %9.4f %9.4f %9.4f %9.4f %8.1f %8.1f %8.1f %7.1f%% %7.2f  %s\n", c.name, msGather, msGemm, msBoth, ms64, msEng,
              msDense, tf(msBoth), tf(msEng), tf(msDense), msDense > 0 ? 100.0 * tf(msBoth) / tf(msDense) : -1.0, msEng / msBoth, ok ? "ok" : "WRONG");
  std::printf(
      "moe-wgmma json: {\"case\":\"%s\",\"device\":\"%s\",\"bn\":%d,\"stages\":%d,\"persistent\":%d,\"engine_bs\":%d,\"ok\":%s,\"rel_ref\":%.4g,\"rel_engine\":%.4g,"
      "\"rel_bs64\":%.4g,\"unwritten\":%llu,\"gather_ms\":%.5f,\"gemm_ms\":%.5f,\"wgmma_ms\":%.5f,\"wgmma_bs64_ms\":%.5f,\"engine_ms\":%.5f,"
      "\"cublas_dense_ms\":%.5f,\"wgmma_tflops\":%.2f,\"engine_tflops\":%.2f,\"dense_tflops\":%.2f}\n",
      c.name, prop.name, fkmoewg::BN, fkmoewg::STAGES, (int)fkmoewg::PERSISTENT, LAB_ENGINE_BS, ok ? "true" : "false", relRef, relEng, rel64, nf[0] + nf[2], msGather, msGemm, msBoth, ms64,
      msEng, msDense, tf(msBoth), tf(msEng), tf(msDense));
  return ok ? 0 : 1;
}
