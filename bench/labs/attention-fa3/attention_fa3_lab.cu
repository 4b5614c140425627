// Issue 28, attention at FA3 class: the FlashAttention-3-style prefill kernel (fk_varlen_prefill_fa3,
// packages/backend-cuda/kernels/attention_fa3.cu: TMA, a producer warp, two ping-ponging consumer warpgroups) against
// the engine's kernel for the shape on sm_90a, bf16, one case a run. Head dim 128 (the default build) against
// fk_varlen_prefill_wgmma (attention_prefill.cu):
//   small       2 sequences (300, 77 tokens), 4 / 2 heads, causal: partial tiles, masks, GQA (a quick first look)
//   llama-4096  1 sequence of 4096, 32 / 8 heads, causal (Llama-3-8B prefill; bench/results/h100: wgmma 431 us)
//   llama-8192  1 sequence of 8192, 32 / 8 heads, causal
//   varlen      8 sequences of 100 .. 2000 tokens, 32 / 8 heads, causal
//   flux        1 sequence of 4608, 24 / 24 heads, not causal (FLUX.1's joint attention)
//   unit        the kernel's TMA loads and two wgmma forms alone against float64 (lab::unit: for a WRONG case)
// Head dim 64 (attention_fa3_lab_hd64.cu: this file with FK_D 64) against fk_varlen_prefill (mma.sync, 8 warps; no wgmma kernel at 64): hd64-small,
// hd64-4096, hd64-varlen, hd64-dense (the shapes above) and hd64-unit.
// Attention sinks (attention_fa3_lab_sinks.cu: this file with FK_D 64 and FK_SINKS 1, so both kernels take the sinks
// pointer): sinks, gpt-oss-20b-like (1 x 4096, 64 / 8 heads x 64, causal, sliding window 128, random per-head sinks,
// one far above the scores and one far below) against the mma.sync sinks kernel; the float32 reference adds the sink.
// Checks: the FA3 kernel's output against the baseline's (every element; its output buffer starts as NaN, so a row
// never written shows), both against a float32 reference (every row of 3 heads), and the FA3 kernel's LSE against the
// reference's. Times: CUDA events, median of 20 after 3 warm-ups, L2 not flushed (the 8B case's K / V fit in L2, as in
// the engine's prefill). TFLOP/s count 4 D flops a visible (query, key) pair: causal is about half of dense.
// Prints a check line, a table row ("attention-fa3 row:") and a JSON line ("attention-fa3 json:"); exit 1 when a check
// fails, 3 when the FA3 kernel's launch fails (a fault: the context is lost, so run.sh runs each case in its
// own process, under a timeout).
//   Build: nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a bench/labs/attention-fa3/attention_fa3_lab[_hd64|_sinks].cu
//   Run: ./attention_fa3_lab CASE [REPS]
#ifndef FK_WARPS
#define FK_WARPS 8  // the mma kernel (the head-dim-64 baseline) as the engine builds it (ATTENTION_TUNING.prefillWarps)
#endif
#include "../../../packages/backend-cuda/kernels/attention_prefill.cu"  // the baselines (FK_T bf16; FK_D 128 by default)
#include "../../../packages/backend-cuda/kernels/attention_fa3.cu"      // fk_varlen_prefill_fa3
#define LAB_NAME "attention-fa3"
#include "../common/lab_common.cuh"
#include "../common/lab_tma.cuh"

#include <cmath>
#include <cstring>
#include <string>

