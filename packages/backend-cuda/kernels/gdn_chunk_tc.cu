// FastKernels chunked gated delta rule on tensor cores (FLA's chunk_gated_delta_rule, Qwen3-Next's linear attention,
// issue 32): two launches over chunks of C = 64 tokens on mma.sync m16n8k16 (bf16 / f16 operands, f32 accumulation),
// the state in f32. q, k and v enter the products as given (exact in T); every operand computed here goes in as a
// hi + lo pair of T values (x = hi + lo to about 2^-16) and its products are the pair's (lo x lo dropped), as in
// gla_chunk_tc.cu, so o and the state match the float64 op as closely as the CUDA-core fk_gdn_chunk's f32 does.
//
// The chunked WY form. Per value head, with G_t the running sum of the log decays g inside the chunk (G_t - G_s <= 0
// for s <= t when g <= 0: no factor below can overflow), n_t = 1 / |q_t| and m_t = 1 / |k_t| (FK_L2: FLA's in-kernel
// l2norm, x / sqrt(sum x^2 + 1e-6); else 1) and S the state at the chunk's start:
//   A[t][s]   = beta_t e^(G_t - G_s) m_t m_s (k_t . k_s)     (s < t)      T = (I + A)^-1 (unit lower triangular)
//   W         = Tw k,  Tw = T diag(beta e^G m)               U = Tu v,  Tu = T diag(beta)
//   V'        = U - W S                                      (the recurrence's corrected values, all tokens at once)
//   o_t       = scale e^(G_t) n_t q_t S + sum_{s <= t} Aqk[t][s] V'_s,   Aqk[t][s] = scale e^(G_t - G_s) n_t m_s (q_t . k_s)
//   S'        = e^(G_last) S + sum_s k_s (m_s e^(G_last - G_s) V'_s)^T
// One decay a head (and the norms) are scalars a token: they scale the rows and columns of the products of the raw
// q, k, so no reference points are needed (gla_chunk_tc.cu's per-channel decays need them) and q, k need no lo half.
//
// fk_gdn_chunk_prep: a CTA per (chunk slot, value head), fully parallel; everything that does not depend on the state:
//   (0) g and beta of the chunk's tokens (zeros past its end: beta 0 makes those rows of A, W, U zero), G by a
//       running sum, to the workspace gc [B T, HV] (f32); the q, k, v rows by cp.async;
//   (1) the inverse norms n, m of the q, k rows (a warp a row), written by the head group's first value head to
//       nrm [B T, H, 2] (f32);
//   (2) k k^T (warps 0-3) and q k^T (warps 4-7) by mma, a warp a 16-row block: A to shared memory in f32, Aqk to its
//       workspace [slots, HV, 2, C, C] (hi, lo; zeros above the diagonal);
//   (3) T in f32, in blocks of 16: the four diagonal blocks by forward substitution at once (a thread a column), then
//       the blocks below them a block row at a time with every thread; the columns scaled into Tw, Tu (hi + lo);
//   (4) W = Tw k, U = Tu v by mma (T lower triangular: the k16 steps above a row block are skipped), to the workspaces
//       w [B T, HV, 2, K] and u [B T, HV, 2, V].
// Chunk slots as gla_chunk_tc.cu's: chunk c of sequence n is slot n * nc_max + c for batch rows, floor(cu[n] / C) + n +
// c with cu_seqlens, so both grids are sized from shapes alone and a slot no chunk takes exits.
//
// fk_gdn_chunk_tc: a CTA per (V tile of FK_BV columns, value head, sequence) walks the sequence's chunks, its [BV, K]
// slice of S^T in mma accumulators (warp (wm, wk): value rows wm 16 .. + 16, key columns wk KW .. + KW), as
// fk_gla_chunk_tc. Per chunk:
//   (A) S^T q^T and S^T W^T from the accumulators (split into hi + lo on the fly): the first scaled by
//       scale e^(G_t) n_t a token column, the second's partials over the WK key slices to shared memory;
//   (B) V' = U - W S summed over the slices, a thread an element, stored as hi + lo pairs twice: as is (for o) and
//       times m_t e^(G_last - G_t) (for the state);
//   (C) o^T += V'^T Aqk^T (the tokens split over the WK warps), the partials to shared memory; S^T = e^(G_last) S^T +
//       (m e^(G_last - G) V')^T k in the accumulators;
//   (D) o = the partials' sum.
// By cp.async, q, W, G and the norms of the next chunk load once (A) is done with this one's; k, Aqk and U once (C)
// is. q and k are read in place through their strides (rows 16-byte aligned: the launcher copies them otherwise).
// Nothing is read on the host: sequences, pool slots and -1 padding rows are read on the device as fk_gdn_chunk does
// (gdn-source.ts), so the launches can be captured in a CUDA graph.
//
// Specialised by NVRTC with -DFK_T=<__nv_bfloat16 | __half> -DFK_TG / -DFK_TB (g's and beta's types: float, bf16 or
// f16) -DFK_K -DFK_V -DFK_BV -DFK_WK -DFK_L2 -DFK_CU_T -DFK_SI_T (src/ops/recurrent/gdn-tc-plan.ts); the defaults
// (Qwen3-Next's heads) compile standalone. A host replay (FK_HOST_REPLAY=1, gdn-tc-host.test.ts) supplies its own
// stand-ins for the CUDA types and the tensor-core primitives (test/warp-mma-host.ts).
// compile-cu: -DFK_T=__half -DFK_TB=__half -DFK_BV=16 -DFK_WK=8 -DFK_L2=0
#include "fk_host_replay.cuh"

