// Issue 4, varlen prefill attention on the H200 without Node: times the engine's two tensor-core kernels from
// packages/backend-cuda/kernels/attention_prefill.cu on one causal sequence of S tokens (Llama-3-8B heads: 32 / 8 x 128,
// bf16): fk_varlen_prefill (mma.sync, FlashAttention-2 style, 8 warps as the engine builds it) and
// fk_varlen_prefill_wgmma (Hopper wgmma, two warpgroups of 64 query rows; the engine's default on sm_90a since run 19),
// checks the wgmma kernel against the mma kernel (every element) and a float32 reference of two heads, and tries the two
// wgmma forms of kernels/fk_wgmma.cuh alone against float64 (wgmma_unit: for a layout that is off it prints where the
// wrong values belong). Run 19 first ran the lab's own version of the kernel: 0.491 ms against the mma kernel's 0.690.
// Built on the GPU host by bench/labs/prefill-wgmma/run.sh with nvcc.
//   Build: nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a bench/labs/prefill-wgmma/prefill_wgmma_lab.cu
//   Run: ./prefill_wgmma_lab [S]   (default 4096)
#ifndef FK_WARPS
#define FK_WARPS 8  // the mma kernel as the engine builds it (ATTENTION_TUNING.prefillWarps)
#endif
#include "../../../packages/backend-cuda/kernels/attention_prefill.cu"  // both kernels, and fk_wgmma.cuh
#define LAB_NAME "prefill-wgmma"
#include "../common/lab_common.cuh"

#include <cmath>
#include <cstring>
#include <string>

static_assert(FK_D == 128, "the lab is head dim 128");

namespace lab {
typedef __nv_bfloat16 T;
constexpr int D = 128;
constexpr int TILE = fkpre::wg::TILE_BYTES;
}  // namespace lab

// The two wgmma forms on their own, for a run that comes out WRONG (one CTA, one warpgroup): s [64, 64] = a [64, 128]
// b [64, 128]^T with a and b K-major in shared memory, and o [64, 128] = p [64, 64] v [64, 128] with p in registers and v
// N-major in shared memory; the fragments written out by the assumed accumulator layout. Inputs row-major in global.
namespace lab {
__global__ void __launch_bounds__(128) wgmma_unit(const T* a, const T* b, const T* p, const T* v, float* s_out, float* o_out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ unsigned char lab_smem_raw[];
  unsigned char* sm = lab_smem_raw + ((1024 - (fkpre::smem_u32(lab_smem_raw) & 1023)) & 1023);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
  for (int i = tid; i < 64 * 16; i += 128) {
    const int r = i >> 4, c = i & 15;
    *reinterpret_cast<uint4*>(sm + fkpre::wg::tile_off(r, c)) = *reinterpret_cast<const uint4*>(a + r * D + c * 8);
    *reinterpret_cast<uint4*>(sm + TILE + fkpre::wg::tile_off(r, c)) = *reinterpret_cast<const uint4*>(b + r * D + c * 8);
    *reinterpret_cast<uint4*>(sm + 2 * TILE + fkpre::wg::tile_off(r, c)) = *reinterpret_cast<const uint4*>(v + r * D + c * 8);
  }
  fkpre::wg::fence_async_smem();
  __syncthreads();
  float s[8][4];
  fkpre::wg::qk_tile<T>(s, fkpre::smem_u32(sm), fkpre::smem_u32(sm + TILE));
  const int rowA = 16 * warp + g, rowB = rowA + 8;
  // an accumulator of N columns to a row-major [64 x N] matrix, by the assumed layout
  auto store = [&](const float* acc, int N, float* dst) {  // (acc: the [N / 8][4] accumulator, flat)
    for (int i = 0; i < N / 8; ++i) {
      const int c = 8 * i + 2 * t4;
      dst[rowA * N + c] = acc[4 * i];
      dst[rowA * N + c + 1] = acc[4 * i + 1];
      dst[rowB * N + c] = acc[4 * i + 2];
      dst[rowB * N + c + 1] = acc[4 * i + 3];
    }
  };
  store(&s[0][0], 64, s_out);
  auto pk = [&](int r, int c) {  // p[r][c], p[r][c + 1] as one register
    const __nv_bfloat162 x = {p[r * 64 + c], p[r * 64 + c + 1]};
    return *reinterpret_cast<const fkpre::u32*>(&x);
  };
  fkpre::u32 pa[4][4];
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    pa[kk][0] = pk(rowA, 16 * kk + 2 * t4);
    pa[kk][1] = pk(rowB, 16 * kk + 2 * t4);
    pa[kk][2] = pk(rowA, 16 * kk + 8 + 2 * t4);
    pa[kk][3] = pk(rowB, 16 * kk + 8 + 2 * t4);
  }
  float o[16][4];
#pragma unroll
  for (int i = 0; i < 16; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  fkpre::wg::pv_tile<T>(o, pa, fkpre::smem_u32(sm + 2 * TILE));
  store(&o[0][0], 128, o_out);
#endif
}
}  // namespace lab

