// FastKernels chunked gated linear attention on tensor cores (FLA's chunk_gla, issue 32): two launches over chunks of
// C = 64 tokens on mma.sync m16n8k16 (bf16 / f16 operands, f32 accumulation), the state in f32. Every operand that is
// not an input as given (Qg, Kd, A, the state) goes in as a hi + lo pair of T values (x = hi + lo to about 2^-16), and
// its products are the pair's (the lo x lo term dropped): o and the state then match the float64 op as closely as the
// CUDA-core kernel's f32 (FLA's single bf16 roundings miss f32's 1e-3 on the state and bf16's 1% on small outputs).
//
// Per chunk, with b_t the running sum of the log gates g inside the chunk (so every exponent below is <= 0 for g <= 0):
//   A[t][s] = scale sum_i q_t,i k_s,i exp(b_t,i - b_s,i)   (s <= t)
//   o_t     = (scale q_t exp(b_t)) S + sum_{s <= t} A[t][s] v_s
//   S'      = diag(exp(b_last)) S + sum_s (k_s exp(b_last - b_s))^T v_s
//
// fk_gla_chunk_prep: a CTA per (chunk slot, head), fully parallel. It computes what depends on q / k / g alone, once a
// chunk instead of once a V tile: Qg = scale q exp(b) and Kd = k exp(b_last - b) (workspaces [B T, H, 2, K]: hi, lo),
// the chunk's decay exp(b_last) and A ([slot, H, 2, C, C]: hi, lo). The key channels go in slabs of
// FK_KS (the scores are sums over channels; the running sums are per channel). A's blocks of 16 x 16 sub-chunks:
//   - below the diagonal (sub-chunk ti > sj): one mma product q' k''^T (hi + lo pairs) with q'_t = q_t exp(b_t - r) and
//     k''_s = k_s exp(r - b_s), r = b at the last token before sub-chunk ti; both factors <= 1, so strongly negative
//     gates underflow to the true (tiny) value instead of overflowing;
//   - on the diagonal: exp(b_t - b_s) per element in f32 (no reference point is safe inside a sub-chunk).
// Chunk slots: a sequence's chunk c is slot n * nc_max + c for batch rows, floor(cu[n] / C) + n + c with cu_seqlens
// (distinct and < floor(T / C) + N whatever the lengths), so the host sizes both grids from shapes alone and a slot no
// chunk takes exits.
//
// fk_gla_chunk_tc: a CTA per (V tile of FK_BV columns, head, sequence) walks the sequence's chunks in order, its
// [BV, K] slice of S^T in f32 mma accumulators (warp (wm, wk): value rows wm * 16 .. + 16, key columns wk * KW .. + KW).
// Holding S transposed lets the accumulators feed the next mma directly as A fragments (o^T = S^T Qg^T, S^T split
// into hi + lo on the fly), and the state update S^T = S^T diag(decay) + V^T Kd accumulates into them in place.
// Per chunk, by cp.async: Qg (hi, lo) of the next chunk loads while this one updates the state, Kd of the next while
// it computes o; A, the v tile and the decay are double-buffered. o^T's partial sums over the WK key slices (plus the
// intra-chunk V^T A^T, its tokens split over the WK warps) are added in shared memory and stored. Nothing is read on the host: sequences, pool slots and -1 padding rows are read
// on the device as fk_gla_chunk does (gla-source.ts), so the launches can be captured in a CUDA graph.
//
// Specialised by NVRTC with -DFK_T=<__nv_bfloat16 | __half> -DFK_K -DFK_BV -DFK_WK -DFK_KS -DFK_CU_T -DFK_SI_T
// (src/ops/recurrent/gla-tc-plan.ts); the defaults (GLA-2.7B heads) compile standalone. A host replay (FK_HOST_REPLAY=1,
// gla-tc-host.test.ts) supplies its own stand-ins for the CUDA types and the tensor-core primitives (test/warp-mma-host.ts).
// compile-cu: -DFK_T=__half -DFK_BV=64 -DFK_WK=2
#include "fk_host_replay.cuh"

