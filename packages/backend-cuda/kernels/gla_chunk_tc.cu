// FastKernels chunked gated linear attention on tensor cores (FLA's chunk_gla, issue 32): two launches over chunks of
// C = 64 tokens, bf16 / f16 operands on mma.sync m16n8k16 with f32 accumulation, the state in f32.
//
// Per chunk, with b_t the running sum of the log gates g inside the chunk (so every exponent below is <= 0 for g <= 0):
//   A[t][s] = scale sum_i q_t,i k_s,i exp(b_t,i - b_s,i)   (s <= t)
//   o_t     = (scale q_t exp(b_t)) S + sum_{s <= t} A[t][s] v_s
//   S'      = diag(exp(b_last)) S + sum_s (k_s exp(b_last - b_s))^T v_s
//
// fk_gla_chunk_prep: a CTA per (chunk slot, head), fully parallel. It computes what depends on q / k / g alone, once a
// chunk instead of once a V tile: Qg = scale q exp(b) and Kd = k exp(b_last - b) (workspaces shaped like q), the chunk's
// decay exp(b_last) and A (rounded to T: the A v product takes it as an mma operand). The key channels go in slabs of
// FK_KS (the scores are sums over channels; the running sums are per channel). A's blocks of 16 x 16 sub-chunks:
//   - below the diagonal (sub-chunk ti > sj): one mma product q' k''^T with q'_t = q_t exp(b_t - r) and
//     k''_s = k_s exp(r - b_s), r = b at the last token before sub-chunk ti; both factors <= 1, so strongly negative
//     gates underflow to the true (tiny) value instead of overflowing;
//   - on the diagonal: exp(b_t - b_s) per element in f32 (no reference point is safe inside a sub-chunk).
// Chunk slots: a sequence's chunk c is slot n * nc_max + c for batch rows, floor(cu[n] / C) + n + c with cu_seqlens
// (distinct and < floor(T / C) + N whatever the lengths), so the host sizes both grids from shapes alone and a slot no
// chunk takes exits.
//
// fk_gla_chunk_tc: a CTA per (V tile of FK_BV columns, head, sequence) walks the sequence's chunks in order, its
// [BV, K] slice of S^T in f32 mma accumulators (warp (wm, wk): value rows wm * 16 .. + 16, key columns wk * KW .. + KW).
// Holding S transposed lets the accumulators feed the next mma directly as A fragments (o^T = S^T Qg^T), and the
// state update S^T = S^T diag(decay) + V^T Kd accumulates into them in place. Per chunk: Qg, Kd, A, the v tile and
// the decay go global -> shared by cp.async, double-buffered (the next chunk's loads fly during this chunk's math);
// o^T's partial sums over the WK key slices (plus the intra-chunk V^T A^T, its tokens split over the WK warps) are
// added in shared memory and stored. Nothing is read on the host: sequences, pool slots and -1 padding rows are read
// on the device as fk_gla_chunk does (gla-source.ts), so the launches can be captured in a CUDA graph.
//
// Specialised by NVRTC with -DFK_T=<__nv_bfloat16 | __half> -DFK_K -DFK_BV -DFK_WK -DFK_KS -DFK_CU_T -DFK_SI_T
// (src/ops/recurrent/gla-tc-plan.ts); the defaults (GLA-2.7B heads) compile standalone. Host replay (FK_HOST_REPLAY=1,
// gla-tc-host.test.ts) supplies its own stand-ins for the CUDA types and the tensor-core primitives.
// compile-cu: -DFK_T=__half -DFK_BV=64 -DFK_WK=2
#ifndef FK_HOST_REPLAY
#define FK_HOST_REPLAY 0
#endif
#if !FK_HOST_REPLAY
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#endif

#ifndef FK_T
#define FK_T __nv_bfloat16
#endif
#ifndef FK_K
#define FK_K 256
#endif
#ifndef FK_BV
#define FK_BV 32
#endif
#ifndef FK_WK
#define FK_WK 4
#endif
#ifndef FK_KS
#define FK_KS 64
#endif
#ifndef FK_CU_T
#define FK_CU_T int
#endif
#ifndef FK_SI_T
#define FK_SI_T int
#endif

