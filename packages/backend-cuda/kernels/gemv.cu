// FastKernels GEMV for small-batch decode: y[m, n] = sum_k x[m, k] * W[n, k] (+ bias[n]) for m < M <= FK_M.
//
// At M <= 8 a linear is a pure stream of the weight (x and y are kilobytes), so the kernel is built to keep as many
// weight bytes in flight as possible and do nothing else: one warp per output row n (W row-major [N, K], each row
// contiguous), lanes striding over the row in 16-byte vectors (lane l: vectors l, l + 32, ...), FK_UNR vectors loaded
// per lane before any FMA. The weight is read once, so it bypasses L1 and leaves L1 to x, which every warp re-reads.
// fp32 accumulation, one rounding to FK_T at the store (the bias is added in fp32 first, like cuBLASLt's epilogue).
//
// No scalar tail and no alignment checks: the host (src/ops/matmul/linear.ts, chooseLinearPath) takes this path only when
// K % FK_VEC == 0 and x, W and x's row stride are 16-byte aligned. y and bias are accessed one element at a time.
// Specialised with -DFK_T=<__nv_bfloat16|__half|float> -DFK_VEC=<8|8|4> -DFK_M -DFK_UNR -DFK_WARPS -DFK_BIAS, and for
// fk_gemv_stream -DFK_GLU=1 (with -DFK_ACT, fk_act.cuh): the gated MLP's activation in the epilogue, and -DFK_NORM=1|2:
// the RMSNorm before the projection in its prologue (see there). tools/compile-cu.sh also builds:
// compile-cu: -DFK_GLU=1 -DFK_UNR=4
// compile-cu: -DFK_GLU=1 -DFK_UNR=4 -DFK_PDL=1 -DFK_LATE_TRIGGER=1
// compile-cu: -DFK_UNR=4 -DFK_PDL=1 -DFK_LATE_TRIGGER=1
// compile-cu: -DFK_NORM=1 -DFK_MINB=6 -DFK_UNR=4 -DFK_BIAS=1 -DFK_PDL=1 -DFK_LATE_TRIGGER=1
// compile-cu: -DFK_NORM=2 -DFK_GLU=1 -DFK_MINB=6 -DFK_UNR=4 -DFK_PDL=1 -DFK_LATE_TRIGGER=1
// compile-cu: -DFK_NORM=2 -DFK_GLU=1 -DFK_MINB=6 -DFK_UNR=4 -DFK_PDL=1 -DFK_LATE_TRIGGER=1 -DFK_NORM_PF=1
// compile-cu: -DFK_NORM=1 -DFK_MINB=6 -DFK_UNR=4 -DFK_PDL=1 -DFK_LATE_TRIGGER=1 -DFK_NORM_PF=1
// compile-cu: -DFK_NORM=2 -DFK_T=float -DFK_VEC=4 -DFK_MINB=6 -DFK_UNR=4
#include "fk_vec.cuh"
#include "fk_pdl.cuh"
#include "fk_act.cuh"
#include "fk_block_sum.cuh"
#ifndef FK_M
#define FK_M 1  // rows of x the kernel is compiled for (the host passes M; 1..8)
#endif
#ifndef FK_UNR
#define FK_UNR 8  // weight vectors in flight per lane (tuning linear.gemvUnroll)
#endif
#ifndef FK_WARPS
#define FK_WARPS 8  // output rows per block (tuning linear.gemvWarps)
#endif
#ifndef FK_BIAS
#define FK_BIAS 0
#endif
#ifndef FK_GLU
#define FK_GLU 0
#endif
#ifndef FK_LATE_TRIGGER
#define FK_LATE_TRIGGER 0  // fk_gemv_stream: 1 = no early fk_pdl_trigger (see there)
#endif
#ifndef FK_NORM
#define FK_NORM 0  // fk_gemv_stream: 1 x is RMS-normalised first, 2 x + residual is (the new residual stored by block 0)
#endif
#ifndef FK_NORM_PF
#define FK_NORM_PF 0  // FK_NORM builds: the norm weight copied into shared memory before the PDL wait (see fk_gemv_stream)
#endif
static_assert(FK_NORM == 0 || FK_M == 1, "FK_NORM normalises one row of x");
// fk_gemv_stream's blocks an SM must hold (__launch_bounds__' second argument): the FK_NORM builds ask for their grid's
// warps an SM (-DFK_MINB), else the prologue's registers would cost resident warps. Without it the bounds keep their
// one-argument form (a minimum of 1 block changes ptxas's choices: 48 registers instead of 40 at FK_UNR 4).
#if defined(FK_MINB) && FK_MINB > 1
#define FK_STREAM_BOUNDS __launch_bounds__(FK_WARPS * 32, FK_MINB)
#else
#define FK_STREAM_BOUNDS __launch_bounds__(FK_WARPS * 32)
#endif
static_assert(FK_VEC * sizeof(FK_T) == 16, "fk_gemv reads 16-byte vectors: FK_VEC must be 16 / sizeof(FK_T)");