// The baseline: the engine's kernel for the head dim on sm_90a (wgmma at 128; the mma.sync kernel, 8 warps, at 64).
#if FK_D == 128
#define LAB_BASE "wgmma"
#else
#define LAB_BASE "mma"
#endif
#if FK_SINKS && FK_D != 64
#error "the sinks lab is the head-dim-64 build (attention_fa3_lab_sinks.cu)"
#endif
namespace lab {
typedef __nv_bfloat16 T;
constexpr int D = FK_D;

struct Case {
  const char* name;
  std::vector<int> lens;
  int nQ, nKV, causal;
  int window = 0;  // > 0: each row sees the last `window` keys up to its own
};
#if FK_SINKS
static const Case CASES[] = {
    {"sinks", {4096}, 64, 8, 1, 128},  // gpt-oss-20b's attention layers (its sliding-window half)
};
#elif FK_D == 128
static const Case CASES[] = {
    {"small", {300, 77}, 4, 2, 1},
    {"llama-4096", {4096}, 32, 8, 1},
    {"llama-8192", {8192}, 32, 8, 1},
    {"varlen", {1000, 100, 2000, 517, 1536, 250, 1789, 640}, 32, 8, 1},
    {"flux", {4608}, 24, 24, 0},
};
#else
static const Case CASES[] = {
    {"hd64-small", {300, 77}, 4, 2, 1},
    {"hd64-4096", {4096}, 32, 8, 1},
    {"hd64-varlen", {1000, 100, 2000, 517, 1536, 250, 1789, 640}, 32, 8, 1},
    {"hd64-dense", {4608}, 24, 24, 0},
};
#endif

// float32 reference of the heads in `heads` (nh of them): one thread a query row, two passes over its keys (the max,
// then the weighted sum). out [nh][T][D], lse [nh][T] (natural log; -inf for a row that sees no key). window > 0: the
// last `window` keys up to the row's own. sinks (or null): a logit a query head in the denominator, with no value.
__global__ void ref32(float* __restrict__ out, float* __restrict__ lse, const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                      const int* __restrict__ cu, int num_seqs, int total, int nQ, int nKV, int causal, int window, float scale,
                      const int* __restrict__ heads, const float* __restrict__ sinks) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= total) return;
  const int h = heads[blockIdx.y], kvh = h / (nQ / nKV);
  int s = 0;
  while (s + 1 < num_seqs && cu[s + 1] <= r) ++s;
  const int q0 = cu[s], len = cu[s + 1] - q0, i = r - q0;
  const int hi = causal ? i : len - 1;  // self-attention: as many keys as queries
  const int lo = window > 0 ? max(0, i - window + 1) : 0;
  const T* qr = q + ((long long)r * nQ + h) * D;
  auto dot = [&](int t) {
    const T* kr = k + ((long long)(q0 + t) * nKV + kvh) * D;
    float x = 0.f;
    for (int d = 0; d < D; ++d) x += __bfloat162float(qr[d]) * __bfloat162float(kr[d]);
    return x * scale;
  };
  float m = -INFINITY;
  for (int t = lo; t <= hi; ++t) m = fmaxf(m, dot(t));
  const float sink = sinks ? sinks[h] : -INFINITY;
  if (lo <= hi) m = fmaxf(m, sink);  // a row that sees no key stays zeros, as in the kernels
  float acc[D], l = lo <= hi ? expf(sink - m) : 0.f;
  for (int d = 0; d < D; ++d) acc[d] = 0.f;
  for (int t = lo; t <= hi; ++t) {
    const float p = expf(dot(t) - m);
    const T* vr = v + ((long long)(q0 + t) * nKV + kvh) * D;
    l += p;
    for (int d = 0; d < D; ++d) acc[d] += p * __bfloat162float(vr[d]);
  }
  float* o = out + ((long long)blockIdx.y * total + r) * D;
  for (int d = 0; d < D; ++d) o[d] = l > 0.f ? acc[d] / l : 0.f;
  lse[(long long)blockIdx.y * total + r] = l > 0.f ? m + logf(l) : -INFINITY;
}

// The tensor map the FA3 kernel reads a packed [rows, heads, 128] bf16 tensor through: 3-D {D, heads, rows}, boxes of
// 64 columns x 1 head x box_rows rows, 128-byte swizzle, zeros past the end.
static FkTensorMap tensor_map(LabEncodeTiled encode, const T* base, int rows, int heads, int box_rows) {
  return lab_tensor_map_3d(encode, base, {(cuuint64_t)D, (cuuint64_t)heads, (cuuint64_t)rows}, {(cuuint64_t)D * 2, (cuuint64_t)heads * D * 2},
                           {64, 1, (cuuint32_t)box_rows});
}

