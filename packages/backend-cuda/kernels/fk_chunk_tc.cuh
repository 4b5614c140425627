// Shared by the tensor-core chunked linear-attention kernels (gla_chunk_tc.cu, gdn_chunk_tc.cu): both walk a sequence's
// chunks of C tokens with a warp's slice of the state S^T in mma accumulators and feed their computed operands as
// hi + lo pairs of T. Included at the top of the kernel's namespace, after its FK_K default: the dtype and index types,
// C, K, the walk's tile (BV columns, WM x WK warps, RP) and the code both kernels run. The host replay (FK_HOST_REPLAY=1)
// declares its own to_f / from_f and tensor-core primitives. Each piece here is the code both kernels had (their machine
// code unchanged: tools/sass-same.sh). Included as a file by nvcc; scripts/embed-kernels.mjs inlines it for NVRTC.
#pragma once

#ifndef FK_T
#define FK_T __nv_bfloat16
#endif
#ifndef FK_BV
#define FK_BV 32
#endif
#ifndef FK_WK
#define FK_WK 4
#endif
#ifndef FK_CU_T
#define FK_CU_T int
#endif
#ifndef FK_SI_T
#define FK_SI_T int
#endif

typedef unsigned int u32;
typedef FK_T T;
typedef FK_CU_T CU_T;
typedef FK_SI_T SI_T;

constexpr int C = 64;                   // tokens a chunk
constexpr int K = FK_K;                 // the key head dim
constexpr int BV = FK_BV;               // value columns a walk CTA
constexpr int WM = BV / 16;             // warps across the tile's value rows
constexpr int WK = FK_WK;               // warps across the key columns
constexpr int KW = K / WK;              // key columns a warp
constexpr int TW = C / WK;              // tokens of the intra-chunk product a warp
constexpr int MAIN_THREADS = 32 * WM * WK;
constexpr int PREP_THREADS = 256;
constexpr int RP = BV + 4;              // rows of the o partials [WK][C][RP] (f32; +4 floats: their fragments' banks)
static_assert(BV % 16 == 0 && K % (16 * WK) == 0 && KW % 16 == 0 && TW % 8 == 0, "tile shape");

#if !FK_HOST_REPLAY
#include "fk_mma.cuh"
__device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
template <typename X> __device__ __forceinline__ X from_f(float x);
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <> __device__ __forceinline__ __half from_f<__half>(float x) { return __float2half_rn(x); }
#endif

// x as hi + lo, both T: hi = x rounded, lo = the rest rounded.
__device__ __forceinline__ void split_store(T* hi, T* lo, float x) {
  const T h = from_f<T>(x);
  *hi = h;
  *lo = from_f<T>(x - to_f(h));
}
// Two floats as packed hi and lo pairs (A fragments of the state).
__device__ __forceinline__ void split_pack(float x0, float x1, u32& hi, u32& lo) {
  const float h0 = to_f(from_f<T>(x0)), h1 = to_f(from_f<T>(x1));
  hi = Mma<T>::pack(h0, h1);
  lo = Mma<T>::pack(x0 - h0, x1 - h1);
}

// Chunk slots: chunk c of sequence n is slot n * nc_max + c for batch rows, floor(cu[n] / C) + n + c with cu_seqlens
// (distinct and < floor(T / C) + N whatever the lengths), so the host sizes the grids from shapes alone.
// The sequence n, chunk c, batch row and token range [t0, t1) of chunk slot j; no chunk takes it where c < 0 or
// t0 + c C >= t1 (the caller's exit: uniform over the CTA).
__device__ __forceinline__ void slot_chunk(const CU_T* cu, long long j, int N, int nc_max, int T_len, int& n, int& c, int& bt, int& t0, int& t1) {
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
}
// The workspace slot of chunk c of sequence n.
__device__ __forceinline__ long long chunk_slot(const CU_T* cu, int n, int c, int nc_max) {
  return cu != nullptr ? (long long)(cu[n] / C) + n + c : (long long)n * nc_max + c;
}