// Vectors stay raw 16-byte words (uint4) in registers and are widened to fp32 only inside the FMA: unpacking them into
// FkVec<T> elements up front made nvcc keep every bf16 half in its own register (86 registers at FK_M 1 vs 57 now,
// i.e. 2 instead of 4 resident blocks per SM). Elements are summed in index order either way.
__device__ __forceinline__ uint4 fk_ld_stream(const uint4* p) {
  // the weight is read exactly once: read-only path, not allocated in L1 (which is left to x)
  uint4 r;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  return r;
}
// acc + x . w over one 32-bit word (1 float or 2 halves / bfloat16s, low half = lower index); exact widening to fp32.
__device__ __forceinline__ float fk_dot32(unsigned w, unsigned x, float acc, const float*) { return fmaf(__uint_as_float(x), __uint_as_float(w), acc); }
__device__ __forceinline__ float fk_dot32(unsigned w, unsigned x, float acc, const __nv_bfloat16*) {
  acc = fmaf(__uint_as_float(x << 16), __uint_as_float(w << 16), acc);
  return fmaf(__uint_as_float(x & 0xffff0000u), __uint_as_float(w & 0xffff0000u), acc);
}
__device__ __forceinline__ float fk_dot32(unsigned w, unsigned x, float acc, const __half*) {
  const float2 wf = __half22float2(*reinterpret_cast<const __half2*>(&w));
  const float2 xf = __half22float2(*reinterpret_cast<const __half2*>(&x));
  return fmaf(xf.y, wf.y, fmaf(xf.x, wf.x, acc));
}
__device__ __forceinline__ float fk_dot16(const uint4& w, const uint4& x, float acc) {
  const FK_T* tag = nullptr;  // picks the overload for the element type
  acc = fk_dot32(w.x, x.x, acc, tag);
  acc = fk_dot32(w.y, x.y, acc, tag);
  acc = fk_dot32(w.z, x.z, acc, tag);
  return fk_dot32(w.w, x.w, acc, tag);
}

// acc[m] += w . x[m, j..j+FK_VEC) for the M rows of x: the one product step of both GEMVs (their bits agree because
// each lane sums its vectors in the same order through this). x is kilobytes and re-read by every warp: L1/L2 hits
// (fk_ld_dep: through the read-only cache outside PDL builds; under PDL x's writer may overlap this kernel).
__device__ __forceinline__ void fk_gemv_step(float (&acc)[FK_M], const uint4& w, const FK_T* __restrict__ x, long long xs, int M, int j) {
#pragma unroll
  for (int m = 0; m < FK_M; ++m)
    if (m < M) acc[m] = fk_dot16(w, fk_ld_dep(reinterpret_cast<const uint4*>(x + m * xs) + j), acc[m]);
}

// A row's M sums reduced over the warp: every lane ends with every sum. Constant indices into acc: it stays in registers.
__device__ __forceinline__ void fk_gemv_reduce(float (&acc)[FK_M]) {
#pragma unroll
  for (int m = 0; m < FK_M; ++m) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc[m] += __shfl_xor_sync(0xffffffffu, acc[m], o);
  }
}