namespace fkgla {
typedef unsigned int u32;
typedef FK_T T;
typedef FK_CU_T CU_T;
typedef FK_SI_T SI_T;

constexpr int C = 64;                         // tokens a chunk
constexpr int SUB = 16;                       // tokens a sub-chunk (A's diagonal blocks)
constexpr int NSUB = C / SUB;
constexpr int TRI = SUB * (SUB + 1) / 2;      // pairs s <= t of one diagonal block
constexpr int K = FK_K;
constexpr int BV = FK_BV;
constexpr int WM = BV / 16;                   // warps across the tile's value rows
constexpr int WK = FK_WK;                     // warps across the key columns
constexpr int KW = K / WK;                    // key columns a warp
constexpr int TW = C / WK;                    // tokens of the intra-chunk product a warp
constexpr int MAIN_THREADS = 32 * WM * WK;
constexpr int PREP_THREADS = 256;
constexpr int KS = FK_KS;                     // key channels a slab of the prep kernel
static_assert(BV % 16 == 0 && K % (16 * WK) == 0 && KW % 16 == 0 && TW % 8 == 0, "tile shape");
static_assert(K % KS == 0 && PREP_THREADS % KS == 0 && KS % 16 == 0, "slab shape");

// shared-memory pitches (elements): +8 T (16 bytes) keeps ldmatrix's eight rows on distinct banks; +2 T / +1 float
// keep the prep's per-pair reads (one channel of many rows) on distinct banks; +4 floats the o partials' fragments
constexpr int QP = K + 8;        // Qg, Kd rows
constexpr int AP = C + 8;        // A rows
constexpr int VP = BV + 8;       // v rows
constexpr int RP = BV + 4;       // o partial rows
constexpr int SP = KS + 2;       // prep: q, k rows
constexpr int BP = KS + 1;       // prep: b rows
constexpr int PP = KS + 8;       // prep: q', k'' rows (ldmatrix)
constexpr int KP_ROWS = SUB * (NSUB - 1) * NSUB / 2;  // k'' rows of sub-chunks 1 .. NSUB - 1: 16 + 32 + 48

// main kernel's shared memory: two stages of { Qg, Kd [C][QP], A [C][AP], v [C][VP] (T); decay [K] (float) }, then the
// o partials [WK][C][RP] (float)
constexpr int STAGE_T = 2 * C * QP + C * AP + C * VP;
constexpr int STAGE_BYTES = STAGE_T * (int)sizeof(T) + K * 4;
constexpr int MAIN_SMEM = 2 * STAGE_BYTES + WK * C * RP * 4;
// prep's: q, k [C][SP] (T); b [C][BP] (float); q' [C][PP], k'' [KP_ROWS][PP] (T); the diagonal sums [NSUB][TRI] and the
// segment totals of the running sum [PREP_THREADS] (float)
constexpr int PREP_SMEM = 2 * C * SP * (int)sizeof(T) + C * BP * 4 + (C + KP_ROWS) * PP * (int)sizeof(T) + NSUB * TRI * 4 + PREP_THREADS * 4;
static_assert(MAIN_SMEM <= 227 * 1024 && PREP_SMEM <= 227 * 1024, "shared memory past sm_90's 227 KiB a CTA");
static_assert(STAGE_BYTES % 16 == 0 && (C * QP * (int)sizeof(T)) % 16 == 0 && (C * AP * (int)sizeof(T)) % 16 == 0, "16-byte stage parts");

#if !FK_HOST_REPLAY
#include "fk_mma.cuh"
__device__ __forceinline__ void ldsm_x2(u32 addr, u32& r0, u32& r1) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(r0), "=r"(r1) : "r"(addr));
}
__device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
template <typename X> __device__ __forceinline__ X from_f(float x);
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <> __device__ __forceinline__ __half from_f<__half>(float x) { return __float2half_rn(x); }
#endif

// The workspace slot of chunk c of sequence n (see the top of the file).
__device__ __forceinline__ long long chunk_slot(const CU_T* cu, int n, int c, int nc_max) {
  return cu != nullptr ? (long long)(cu[n] / C) + n + c : (long long)n * nc_max + c;
}
// Row base of k'' for sub-chunk ti (its 16 ti rows: the tokens before it).
__device__ __forceinline__ int kp_base(int ti) { return SUB * (ti - 1) * ti / 2; }
}  // namespace fkgla