// float32 reference of one head: one thread a query row, two passes over its keys (max, then the weighted sum).
extern "C" __global__ void lab_prefill_ref32(float* __restrict__ out, const lab::T* __restrict__ q, const lab::T* __restrict__ k,
                                             const lab::T* __restrict__ v, int S, int nQ, int group, int h, float scale) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= S) return;
  const int kvh = h / group, D = lab::D;
  const lab::T* qr = q + ((long long)r * nQ + h) * D;
  float m = -INFINITY;
  for (int t = 0; t <= r; ++t) {
    const lab::T* kr = k + ((long long)t * (nQ / group) + kvh) * D;
    float x = 0.f;
    for (int d = 0; d < D; ++d) x += __bfloat162float(qr[d]) * __bfloat162float(kr[d]);
    m = fmaxf(m, x * scale);
  }
  float acc[128], l = 0.f;
  for (int d = 0; d < D; ++d) acc[d] = 0.f;
  for (int t = 0; t <= r; ++t) {
    const lab::T* kr = k + ((long long)t * (nQ / group) + kvh) * D;
    const lab::T* vr = v + ((long long)t * (nQ / group) + kvh) * D;
    float x = 0.f;
    for (int d = 0; d < D; ++d) x += __bfloat162float(qr[d]) * __bfloat162float(kr[d]);
    const float p = expf(x * scale - m);
    l += p;
    for (int d = 0; d < D; ++d) acc[d] += p * __bfloat162float(vr[d]);
  }
  for (int d = 0; d < D; ++d) out[(long long)r * D + d] = acc[d] / l;
}

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const int S = argc > 1 ? std::atoi(argv[1]) : 4096, nQ = 32, nKV = 8, D = lab::D, group = nQ / nKV;
  if (S < 1) {
    std::fprintf(stderr, "prefill-wgmma: S must be at least 1\n");
    return 2;
  }
  const float scale = 1.f / std::sqrt((float)D), scaleLog2 = scale * 1.4426950408889634f;
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const long long nq = (long long)S * nQ * D, nk = (long long)S * nKV * D;
  lab::T *q, *k, *v, *outRef, *outNew;
  CK(cudaMalloc(&q, nq * 2));
  CK(cudaMalloc(&k, nk * 2));
  CK(cudaMalloc(&v, nk * 2));
  CK(cudaMalloc(&outRef, nq * 2));
  CK(cudaMalloc(&outNew, nq * 2));
  lab_fill_bf16<<<1024, 256>>>(q, nq, 1, 1.f);
  lab_fill_bf16<<<1024, 256>>>(k, nk, 2, 1.f);
  lab_fill_bf16<<<1024, 256>>>(v, nk, 3, 1.f);
  CK(cudaDeviceSynchronize());
  int cu[2] = {0, S}, *cuDev;
  CK(cudaMalloc(&cuDev, sizeof cu));
  CK(cudaMemcpy(cuDev, cu, sizeof cu, cudaMemcpyHostToDevice));

  // the mma kernel as the engine launches it off sm_90a (attention-plan.ts planPrefill: 8 warps, 128 rows a CTA)
  const int refBm = 16 * FK_WARPS, refTiles = (S + refBm - 1) / refBm + 1;
  const int refSmem = (refBm * D + 4 * 64 * D) * 2;
  CK(cudaFuncSetAttribute(fk_varlen_prefill, cudaFuncAttributeMaxDynamicSharedMemorySize, refSmem));
  auto runRef = [&] {
    long long qsr = (long long)nQ * D, qsh = D, ksr = (long long)nKV * D, ksh = D;
    int one = 1, causal = 1, window = 0, nQa = nQ, groupA = group, Sa = S;
    float sl = scaleLog2;
    void* args[] = {&outRef, &q, &qsr, &qsh, &k, &ksr, &ksh, &v, &ksr, &ksh, &cuDev, &cuDev, &one, &Sa, &nQa, &groupA, &causal, &window, &sl};
    CK(cudaLaunchKernel((const void*)fk_varlen_prefill, dim3(nQ, refTiles), dim3(FK_WARPS * 32), args, refSmem, s));
  };
  // the wgmma kernel as the engine launches it (planPrefill: 128 rows a CTA, 256 threads)
  const int newTiles = (S + fkpre::WG_BM - 1) / fkpre::WG_BM + 1;
  CK(cudaFuncSetAttribute(fk_varlen_prefill_wgmma, cudaFuncAttributeMaxDynamicSharedMemorySize, fkpre::WGMMA_SMEM_BYTES));
  auto runNew = [&] {
    long long qsr = (long long)nQ * D, qsh = D, ksr = (long long)nKV * D, ksh = D;
    int one = 1, causal = 1, window = 0, nQa = nQ, groupA = group, Sa = S;
    float sl = scaleLog2;
    void* args[] = {&outNew, &q, &qsr, &qsh, &k, &ksr, &ksh, &v, &ksr, &ksh, &cuDev, &cuDev, &one, &Sa, &nQa, &groupA, &causal, &window, &sl};
    CK(cudaLaunchKernel((const void*)fk_varlen_prefill_wgmma, dim3(nQ, newTiles), dim3(fkpre::WG_NT), args, fkpre::WGMMA_SMEM_BYTES, s));
  };
  auto f = [](unsigned short x) {
    unsigned u = (unsigned)x << 16;
    float r;
    std::memcpy(&r, &u, 4);
    return r;
  };
  // float32 references of heads 0 and nQ - 1, and the shipped kernel's output and its error against them
  runRef();
  CK(cudaStreamSynchronize(s));
  std::vector<unsigned short> a(nq), b(nq);
  CK(cudaMemcpy(a.data(), outRef, nq * 2, cudaMemcpyDeviceToHost));
  float* r32;
  CK(cudaMalloc(&r32, (long long)S * D * 4));
  const int heads[2] = {0, nQ - 1};
  std::vector<float> h32[2];
  double shipped32 = 0;
  for (int i = 0; i < 2; ++i) {
    lab_prefill_ref32<<<(S + 127) / 128, 128, 0, s>>>(r32, q, k, v, S, nQ, group, heads[i], scale);
    CK(cudaStreamSynchronize(s));
    h32[i].resize((size_t)S * D);
    CK(cudaMemcpy(h32[i].data(), r32, h32[i].size() * 4, cudaMemcpyDeviceToHost));
    for (int r = 0; r < S; ++r)
      for (int d = 0; d < D; ++d) shipped32 = std::max(shipped32, (double)std::fabs(f(a[((long long)r * nQ + heads[i]) * D + d]) - h32[i][(size_t)r * D + d]));
  }
  // checks of one build: every element against the shipped kernel, the two heads against float32
  auto check = [&] {
    CK(cudaMemset(outNew, 0xff, nq * 2));  // NaN: a row the kernel never writes shows
    runNew();
    CK(cudaStreamSynchronize(s));
    CK(cudaMemcpy(b.data(), outNew, nq * 2, cudaMemcpyDeviceToHost));
    double maxDiff = 0, sumDiff = 0, new32 = 0;
    long long nonFinite = 0;
    for (long long i = 0; i < nq; ++i) {
      const float y = f(b[i]);
      if (!std::isfinite(y)) ++nonFinite;
      const double d = std::fabs((double)f(a[i]) - y);
      maxDiff = std::max(maxDiff, d);
      sumDiff += d;
    }
    for (int i = 0; i < 2; ++i)
      for (int r = 0; r < S; ++r)
        for (int d = 0; d < D; ++d) new32 = std::max(new32, (double)std::fabs(f(b[((long long)r * nQ + heads[i]) * D + d]) - h32[i][(size_t)r * D + d]));
    const bool good = nonFinite == 0 && new32 <= 2.5 * std::max(shipped32, 4e-3) && maxDiff < 3e-2;
    std::printf("prefill-wgmma: %s, S %d, %d / %d heads x %d, causal bf16: wgmma vs mma max |diff| %.3g (mean %.3g), vs float32 (2 heads): mma %.3g, wgmma %.3g, non-finite %lld: %s\n",
                prop.name, S, nQ, nKV, D, maxDiff, sumDiff / nq, shipped32, new32, nonFinite, good ? "ok" : "WRONG");
    return good;
  };
  // the two wgmma forms alone (their inputs from the filled q, k and v): max |error| against float64 on the host, and
  // for the first wrong elements where the expected value sits instead (a layout that is off shows as a permutation)
  {
    float *sDev, *oDev;
    CK(cudaMalloc(&sDev, 64 * 64 * 4));
    CK(cudaMalloc(&oDev, 64 * 128 * 4));
    CK(cudaFuncSetAttribute(lab::wgmma_unit, cudaFuncAttributeMaxDynamicSharedMemorySize, 3 * lab::TILE + 1024));
    // a: 64 rows of q (head 0), b: 64 rows of k, p: 64 x 64 values of v, v: 64 rows of v (contiguous copies)
    lab::T *ua, *ub, *up, *uv;
    for (lab::T** t : {&ua, &ub, &up, &uv}) CK(cudaMalloc(t, 64 * 128 * 2));
    CK(cudaMemcpy2D(ua, 256, q, (size_t)nQ * D * 2, 256, 64, cudaMemcpyDeviceToDevice));
    CK(cudaMemcpy2D(ub, 256, k, (size_t)nKV * D * 2, 256, 64, cudaMemcpyDeviceToDevice));
    CK(cudaMemcpy(up, v, 64 * 64 * 2, cudaMemcpyDeviceToDevice));
    CK(cudaMemcpy2D(uv, 256, v + D, (size_t)nKV * D * 2, 256, 64, cudaMemcpyDeviceToDevice));
    lab::wgmma_unit<<<1, 128, 3 * lab::TILE + 1024, s>>>(ua, ub, up, uv, sDev, oDev);
    CK(cudaGetLastError());
    CK(cudaStreamSynchronize(s));
    std::vector<unsigned short> ha(64 * 128), hb(64 * 128), hp(64 * 64), hv(64 * 128);
    CK(cudaMemcpy(ha.data(), ua, ha.size() * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hb.data(), ub, hb.size() * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hp.data(), up, hp.size() * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hv.data(), uv, hv.size() * 2, cudaMemcpyDeviceToHost));
    std::vector<float> gs(64 * 64), go(64 * 128);
    CK(cudaMemcpy(gs.data(), sDev, gs.size() * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(go.data(), oDev, go.size() * 4, cudaMemcpyDeviceToHost));
    std::vector<double> ws(64 * 64, 0), wo(64 * 128, 0);
    for (int r = 0; r < 64; ++r)
      for (int c = 0; c < 64; ++c)
        for (int x = 0; x < 128; ++x) ws[r * 64 + c] += (double)f(ha[r * 128 + x]) * f(hb[c * 128 + x]);
    for (int r = 0; r < 64; ++r)
      for (int c = 0; c < 128; ++c)
        for (int x = 0; x < 64; ++x) wo[r * 128 + c] += (double)f(hp[r * 64 + x]) * f(hv[x * 128 + c]);
    auto report = [&](const char* what, const std::vector<float>& got, const std::vector<double>& want, int cols) {
      double err = 0, scale = 0;
      for (size_t i = 0; i < got.size(); ++i) err = std::max(err, std::fabs(got[i] - want[i])), scale = std::max(scale, std::fabs(want[i]));
      const bool good = err <= 1e-3 * std::max(scale, 1.0);
      std::printf("prefill-wgmma: unit %s: max |error| %.3g (values up to %.3g): %s\n", what, err, scale, good ? "ok" : "WRONG");
      for (size_t i = 0, shown = 0; !good && i < got.size() && shown < 4; ++i) {
        if (std::fabs(got[i] - want[i]) <= 1e-3 * std::max(scale, 1.0)) continue;
        ++shown;
        long long at = -1;
        for (size_t j = 0; j < want.size(); ++j)
          if (std::fabs(got[i] - want[j]) <= 1e-4 * std::max(scale, 1.0)) {
            at = (long long)j;
            break;
          }
        if (at < 0)
          std::printf("prefill-wgmma:   [%zu][%zu] got %.5g want %.5g; no element expects that value\n", i / cols, i % cols, got[i], want[i]);
        else
          std::printf("prefill-wgmma:   [%zu][%zu] got %.5g want %.5g; [%lld][%lld] expects it\n", i / cols, i % cols, got[i], want[i], at / cols, at % cols);
      }
      return good;
    };
    report("S = A B^T (K-major A and B from shared memory)", gs, ws, 64);
    report("O = P V (P in registers, V N-major)", go, wo, 128);
    for (void* t : {(void*)sDev, (void*)oDev, (void*)ua, (void*)ub, (void*)up, (void*)uv}) CK(cudaFree(t));
  }
  const bool ok = check();

  const double flops = 4.0 * S * (double)S * D * nQ / 2;  // causal: half the score matrix
  const float refMs = lab_median_ms(s, runRef, 20), newMs = lab_median_ms(s, runNew, 20);
  std::printf("\nprefill-wgmma table (S %d, causal; TFLOP/s counts half the score matrix)\n%-44s %10s %10s\n", S, "kernel", "ms", "TFLOP/s");
  std::printf("%-44s %10.4f %10.1f\n", "fk_varlen_prefill (mma.sync, 8 warps)", refMs, flops / refMs / 1e9);
  std::printf("%-44s %10.4f %10.1f%s\n", "fk_varlen_prefill_wgmma (2 warpgroups)", newMs, flops / newMs / 1e9, ok ? "" : "  (WRONG)");
  return ok ? 0 : 1;
}