// Row n's M sums reduced, then lane m stores y[m, n] (+ bias[n], added in fp32 first; one rounding).
__device__ __forceinline__ void fk_gemv_store_row(float (&acc)[FK_M], int M, int lane, FK_T* __restrict__ y, const FK_T* __restrict__ bias,
                                                  int N, int n) {
  fk_gemv_reduce(acc);
#pragma unroll
  for (int m = 0; m < FK_M; ++m) {
    if (m < M && lane == m) {
      float v = acc[m];
#if FK_BIAS
      v += fk_f(bias[n]);
#endif
      fk_set(y[(long long)m * N + n], v);
    }
  }
}

// y [M, N] (contiguous); x rows at stride xs (elements); w [N, K] contiguous; bias [N] (read only when FK_BIAS).
extern "C" __global__ void __launch_bounds__(FK_WARPS * 32) fk_gemv(FK_T* __restrict__ y, const FK_T* __restrict__ x, const FK_T* __restrict__ w,
                                                                     const FK_T* __restrict__ bias, int M, int N, int K, long long xs) {
  const int lane = threadIdx.x & 31;
  const int n = blockIdx.x * FK_WARPS + (threadIdx.x >> 5);
  if (n >= N) return;  // whole warps leave: the shuffles below stay full-warp (and write nothing: no wait needed)
  const int nv = K / FK_VEC;
  const uint4* wr = reinterpret_cast<const uint4*>(w + (long long)n * K);

  float acc[FK_M];
#pragma unroll
  for (int m = 0; m < FK_M; ++m) acc[m] = 0.f;

  bool waited = false;
  for (int j0 = lane; j0 < nv; j0 += 32 * FK_UNR) {
    // All FK_UNR weight loads issued before the first FMA (predicated at the row's end, never a serial chain).
    uint4 wv[FK_UNR];
#pragma unroll
    for (int u = 0; u < FK_UNR; ++u)
      if (j0 + u * 32 < nv) wv[u] = fk_ld_stream(wr + j0 + u * 32);
    // Launched with LAUNCH_PDL, the kernel starts while the one producing x still runs: the first weight loads (which
    // do not depend on it) are in flight before we wait for x.
    if (!waited) {
      fk_pdl_wait();
      waited = true;
    }
#pragma unroll
    for (int u = 0; u < FK_UNR; ++u) {
      const int j = j0 + u * 32;
      if (j < nv) fk_gemv_step(acc, wv[u], x, xs, M, j);
    }
  }

  if (!waited) fk_pdl_wait();  // a lane past a short row (K / FK_VEC < 32) still stores below: wait first
  fk_gemv_store_row(acc, M, lane, y, bias, N, n);
}

// FK_GLU's store: lane m writes y[m, n] = act(g) * u (y [M, R]) from the reduced sums of gate row n and up row n + R,
// each plus its bias and rounded to FK_T as the projection would store it, then the product as fk_act_and_mul has it.
__device__ __forceinline__ void fk_gemv_store_glu(const float (&gate)[FK_M], const float (&up)[FK_M], int M, int lane, FK_T* __restrict__ y,
                                                  const FK_T* __restrict__ bias, int R, int n) {
#pragma unroll
  for (int m = 0; m < FK_M; ++m) {
    if (m < M && lane == m) {
      float g = gate[m], u = up[m];
#if FK_BIAS
      g += fk_f(bias[n]);
      u += fk_f(bias[n + R]);
#endif
      FK_T gt, ut;
      fk_set(gt, g);
      fk_set(ut, u);
      fk_set(y[(long long)m * R + n], fk_act(fk_f(gt)) * fk_f(ut));
    }
  }
}