extern "C" __global__ void __launch_bounds__(fkgla::PREP_THREADS) fk_gla_chunk_prep(
    const FK_T* __restrict__ q, const FK_T* __restrict__ k, const FK_T* __restrict__ g,
    long long qb, long long qt, long long qh, long long kb, long long kt, long long kh, long long gb, long long gt, long long gh,
    const FK_CU_T* __restrict__ cu, int T_len, int H, int N, int nc_max, float scale,
    FK_T* __restrict__ qg, FK_T* __restrict__ kd, FK_T* __restrict__ A, float* __restrict__ dec) {
  using namespace fkgla;
  extern __shared__ __align__(16) unsigned char smem[];
  T* sQ = reinterpret_cast<T*>(smem);
  T* sK = sQ + C * SP;
  float* sB = reinterpret_cast<float*>(sK + C * SP);
  T* sQp = reinterpret_cast<T*>(sB + C * BP);
  T* sKp = sQp + C * PP;
  float* sDiag = reinterpret_cast<float*>(sKp + KP_ROWS * PP);
  float* sSeg = sDiag + NSUB * TRI;

  const long long j = blockIdx.x;
  const int h = blockIdx.y;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  // which sequence and chunk this slot is (uniform over the CTA: the early exits come before any barrier)
  int n, c, bt, t0, t1;
  if (cu != nullptr) {
    int lo = 0, hi = N - 1;  // the last sequence whose first slot is <= j (first slots grow strictly with n)
    while (lo < hi) {
      const int mid = (lo + hi + 1) >> 1;
      if ((long long)(cu[mid] / C) + mid <= j) lo = mid;
      else hi = mid - 1;
    }
    n = lo;
    c = (int)(j - ((long long)(cu[n] / C) + n));
    bt = 0;
    t0 = (int)cu[n];
    t1 = (int)cu[n + 1];
  } else {
    n = (int)(j / nc_max);
    c = (int)(j - (long long)n * nc_max);
    bt = n;
    t0 = 0;
    t1 = T_len;
  }
  if (c < 0) return;
  const int cs = t0 + c * C;
  if (cs >= t1) return;
  const int L = min(C, t1 - cs);
  const long long row0 = (long long)bt * T_len + cs;  // the chunk's first row of the [B * T, H, K] workspaces

  constexpr int SEGS = PREP_THREADS / KS, TPS = C / SEGS;  // the running sum: SEGS segments of TPS tokens a channel
  const int ch = tid % KS, seg = tid / KS;
  const int g8 = lane >> 2, q4 = lane & 3;
  float acc[2][4];  // this warp's below-diagonal n8 tiles u = warp, warp + 8 (of 2 + 4 + 6)
#pragma unroll
  for (int w2 = 0; w2 < 2; ++w2)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[w2][e] = 0.f;

  for (int i0 = 0; i0 < K; i0 += KS) {
    // (1) the slab's q, k and g (rows past L: zeros, so they add nothing and b stays flat)
    for (int x = tid; x < C * KS; x += PREP_THREADS) {
      const int t = x / KS, i = x - t * KS;
      T qv = from_f<T>(0.f), kv = from_f<T>(0.f);
      float gv = 0.f;
      if (t < L) {
        const long long tt = cs + t;
        qv = q[bt * qb + tt * qt + h * qh + i0 + i];
        kv = k[bt * kb + tt * kt + h * kh + i0 + i];
        gv = to_f(g[bt * gb + tt * gt + h * gh + i0 + i]);
      }
      sQ[t * SP + i] = qv;
      sK[t * SP + i] = kv;
      sB[t * BP + i] = gv;
    }
    __syncthreads();
    // (2) b = the running sum of g down each channel: each segment's own sums, then the earlier segments' totals
    float part[TPS];
    float run = 0.f;
#pragma unroll
    for (int u = 0; u < TPS; ++u) {
      run += sB[(seg * TPS + u) * BP + ch];
      part[u] = run;
    }
    sSeg[seg * KS + ch] = run;
    __syncthreads();
    float before = 0.f;
    for (int s2 = 0; s2 < seg; ++s2) before += sSeg[s2 * KS + ch];
#pragma unroll
    for (int u = 0; u < TPS; ++u) sB[(seg * TPS + u) * BP + ch] = part[u] + before;
    __syncthreads();
    // (3) Qg, Kd and the decay to global memory; q' and the k'' of every later sub-chunk to shared memory
    for (int x = tid; x < C * KS; x += PREP_THREADS) {
      const int t = x / KS, i = x - t * KS;
      const float bx = sB[t * BP + i], blast = sB[(C - 1) * BP + i];
      const float qv = to_f(sQ[t * SP + i]), kv = to_f(sK[t * SP + i]);
      if (t < L) {
        const long long at = ((row0 + t) * H + h) * K + i0 + i;
        qg[at] = from_f<T>(qv * expf(bx) * scale);
        kd[at] = from_f<T>(kv * expf(blast - bx));
      }
      if (t == 0) dec[(j * H + h) * K + i0 + i] = expf(blast);
      const int d = t / SUB;
      if (d > 0) sQp[t * PP + i] = from_f<T>(qv * expf(bx - sB[(d * SUB - 1) * BP + i]));
      for (int ti = d + 1; ti < NSUB; ++ti) sKp[(kp_base(ti) + t) * PP + i] = from_f<T>(kv * expf(sB[(ti * SUB - 1) * BP + i] - bx));
    }
    // (4) the diagonal blocks, a thread a pair (s <= t), summed over the slabs in f32
    for (int p = tid; p < NSUB * TRI; p += PREP_THREADS) {
      const int d = p / TRI, r = p - d * TRI;
      int tt = 0;
      while ((tt + 1) * (tt + 2) / 2 <= r) ++tt;
      const int t = d * SUB + tt, s = d * SUB + (r - tt * (tt + 1) / 2);
      float a = 0.f;
      for (int i = 0; i < KS; ++i) a += to_f(sQ[t * SP + i]) * to_f(sK[s * SP + i]) * expf(sB[t * BP + i] - sB[s * BP + i]);
      sDiag[p] = (i0 == 0 ? 0.f : sDiag[p]) + a;
    }
    __syncthreads();
    // (5) below the diagonal: q' (16 rows of sub-chunk ti) times k''^T (its 16 ti earlier tokens), n8 tile by tile
#pragma unroll
    for (int w2 = 0; w2 < 2; ++w2) {
      const int u = warp + 8 * w2;
      if (u < 12) {
        const int ti = u < 2 ? 1 : u < 6 ? 2 : 3;
        const int nt = u - (ti == 1 ? 0 : ti == 2 ? 2 : 6);
#pragma unroll
        for (int kk = 0; kk < KS; kk += 16) {
          u32 a[4], b0, b1;
          ldsm_x4(smem_u32(sQp + (ti * SUB + (lane & 15)) * PP + kk + (lane >> 4) * 8), a[0], a[1], a[2], a[3]);
          ldsm_x2(smem_u32(sKp + (kp_base(ti) + nt * 8 + (lane & 7)) * PP + kk + ((lane >> 3) & 1) * 8), b0, b1);
          Mma<T>::mma(acc[w2], a, b0, b1);
        }
      }
    }
    __syncthreads();  // the next slab overwrites every array
  }

  // (6) A: zeros above the diagonal, the diagonal blocks from shared memory, the blocks below from the mma tiles
  T* Aj = A + (j * H + h) * (long long)(C * C);
  for (int x = tid; x < C * C; x += PREP_THREADS) {
    const int t = x / C, s = x - t * C;
    if (s > t) Aj[x] = from_f<T>(0.f);
    else if (s / SUB == t / SUB) {
      const int d = t / SUB, tt = t - d * SUB, ss = s - d * SUB;
      Aj[x] = from_f<T>(sDiag[d * TRI + tt * (tt + 1) / 2 + ss] * scale);
    }
  }
#pragma unroll
  for (int w2 = 0; w2 < 2; ++w2) {
    const int u = warp + 8 * w2;
    if (u < 12) {
      const int ti = u < 2 ? 1 : u < 6 ? 2 : 3;
      const int nt = u - (ti == 1 ? 0 : ti == 2 ? 2 : 6);
#pragma unroll
      for (int e = 0; e < 4; ++e) Aj[(ti * SUB + g8 + (e >> 1) * 8) * C + nt * 8 + 2 * q4 + (e & 1)] = from_f<T>(acc[w2][e] * scale);
    }
  }
}