#ifndef FK_TG
#define FK_TG float
#endif
#ifndef FK_TB
#define FK_TB FK_T
#endif
#ifndef FK_K
#define FK_K 128
#endif
#ifndef FK_V
#define FK_V 128
#endif
#ifndef FK_L2
#define FK_L2 1
#endif

namespace fkgdn {
#include "fk_chunk_tc.cuh"  // T, CU_T, SI_T, C, K, the walk's tile (BV, WM, WK, KW, TW, MAIN_THREADS, RP), PREP_THREADS
__device__ __forceinline__ float to_f(float x) { return x; }  // g and beta may be f32

constexpr int VF = FK_V;               // the whole value head dim (the prep computes U for every column)
static_assert(K % 16 == 0 && VF % 16 == 0 && VF % BV == 0, "head dims");

// shared-memory pitches (elements): +8 T (16 bytes) keeps ldmatrix's eight rows on distinct banks; +4 floats A's rows
constexpr int KP = K + 8;       // q, k, W rows
constexpr int TP = C + 8;       // Tw, Tu, Aqk rows
constexpr int VP = VF + 8;      // prep: v rows
constexpr int BP = BV + 8;      // main: U, V' tile rows
constexpr int AP = C + 4;       // prep: A (f32) rows

// prep's shared memory: k [C][KP]; then q [C][KP], whose space Tw hi, lo and Tu hi, lo [C][TP] take once the scores
// are done; v [C][VP] (T); A and T [C][AP], G, beta, n, m [C] (float)
constexpr int QREGION = (C * KP > 4 * C * TP ? C * KP : 4 * C * TP) * (int)sizeof(T);
constexpr int PREP_SMEM = C * KP * (int)sizeof(T) + QREGION + C * VP * (int)sizeof(T) + 2 * C * AP * 4 + 4 * C * 4;
// main's: q, W hi, lo, k [C][KP]; Aqk hi, lo [C][TP]; U, V', V' m e^(G_last - G) hi, lo [C][BP] (T); G, n, m [2][C]
// and the partials [WK][C][RP] (float)
constexpr int MAIN_SMEM = (4 * C * KP + 2 * C * TP + 6 * C * BP) * (int)sizeof(T) + 6 * C * 4 + WK * C * RP * 4;
static_assert(MAIN_SMEM <= 227 * 1024 && PREP_SMEM <= 227 * 1024, "shared memory past sm_90's 227 KiB a CTA");

// Two adjacent elements (hi, lo 4-byte aligned) as hi + lo pairs, one 4-byte store each.
__device__ __forceinline__ void split_store2(T* hi, T* lo, float x0, float x1) {
  u32 h, l;
  split_pack(x0, x1, h, l);
  *reinterpret_cast<u32*>(hi) = h;
  *reinterpret_cast<u32*>(lo) = l;
}
// A hi + lo [C][BP] tile's transpose as A fragments f, fl (value rows wm 16 .., tokens ks 16 ..).
__device__ __forceinline__ void tile_t_frags(u32 (&f)[C / 16][4], u32 (&fl)[C / 16][4], const T* hi, const T* lo, int wm, int lane) {
#pragma unroll
  for (int ks = 0; ks < C / 16; ++ks) {
    const int at = (ks * 16 + (lane & 7) + ((lane >> 4) << 3)) * BP + wm * 16 + ((lane >> 3) & 1) * 8;
    ldsm_x4_t(smem_u32(hi + at), f[ks][0], f[ks][1], f[ks][2], f[ks][3]);
    ldsm_x4_t(smem_u32(lo + at), fl[ks][0], fl[ks][1], fl[ks][2], fl[ks][3]);
  }
}
}  // namespace fkgdn