// The kernel's pieces alone, for a run that comes out WRONG (one CTA, one warpgroup): a [64 x D], b [128 x D] and
// v [128 x D] loaded by the TMA through the same kind of tensor maps (1 head), then s = a b^T (issue_qk) and o = p v
// (issue_pv, p [64 x 128] packed into A fragments by the accumulator layout), written out by that layout. A wrong s
// points at the TMA layout or the K-major descriptors, a wrong o (with s right) at the N-major V descriptor.
__global__ void __launch_bounds__(128) unit(const __grid_constant__ FkTensorMap ta, const __grid_constant__ FkTensorMap tb,
                                            const __grid_constant__ FkTensorMap tv, const T* __restrict__ p, float* __restrict__ s_out,
                                            float* __restrict__ o_out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) unsigned char unit_smem[];
  unsigned char* smp = unit_smem + ((1024 - (fkfa3::smem_u32(unit_smem) & 1023)) & 1023);
  const unsigned sa = fkfa3::smem_u32(smp), sb = sa + fkfa3::Q_WG_BYTES, sv = sb + fkfa3::KV_BYTES, bar = sv + fkfa3::KV_BYTES;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
  if (tid == 0) {
    fkbar::init(bar, 1);
    fkbar::init_fence();
  }
  __syncthreads();
  if (tid == 0) {
    fkbar::arrive_expect_tx(bar, fkfa3::Q_WG_BYTES + 2 * fkfa3::KV_BYTES);
    for (int blk = 0; blk < fkfa3::D_BLOCKS; ++blk) {
      fktma::load_3d(sa + blk * fkfa3::Q_BLOCK_BYTES, &ta, bar, 64 * blk, 0, 0);
      fktma::load_3d(sb + blk * fkfa3::KV_BLOCK_BYTES, &tb, bar, 64 * blk, 0, 0);
      fktma::load_3d(sv + blk * fkfa3::KV_BLOCK_BYTES, &tv, bar, 64 * blk, 0, 0);
    }
  }
  fkbar::wait(bar, 0);
  float s[64], o[fkfa3::O_REGS];
  for (int i = 0; i < 64; ++i) s[i] = 0.f;
  for (int i = 0; i < fkfa3::O_REGS; ++i) o[i] = 0.f;
  fkwg::fence();
  fkfa3::issue_qk(s, sa, sb);
  fkwg::commit();
  fkwg::wait<0>();
  fkwg::pin(s);
  const int rowA = 16 * warp + g, rowB = rowA + 8;
  auto pk = [&](int r, int c) { return fkfa3::pack(__bfloat162float(p[r * 128 + c]), __bfloat162float(p[r * 128 + c + 1])); };
  unsigned pa[fkfa3::BN / 16][4];
  for (int kk = 0; kk < fkfa3::BN / 16; ++kk) {
    pa[kk][0] = pk(rowA, 16 * kk + 2 * t4);
    pa[kk][1] = pk(rowB, 16 * kk + 2 * t4);
    pa[kk][2] = pk(rowA, 16 * kk + 8 + 2 * t4);
    pa[kk][3] = pk(rowB, 16 * kk + 8 + 2 * t4);
  }
  fkwg::fence();
  fkfa3::issue_pv(o, pa, sv);
  fkwg::commit();
  fkwg::wait<0>();
  fkwg::pin(o);
  for (int i = 0; i < 16; ++i) {  // s [64 x 128 keys]
    const int c = 8 * i + 2 * t4;
    s_out[rowA * 128 + c] = s[4 * i], s_out[rowA * 128 + c + 1] = s[4 * i + 1];
    s_out[rowB * 128 + c] = s[4 * i + 2], s_out[rowB * 128 + c + 1] = s[4 * i + 3];
  }
  for (int i = 0; i < D / 8; ++i) {  // o [64 x D]
    const int c = 8 * i + 2 * t4;
    o_out[rowA * D + c] = o[4 * i], o_out[rowA * D + c + 1] = o[4 * i + 1];
    o_out[rowB * D + c] = o[4 * i + 2], o_out[rowB * D + c + 1] = o[4 * i + 3];
  }