#ifndef FK_K
#define FK_K 256
#endif
#ifndef FK_KS
#define FK_KS 64
#endif

namespace fkgla {
#include "fk_chunk_tc.cuh"  // T, CU_T, SI_T, C, K, the walk's tile (BV, WM, WK, KW, TW, MAIN_THREADS, RP), PREP_THREADS

constexpr int SUB = 16;                       // tokens a sub-chunk (A's diagonal blocks)
constexpr int NSUB = C / SUB;
constexpr int TRI = SUB * (SUB + 1) / 2;      // pairs s <= t of one diagonal block
constexpr int KS = FK_KS;                     // key channels a slab of the prep kernel
static_assert(K % KS == 0 && PREP_THREADS % KS == 0 && KS % 16 == 0, "slab shape");

// shared-memory pitches (elements): +8 T (16 bytes) keeps ldmatrix's eight rows on distinct banks; +2 T / +1 float
// keep the prep's per-pair reads (one channel of many rows) on distinct banks
constexpr int QP = K + 8;        // Qg, Kd rows
constexpr int AP = C + 8;        // A rows
constexpr int VP = BV + 8;       // v rows
constexpr int SP = KS + 2;       // prep: q, k rows
constexpr int BP = KS + 1;       // prep: b rows
constexpr int PP = KS + 8;       // prep: q', k'' rows (ldmatrix)
constexpr int KP_ROWS = SUB * (NSUB - 1) * NSUB / 2;  // k'' rows of sub-chunks 1 .. NSUB - 1: 16 + 32 + 48

// main kernel's shared memory: Qg hi, lo and Kd hi, lo [C][QP] (T, one buffer each); two stages of { A hi, lo [C][AP],
// v [C][VP] (T); decay [K] (float) }; the o partials [WK][C][RP] (float)
constexpr int QK_BYTES = 4 * C * QP * (int)sizeof(T);
constexpr int STAGE_BYTES = (2 * C * AP + C * VP) * (int)sizeof(T) + K * 4;
constexpr int MAIN_SMEM = QK_BYTES + 2 * STAGE_BYTES + WK * C * RP * 4;
// prep's: q, k [C][SP] (T); b [C][BP] (float); q' hi, lo [C][PP], k'' hi, lo [KP_ROWS][PP] (T); the diagonal sums
// [NSUB][TRI] and the segment totals of the running sum [PREP_THREADS] (float)
constexpr int PREP_SMEM = 2 * C * SP * (int)sizeof(T) + C * BP * 4 + 2 * (C + KP_ROWS) * PP * (int)sizeof(T) + NSUB * TRI * 4 + PREP_THREADS * 4;
static_assert(MAIN_SMEM <= 227 * 1024 && PREP_SMEM <= 227 * 1024, "shared memory past sm_90's 227 KiB a CTA");
static_assert(STAGE_BYTES % 16 == 0 && (C * QP * (int)sizeof(T)) % 16 == 0 && (C * AP * (int)sizeof(T)) % 16 == 0 && (C * VP * (int)sizeof(T)) % 16 == 0, "16-byte parts");

// Row base of k'' for sub-chunk ti (its 16 ti rows: the tokens before it).
__device__ __forceinline__ int kp_base(int ti) { return SUB * (ti - 1) * ti / 2; }
// A's n8 tiles below the diagonal blocks, numbered u = 0 .. BELOW_TILES - 1 sub-chunk row by row (row ti has 2 ti
// tiles: its 16 ti earlier tokens; warp w takes u = w and w + 8): tile u's sub-chunk row ti and its n8 column nt.
constexpr int BELOW_TILES = 2 * (NSUB - 1) * NSUB / 2;
static_assert(NSUB == 4, "below_tile numbers the 2 + 4 + 6 tiles of four sub-chunks");
__device__ __forceinline__ void below_tile(int u, int& ti, int& nt) {
  ti = u < 2 ? 1 : u < 6 ? 2 : 3;
  nt = u - (ti == 1 ? 0 : ti == 2 ? 2 : 6);
}
}  // namespace fkgla