// The norm weight's vectors j = t, t + blockDim, ... of this thread copied into nws (shared memory) by cp.async through L2:
// a weight, written by no kernel, so this may run before the PDL wait; fk_gemv_norm_x reads them back in the same thread.
__device__ __forceinline__ void fk_gemv_norm_w_prefetch(FK_T* nws, const FK_T* __restrict__ nw, int K) {
#if FK_NORM && FK_NORM_PF
  for (int j = threadIdx.x; j < K / FK_VEC; j += blockDim.x) {
    const unsigned dst = (unsigned)__cvta_generic_to_shared(nws + j * FK_VEC);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(nw + j * FK_VEC) : "memory");
  }
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// FK_NORM's prologue: x's one row normalised into shared memory (xn, K elements) by the whole block. Thread t takes
// vectors t, t + blockDim, ... and sums their squares in that order, as fk_rms_norm's threads do, then fk_block_sum: with
// fk_rms_norm's block size (the host fuses only then) the same bits as rms_norm then linear. Row vectors pass through xn
// (their own thread's slots) rather than registers: the weight loads in flight keep the registers. FK_NORM 2 normalises
// s = x + res_in rounded to FK_T, and block 0 stores s (the new residual). Every thread of the block must call it (it
// syncs); after it returns, xn is complete. With FK_NORM_PF the weight is read from nws, where
// fk_gemv_norm_w_prefetch put it before the wait (at bs 1 the weight's load is a DRAM round trip on the step's critical
// path: 436 MB of weights pass through L2 between a layer's uses of it).
// Element e of a 16-byte vector held as four 32-bit words (1 float or 2 halves / bfloat16s a word, low half first).
__device__ __forceinline__ void fk_from_word(float& d, unsigned w, int) { d = __uint_as_float(w); }
__device__ __forceinline__ void fk_from_word(__half& d, unsigned w, int hi) { d = __ushort_as_half(static_cast<unsigned short>(hi ? w >> 16 : w & 0xffffu)); }
__device__ __forceinline__ void fk_from_word(__nv_bfloat16& d, unsigned w, int hi) { d = __ushort_as_bfloat16(static_cast<unsigned short>(hi ? w >> 16 : w & 0xffffu)); }

// Vector j of p (FkVec<FK_T, FK_VEC>: 16 bytes): in PDL builds through fk_ld_dep (p was written by the kernels before),
// its words unpacked element by element; otherwise the plain load the kernel was measured with (the same PTX as before
// PDL builds read x this way). The f32 FK_NORM_PF PDL build then keeps 16 bytes on the stack under its FK_MINB register
// bound (no bf16 / f16 build does): f32 GEMVs at M 1 are the tiny test models'.
__device__ __forceinline__ FkVec<FK_T, FK_VEC> fk_ld_vec(const FK_T* p, int j) {
#if FK_PDL_ON
  const uint4 r = fk_ld_dep(reinterpret_cast<const uint4*>(p) + j);
  const unsigned w[4] = {r.x, r.y, r.z, r.w};
  constexpr int per = FK_VEC / 4;  // elements a word
  FkVec<FK_T, FK_VEC> v;
#pragma unroll
  for (int e = 0; e < FK_VEC; ++e) fk_from_word(v.v[e], w[e / per], e % per);
  return v;
#else
  return reinterpret_cast<const FkVec<FK_T, FK_VEC>*>(p)[j];
#endif
}

__device__ __forceinline__ void fk_gemv_norm_x(FK_T* __restrict__ xn, const FK_T* __restrict__ x, const FK_T* __restrict__ res_in,
                                               FK_T* __restrict__ res_out, const FK_T* __restrict__ nw, const FK_T* nws, int K, float eps) {
#if FK_NORM
  typedef FkVec<FK_T, FK_VEC> V;
  __shared__ float red[32];
  const int nv = K / FK_VEC;
  V* xo = reinterpret_cast<V*>(xn);
  float ss = 0.f;
  for (int j = threadIdx.x; j < nv; j += blockDim.x) {
    // x and the residual come from the kernels before (fk_ld_dep: not the read-only path under PDL)
    V a = fk_ld_vec(x, j);
#if FK_NORM == 2
    const V b = fk_ld_vec(res_in, j);
#pragma unroll
    for (int e = 0; e < FK_VEC; ++e) fk_set(a.v[e], fk_f(a.v[e]) + fk_f(b.v[e]));
    if (blockIdx.x == 0) reinterpret_cast<V*>(res_out)[j] = a;
#endif
#pragma unroll
    for (int e = 0; e < FK_VEC; ++e) {
      const float f = fk_f(a.v[e]);
      ss += f * f;
    }
    xo[j] = a;
  }
  ss = fk_block_sum(ss, red);
  const float inv = rsqrtf(ss / (float)K + eps);
#if FK_NORM_PF
  asm volatile("cp.async.wait_all;\n" ::: "memory");  // this thread's own copies: it reads only those
  const V* wv = reinterpret_cast<const V*>(nws);
#else
  const V* wv = reinterpret_cast<const V*>(nw);
#endif
  for (int j = threadIdx.x; j < nv; j += blockDim.x) {
    const V a = xo[j];
    const V wk = wv[j];
    V o;
#pragma unroll
    for (int e = 0; e < FK_VEC; ++e) fk_set(o.v[e], fk_f(a.v[e]) * inv * fk_f(wk.v[e]));
    xo[j] = o;
  }
  __syncthreads();
#endif
}