// The walk's sequence n: its batch row and token range [t0, t1) ([cu[n], cu[n + 1]) of batch row 0 with cu_seqlens, else
// [0, T_len) of batch row n), and its state row: si[n] in a pool, else n. rd / wr come in as whether s_in / s_out are
// given; a -1 padding row (PAD_SLOT_ID) clears both: a zero state, nothing written back.
__device__ __forceinline__ long long walk_sequence(const CU_T* cu, const SI_T* si, int n, int T_len, int& bt, int& t0, int& t1, bool& rd, bool& wr) {
  if (cu != nullptr) { bt = 0; t0 = (int)cu[n]; t1 = (int)cu[n + 1]; }
  else { bt = n; t0 = 0; t1 = T_len; }
  long long slot = n;
  if (si != nullptr) {
    slot = (long long)si[n];
    if (slot < 0) { rd = false; wr = false; }
  }
  return slot;
}

// A chunk's rows of a hi + lo workspace [B T][heads][2][width] (row0: its first; columns col0 .. + cols of `head`) to
// hi, lo [C][pitch] by cp.async; rows past the sequence (t >= L) zero-filled (0 source bytes).
__device__ __forceinline__ void load_pair_rows(const T* src, long long row0, int L, int heads, int head, int width, int cols, int col0, int pitch, T* hi, T* lo, int tid) {
  const int cch = cols / 8;
  for (int x = tid; x < C * cch; x += MAIN_THREADS) {
    const int t = x / cch, cc = x - t * cch;
    const bool ok = t < L;
    const long long at = ((row0 + (ok ? t : 0)) * heads + head) * (2LL * width) + col0 + cc * 8;
    cp_async16(smem_u32(hi + t * pitch + cc * 8), src + at, ok ? 16 : 0);
    cp_async16(smem_u32(lo + t * pitch + cc * 8), src + at + width, ok ? 16 : 0);
  }
}
// A chunk's intra-chunk scores (hi + lo [C][C] at Aj) to hi, lo [C][pitch] by cp.async.
__device__ __forceinline__ void load_scores(const T* Aj, T* hi, T* lo, int pitch, int tid) {
  for (int x = tid; x < C * (C / 8); x += MAIN_THREADS) {
    const int t = x / (C / 8), cc = x - t * (C / 8);
    cp_async16(smem_u32(hi + t * pitch + cc * 8), Aj + t * C + cc * 8, 16);
    cp_async16(smem_u32(lo + t * pitch + cc * 8), Aj + C * C + t * C + cc * 8, 16);
  }
}

