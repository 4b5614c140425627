// Issue 4, paged decode attention on the H200 without Node: times the engine's tensor-core decode kernel
// (fk_paged_decode_mma from packages/backend-cuda/kernels/attention_decode.cu, built as the engine builds it: 4 warps,
// 2 cp.async stages, 4 query heads a CTA) on the kernel bench's case llama3-8b-decode-b64-2k (64 sequences whose lengths
// come in pairs L, 2049 - L; Llama-3-8B heads 32 / 8 x 128, bf16; every sequence's blocks drawn from a shuffled pool),
// and what its time is made of:
//   split+combine   the engine's launches: 512-key splits, then fk_paged_decode_combine
//   main only       the same main kernel without the combine (its output incomplete: time only)
//   combine loops   split+combine with the combine as it was before run 20 (a loop a pass, the length after the wait)
//   split / main cN split+combine and the main kernel alone with N-key splits
//   read floor      a plain read of both caches (every block, 16-byte loads), per byte of the case's traffic
//   copy            a device-to-device copy of half the case's traffic (the kernel bench's same-size copy)
// Run 20's first call also had each sequence's blocks consecutive and the cache laid out [block, head, token, dim]
// (one head's 16 keys 4 KB contiguous): both timed as the shuffled production layout (89.3-90.0 against 89.6-89.9 us),
// so neither the shuffle nor the 256-byte pieces cost DRAM time here; and the splits merged by the last CTA of each
// (sequence, head group) instead of the combine launch (each CTA fences its partials and counts itself in with an atomic;
// bit-identical): 97.3 us at 512 keys, 104-106 at 256 / 1024, against 89.6-89.9 for split+combine and 83.6-84.1 for the
// main kernel alone (docs/experiments.md: the patch is in git at 1b347c8).
// Run 20's calls 8-9 also ran a persistent version of the main kernel (one wave of CTAs taking the same items from a
// counter, each warp's stream running on into the next item): bit-identical, slower (main 94-102 us against 83);
// docs/experiments.md names the commit that has it (d6ff494).
// Every timing flushes L2 first (a 128 MiB memset outside the events) and is the median of the repetitions. Checks: the
// old combine's output bit-identical to the new one's at 128, 256, 512 and 1024-key splits, split+combine against a
// float64 reference of 16 (sequence, head) pairs. Built on the GPU host by
// bench/labs/decode-attention/run.sh with nvcc.
//   Build: nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a bench/labs/decode-attention/decode_lab.cu
//   Run: ./decode_lab [reps]   (default 20)
#define FK_DEC_PATH 2
#define FK_STAGES 2
#define FK_MWARPS 4
#define FK_MHG 4
#include "../../../packages/backend-cuda/kernels/attention_decode.cu"
#define LAB_NAME "decode-lab"
#include "../common/lab_common.cuh"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

namespace lab {
constexpr int B = 64, NQ = 32, NKV = 8, HD = 128, S = 2048, BS = 16, MB = S / BS, GROUP = NQ / NKV, NHG = NQ / FK_MHG;
constexpr int WARPS = FK_MWARPS, SMEM = WARPS * FK_STAGES * 2 * 16 * HD * 2;

struct Rng {  // a 64-bit LCG: the same case in every run
  uint64_t s = 0x9e3779b97f4a7c15ull;
  uint32_t next() {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(s >> 33);
  }
  int below(int n) { return (int)(next() % (uint32_t)n); }
};

// XOR of 16-byte words of p[0, n) (grid-stride, U loads in flight a thread), one word a block: a plain read.
template <int U>
__global__ void read_all(const uint4* __restrict__ p, long long n, unsigned* __restrict__ sink) {
  unsigned acc = 0;
  const long long stride = (long long)gridDim.x * blockDim.x;
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  for (; i + (U - 1) * stride < n; i += U * stride) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; u++) v[u] = __ldcs(p + i + u * stride);
#pragma unroll
    for (int u = 0; u < U; u++) acc ^= v[u].x ^ v[u].w;
  }
  for (; i < n; i += stride) acc ^= __ldcs(p + i).x;
  if (acc == 0x12345678u) sink[blockIdx.x] = acc;  // never in practice; keeps the loads
}
// fk_paged_decode_combine as it was before run 20 (a loop per pass over the splits, the length read after the wait)
__global__ void combine_loops(T* __restrict__ out, const float* __restrict__ part_acc, const float* __restrict__ part_ml, const int* __restrict__ seq_lens,
                              int max_tokens, int n_q_heads, int head_dim, int window, int chunk, int num_splits, int skip_single) {
  const int h = blockIdx.x, b = blockIdx.y;
  const int L = min(seq_lens[b], max_tokens);
  const int lo = window > 0 ? max(0, L - window) : 0;
  const int n = min(num_splits, max(0, (L - lo + chunk - 1) / chunk));
  if (skip_single && n <= 1) return;
  combine_splits<0>(out, part_acc, part_ml, n, (long long)b * n_q_heads + h, head_dim, num_splits);
}
}  // namespace lab