// fk_gemv_stream: the same product (same per-lane order and the same shuffle tree, so the same bits as fk_gemv), laid
// out so that a warp never lets its loads run dry. fk_gemv gives each warp one row, so N / FK_WARPS blocks run in waves
// and the last wave leaves most SMs idle (qkv at M 1: 768 blocks over 132 SMs), and each warp waits for all FK_UNR
// loads before it issues the next FK_UNR. Here:
//  - the grid is one wave of W warps (the host sizes it: linear.ts, gemvStreamGrid); warp w owns rows w, w + W, ...,
//    so shares differ by at most one row, and the rows being read at any moment are neighbours (a dense stretch of
//    memory: warps owning contiguous blocks of rows left most DRAM channels idle, gemv_lab run 11);
//  - each lane keeps FK_UNR 16-byte loads in flight: the slot just consumed is refilled with the vector FK_UNR chunks
//    ahead, across row ends (a chunk = 32 vectors, one per lane, inside one row: K % (32 * FK_VEC) == 0, which the
//    host checks). The refill is unconditional (past the warp's last chunk it re-reads that chunk, an L2 hit): a
//    conditional load would need a select on its result, which waits for it and serialises the stream;
//  - under PDL the first FK_UNR chunks load before the wait for x, and the next kernel is let in right after it
//    (FK_LATE_TRIGGER=1: only when this kernel's blocks exit; see tuning linear.gemvLateTrigger).
// With FK_GLU (a gated MLP's gate_up projection, W = [gate; up], 2d rows): y [M, d] = act(gate . x) * (up . x). The
// warp's logical row r is gate row r followed by up row r + d in its stream, so one warp holds both sums and writes
// act(g) * u itself: fk_act_and_mul's launch and its read of the [M, 2d] projection are gone. Each sum is rounded to
// FK_T first, as the unfused projection stores it, and the product computed as fk_act_and_mul does: the same bits.
// With FK_NORM (M 1; a pre-norm projection: qkv after input_layernorm, gate_up after post_attention_layernorm), each block
// first normalises x (and adds res_in) into shared memory (fk_gemv_norm_x) after the PDL wait, and the products read it
// there: rms_norm's launch is gone, and its bits are kept (the host fuses only where the blocks match fk_rms_norm's).
// FK_NORM_PF=1 (tuning linear.gemvNormPrefetch): the norm weight is copied into shared memory before the wait, beside xn.
// res_in, res_out (FK_NORM 2), norm_w [K] and eps are read only by the FK_NORM builds (the host passes 0 otherwise).
extern "C" __global__ void FK_STREAM_BOUNDS
    fk_gemv_stream(FK_T* __restrict__ y, const FK_T* __restrict__ x, const FK_T* __restrict__ w, const FK_T* __restrict__ bias, int M,
                   int N, int K, long long xs, const FK_T* __restrict__ res_in, FK_T* __restrict__ res_out,
                   const FK_T* __restrict__ norm_w, float eps) {
  const int lane = threadIdx.x & 31;
  const int w0 = blockIdx.x * FK_WARPS + (threadIdx.x >> 5);
#if FK_GLU
  const int R = N / 2;  // logical rows: gate row r and up row r + R each
#else
  const int R = N;
#endif
#if FK_NORM
  // every warp takes part in the block's norm; those past the last row leave after it
  extern __shared__ __align__(16) unsigned char fk_gemv_smem[];
  FK_T* xn = reinterpret_cast<FK_T*>(fk_gemv_smem);  // [K]: the normalised x
  FK_T* nws = xn + K;                                 // [K]: the norm weight (FK_NORM_PF; the host sizes the memory)
  const bool active = w0 < R;
#else
  if (w0 >= R) return;  // whole warps past the last row leave (they write nothing: no wait needed)
  const bool active = true;
#endif
  const int W = gridDim.x * FK_WARPS;
  const int nv = K / FK_VEC;                // vectors per row
  const int cpr = nv / 32;                  // chunks per row
#if FK_GLU
  const int total = ((R - 1 - w0) / W + 1) * 2 * cpr;
  const long long midJump = (long long)(R - 1) * nv;      // from the end of gate row r to up row r + R
  const long long rowJump = (long long)(W - R - 1) * nv;  // from the end of up row r + R to gate row r + W
#else
  const int total = ((N - 1 - w0) / W + 1) * cpr;
  const long long rowJump = (long long)(W - 1) * nv;  // from the end of one of this warp's rows to its next
#endif

  // the prefetch cursor: next chunk's address, its index inside its row, chunks left after it
  const uint4* pp = reinterpret_cast<const uint4*>(w) + (long long)w0 * nv + lane;
  int pk = 0, left = total;
  auto refill = [&]() -> uint4 {
    const uint4 v = fk_ld_stream(pp);
    if (left > 1) {  // stays on the last chunk once there (uniform, and independent of the loaded value)
      --left;
      pp += 32;
#if FK_GLU
      if (++pk == cpr) {
        pp += midJump;
      } else if (pk == 2 * cpr) {
        pk = 0;
        pp += rowJump;
      }
#else
      if (++pk == cpr) {
        pk = 0;
        pp += rowJump;
      }
#endif
    }
    return v;
  };
#if FK_NORM
  fk_gemv_norm_w_prefetch(nws, norm_w, K);  // first: the weight loads below then hold their registers across the wait alone
#endif
  uint4 buf[FK_UNR];
  if (active) {
#pragma unroll
    for (int u = 0; u < FK_UNR; ++u) buf[u] = refill();
  }
  fk_pdl_wait();
#if !FK_LATE_TRIGGER
  fk_pdl_trigger();
#endif
#if FK_NORM
  fk_gemv_norm_x(xn, x, res_in, res_out, norm_w, nws, K, eps);
  if (!active) return;
#endif

  float acc[FK_M];
#pragma unroll
  for (int m = 0; m < FK_M; ++m) acc[m] = 0.f;
  int row = w0;
  int inRow = 0;  // chunk index inside the current row
#if FK_GLU
  float gate[FK_M];  // the gate row's reduced sums while the up row is summed
  bool upHalf = false;
#endif
  for (int c0 = 0; c0 < total; c0 += FK_UNR) {
#pragma unroll
    for (int u = 0; u < FK_UNR; ++u) {
      if (c0 + u < total) {
#if FK_NORM
        acc[0] = fk_dot16(buf[u], reinterpret_cast<const uint4*>(xn)[inRow * 32 + lane], acc[0]);
#else
        fk_gemv_step(acc, buf[u], x, xs, M, inRow * 32 + lane);
#endif
        if (++inRow == cpr) {  // the row is done (warp-uniform): reduce, store, start the next
#if FK_GLU
          fk_gemv_reduce(acc);
          if (!upHalf) {
#pragma unroll
            for (int m = 0; m < FK_M; ++m) gate[m] = acc[m];
          } else {
            fk_gemv_store_glu(gate, acc, M, lane, y, bias, R, row);
            row += W;
          }
          upHalf = !upHalf;
#else
          fk_gemv_store_row(acc, M, lane, y, bias, N, row);
          row += W;
#endif
#pragma unroll
          for (int m = 0; m < FK_M; ++m) acc[m] = 0.f;
          inRow = 0;
        }
      }
      buf[u] = refill();  // after the slot's use: its registers are free, FK_UNR - 1 loads stay in flight meanwhile
    }
  }
}