extern "C" __global__ void __launch_bounds__(fkgla::MAIN_THREADS, 1) fk_gla_chunk_tc(
    FK_T* __restrict__ o, const FK_T* __restrict__ v, long long vb, long long vt, long long vh,
    const FK_T* __restrict__ qg, const FK_T* __restrict__ kd, const FK_T* __restrict__ A, const float* __restrict__ dec,
    const float* s_in, long long s_in_n, float* s_out, long long s_out_n,
    const FK_CU_T* __restrict__ cu, const FK_SI_T* __restrict__ si, int T_len, int H, int V, int nc_max) {
  using namespace fkgla;
  extern __shared__ __align__(16) unsigned char smem[];
  float* red = reinterpret_cast<float*>(smem + 2 * STAGE_BYTES);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp % WM, wk = warp / WM;
  const int g8 = lane >> 2, q4 = lane & 3;
  const int h = blockIdx.y, n = blockIdx.z;
  const int c0 = blockIdx.x * BV;
  int bt, t0, t1;
  if (cu != nullptr) { bt = 0; t0 = (int)cu[n]; t1 = (int)cu[n + 1]; }
  else { bt = n; t0 = 0; t1 = T_len; }
  long long slot = n;
  bool rd = s_in != nullptr, wr = s_out != nullptr;
  if (si != nullptr) {
    slot = (long long)si[n];
    if (slot < 0) { rd = false; wr = false; }  // PAD_SLOT_ID: a zero state, nothing written back
  }
  const long long head = (long long)h * K * V;

  // S^T: fragment e of n8 tile nt holds value column vrow(e) and key row kcol(nt, e)
  const int vrow0 = c0 + wm * 16 + g8;
  float S[KW / 8][4];
#pragma unroll
  for (int nt = 0; nt < KW / 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const long long i = wk * KW + nt * 8 + 2 * q4 + (e & 1);
      S[nt][e] = rd ? s_in[slot * s_in_n + head + i * V + vrow0 + (e >> 1) * 8] : 0.f;
    }

  // one chunk's operands into stage st: rows past the sequence zero-filled (cp.async of 0 source bytes)
  auto load_chunk = [&](int c, int st) {
    T* sQ = reinterpret_cast<T*>(smem + st * STAGE_BYTES);
    T* sKd = sQ + C * QP;
    T* sA = sKd + C * QP;
    T* sV = sA + C * AP;
    float* sDec = reinterpret_cast<float*>(sV + C * VP);
    const int cs = t0 + c * C, L = min(C, t1 - cs);
    const long long jj = chunk_slot(cu, n, c, nc_max);
    const long long row0 = (long long)bt * T_len + cs;
    constexpr int KCH = K / 8;
    for (int x = tid; x < C * KCH; x += MAIN_THREADS) {
      const int t = x / KCH, cc = x - t * KCH;
      const bool ok = t < L;
      const long long at = ((row0 + (ok ? t : 0)) * H + h) * K + cc * 8;
      cp_async16(smem_u32(sQ + t * QP + cc * 8), qg + at, ok ? 16 : 0);
      cp_async16(smem_u32(sKd + t * QP + cc * 8), kd + at, ok ? 16 : 0);
    }
    const T* Aj = A + (jj * H + h) * (long long)(C * C);
    for (int x = tid; x < C * (C / 8); x += MAIN_THREADS) {
      const int t = x / (C / 8), cc = x - t * (C / 8);
      cp_async16(smem_u32(sA + t * AP + cc * 8), Aj + t * C + cc * 8, 16);
    }
    for (int x = tid; x < C * (BV / 8); x += MAIN_THREADS) {
      const int t = x / (BV / 8), cc = x - t * (BV / 8);
      const bool ok = t < L;
      cp_async16(smem_u32(sV + t * VP + cc * 8), v + bt * vb + (long long)(cs + (ok ? t : 0)) * vt + h * vh + c0 + cc * 8, ok ? 16 : 0);
    }
    for (int x = tid; x < K / 4; x += MAIN_THREADS) cp_async16(smem_u32(sDec + x * 4), dec + (jj * H + h) * K + x * 4, 16);
  };

  const int nc = (t1 - t0 + C - 1) / C;
  if (nc > 0) {
    load_chunk(0, 0);
    cp_async_commit();
  }
  for (int c = 0; c < nc; ++c) {
    const int st = c & 1;
    if (c + 1 < nc) {
      load_chunk(c + 1, st ^ 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const T* sQ = reinterpret_cast<const T*>(smem + st * STAGE_BYTES);
    const T* sKd = sQ + C * QP;
    const T* sA = sKd + C * QP;
    const T* sV = sA + C * AP;
    const float* sDec = reinterpret_cast<const float*>(sV + C * VP);
    const int cs = t0 + c * C, L = min(C, t1 - cs);

    // V^T as A fragments (value rows wm * 16 .., tokens ks * 16 ..): shared by the intra-chunk product and the update
    u32 vf[C / 16][4];
#pragma unroll
    for (int ks = 0; ks < C / 16; ++ks)
      ldsm_x4_t(smem_u32(sV + (ks * 16 + (lane & 7) + ((lane >> 4) << 3)) * VP + wm * 16 + ((lane >> 3) & 1) * 8), vf[ks][0], vf[ks][1], vf[ks][2], vf[ks][3]);

    // (1) o^T over this warp's key columns: S^T Qg^T (the accumulators of two n8 tiles are one A fragment)
    float oacc[C / 8][4];
#pragma unroll
    for (int nt = 0; nt < C / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) oacc[nt][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < KW / 16; ++kk) {
      const u32 a[4] = {Mma<T>::pack(S[2 * kk][0], S[2 * kk][1]), Mma<T>::pack(S[2 * kk][2], S[2 * kk][3]),
                        Mma<T>::pack(S[2 * kk + 1][0], S[2 * kk + 1][1]), Mma<T>::pack(S[2 * kk + 1][2], S[2 * kk + 1][3])};
#pragma unroll
      for (int np = 0; np < C / 16; ++np) {
        u32 b0, b1, b2, b3;
        ldsm_x4(smem_u32(sQ + (np * 16 + (lane & 7) + ((lane >> 4) << 3)) * QP + wk * KW + kk * 16 + ((lane >> 3) & 1) * 8), b0, b1, b2, b3);
        Mma<T>::mma(oacc[2 * np], a, b0, b1);
        Mma<T>::mma(oacc[2 * np + 1], a, b2, b3);
      }
    }
    // (2) the intra-chunk V^T A^T for this warp's TW tokens (A is zero above the diagonal: those k steps skipped)
#pragma unroll
    for (int nt = 0; nt < C / 8; ++nt) {
      if (nt / (TW / 8) != wk) continue;
#pragma unroll
      for (int ks = 0; ks < C / 16; ++ks) {
        if (ks * 16 > nt * 8 + 7) continue;
        u32 b0, b1;
        ldsm_x2(smem_u32(sA + (nt * 8 + (lane & 7)) * AP + ks * 16 + ((lane >> 3) & 1) * 8), b0, b1);
        Mma<T>::mma(oacc[nt], vf[ks], b0, b1);
      }
    }
    // (3) the partials to shared memory (summed over the WK key slices below)
#pragma unroll
    for (int nt = 0; nt < C / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) red[(wk * C + nt * 8 + 2 * q4 + (e & 1)) * RP + wm * 16 + g8 + (e >> 1) * 8] = oacc[nt][e];
    // (4) the state over the chunk: S^T diag(decay) + V^T Kd, in the accumulators (S was read as o's operand above)
#pragma unroll
    for (int nt = 0; nt < KW / 8; ++nt) {
      const int i = wk * KW + nt * 8 + 2 * q4;
      const float d0 = sDec[i], d1 = sDec[i + 1];
      S[nt][0] *= d0;
      S[nt][1] *= d1;
      S[nt][2] *= d0;
      S[nt][3] *= d1;
    }
#pragma unroll
    for (int np = 0; np < KW / 16; ++np)
#pragma unroll
      for (int ks = 0; ks < C / 16; ++ks) {
        u32 b0, b1, b2, b3;
        ldsm_x4_t(smem_u32(sKd + (ks * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * QP + wk * KW + np * 16 + (lane >> 4) * 8), b0, b1, b2, b3);
        Mma<T>::mma(S[2 * np], vf[ks], b0, b1);
        Mma<T>::mma(S[2 * np + 1], vf[ks], b2, b3);
      }
    __syncthreads();
    // (5) o = the sum of the partials, two columns a thread at a time
    for (int x = tid; x < C * (BV / 2); x += MAIN_THREADS) {
      const int t = x / (BV / 2), cp = (x - t * (BV / 2)) * 2;
      if (t < L) {
        float y0 = 0.f, y1 = 0.f;
#pragma unroll
        for (int w = 0; w < WK; ++w) {
          y0 += red[(w * C + t) * RP + cp];
          y1 += red[(w * C + t) * RP + cp + 1];
        }
        T* op = o + (((long long)bt * T_len + cs + t) * H + h) * V + c0 + cp;
        op[0] = from_f<T>(y0);
        op[1] = from_f<T>(y1);
      }
    }
    __syncthreads();  // the next chunk's loads refill this stage; its partials overwrite red
  }

  if (wr) {
#pragma unroll
    for (int nt = 0; nt < KW / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const long long i = wk * KW + nt * 8 + 2 * q4 + (e & 1);
        s_out[slot * s_out_n + head + i * V + vrow0 + (e >> 1) * 8] = S[nt][e];
      }
  }
}