extern "C" __global__ void __launch_bounds__(fkgla::PREP_THREADS) fk_gla_chunk_prep(
    const FK_T* __restrict__ q, const FK_T* __restrict__ k, const FK_T* __restrict__ g,
    long long qb, long long qt, long long qh, long long kb, long long kt, long long kh, long long gb, long long gt, long long gh,
    const FK_CU_T* __restrict__ cu, int T_len, int H, int N, int nc_max, float scale,
    FK_T* __restrict__ qg, FK_T* __restrict__ kd, FK_T* __restrict__ A, float* __restrict__ dec) {
  using namespace fkgla;
  extern __shared__ __align__(16) unsigned char fk_smem[];
  T* sQ = reinterpret_cast<T*>(fk_smem);
  T* sK = sQ + C * SP;
  float* sB = reinterpret_cast<float*>(sK + C * SP);
  T* sQp = reinterpret_cast<T*>(sB + C * BP);  // hi rows, then lo rows
  T* sKp = sQp + 2 * C * PP;                      // hi rows, then lo rows
  float* sDiag = reinterpret_cast<float*>(sKp + 2 * KP_ROWS * PP);
  float* sSeg = sDiag + NSUB * TRI;

  const long long j = blockIdx.x;
  const int h = blockIdx.y;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  int n, c, bt, t0, t1;
  slot_chunk(cu, j, N, nc_max, T_len, n, c, bt, t0, t1);
  if (c < 0) return;  // no chunk takes the slot (uniform over the CTA, before any barrier)
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
        const long long at = ((row0 + t) * H + h) * (2 * K) + i0 + i;
        split_store(qg + at, qg + at + K, qv * expf(bx) * scale);
        split_store(kd + at, kd + at + K, kv * expf(blast - bx));
      }
      if (t == 0) dec[(j * H + h) * K + i0 + i] = expf(blast);
      const int d = t / SUB;
      if (d > 0) split_store(sQp + t * PP + i, sQp + (C + t) * PP + i, qv * expf(bx - sB[(d * SUB - 1) * BP + i]));
      for (int ti = d + 1; ti < NSUB; ++ti) {
        const int r = kp_base(ti) + t;
        split_store(sKp + r * PP + i, sKp + (KP_ROWS + r) * PP + i, kv * expf(sB[(ti * SUB - 1) * BP + i] - bx));
      }
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
      if (u < BELOW_TILES) {
        int ti, nt;
        below_tile(u, ti, nt);
#pragma unroll
        for (int kk = 0; kk < KS; kk += 16) {
          u32 a[4], al[4], b0, b1, bl0, bl1;
          const int qr = ti * SUB + (lane & 15), kr = kp_base(ti) + nt * 8 + (lane & 7);
          const int qc = kk + (lane >> 4) * 8, kc = kk + ((lane >> 3) & 1) * 8;
          ldsm_x4(smem_u32(sQp + qr * PP + qc), a[0], a[1], a[2], a[3]);
          ldsm_x4(smem_u32(sQp + (C + qr) * PP + qc), al[0], al[1], al[2], al[3]);
          ldsm_x2(smem_u32(sKp + kr * PP + kc), b0, b1);
          ldsm_x2(smem_u32(sKp + (KP_ROWS + kr) * PP + kc), bl0, bl1);
          Mma<T>::mma(acc[w2], a, b0, b1);
          Mma<T>::mma(acc[w2], al, b0, b1);
          Mma<T>::mma(acc[w2], a, bl0, bl1);
        }
      }
    }
    __syncthreads();  // the next slab overwrites every array
  }

  // (6) A (hi, lo): zeros above the diagonal, the diagonal blocks from shared memory, the blocks below from the tiles
  T* Aj = A + (j * H + h) * (long long)(2 * C * C);
  for (int x = tid; x < C * C; x += PREP_THREADS) {
    const int t = x / C, s = x - t * C;
    if (s > t) split_store(Aj + x, Aj + C * C + x, 0.f);
    else if (s / SUB == t / SUB) {
      const int d = t / SUB, tt = t - d * SUB, ss = s - d * SUB;
      split_store(Aj + x, Aj + C * C + x, sDiag[d * TRI + tt * (tt + 1) / 2 + ss] * scale);
    }
  }