// This warp's slice of S^T: fragment e of n8 tile nt holds value column vrow0 + (e >> 1) 8 and key row
// wk KW + nt 8 + 2 q4 + (e & 1) of the head's [K][V] floats at states[at] (zeros when !rd).
__device__ __forceinline__ void load_state(float (&S)[KW / 8][4], const float* states, long long at, bool rd, int V, int wk, int q4, int vrow0) {
#pragma unroll
  for (int nt = 0; nt < KW / 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const long long i = wk * KW + nt * 8 + 2 * q4 + (e & 1);
      S[nt][e] = rd ? states[at + i * V + vrow0 + (e >> 1) * 8] : 0.f;
    }
}
__device__ __forceinline__ void store_state(const float (&S)[KW / 8][4], float* states, long long at, int V, int wk, int q4, int vrow0) {
#pragma unroll
  for (int nt = 0; nt < KW / 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const long long i = wk * KW + nt * 8 + 2 * q4 + (e & 1);
      states[at + i * V + vrow0 + (e >> 1) * 8] = S[nt][e];
    }
}
// The A fragments (hi, lo) of S^T's k16 step kk: its n8 tiles 2 kk and 2 kk + 1, split on the fly.
__device__ __forceinline__ void state_frags(const float (&S)[KW / 8][4], int kk, u32 (&a)[4], u32 (&al)[4]) {
  split_pack(S[2 * kk][0], S[2 * kk][1], a[0], al[0]);
  split_pack(S[2 * kk][2], S[2 * kk][3], a[1], al[1]);
  split_pack(S[2 * kk + 1][0], S[2 * kk + 1][1], a[2], al[2]);
  split_pack(S[2 * kk + 1][2], S[2 * kk + 1][3], a[3], al[3]);
}
// acc's n8 tiles 2 np and 2 np + 1 += S^T's k16 step kk (a + al) times a B operand of 16 token rows np 16 .. given as
// hi + lo [rows][pitch] (its key columns: this warp's, at step kk), less the lo x lo term.
__device__ __forceinline__ void mma_state_pair(float (&acc)[C / 8][4], const u32 (&a)[4], const u32 (&al)[4], const T* hi, const T* lo, int pitch, int np, int kk, int wk, int lane) {
  const int at = (np * 16 + (lane & 7) + ((lane >> 4) << 3)) * pitch + wk * KW + kk * 16 + ((lane >> 3) & 1) * 8;
  u32 b0, b1, b2, b3, l0, l1, l2, l3;
  ldsm_x4(smem_u32(hi + at), b0, b1, b2, b3);
  ldsm_x4(smem_u32(lo + at), l0, l1, l2, l3);
  Mma<T>::mma(acc[2 * np], a, b0, b1);
  Mma<T>::mma(acc[2 * np], al, b0, b1);
  Mma<T>::mma(acc[2 * np], a, l0, l1);
  Mma<T>::mma(acc[2 * np + 1], a, b2, b3);
  Mma<T>::mma(acc[2 * np + 1], al, b2, b3);
  Mma<T>::mma(acc[2 * np + 1], a, l2, l3);
}
// oacc += V^T A^T, the intra-chunk product of this warp's TW tokens (n8 tiles of A's rows; A is zero above the
// diagonal: those k16 steps skipped). V^T as A fragments vf (value rows wm 16 .., tokens ks 16 ..) plus, with VLO,
// their lo half vl; A as hi + lo [C][pitch]. Products: vf ah, (vl ah), vf al.
template <bool VLO>
__device__ __forceinline__ void mma_intra(float (&oacc)[C / 8][4], const u32 (&vf)[C / 16][4], const u32 (&vl)[C / 16][4], const T* ah, const T* al, int pitch, int wk, int lane) {
#pragma unroll
  for (int nt = 0; nt < C / 8; ++nt) {
    if (nt / (TW / 8) != wk) continue;
#pragma unroll
    for (int ks = 0; ks < C / 16; ++ks) {
      if (ks * 16 > nt * 8 + 7) continue;
      const int at = (nt * 8 + (lane & 7)) * pitch + ks * 16 + ((lane >> 3) & 1) * 8;
      u32 b0, b1, l0, l1;
      ldsm_x2(smem_u32(ah + at), b0, b1);
      ldsm_x2(smem_u32(al + at), l0, l1);
      Mma<T>::mma(oacc[nt], vf[ks], b0, b1);
      if (VLO) Mma<T>::mma(oacc[nt], vl[ks], b0, b1);
      Mma<T>::mma(oacc[nt], vf[ks], l0, l1);
    }
  }
}
// o^T's partials of this warp's key slice (value rows wm 16 .., tokens a column) to red [WK][C][RP].
__device__ __forceinline__ void store_partials(float* red, const float (&oacc)[C / 8][4], int wk, int wm, int g8, int q4) {
#pragma unroll
  for (int nt = 0; nt < C / 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) red[(wk * C + nt * 8 + 2 * q4 + (e & 1)) * RP + wm * 16 + g8 + (e >> 1) * 8] = oacc[nt][e];
}
// o = the sum of the WK partials, two columns a thread at a time: store(t, cp, y0, y1) for the chunk's L tokens.
template <typename Store>
__device__ __forceinline__ void sum_partials(const float* red, int L, int tid, Store store) {
  for (int x = tid; x < C * (BV / 2); x += MAIN_THREADS) {
    const int t = x / (BV / 2), cp = (x - t * (BV / 2)) * 2;
    if (t < L) {
      float y0 = 0.f, y1 = 0.f;
#pragma unroll
      for (int w = 0; w < WK; ++w) {
        y0 += red[(w * C + t) * RP + cp];
        y1 += red[(w * C + t) * RP + cp + 1];
      }
      store(t, cp, y0, y1);
    }
  }
}