int main(int argc, char** argv) {
  using namespace lab;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const int reps = argc > 1 ? std::atoi(argv[1]) : 20;
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;

  // the case: kernel bench's llama3-8b-decode-b64-2k (paged_decode_attention.ts decodeSeqLens / makeInputs)
  std::vector<int> lens;
  Rng rng;
  for (int p = 0; p < B / 2; ++p) {
    const int L = p == 0 ? 1 : 1 + rng.below(S);
    lens.push_back(L);
    lens.push_back(S + 1 - L);
  }
  for (int i = B - 1; i > 0; --i) std::swap(lens[i], lens[rng.below(i + 1)]);
  const int NB = ((B / 2) * (S + 1) + BS - 1) / BS + B;
  std::vector<int> pool(NB);
  for (int i = 0; i < NB; ++i) pool[i] = i;
  for (int i = NB - 1; i > 0; --i) std::swap(pool[i], pool[rng.below(i + 1)]);
  std::vector<int> table(B * MB, 0);
  long long keys = 0;
  for (int b = 0, next = 0; b < B; ++b) {
    const int need = (lens[b] + BS - 1) / BS;
    for (int i = 0; i < need; ++i, ++next) {
      table[b * MB + i] = pool[next];
    }
    keys += lens[b];
  }
  const double bytes = 2.0 * B * NQ * HD * 2 + 2.0 * keys * NKV * HD * 2 + B * MB * 4.0 + B * 4.0;  // as the task's work()

  const long long nq = (long long)B * NQ * HD, nc = (long long)NB * BS * NKV * HD;
  T *q, *kc, *vc, *outA, *outB;
  CK(cudaMalloc(&q, nq * 2));
  CK(cudaMalloc(&kc, nc * 2));
  CK(cudaMalloc(&vc, nc * 2));
  CK(cudaMalloc(&outA, nq * 2));
  CK(cudaMalloc(&outB, nq * 2));
  lab_fill_bf16<<<1024, 256>>>(q, nq, 11, 1.7f);
  lab_fill_bf16<<<4096, 256>>>(kc, nc, 12, 1.7f);
  lab_fill_bf16<<<4096, 256>>>(vc, nc, 13, 1.7f);
  int *btDev, *lensDev;
  CK(cudaMalloc(&btDev, table.size() * 4));
  CK(cudaMalloc(&lensDev, B * 4));
  CK(cudaMemcpy(btDev, table.data(), table.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(lensDev, lens.data(), B * 4, cudaMemcpyHostToDevice));
  const int maxSplits = S / 64;
  float *partAcc, *partMl;
  CK(cudaMalloc(&partAcc, (long long)B * NQ * maxSplits * HD * 4));
  CK(cudaMalloc(&partMl, (long long)B * NQ * maxSplits * 2 * 4));
  void* flush;
  const size_t flushBytes = 128ull << 20;
  CK(cudaMalloc(&flush, flushBytes));
  unsigned* sink;
  CK(cudaMalloc(&sink, 4096 * 4));
  void* copyDst;
  const size_t copyBytes = (size_t)(bytes / 2) & ~(size_t)15;
  CK(cudaMalloc(&copyDst, copyBytes));
  CK(cudaDeviceSynchronize());
  CK(cudaFuncSetAttribute(fk_paged_decode_mma, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM));

  // the engine's split (attention-plan.ts planDecodeMma: 16 CTAs an SM aimed for, one 16-key tile a warp as the unit)
  const int unit = 16 * WARPS, target = sms * 16;
  const int planChunk = std::max(64, ((S * B * NHG + target - 1) / target + unit - 1) / unit * unit);
  const float scale = 1.f / std::sqrt((float)HD), scaleLog2 = scale * 1.4426950408889634f;
  // the combine after the main kernel: none (main kernel alone), the shipped one, or the loops it replaced
  enum class Combine { none, shipped, loops };
  auto runDecode = [&](T* out, int chunk, Combine combine) {
    const int splits = (S + chunk - 1) / chunk;
    long long qsb = (long long)NQ * HD, qsh = HD, sblk = (long long)BS * NKV * HD, stok = (long long)NKV * HD, sh = HD, btStride = MB;
    int maxBlocks = MB, nQ = NQ, group = GROUP, window = 0, ch = chunk, ns = splits;
    float sl = scaleLog2;
    void* args[] = {&out, &partAcc, &partMl, &q, &qsb, &qsh, &kc, &sblk, &stok, &sh, &vc, &sblk, &stok, &sh, &btDev, &btStride, &maxBlocks, &lensDev, &nQ, &group,
                    &window, &sl, &ch, &ns};
    CK(cudaLaunchKernel((const void*)fk_paged_decode_mma, dim3(splits, NHG, B), dim3(WARPS * 32), args, SMEM, s));
    if (splits > 1 && combine != Combine::none) {
      int maxTokens = MB * BS, d = HD, skip = 1;
      void* cargs[] = {&out, &partAcc, &partMl, &lensDev, &maxTokens, &nQ, &d, &window, &ch, &ns, &skip};
      const void* fn = combine == Combine::loops ? (const void*)combine_loops : (const void*)fk_paged_decode_combine;
      CK(cudaLaunchKernel(fn, dim3(NQ, B), dim3(128), cargs, 0, s));
    }
  };

  // --- checks
  auto fetch = [&](T* p) {
    std::vector<unsigned short> h(nq);
    CK(cudaStreamSynchronize(s));
    CK(cudaMemcpy(h.data(), p, nq * 2, cudaMemcpyDeviceToHost));
    return h;
  };
  auto bf = [](unsigned short x) {
    unsigned u = (unsigned)x << 16;
    float r;
    std::memcpy(&r, &u, 4);
    return r;
  };
  bool ok = true;
  CK(cudaMemset(outA, 0xff, nq * 2));
  runDecode(outA, planChunk, Combine::shipped);
  const std::vector<unsigned short> ref = fetch(outA);
  {  // float64 reference of 16 (sequence, head) pairs
    std::vector<unsigned short> hk(nc), hv(nc), hq(nq);
    CK(cudaMemcpy(hk.data(), kc, nc * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hv.data(), vc, nc * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hq.data(), q, nq * 2, cudaMemcpyDeviceToHost));
    double worst = 0;
    for (int i = 0; i < 16; ++i) {
      const int b = (i * 37) % B, h = (i * 11) % NQ, kvh = h / GROUP, L = lens[b];
      std::vector<double> sc(L), acc(HD, 0.0);
      double m = -1e300, l = 0;
      for (int t = 0; t < L; ++t) {
        const long long row = ((long long)table[b * MB + t / BS] * BS + t % BS) * NKV * HD + kvh * HD;
        double x = 0;
        for (int d = 0; d < HD; ++d) x += (double)bf(hq[((long long)b * NQ + h) * HD + d]) * bf(hk[row + d]);
        sc[t] = x * scale;
        m = std::max(m, sc[t]);
      }
      for (int t = 0; t < L; ++t) {
        const long long row = ((long long)table[b * MB + t / BS] * BS + t % BS) * NKV * HD + kvh * HD;
        const double p = std::exp(sc[t] - m);
        l += p;
        for (int d = 0; d < HD; ++d) acc[d] += p * bf(hv[row + d]);
      }
      for (int d = 0; d < HD; ++d) worst = std::max(worst, std::fabs(acc[d] / l - bf(ref[((long long)b * NQ + h) * HD + d])));
    }
    const bool good = worst < 2e-2;
    ok = ok && good;
    std::printf("decode-lab: split+combine (chunk %d) against float64, 16 heads: max abs err %.3g %s\n", planChunk, worst, good ? "ok" : "WRONG");
  }
  for (int chunk : {128, 256, planChunk, 1024}) {  // the old combine's bits at several split sizes
    runDecode(outA, chunk, Combine::shipped);
    const std::vector<unsigned short> a = fetch(outA);
    runDecode(outB, chunk, Combine::loops);
    const std::vector<unsigned short> c = fetch(outB);
    long long diff = 0;
    for (long long i = 0; i < nq; ++i) diff += a[i] != c[i];
    ok = ok && diff == 0;
    std::printf("decode-lab: split+combine c%d, the combine's loops against the unrolled combine: %lld elements differ %s\n", chunk, diff, diff ? "WRONG" : "ok");
  }
  // --- timings
  int flushes = 0;
  auto timed = [&](auto body) {  // (median, min) us, each run after an L2 flush
    const std::vector<float> t = lab_times_ms(s, body, reps, 2, [&] { CK(cudaMemsetAsync(flush, ++flushes & 0xff, flushBytes, s)); });
    return std::make_pair(t[t.size() / 2] * 1000.f, t[0] * 1000.f);
  };
  struct Row {
    std::string name;
    float med, min;
  };
  std::vector<Row> rows;
  auto add = [&](const std::string& name, auto body) {
    const auto r = timed(body);
    rows.push_back({name, r.first, r.second});
    std::printf("decode-lab: %-16s median %7.1f us  min %7.1f us\n", name.c_str(), r.first, r.second);
  };
  const long long cacheWords = nc * 2 / 16;
  for (int round = 0; round < 2; ++round) {  // two rounds: the order of the variants shows in neither
    const std::string tag = round ? " #2" : "";
    add("read floor" + tag, [&] {
      read_all<4><<<sms * 8, 512, 0, s>>>(reinterpret_cast<const uint4*>(kc), cacheWords, sink);
      read_all<4><<<sms * 8, 512, 0, s>>>(reinterpret_cast<const uint4*>(vc), cacheWords, sink);
    });
    // other read shapes, for the best plain read of these bytes: fewer threads with more loads each, one launch a cache
    add("read floor 2x8" + tag, [&] {
      read_all<8><<<sms * 2, 1024, 0, s>>>(reinterpret_cast<const uint4*>(kc), cacheWords, sink);
      read_all<8><<<sms * 2, 1024, 0, s>>>(reinterpret_cast<const uint4*>(vc), cacheWords, sink);
    });
    add("read floor 4x2" + tag, [&] {
      read_all<2><<<sms * 4, 1024, 0, s>>>(reinterpret_cast<const uint4*>(kc), cacheWords, sink);
      read_all<2><<<sms * 4, 1024, 0, s>>>(reinterpret_cast<const uint4*>(vc), cacheWords, sink);
    });
    add("copy" + tag, [&] { CK(cudaMemcpyAsync(copyDst, kc, copyBytes, cudaMemcpyDeviceToDevice, s)); });
    add("split+combine" + tag, [&] { runDecode(outA, planChunk, Combine::shipped); });
    add("main only" + tag, [&] { runDecode(outA, planChunk, Combine::none); });
    add("combine loops" + tag, [&] { runDecode(outA, planChunk, Combine::loops); });
    for (int chunk : {384, 1024}) {  // run 20 call 2 also had 256, 640, 768: all slower than 384-512
      add("split c" + std::to_string(chunk) + tag, [&] { runDecode(outA, chunk, Combine::shipped); });
      add("main c" + std::to_string(chunk) + tag, [&] { runDecode(outA, chunk, Combine::none); });
    }

  }
  // the read floor's figure is for the whole caches; per byte of this case's traffic:
  const double cacheBytes = 2.0 * nc * 2;
  std::printf("decode-lab table (b64 x 2k, %d SMs, %.1f MB of traffic, chunk %d, %d reps; GB/s = traffic / median; read floor scaled to the traffic)\n", sms,
              bytes / 1e6, planChunk, reps);
  std::printf("| variant | median us | min us | GB/s |\n| --- | --- | --- | --- |\n");
  for (const Row& r : rows) {
    const bool floor = r.name.rfind("read floor", 0) == 0, copy = r.name.rfind("copy", 0) == 0;
    const double med = floor ? r.med * bytes / cacheBytes : r.med;
    const double gbps = (copy ? 2.0 * copyBytes : bytes) / (r.med * 1e3);
    std::printf("| %s | %.1f%s | %.1f | %.0f |\n", r.name.c_str(), med, floor ? " (scaled)" : "", r.min, floor ? cacheBytes / (r.med * 1e3) : gbps);
  }
  std::printf("decode-lab: %s\n", ok ? "all checks passed" : "a check FAILED");
  return ok ? 0 : 1;
}