#pragma unroll
  for (int w2 = 0; w2 < 2; ++w2) {
    const int u = warp + 8 * w2;
    if (u < BELOW_TILES) {
      int ti, nt;
      below_tile(u, ti, nt);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int x = (ti * SUB + g8 + (e >> 1) * 8) * C + nt * 8 + 2 * q4 + (e & 1);
        split_store(Aj + x, Aj + C * C + x, acc[w2][e] * scale);
      }
    }
  }
}

extern "C" __global__ void __launch_bounds__(fkgla::MAIN_THREADS, 1) fk_gla_chunk_tc(
    FK_T* __restrict__ o, const FK_T* __restrict__ v, long long vb, long long vt, long long vh,
    const FK_T* __restrict__ qg, const FK_T* __restrict__ kd, const FK_T* __restrict__ A, const float* __restrict__ dec,
    const float* s_in, long long s_in_n, float* s_out, long long s_out_n,
    const FK_CU_T* __restrict__ cu, const FK_SI_T* __restrict__ si, int T_len, int H, int V, int nc_max) {
  using namespace fkgla;
  extern __shared__ __align__(16) unsigned char fk_smem[];
  T* sQh = reinterpret_cast<T*>(fk_smem);  // Qg hi, lo; Kd hi, lo: one buffer each
  T* sQl = sQh + C * QP;
  T* sKh = sQl + C * QP;
  T* sKl = sKh + C * QP;
  unsigned char* stages = fk_smem + QK_BYTES;
  float* red = reinterpret_cast<float*>(stages + 2 * STAGE_BYTES);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp % WM, wk = warp / WM;
  const int g8 = lane >> 2, q4 = lane & 3;
  const int h = blockIdx.y, n = blockIdx.z;
  const int c0 = blockIdx.x * BV;
  int bt, t0, t1;
  bool rd = s_in != nullptr, wr = s_out != nullptr;
  const long long slot = walk_sequence(cu, si, n, T_len, bt, t0, t1, rd, wr);
  const long long head = (long long)h * K * V;
  const int vrow0 = c0 + wm * 16 + g8;
  float S[KW / 8][4];  // this warp's slice of S^T
  load_state(S, s_in, slot * s_in_n + head, rd, V, wk, q4, vrow0);

  // loads of chunk c: rows past the sequence zero-filled (cp.async of 0 source bytes)
  auto rows = [&](int c, const T* src, T* hi, T* lo) {  // a [C][2][K] workspace slice -> hi, lo [C][QP]
    const int cs = t0 + c * C, L = min(C, t1 - cs);
    load_pair_rows(src, (long long)bt * T_len + cs, L, H, h, K, K, 0, QP, hi, lo, tid);
  };
  auto load_q = [&](int c) {  // Qg of chunk c, and its stage: A (hi, lo), the v tile, the decay
    rows(c, qg, sQh, sQl);
    T* sAh = reinterpret_cast<T*>(stages + (c & 1) * STAGE_BYTES);
    T* sAl = sAh + C * AP;
    T* sV = sAl + C * AP;
    float* sDec = reinterpret_cast<float*>(sV + C * VP);
    const int cs = t0 + c * C, L = min(C, t1 - cs);
    const long long jj = chunk_slot(cu, n, c, nc_max);
    load_scores(A + (jj * H + h) * (long long)(2 * C * C), sAh, sAl, AP, tid);
    for (int x = tid; x < C * (BV / 8); x += MAIN_THREADS) {
      const int t = x / (BV / 8), cc = x - t * (BV / 8);
      const bool ok = t < L;
      cp_async16(smem_u32(sV + t * VP + cc * 8), v + bt * vb + (long long)(cs + (ok ? t : 0)) * vt + h * vh + c0 + cc * 8, ok ? 16 : 0);
    }
    for (int x = tid; x < K / 4; x += MAIN_THREADS) cp_async16(smem_u32(sDec + x * 4), dec + (jj * H + h) * K + x * 4, 16);
  };

  // cp.async groups in flight at the top of chunk c: Q(c), then K(c). Q(c + 1) is issued once every warp is past
  // (1) (the Qg buffer is free), K(c + 1) once every warp is past (4) (the Kd buffer is).
  const int nc = (t1 - t0 + C - 1) / C;
  if (nc > 0) {
    load_q(0);
    cp_async_commit();
    rows(0, kd, sKh, sKl);
    cp_async_commit();
  }
  for (int c = 0; c < nc; ++c) {
    cp_async_wait<1>();  // Q(c)
    __syncthreads();
    const T* sAh = reinterpret_cast<const T*>(stages + (c & 1) * STAGE_BYTES);
    const T* sAl = sAh + C * AP;
    const T* sV = sAl + C * AP;
    const float* sDec = reinterpret_cast<const float*>(sV + C * VP);
    const int cs = t0 + c * C, L = min(C, t1 - cs);

    // V^T as A fragments (value rows wm * 16 .., tokens ks * 16 ..): shared by the intra-chunk product and the update
    u32 vf[C / 16][4];
#pragma unroll
    for (int ks = 0; ks < C / 16; ++ks)
      ldsm_x4_t(smem_u32(sV + (ks * 16 + (lane & 7) + ((lane >> 4) << 3)) * VP + wm * 16 + ((lane >> 3) & 1) * 8), vf[ks][0], vf[ks][1], vf[ks][2], vf[ks][3]);

    // (1) o^T over this warp's key columns: S^T Qg^T as (S_hi + S_lo)(Qg_hi + Qg_lo) less the lo x lo term (the
    // accumulators of two n8 tiles are one A fragment)
    float oacc[C / 8][4];
#pragma unroll
    for (int nt = 0; nt < C / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) oacc[nt][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < KW / 16; ++kk) {
      u32 a[4], al[4];
      state_frags(S, kk, a, al);
#pragma unroll
      for (int np = 0; np < C / 16; ++np) mma_state_pair(oacc, a, al, sQh, sQl, QP, np, kk, wk, lane);
    }
    // (2) the intra-chunk V^T (A_hi + A_lo)^T for this warp's TW tokens (v as given: no lo half)
    mma_intra<false>(oacc, vf, vf, sAh, sAl, AP, wk, lane);
    // (3) the partials to shared memory (summed over the WK key slices below)
    store_partials(red, oacc, wk, wm, g8, q4);
    __syncthreads();  // every warp is past (1): the Qg buffer takes chunk c + 1
    if (c + 1 < nc) {
      load_q(c + 1);
      cp_async_commit();
      cp_async_wait<1>();  // K(c)
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    // (4) the state over the chunk: S^T diag(decay) + V^T (Kd_hi + Kd_lo), in the accumulators
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
        const int at = (ks * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * QP + wk * KW + np * 16 + (lane >> 4) * 8;
        u32 b0, b1, b2, b3;
        ldsm_x4_t(smem_u32(sKh + at), b0, b1, b2, b3);
        Mma<T>::mma(S[2 * np], vf[ks], b0, b1);
        Mma<T>::mma(S[2 * np + 1], vf[ks], b2, b3);
        ldsm_x4_t(smem_u32(sKl + at), b0, b1, b2, b3);
        Mma<T>::mma(S[2 * np], vf[ks], b0, b1);
        Mma<T>::mma(S[2 * np + 1], vf[ks], b2, b3);
      }
    // (5) o = the sum of the partials
    sum_partials(red, L, tid, [&](int t, int cp, float y0, float y1) {
      T* op = o + (((long long)bt * T_len + cs + t) * H + h) * V + c0 + cp;
      op[0] = from_f<T>(y0);
      op[1] = from_f<T>(y1);
    });
    __syncthreads();  // every warp is past (4) and (5): the Kd buffer takes chunk c + 1, red the next partials
    if (c + 1 < nc) {
      rows(c + 1, kd, sKh, sKl);
      cp_async_commit();
    }
  }

  if (wr) store_state(S, s_out, slot * s_out_n + head, V, wk, q4, vrow0);
}