extern "C" __global__ void __launch_bounds__(fkgdn::PREP_THREADS, 2) fk_gdn_chunk_prep(
    const FK_T* __restrict__ q, const FK_T* __restrict__ k, const FK_T* __restrict__ v, const FK_TG* __restrict__ g,
    const FK_TB* __restrict__ beta,
    long long qb, long long qt, long long qh, long long kb, long long kt, long long kh, long long vb, long long vt, long long vh,
    long long gb, long long gt, long long gh, long long bb, long long btk, long long bh,
    const FK_CU_T* __restrict__ cu, int T_len, int H, int HV, int N, int nc_max, float scale,
    FK_T* __restrict__ w, FK_T* __restrict__ u, FK_T* __restrict__ aqk, float* __restrict__ gc, float* __restrict__ nrm) {
  using namespace fkgdn;
  extern __shared__ __align__(16) unsigned char fk_smem[];
  T* sK = reinterpret_cast<T*>(fk_smem);
  T* sQ = sK + C * KP;  // the q region: q; later Tw hi, lo, Tu hi, lo
  T* sTwh = sQ;
  T* sTwl = sTwh + C * TP;
  T* sTuh = sTwl + C * TP;
  T* sTul = sTuh + C * TP;
  T* sV = reinterpret_cast<T*>(reinterpret_cast<unsigned char*>(sQ) + QREGION);
  float* sA = reinterpret_cast<float*>(sV + C * VP);
  float* sT = sA + C * AP;
  float* sG = sT + C * AP;
  float* sBeta = sG + C;
  float* sRq = sBeta + C;  // n_t
  float* sRk = sRq + C;    // m_t

  const long long j = blockIdx.x;
  const int hv = blockIdx.y, R = HV / H, h = hv / R;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g8 = lane >> 2, q4 = lane & 3;
  int n, c, bt, t0, t1;
  slot_chunk(cu, j, N, nc_max, T_len, n, c, bt, t0, t1);
  if (!(c >= 0 && t0 + c * C < t1)) return;  // no chunk takes the slot (uniform over the CTA, before any barrier)
  const int cs = t0 + c * C, L = min(C, t1 - cs);
  const long long row0 = (long long)bt * T_len + cs;  // the chunk's first row of the [B T, ...] workspaces

  // (0) g, beta (zeros past the chunk's end); the q, k and v rows by cp.async, all in flight at once
  if (tid < C) {
    const bool live = tid < L;
    const long long tt = cs + tid;
    sG[tid] = live ? to_f(g[bt * gb + tt * gt + hv * gh]) : 0.f;
    sBeta[tid] = live ? to_f(beta[bt * bb + tt * btk + hv * bh]) : 0.f;
  }
  for (int x = tid; x < C * (K / 8); x += PREP_THREADS) {
    const int t = x / (K / 8), cc = x - t * (K / 8);
    const bool ok = t < L;
    const long long tt = cs + (ok ? t : 0);
    cp_async16(smem_u32(sQ + t * KP + cc * 8), q + bt * qb + tt * qt + h * qh + cc * 8, ok ? 16 : 0);
    cp_async16(smem_u32(sK + t * KP + cc * 8), k + bt * kb + tt * kt + h * kh + cc * 8, ok ? 16 : 0);
  }
  for (int x = tid; x < C * (VF / 8); x += PREP_THREADS) {
    const int t = x / (VF / 8), cc = x - t * (VF / 8);
    const bool ok = t < L;
    cp_async16(smem_u32(sV + t * VP + cc * 8), v + bt * vb + (long long)(cs + (ok ? t : 0)) * vt + hv * vh + cc * 8, ok ? 16 : 0);
  }
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  // (1) the inverse norms of the q, k rows (FLA's x / sqrt(sum x^2 + 1e-6)), a warp a row
  for (int t = warp; t < C; t += PREP_THREADS / 32) {
#if FK_L2
    float sq = 0.f, sk = 0.f;
    for (int i = lane; i < K; i += 32) {
      const float qv = to_f(sQ[t * KP + i]), kv = to_f(sK[t * KP + i]);
      sq += qv * qv;
      sk += kv * kv;
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
      sq += __shfl_xor_sync(0xffffffffu, sq, off);
      sk += __shfl_xor_sync(0xffffffffu, sk, off);
    }
    const float rq = 1.f / sqrtf(sq + 1e-6f), rk = 1.f / sqrtf(sk + 1e-6f);
#else
    const float rq = 1.f, rk = 1.f;
#endif
    if (lane == 0) {
      sRq[t] = rq;
      sRk[t] = rk;
      if (FK_L2 && t < L && hv % R == 0) {
        nrm[((row0 + t) * H + h) * 2] = rq;
        nrm[((row0 + t) * H + h) * 2 + 1] = rk;
      }
    }
  }
  __syncthreads();
  if (tid == 0) {  // G: the running sum of g (64 adds)
    float run = 0.f;
    for (int t = 0; t < C; ++t) sG[t] = (run += sG[t]);
  }
  __syncthreads();
  if (tid < L) gc[(row0 + tid) * HV + hv] = sG[tid];

  // (2) k k^T (warps 0-3) and q k^T (warps 4-7), rows mi 16 .. + 16, the n8 tiles at or below the diagonal: the raw
  // inputs are exact in T, one mma a tile and k16 step
  {
    const int mi = warp & 3;
    const bool qk = warp >= 4;
    const T* as = qk ? sQ : sK;
    float acc[C / 8][4];
#pragma unroll
    for (int nt = 0; nt < C / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[nt][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < K / 16; ++kk) {
      u32 a[4];
      ldsm_x4(smem_u32(as + (mi * 16 + (lane & 15)) * KP + kk * 16 + (lane >> 4) * 8), a[0], a[1], a[2], a[3]);
#pragma unroll
      for (int nt = 0; nt < C / 8; ++nt) {
        if (nt >= 2 * mi + 2) continue;  // above the diagonal block (warp-uniform)
        u32 b0, b1;
        ldsm_x2(smem_u32(sK + (nt * 8 + (lane & 7)) * KP + kk * 16 + ((lane >> 3) & 1) * 8), b0, b1);
        Mma<T>::mma(acc[nt], a, b0, b1);
      }
    }
    T* Aj = aqk + (j * HV + hv) * (long long)(2 * C * C);
#pragma unroll
    for (int nt = 0; nt < C / 8; ++nt)
#pragma unroll
      for (int e2 = 0; e2 < 4; e2 += 2) {
        const int t = mi * 16 + g8 + (e2 >> 1) * 8, s0 = nt * 8 + 2 * q4;
        float f[2];
#pragma unroll
        for (int u = 0; u < 2; ++u) {
          const int s = s0 + u;
          f[u] = s <= t ? expf(sG[t] - sG[s]) * sRk[s] * acc[nt][e2 + u] : 0.f;  // exponent <= 0 for s <= t
          if (!qk) sA[t * AP + s] = s < t ? sBeta[t] * sRk[t] * f[u] : 0.f;
        }
        if (qk) split_store2(Aj + t * C + s0, Aj + C * C + t * C + s0, scale * sRq[t] * f[0], scale * sRq[t] * f[1]);
      }
  }
  __syncthreads();  // A is whole; the q region is free

  // (3) T = (I + A)^-1 in blocks of 16: the diagonal blocks by forward substitution, a thread a column of one block
  // (T_dd[t][jj] = [t == jj] - sum_{s < t} A_dd[t][s] T_dd[s][jj]); then block row by block row, with every thread,
  // T_ij = -T_ii sum_{k = j .. i - 1} A_ik T_kj (i > j; the T_kj of earlier rows are done). Zeros above the diagonal.
  {
    float* sX = reinterpret_cast<float*>(sTwh);  // the block row's sums [3][16][16]; Tw / Tu take the space after
    if (tid < C) {
      const int d = tid >> 4, jj = tid & 15, r0 = d * 16;
#pragma unroll 1
      for (int t = 0; t < 16; ++t) {
        float p0 = t == jj ? 1.f : 0.f, p1 = 0.f;  // two partial sums: half the dependent chain
        for (int s = 0; s + 1 < t; s += 2) {
          p0 -= sA[(r0 + t) * AP + r0 + s] * sT[(r0 + s) * AP + r0 + jj];
          p1 -= sA[(r0 + t) * AP + r0 + s + 1] * sT[(r0 + s + 1) * AP + r0 + jj];
        }
        if (t & 1) p0 -= sA[(r0 + t) * AP + r0 + t - 1] * sT[(r0 + t - 1) * AP + r0 + jj];
        sT[(r0 + t) * AP + r0 + jj] = p0 + p1;
      }
    }
    for (int x = tid; x < C * C; x += PREP_THREADS) {
      const int t = x / C, s = x - t * C;
      if (s / 16 > t / 16) sT[t * AP + s] = 0.f;
    }
    __syncthreads();
#pragma unroll 1
    for (int i = 1; i < C / 16; ++i) {
      for (int e = tid; e < i * 256; e += PREP_THREADS) {
        const int jb = e >> 8, r = (e >> 4) & 15, cc = e & 15;
        float acc = 0.f;
        for (int kb = jb; kb < i; ++kb)
#pragma unroll 4
          for (int s = 0; s < 16; ++s) acc += sA[(i * 16 + r) * AP + kb * 16 + s] * sT[(kb * 16 + s) * AP + jb * 16 + cc];
        sX[e] = acc;
      }
      __syncthreads();
      for (int e = tid; e < i * 256; e += PREP_THREADS) {
        const int jb = e >> 8, r = (e >> 4) & 15, cc = e & 15;
        float acc = 0.f;
#pragma unroll 4
        for (int s = 0; s < 16; ++s) acc -= sT[(i * 16 + r) * AP + i * 16 + s] * sX[(jb << 8) + s * 16 + cc];
        sT[(i * 16 + r) * AP + jb * 16 + cc] = acc;
      }
      __syncthreads();
    }
    // the columns scaled: Tw = T diag(beta e^G m), Tu = T diag(beta), as hi + lo pairs (over sX: every thread is past it)
    for (int x = tid; x < C * C; x += PREP_THREADS) {
      const int t = x / C, jc = x - t * C;
      const float tv = sT[t * AP + jc], bu = sBeta[jc];
      split_store(sTwh + t * TP + jc, sTwl + t * TP + jc, tv * bu * expf(sG[jc]) * sRk[jc]);
      split_store(sTuh + t * TP + jc, sTul + t * TP + jc, tv * bu);
    }
  }
  __syncthreads();

  // (4) W = Tw k and U = Tu v, rows mi 16 .. + 16, 16-column groups split over the two warps of a row block
  {
    const int mi = warp & 3, wn = warp >> 2;
#pragma unroll 1
    for (int pass = 0; pass < 2; ++pass) {  // 0: W, 1: U
      const T* th = pass == 0 ? sTwh : sTuh;
      const T* tl = pass == 0 ? sTwl : sTul;
      u32 a[C / 16][4], a2[C / 16][4];
#pragma unroll
      for (int ks = 0; ks < C / 16; ++ks) {
        if (ks > mi) continue;  // T is zero above the diagonal
        const int at = (mi * 16 + (lane & 15)) * TP + ks * 16 + (lane >> 4) * 8;
        ldsm_x4(smem_u32(th + at), a[ks][0], a[ks][1], a[ks][2], a[ks][3]);
        ldsm_x4(smem_u32(tl + at), a2[ks][0], a2[ks][1], a2[ks][2], a2[ks][3]);
      }
      const int cols = pass == 0 ? K : VF;
      const T* bs = pass == 0 ? sK : sV;
      const int bp = pass == 0 ? KP : VP;
#pragma unroll 1
      for (int gq = wn; gq < cols / 16; gq += 2) {
        float acc[2][4];
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[0][e] = acc[1][e] = 0.f;
#pragma unroll
        for (int ks = 0; ks < C / 16; ++ks) {
          if (ks > mi) continue;
          u32 b0, b1, b2, b3;
          ldsm_x4_t(smem_u32(bs + (ks * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * bp + gq * 16 + (lane >> 4) * 8), b0, b1, b2, b3);
          Mma<T>::mma(acc[0], a[ks], b0, b1);
          Mma<T>::mma(acc[1], a[ks], b2, b3);
          Mma<T>::mma(acc[0], a2[ks], b0, b1);
          Mma<T>::mma(acc[1], a2[ks], b2, b3);
        }
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
          for (int e2 = 0; e2 < 4; e2 += 2) {
            const int t = mi * 16 + g8 + (e2 >> 1) * 8, col = gq * 16 + nt * 8 + 2 * q4;
            if (t < L) {
              T* dst = pass == 0 ? w + ((row0 + t) * HV + hv) * (2 * K) + col : u + ((row0 + t) * HV + hv) * (2 * VF) + col;
              split_store2(dst, dst + cols, acc[nt][e2], acc[nt][e2 + 1]);
            }
          }
      }
    }
  }
}

extern "C" __global__ void __launch_bounds__(fkgdn::MAIN_THREADS, 1) fk_gdn_chunk_tc(
    FK_T* __restrict__ o, const FK_T* __restrict__ q, const FK_T* __restrict__ k,
    long long qb, long long qt, long long qh, long long kb, long long kt, long long kh,
    const FK_T* __restrict__ w, const FK_T* __restrict__ u, const FK_T* __restrict__ aqk, const float* __restrict__ gc,
    const float* __restrict__ nrm, const float* s_in, long long s_in_n, float* s_out, long long s_out_n,
    const FK_CU_T* __restrict__ cu, const FK_SI_T* __restrict__ si, int T_len, int H, int HV, int nc_max, float scale) {
  using namespace fkgdn;
  extern __shared__ __align__(16) unsigned char fk_smem[];
  T* sQ = reinterpret_cast<T*>(fk_smem);
  T* sWh = sQ + C * KP;
  T* sWl = sWh + C * KP;
  T* sK = sWl + C * KP;
  T* sAh = sK + C * KP;
  T* sAl = sAh + C * TP;
  T* sUh = sAl + C * TP;
  T* sUl = sUh + C * BP;
  T* sNh = sUl + C * BP;  // V'
  T* sNl = sNh + C * BP;
  T* sDh = sNl + C * BP;  // V' m e^(G_last - G)
  T* sDl = sDh + C * BP;
  float* sG = reinterpret_cast<float*>(sDl + C * BP);  // [2][C] each: G, n, m
  float* sRq = sG + 2 * C;
  float* sRk = sRq + 2 * C;
  float* red = sRk + 2 * C;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp % WM, wk = warp / WM;
  const int g8 = lane >> 2, q4 = lane & 3;
  const int hv = blockIdx.y, n = blockIdx.z, h = hv / (HV / H);
  const int c0 = blockIdx.x * BV;
  int bt, t0, t1;
  bool rd = s_in != nullptr, wr = s_out != nullptr;
  const long long slot = walk_sequence(cu, si, n, T_len, bt, t0, t1, rd, wr);
  const long long head = (long long)hv * K * VF;
  const int vrow0 = c0 + wm * 16 + g8;
  float S[KW / 8][4];  // this warp's slice of S^T
  load_state(S, s_in, slot * s_in_n + head, rd, VF, wk, q4, vrow0);

  // loads of chunk c; rows past the sequence zero-filled (cp.async of 0 source bytes)
  auto input_rows = [&](int c, const T* src, long long sb, long long st, long long sh, T* dst) {  // q or k [C][KP]
    const int cs = t0 + c * C, L = min(C, t1 - cs);
    for (int x = tid; x < C * (K / 8); x += MAIN_THREADS) {
      const int t = x / (K / 8), cc = x - t * (K / 8);
      const bool ok = t < L;
      cp_async16(smem_u32(dst + t * KP + cc * 8), src + bt * sb + (long long)(cs + (ok ? t : 0)) * st + h * sh + cc * 8, ok ? 16 : 0);
    }
  };
  // columns col0 .. + cols of a [B T][HV][2][width] workspace -> hi, lo [C][pitch]
  auto pair_rows = [&](int c, const T* src, int width, int cols, int col0, int pitch, T* hi, T* lo) {
    const int cs = t0 + c * C, L = min(C, t1 - cs);
    load_pair_rows(src, (long long)bt * T_len + cs, L, HV, hv, width, cols, col0, pitch, hi, lo, tid);
  };
  auto load_first = [&](int c) {  // q, W, G and the norms of chunk c
    input_rows(c, q, qb, qt, qh, sQ);
    pair_rows(c, w, K, K, 0, KP, sWh, sWl);
    const int cs = t0 + c * C, L = min(C, t1 - cs), b = (c & 1) * C;
    for (int t = tid; t < C; t += MAIN_THREADS) {
      const long long row = (long long)bt * T_len + cs + t;
      sG[b + t] = t < L ? gc[row * HV + hv] : 0.f;
      sRq[b + t] = FK_L2 && t < L ? nrm[(row * H + h) * 2] : 1.f;
      sRk[b + t] = FK_L2 && t < L ? nrm[(row * H + h) * 2 + 1] : 1.f;
    }
  };
  auto load_second = [&](int c) {  // k, Aqk and the U tile of chunk c
    input_rows(c, k, kb, kt, kh, sK);
    pair_rows(c, u, VF, BV, c0, BP, sUh, sUl);
    load_scores(aqk + (chunk_slot(cu, n, c, nc_max) * HV + hv) * (long long)(2 * C * C), sAh, sAl, TP, tid);
  };

  // cp.async groups in flight at the top of chunk c: first(c), then second(c)
  const int nc = (t1 - t0 + C - 1) / C;
  if (nc > 0) {
    load_first(0);
    cp_async_commit();
    load_second(0);
    cp_async_commit();
  }
  for (int c = 0; c < nc; ++c) {
    cp_async_wait<1>();  // first(c)
    __syncthreads();
    const float* G = sG + (c & 1) * C;
    const float* Rq = sRq + (c & 1) * C;
    const float* Rk = sRk + (c & 1) * C;
    const int cs = t0 + c * C, L = min(C, t1 - cs);
    const float glast = G[L - 1];

    // (A) S^T q^T and S^T W^T over this warp's key columns: (S_hi + S_lo) q, (S_hi + S_lo)(W_hi + W_lo) less lo x lo
    float oacc[C / 8][4], vacc[C / 8][4];
#pragma unroll
    for (int nt = 0; nt < C / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) oacc[nt][e] = vacc[nt][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < KW / 16; ++kk) {
      u32 a[4], al[4];
      state_frags(S, kk, a, al);
#pragma unroll
      for (int np = 0; np < C / 16; ++np) {
        const int at = (np * 16 + (lane & 7) + ((lane >> 4) << 3)) * KP + wk * KW + kk * 16 + ((lane >> 3) & 1) * 8;
        u32 b0, b1, b2, b3;
        ldsm_x4(smem_u32(sQ + at), b0, b1, b2, b3);  // q as given: no lo half
        Mma<T>::mma(oacc[2 * np], a, b0, b1);
        Mma<T>::mma(oacc[2 * np], al, b0, b1);
        Mma<T>::mma(oacc[2 * np + 1], a, b2, b3);
        Mma<T>::mma(oacc[2 * np + 1], al, b2, b3);
        mma_state_pair(vacc, a, al, sWh, sWl, KP, np, kk, wk, lane);
      }
    }
    // the inter-chunk o scaled per token (column) by scale e^(G_t) n_t; the W S partials to shared memory
#pragma unroll
    for (int nt = 0; nt < C / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int t = nt * 8 + 2 * q4 + (e & 1);
        oacc[nt][e] *= scale * expf(G[t]) * Rq[t];
        red[(wk * C + t) * RP + wm * 16 + g8 + (e >> 1) * 8] = vacc[nt][e];
      }
    __syncthreads();  // every warp is past (A): q and W take chunk c + 1
    if (c + 1 < nc) {
      load_first(c + 1);
      cp_async_commit();
      cp_async_wait<1>();  // second(c)
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    // (B) V' = U - W S, as hi + lo pairs: as is, and times m_t e^(G_last - G_t) (the state's factor)
    for (int x = tid; x < C * BV; x += MAIN_THREADS) {
      const int t = x / BV, col = x - t * BV;
      float y = 0.f;
      if (t < L) {
        y = to_f(sUh[t * BP + col]) + to_f(sUl[t * BP + col]);
#pragma unroll
        for (int ww = 0; ww < WK; ++ww) y -= red[(ww * C + t) * RP + col];
      }
      split_store(sNh + t * BP + col, sNl + t * BP + col, y);
      split_store(sDh + t * BP + col, sDl + t * BP + col, t < L ? y * Rk[t] * expf(glast - G[t]) : 0.f);
    }
    __syncthreads();
    // (C) the intra-chunk V'^T Aqk^T for this warp's TW tokens (Aqk is zero above the diagonal: skipped)
    {
      u32 vf[C / 16][4], vl[C / 16][4];
      tile_t_frags(vf, vl, sNh, sNl, wm, lane);
      mma_intra<true>(oacc, vf, vl, sAh, sAl, TP, wk, lane);
    }
    store_partials(red, oacc, wk, wm, g8, q4);
    // the state over the chunk: e^(G_last) S^T + (m e^(G_last - G) V')^T k, in the accumulators
    {
      const float d = expf(glast);
#pragma unroll
      for (int nt = 0; nt < KW / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) S[nt][e] *= d;
      u32 df[C / 16][4], dl[C / 16][4];
      tile_t_frags(df, dl, sDh, sDl, wm, lane);
#pragma unroll
      for (int np = 0; np < KW / 16; ++np)
#pragma unroll
        for (int ks = 0; ks < C / 16; ++ks) {
          u32 b0, b1, b2, b3;
          ldsm_x4_t(smem_u32(sK + (ks * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * KP + wk * KW + np * 16 + (lane >> 4) * 8), b0, b1, b2, b3);
          Mma<T>::mma(S[2 * np], df[ks], b0, b1);
          Mma<T>::mma(S[2 * np + 1], df[ks], b2, b3);
          Mma<T>::mma(S[2 * np], dl[ks], b0, b1);
          Mma<T>::mma(S[2 * np + 1], dl[ks], b2, b3);
        }
    }
    __syncthreads();  // the partials are whole; k, Aqk, U, V' are free
    // (D) o = the sum of the partials, a column pair a 4-byte store
    sum_partials(red, L, tid, [&](int t, int cp, float y0, float y1) {
      *reinterpret_cast<u32*>(o + (((long long)bt * T_len + cs + t) * HV + hv) * VF + c0 + cp) = Mma<T>::pack(y0, y1);
    });
    if (c + 1 < nc) {
      load_second(c + 1);
      cp_async_commit();
    }
  }

  if (wr) store_state(S, s_out, slot * s_out_n + head, VF, wk, q4, vrow0);
}