#endif
}

static float bf(unsigned short x) {
  const unsigned u = (unsigned)x << 16;
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}
// The "unit" case: lab::unit against float64 on the host; for a wrong element, where its value belongs instead.
static int run_unit(LabEncodeTiled encode, const cudaDeviceProp& prop) {
  constexpr int KEYS = fkfa3::BN;  // 128
  const char* name = D == 128 ? "unit" : "hd64-unit";
  T *a, *b, *v, *p;  // a [64 x D], b and v [KEYS x D], p [64 x KEYS]
  float *sDev, *oDev;  // s [64 x KEYS], o [64 x D]
  CK(cudaMalloc(&a, 64 * D * 2));
  CK(cudaMalloc(&b, KEYS * D * 2));
  CK(cudaMalloc(&v, KEYS * D * 2));
  CK(cudaMalloc(&p, 64 * KEYS * 2));
  CK(cudaMalloc(&sDev, 64 * KEYS * 4));
  CK(cudaMalloc(&oDev, 64 * D * 4));
  lab_fill_bf16<<<64, 256>>>(a, 64 * D, 11, 1.f);
  lab_fill_bf16<<<64, 256>>>(b, KEYS * D, 12, 1.f);
  lab_fill_bf16<<<64, 256>>>(v, KEYS * D, 13, 1.f);
  lab_fill_bf16<<<64, 256>>>(p, 64 * KEYS, 14, 1.f);
  const FkTensorMap ta = tensor_map(encode, a, 64, 1, fkfa3::WG_ROWS), tb = tensor_map(encode, b, KEYS, 1, fkfa3::BN),
                    tv = tensor_map(encode, v, KEYS, 1, fkfa3::BN);
  const int smem = fkfa3::Q_WG_BYTES + 2 * fkfa3::KV_BYTES + 1024 + 64;
  CK(cudaFuncSetAttribute(unit, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  unit<<<1, 128, smem>>>(ta, tb, tv, p, sDev, oDev);
  const cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    std::printf("attention-fa3: %s, %s: FAILED to run: %s\n", prop.name, name, cudaGetErrorString(e));
    std::printf("attention-fa3 row: %-11s %9s %9s %8s %8s %7s %10s  %s\n", name, "-", "-", "-", "-", "-", "-", "FAULT");
    return 3;
  }
  std::vector<unsigned short> ha(64 * D), hb(KEYS * D), hv(KEYS * D), hp(64 * KEYS);
  std::vector<float> gs(64 * KEYS), go(64 * D);
  CK(cudaMemcpy(ha.data(), a, ha.size() * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hb.data(), b, hb.size() * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hv.data(), v, hv.size() * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hp.data(), p, hp.size() * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(gs.data(), sDev, gs.size() * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(go.data(), oDev, go.size() * 4, cudaMemcpyDeviceToHost));
  std::vector<double> ws(64 * KEYS, 0.0), wo(64 * D, 0.0);
  for (int r = 0; r < 64; ++r)
    for (int c = 0; c < KEYS; ++c)
      for (int x = 0; x < D; ++x) ws[r * KEYS + c] += (double)bf(ha[r * D + x]) * bf(hb[c * D + x]);  // s = a b^T
  for (int r = 0; r < 64; ++r)
    for (int c = 0; c < D; ++c)
      for (int x = 0; x < KEYS; ++x) wo[r * D + c] += (double)bf(hp[r * KEYS + x]) * bf(hv[x * D + c]);  // o = p v
  bool all = true;
  auto report = [&](const char* what, const std::vector<float>& g, const std::vector<double>& w, int cols) {
    double err = 0, scale = 1;
    for (size_t i = 0; i < g.size(); ++i) err = std::max(err, std::fabs(g[i] - w[i])), scale = std::max(scale, std::fabs(w[i]));
    const bool good = err <= 1e-3 * scale;
    all = all && good;
    std::printf("attention-fa3: %s, %s %s: max |error| %.3g (values up to %.3g): %s\n", prop.name, name, what, err, scale, good ? "ok" : "WRONG");
    for (size_t i = 0, shown = 0; !good && i < g.size() && shown < 4; ++i) {
      if (std::fabs(g[i] - w[i]) <= 1e-3 * scale) continue;
      ++shown;
      long long at = -1;
      for (size_t j = 0; j < w.size() && at < 0; ++j)
        if (std::fabs(g[i] - w[j]) <= 1e-4 * scale) at = (long long)j;
      if (at < 0) std::printf("attention-fa3:   [%zu][%zu] got %.5g want %.5g; no element expects that value\n", i / cols, i % cols, g[i], w[i]);
      else std::printf("attention-fa3:   [%zu][%zu] got %.5g want %.5g; [%lld][%lld] expects it\n", i / cols, i % cols, g[i], w[i], at / cols, at % cols);
    }
  };
  report("S = A B^T (TMA boxes, K-major, m64n128k16)", gs, ws, KEYS);
  report("O = P V (P in registers, V N-major)", go, wo, D);
  std::printf("attention-fa3 row: %-11s %9s %9s %8s %8s %7s %10s  %s\n", name, "-", "-", "-", "-", "-", "-", all ? "ok" : "WRONG");
  std::printf("attention-fa3 json: {\"case\":\"%s\",\"device\":\"%s\",\"head_dim\":%d,\"ok\":%s}\n", name, prop.name, D, all ? "true" : "false");
  return all ? 0 : 1;
}
}  // namespace lab

int main(int argc, char** argv) {
  using lab::Case;
  using lab::bf;
  typedef lab::T T;  // (local names: attention_prefill.cu's `using namespace fkpre` has a T and a D too)
  constexpr int D = lab::D;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const std::string want = argc > 1 ? argv[1] : "small";
  const int reps = argc > 2 ? std::max(1, std::atoi(argv[2])) : 20;
  const Case* cs = nullptr;
  for (const Case& c : lab::CASES)
    if (want == c.name) cs = &c;
  const std::string unitName = FK_SINKS ? "" : D == 128 ? "unit" : "hd64-unit";  // (the sinks build has none)
  if (!cs && (unitName.empty() || want != unitName)) {
    std::fprintf(stderr, "attention-fa3: unknown case %s (this build:", want.c_str());
    if (!unitName.empty()) std::fprintf(stderr, " %s", unitName.c_str());
    for (const Case& c : lab::CASES) std::fprintf(stderr, " %s", c.name);
    std::fprintf(stderr, ")\n");
    return 2;
  }
  cudaDeviceProp prop;
  const LabEncodeTiled encode = lab_tma_setup(prop);
  if (!cs) return lab::run_unit(encode, prop);
  const int B = (int)cs->lens.size(), nQ = cs->nQ, nKV = cs->nKV, group = nQ / nKV, causal = cs->causal, window = cs->window;
  std::vector<int> cu(B + 1, 0);
  for (int i = 0; i < B; ++i) cu[i + 1] = cu[i] + cs->lens[i];
  const int total = cu[B];
  double pairs = 0;  // visible (query, key) pairs
  for (int len : cs->lens)
    for (int i = 0; i < len; ++i) pairs += (causal ? i : len - 1) - (window > 0 ? std::max(0, i - window + 1) : 0) + 1;  // keys [lo, hi]
  const double flops = 4.0 * D * nQ * pairs;
  const float scale = 1.f / std::sqrt((float)D), scaleLog2 = scale * 1.4426950408889634f;

  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const long long nq = (long long)total * nQ * D, nk = (long long)total * nKV * D;
  T *q, *k, *v, *outBase, *outFa3;
  float* lse;
  int* cuDev;
  CK(cudaMalloc(&q, nq * 2));
  CK(cudaMalloc(&k, nk * 2));
  CK(cudaMalloc(&v, nk * 2));
  CK(cudaMalloc(&outBase, nq * 2));
  CK(cudaMalloc(&outFa3, nq * 2));
  CK(cudaMalloc(&lse, (long long)nQ * total * 4));
  CK(cudaMalloc(&cuDev, (B + 1) * 4));
  CK(cudaMemcpy(cuDev, cu.data(), (B + 1) * 4, cudaMemcpyHostToDevice));
  // sinks: moderate ones in [-1, 3), the last head's far above the scores (its output ~0: the overflow-safe max), the
  // one after the middle (a checked head, as the last) far below (no effect); without FK_SINKS passed but unread
  std::vector<float> hSinks(nQ);
  for (int h = 0; h < nQ; ++h) hSinks[h] = -1.f + 4.f * (float)((h * 2654435761u) >> 8 & 0xffff) / 65536.f;
  if (nQ > 2) hSinks[nQ - 1] = 40.f, hSinks[nQ / 2 + 1] = -60.f;
  float* sinksDev;
  CK(cudaMalloc(&sinksDev, nQ * 4));
  CK(cudaMemcpy(sinksDev, hSinks.data(), nQ * 4, cudaMemcpyHostToDevice));
  lab_fill_bf16<<<1024, 256, 0, s>>>(q, nq, 1, 1.f);
  lab_fill_bf16<<<1024, 256, 0, s>>>(k, nk, 2, 1.f);
  lab_fill_bf16<<<1024, 256, 0, s>>>(v, nk, 3, 1.f);
  CK(cudaMemsetAsync(outBase, 0xff, nq * 2, s));  // NaN: a row a kernel never writes shows
  CK(cudaMemsetAsync(outFa3, 0xff, nq * 2, s));
  CK(cudaStreamSynchronize(s));

  FkTensorMap tmQ = lab::tensor_map(encode, q, total, nQ, fkfa3::WG_ROWS);
  FkTensorMap tmK = lab::tensor_map(encode, k, total, nKV, fkfa3::BN);
  FkTensorMap tmV = lab::tensor_map(encode, v, total, nKV, fkfa3::BN);

  // grids (nQ, an upper bound on the query tiles of the kernel's size); spare CTAs exit
  const int tiles = (total + fkfa3::BM - 1) / fkfa3::BM + B;
  long long qsr = (long long)nQ * D, qsh = D, ksr = (long long)nKV * D, ksh = D;
  long long outRow = (long long)nQ * D, outHead = D;  // the FA3 kernel's output strides (elements): packed [T, nQ, D]
  int nseq = B, totalA = total, nQa = nQ, groupA = group, causalA = causal, windowA = window;
  float sl = scaleLog2;
#if FK_D == 128  // the baseline: the wgmma kernel, as the engine launches it on sm_90a (128 rows a CTA, 256 threads)
  const void* baseFn = (const void*)fk_varlen_prefill_wgmma;
  const int baseSmem = fkpre::WGMMA_SMEM_BYTES, baseThreads = fkpre::WG_NT, baseTiles = (total + fkpre::WG_BM - 1) / fkpre::WG_BM + B;
#else  // the mma.sync kernel (16 rows a warp), which the engine runs at head dim 64
  const void* baseFn = (const void*)fk_varlen_prefill;
  const int baseSmem = (fkpre::BM * D + 4 * fkpre::BN * D) * 2, baseThreads = fkpre::NT, baseTiles = (total + fkpre::BM - 1) / fkpre::BM + B;
#endif
  CK(cudaFuncSetAttribute(baseFn, cudaFuncAttributeMaxDynamicSharedMemorySize, baseSmem));
  auto runBase = [&] {
    void* args[] = {&outBase, &q, &qsr, &qsh, &k, &ksr, &ksh, &v, &ksr, &ksh, &cuDev, &cuDev, &nseq, &totalA, &nQa, &groupA, &causalA, &windowA, &sl, &sinksDev};
    CK(cudaLaunchKernel(baseFn, dim3(nQ, baseTiles), dim3(baseThreads), args, baseSmem, s));
  };
  CK(cudaFuncSetAttribute(fk_varlen_prefill_fa3, cudaFuncAttributeMaxDynamicSharedMemorySize, fkfa3::FA3_SMEM_BYTES));
  auto launchFa3 = [&] {
    void* args[] = {&tmQ, &tmK, &tmV, &outFa3, &lse, &cuDev, &cuDev, &nseq, &totalA, &nQa, &groupA, &causalA, &windowA, &sl, &outRow, &outHead, &sinksDev};
    return cudaLaunchKernel((const void*)fk_varlen_prefill_fa3, dim3(nQ, tiles), dim3(fkfa3::THREADS), args, fkfa3::FA3_SMEM_BYTES, s);
  };
  auto runFa3 = [&] { CK(launchFa3()); };

  const std::string head = std::string("attention-fa3: ") + prop.name + ", " + cs->name + " (" + std::to_string(B) + " seq, " + std::to_string(total) +
                           " tokens, " + std::to_string(nQ) + " / " + std::to_string(nKV) + " heads x " + std::to_string(D) + ", " + (causal ? "causal" : "not causal") +
                           (window > 0 ? ", window " + std::to_string(window) : std::string()) + (FK_SINKS ? ", sinks" : "") + ", bf16)";
  runBase();
  CK(cudaStreamSynchronize(s));
  // the FA3 kernel's first launch: a fault (or a launch error) ends this case with a line that says so
  cudaError_t e = launchFa3();
  if (e == cudaSuccess) e = cudaStreamSynchronize(s);
  if (e != cudaSuccess) {
    std::printf("%s: fk_varlen_prefill_fa3 FAILED to run: %s\n", head.c_str(), cudaGetErrorString(e));
    std::printf("attention-fa3 row: %-11s %9s %9s %8s %8s %7s %10s  %s\n", cs->name, "-", "-", "-", "-", "-", "-", "FAULT");
    std::printf("attention-fa3 json: {\"case\":\"%s\",\"device\":\"%s\",\"ok\":false,\"error\":\"%s\"}\n", cs->name, prop.name, cudaGetErrorString(e));
    return 3;
  }

  // checks
  std::vector<unsigned short> a(nq), b(nq);
  CK(cudaMemcpy(a.data(), outBase, nq * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(b.data(), outFa3, nq * 2, cudaMemcpyDeviceToHost));
  double diffBase = 0;
  long long nonFinite = 0, worst = -1;
  for (long long i = 0; i < nq; ++i) {
    const float y = bf(b[i]);
    if (!std::isfinite(y)) {
      if (nonFinite++ == 0) worst = i;
      continue;
    }
    const double d = std::fabs((double)bf(a[i]) - y);
    if (d > diffBase) diffBase = d, worst = nonFinite ? worst : i;
  }
  const int heads[3] = {0, nQ / 2 + 1 < nQ ? nQ / 2 + 1 : nQ - 1, nQ - 1};
  int* headsDev;
  float *r32, *rLse;
  CK(cudaMalloc(&headsDev, sizeof heads));
  CK(cudaMemcpy(headsDev, heads, sizeof heads, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&r32, 3LL * total * D * 4));
  CK(cudaMalloc(&rLse, 3LL * total * 4));
  lab::ref32<<<dim3((total + 127) / 128, 3), 128, 0, s>>>(r32, rLse, q, k, v, cuDev, B, total, nQ, nKV, causal, window, scale, headsDev,
                                                          FK_SINKS ? sinksDev : nullptr);
  CK(cudaGetLastError());
  CK(cudaStreamSynchronize(s));
  std::vector<float> h32((size_t)3 * total * D), hLse((size_t)3 * total), gotLse((size_t)nQ * total);
  CK(cudaMemcpy(h32.data(), r32, h32.size() * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hLse.data(), rLse, hLse.size() * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(gotLse.data(), lse, gotLse.size() * 4, cudaMemcpyDeviceToHost));
  double base32 = 0, fa32 = 0, lseErr = 0;
  for (int hi = 0; hi < 3; ++hi)
    for (int r = 0; r < total; ++r) {
      for (int d = 0; d < D; ++d) {
        const long long at = ((long long)r * nQ + heads[hi]) * D + d;
        const float want = h32[((size_t)hi * total + r) * D + d];
        base32 = std::max(base32, (double)std::fabs(bf(a[at]) - want));
        const double e32 = std::fabs(bf(b[at]) - want);
        fa32 = std::max(fa32, std::isfinite(e32) ? e32 : INFINITY);
      }
      const float wl = hLse[(size_t)hi * total + r], gl = gotLse[(size_t)heads[hi] * total + r];
      const double el = std::isinf(wl) && std::isinf(gl) && wl == gl ? 0.0 : std::fabs((double)wl - gl);
      lseErr = std::max(lseErr, std::isfinite(el) ? el : INFINITY);
    }
  const bool ok = nonFinite == 0 && fa32 <= 2.5 * std::max(base32, 4e-3) && diffBase < 3e-2 && lseErr < 1e-2;
  std::printf("%s: FA3 vs " LAB_BASE " max |diff| %.3g, vs float32 (every row of heads %d, %d, %d): " LAB_BASE " %.3g, FA3 %.3g, FA3 LSE %.3g, FA3 non-finite %lld: %s\n",
              head.c_str(), diffBase, heads[0], heads[1], heads[2], base32, fa32, lseErr, nonFinite, ok ? "ok" : "WRONG");
  if (!ok && worst >= 0) {  // where: the first non-finite element, else the largest difference from the baseline
    const long long row = worst / ((long long)nQ * D), h = worst / D % nQ, col = worst % D;
    int sq = 0;
    while (sq + 1 < B && cu[sq + 1] <= row) ++sq;
    std::printf("attention-fa3:   worst element: token %lld (sequence %d, row %lld of it), head %lld, column %lld: FA3 %.5g, " LAB_BASE " %.5g\n", row, sq,
                row - cu[sq], h, col, bf(b[worst]), bf(a[worst]));
  }

  const float baseMs = lab_median_ms(s, runBase, reps, 3), faMs = lab_median_ms(s, runFa3, reps, 3);
  const double baseTf = flops / baseMs / 1e9, faTf = flops / faMs / 1e9;
  std::printf("attention-fa3 row: %-11s %9.4f %9.4f %8.1f %8.1f %7.2f %10.3g  %s\n", cs->name, faMs, baseMs, faTf, baseTf, baseMs / faMs, diffBase, ok ? "ok" : "WRONG");
  std::printf(
      "attention-fa3 json: {\"case\":\"%s\",\"device\":\"%s\",\"seqs\":%d,\"tokens\":%d,\"q_heads\":%d,\"kv_heads\":%d,\"head_dim\":%d,\"causal\":%s,"
      "\"baseline\":\"" LAB_BASE "\",\"fa3_ms\":%.5f,\"base_ms\":%.5f,\"fa3_tflops\":%.1f,\"base_tflops\":%.1f,\"speedup_vs_base\":%.3f,"
      "\"max_abs_vs_base\":%.4g,\"max_abs_vs_f32_fa3\":%.4g,\"max_abs_vs_f32_base\":%.4g,\"lse_max_abs\":%.4g,\"l2_flushed\":false,\"reps\":%d,\"ok\":%s}\n",
      cs->name, prop.name, B, total, nQ, nKV, D, causal ? "true" : "false", faMs, baseMs, faTf, baseTf, baseMs / faMs, diffBase, fa32, base32, lseErr, reps,
      ok ? "true" : "false");
  return ok ? 0 : 1;
}
