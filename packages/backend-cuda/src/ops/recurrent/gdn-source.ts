/**
 * The CUDA sources of Qwen3-Next's gated-DeltaNet ops over vLLM's state pools (issue 32): FLA's
 * fused_recurrent_gated_delta_rule and the short conv causal_conv1d_fn / causal_conv1d_update (Dao-AILab, vLLM's
 * mamba ops), generated here so a variant is a few #defines over one body (gdn-nvcc.test.ts compiles each for sm_90a
 * with no spills). Nothing is read on the host: sequence ranges (cu_seqlens / query_start_loc), pool rows
 * (ssm_state_indices / cache_indices, -1 = padding: a zero state, nothing written) and has_initial_state are read on
 * the device, so a captured decode graph replays the state update for whatever the index tensors hold. Live rows must
 * be distinct (the op contract): two sequences on one row race.
 *
 * fk_gdn_recurrent: a CTA per (V tile, value head, sequence) holds the [K, BV] f32 slice of the state in registers, as
 * GLA's recurrent kernel (gla-source.ts, the same gla-plan.ts tiling: thread (ct, rg) owns columns c0 + ct * VEC ..
 * + VEC of rows rg + r * RG). Per token, with d = exp(g_t) and q, k l2-normalised when FK_L2 (FLA's eps 1e-6): one pass
 * over the old state gives k^T S and q^T S for the thread's columns and its rows' parts of q.q, k.k, q.k, reduced over
 * the row groups (warp shuffles, then across warps in shared memory); then u = beta (v - d k^T S),
 * o = scale (d q^T S + (q.k) u) (= scale q^T S_new) and S = d S + k u^T, all in registers. Two barriers a token (the
 * shared arrays double-buffered). Value head hv reads q / k head hv / R.
 *
 * fk_gdn_chunk (chunk_gated_delta_rule, prefill): FLA's chunked form with CUDA-core FMAs in f32, C = FK_C tokens at a
 * time, the same CTA and state tiling. With G_t the running sum of g inside the chunk: the corrections solve
 * u_t = beta_t (v_t - exp(G_t) k_t^T S0) - sum_{s < t} beta_t exp(G_t - G_s) (k_t . k_s) u_s (the UT transform, by
 * forward substitution a thread a column), o_t = scale (exp(G_t) q_t^T S0 + sum_{s <= t} exp(G_t - G_s) (q_t . k_s) u_s)
 * and S_C = exp(G_last) S0 + sum_s exp(G_last - G_s) k_s u_s^T (every exponent <= 0 for g <= 0). The scores are
 * recomputed by each V tile: a first step, as chunk_gla's was (the tensor-core form computes them once a chunk).
 *
 * KDA (Kimi-Linear's fused_recurrent_kda / chunk_kda, FK_KDA 1: entries fk_kda_recurrent / fk_kda_chunk) is the same two
 * bodies with the decay per key channel, g [B, T, HV, K]: the recurrent kernel scales each state row i by
 * exp(g_t[i]) in the pass that reads it (then d = 1 below); the chunked one keeps the running sums G_t[i] per channel
 * ([C][K] in shared memory), so exp(G_t - G_s) moves inside the key-channel sums of the scores, k_t^T S0 / q_t^T S0
 * read k_t[i] exp(G_t[i]) / q_t[i] exp(G_t[i]), and the state update decays row i by exp(G_last[i]).
 *
 * fk_causal_conv1d: a CTA per (FK_CT channels, sequence), FK_TG token groups: each thread keeps its channel's W taps
 * and the last W - 1 state columns in registers and computes the outputs of tokens tg, tg + TG, ...; after a barrier
 * (every thread has read the state) one thread a channel writes the new state, the last S columns of [state, x], in
 * increasing column order (in place: column j takes old column j + L, read before it is overwritten). The same kernel
 * runs causal_conv1d (varlen with a pool, or batch rows with initial / final states) and causal_conv1d_update (decode
 * rows; state_len S >= W - 1).
 */
import type { ArgType } from '../../args.js';
import { GEN_CTYPE, conversionHelpers, type GenDType } from '../ctypes.js';
import type { GeneratedKernel } from '../elementwise-source.js';
import { STATE_TILE_CONSTS, STATE_TILE_STORE, stateTileSetup } from './state-tile-source.js';

export type GdnDType = 'f32' | 'f16' | 'bf16';
export type GdnIndexDType = 'i32' | 'i64';

const I64 = (n: number): ArgType[] => new Array<ArgType>(n).fill('i64');

export interface GdnKernelSpec {
  /** The recurrent kernel (decode) or the chunked one (prefill). */
  readonly kind?: 'recurrent' | 'chunk';
  /** Tokens a chunk (the chunked kernel). */
  readonly chunk?: number;
  /** One decay a value head (gated DeltaNet, g [B, T, HV]) or one a key channel (KDA, g [B, T, HV, K]). */
  readonly gate?: 'head' | 'channel';
  /** q / k / v and o; g and beta. */
  readonly dtype: GdnDType;
  readonly gDType: GdnDType;
  readonly betaDType: GdnDType;
  readonly cuDType: GdnIndexDType;
  readonly idxDType: GdnIndexDType;
  readonly K: number;
  readonly bv: number;
  readonly vec: number;
  readonly threads: number;
  readonly l2norm: boolean;
}

/**
 * o, q, k, v, g, beta; element strides (batch, token, head) of q, k, v, g, beta; s_in and its slot stride, s_out and
 * its slot stride (floats); cu_seqlens, ssm_state_indices (0 when absent); T (tokens a batch row), HV, V, R = HV / H,
 * scale.
 */
export const GDN_SIGNATURE: readonly ArgType[] = [
  'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', ...I64(15), 'ptr', 'i64', 'ptr', 'i64', 'ptr', 'ptr', 'i32', 'i32', 'i32', 'i32', 'f32',
];

const GDN_BODY = String.raw`
extern "C" __global__ void __launch_bounds__(FK_THREADS) FK_ENTRY(
    T* __restrict__ o, const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, const TGATE* __restrict__ g,
    const TBETA* __restrict__ beta,
    long long qb, long long qt, long long qh, long long kb, long long kt, long long kh, long long vb, long long vt, long long vh,
    long long gb, long long gt, long long gh, long long bb, long long btk, long long bh,
    const float* s_in, long long s_in_n, float* s_out, long long s_out_n,
    const CU_T* __restrict__ cu, const SI_T* __restrict__ si, int T_len, int HV, int V, int R, float scale) {
${STATE_TILE_CONSTS}  __shared__ float sq[2][FK_K], sk[2][FK_K], sv[2][FK_BV], sgb[2][2];
#if FK_KDA
  __shared__ float sdk[2][FK_K];  // exp(g_t[i]): the decay of state row i
#endif
  __shared__ float red[2][WARPS][2][FK_BV];
  __shared__ float reds[2][WARPS][3];
${stateTileSetup('delta')}  for (int t = t0; t < t1; ++t) {
    const int b = (t - t0) & 1;  // buffer b was last read two tokens ago, before the barriers of the token between
    const T* qp = q + br * qb + t * qt + h * qh;
    const T* kp = k + br * kb + t * kt + h * kh;
    const T* vp = v + br * vb + t * vt + hv * vh;
    for (int i = tid; i < FK_K; i += FK_THREADS) {
      sq[b][i] = LD_T(qp[i]);
      sk[b][i] = LD_T(kp[i]);
#if FK_KDA
      sdk[b][i] = expf(LD_G(g[br * gb + t * gt + hv * gh + i]));
#endif
    }
    for (int c = tid; c < FK_BV; c += FK_THREADS) sv[b][c] = c0 + c < V ? LD_T(vp[c0 + c]) : 0.f;
    if (tid == 0) {
#if !FK_KDA
      sgb[b][0] = expf(LD_G(g[br * gb + t * gt + hv * gh]));
#endif
      sgb[b][1] = LD_B(beta[br * bb + t * btk + hv * bh]);
    }
    __syncthreads();
    // one pass over the old state: k^T S and q^T S for this thread's columns, its rows' parts of q.q, k.k, q.k
    // (KDA: each row decayed by its channel's exp(g_t[i]) first, so the d below is 1)
    float ak[FK_VEC], aq[FK_VEC];
    float pqq = 0.f, pkk = 0.f, pqk = 0.f;
#pragma unroll
    for (int e = 0; e < FK_VEC; ++e) { ak[e] = 0.f; aq[e] = 0.f; }
#pragma unroll
    for (int r = 0; r < RK; ++r) {
      const int i = rg + r * RG;
      if (RK * RG == FK_K || i < FK_K) {
        const float kk = sk[b][i], qq = sq[b][i];
#if FK_KDA
        const float dk = sdk[b][i];
#pragma unroll
        for (int e = 0; e < FK_VEC; ++e) s[r][e] *= dk;
#endif
#pragma unroll
        for (int e = 0; e < FK_VEC; ++e) {
          ak[e] = fmaf(kk, s[r][e], ak[e]);
          aq[e] = fmaf(qq, s[r][e], aq[e]);
        }
        pqk = fmaf(qq, kk, pqk);
#if FK_L2
        pqq = fmaf(qq, qq, pqq);
        pkk = fmaf(kk, kk, pkk);
#endif
      }
    }
    // lanes ct, ct + CT, ... of a warp hold the same columns of other rows
#pragma unroll
    for (int off = CT; off < 32; off <<= 1) {
#pragma unroll
      for (int e = 0; e < FK_VEC; ++e) {
        ak[e] += __shfl_xor_sync(0xffffffffu, ak[e], off);
        aq[e] += __shfl_xor_sync(0xffffffffu, aq[e], off);
      }
      pqq += __shfl_xor_sync(0xffffffffu, pqq, off);
      pkk += __shfl_xor_sync(0xffffffffu, pkk, off);
      pqk += __shfl_xor_sync(0xffffffffu, pqk, off);
    }
    if (lane < CT) {
#pragma unroll
      for (int e = 0; e < FK_VEC; ++e) {
        red[b][warp][0][ct * FK_VEC + e] = ak[e];
        red[b][warp][1][ct * FK_VEC + e] = aq[e];
      }
    }
    if (lane == 0) { reds[b][warp][0] = pqq; reds[b][warp][1] = pkk; reds[b][warp][2] = pqk; }
    __syncthreads();
    float kS[FK_VEC], qS[FK_VEC];
#pragma unroll
    for (int e = 0; e < FK_VEC; ++e) { kS[e] = 0.f; qS[e] = 0.f; }
    float qq = 0.f, kk = 0.f, qk = 0.f;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) {
#pragma unroll
      for (int e = 0; e < FK_VEC; ++e) {
        kS[e] += red[b][w][0][ct * FK_VEC + e];
        qS[e] += red[b][w][1][ct * FK_VEC + e];
      }
      qq += reds[b][w][0];
      kk += reds[b][w][1];
      qk += reds[b][w][2];
    }
#if FK_L2
    const float rq = rsqrtf(qq + 1e-6f), rk = rsqrtf(kk + 1e-6f);
#else
    const float rq = 1.f, rk = 1.f;
#endif
#if FK_KDA
    const float d = 1.f, be = sgb[b][1];
#else
    const float d = sgb[b][0], be = sgb[b][1];
#endif
    float u[FK_VEC];
#pragma unroll
    for (int e = 0; e < FK_VEC; ++e) u[e] = be * (sv[b][ct * FK_VEC + e] - d * rk * kS[e]);
    if (rg == 0 && col_ok) {
      T* op = o + ((br * T_len + t) * HV + hv) * (long long)V + j0;
#pragma unroll
      for (int e = 0; e < FK_VEC; ++e) op[e] = ST_T(scale * rq * fmaf(d, qS[e], rk * qk * u[e]));
    }
#pragma unroll
    for (int r = 0; r < RK; ++r) {
      const int i = rg + r * RG;
      if (RK * RG == FK_K || i < FK_K) {
        const float kn = sk[b][i] * rk;
#pragma unroll
        for (int e = 0; e < FK_VEC; ++e) s[r][e] = fmaf(kn, u[e], d * s[r][e]);
      }
    }
  }
${STATE_TILE_STORE}}
`;

const GDN_CHUNK_BODY = String.raw`
extern "C" __global__ void __launch_bounds__(FK_THREADS) FK_ENTRY(
    T* __restrict__ o, const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, const TGATE* __restrict__ g,
    const TBETA* __restrict__ beta,
    long long qb, long long qt, long long qh, long long kb, long long kt, long long kh, long long vb, long long vt, long long vh,
    long long gb, long long gt, long long gh, long long bb, long long btk, long long bh,
    const float* s_in, long long s_in_n, float* s_out, long long s_out_n,
    const CU_T* __restrict__ cu, const SI_T* __restrict__ si, int T_len, int HV, int V, int R, float scale) {
${STATE_TILE_CONSTS}  extern __shared__ float smem[];
  float* cq = smem;                     // [C][K]: q (l2-normalised)
  float* ck = cq + FK_C * FK_K;         // [C][K]: k (l2-normalised)
  float* cv = ck + FK_C * FK_K;         // [C][BV]: the v tile, then the corrections u
  float* cKS = cv + FK_C * FK_BV;       // [C][BV]: k_t^T S0
  float* cQS = cKS + FK_C * FK_BV;      // [C][BV]: q_t^T S0
  float* cred = cQS + FK_C * FK_BV;     // [WARPS][C][BV]: the warps' partials
  float* cAkk = cred + WARPS * FK_C * FK_BV;  // [C][C]
  float* cAqk = cAkk + FK_C * FK_C;     // [C][C]
  float* cB = cAqk + FK_C * FK_C;       // [C]: beta
  float* cG = cB + FK_C;                // [C] ([C][K] for KDA): g, then its running sum in the chunk
${stateTileSetup('delta')}  for (int cs = t0; cs < t1; cs += FK_C) {
    const int L = min(FK_C, t1 - cs);
    // (1) the chunk's q, k (rows past L: zeros), the v tile, g and beta
    for (int x = tid; x < FK_C * FK_K; x += FK_THREADS) {
      const int tt = x / FK_K, i = x - tt * FK_K;
      float qv = 0.f, kv = 0.f;
      if (tt < L) {
        const long long t = cs + tt;
        qv = LD_T(q[br * qb + t * qt + h * qh + i]);
        kv = LD_T(k[br * kb + t * kt + h * kh + i]);
      }
      cq[x] = qv;
      ck[x] = kv;
    }
    for (int x = tid; x < FK_C * FK_BV; x += FK_THREADS) {
      const int tt = x / FK_BV, c = x - tt * FK_BV;
      cv[x] = tt < L && c0 + c < V ? LD_T(v[br * vb + (long long)(cs + tt) * vt + hv * vh + c0 + c]) : 0.f;
    }
    for (int tt = tid; tt < FK_C; tt += FK_THREADS) {
      const long long t = cs + tt;
#if !FK_KDA
      cG[tt] = tt < L ? LD_G(g[br * gb + t * gt + hv * gh]) : 0.f;
#endif
      cB[tt] = tt < L ? LD_B(beta[br * bb + t * btk + hv * bh]) : 0.f;
    }
#if FK_KDA
    for (int x = tid; x < FK_C * FK_K; x += FK_THREADS) {
      const int tt = x / FK_K, i = x - tt * FK_K;
      cG[x] = tt < L ? LD_G(g[br * gb + (long long)(cs + tt) * gt + hv * gh + i]) : 0.f;
    }
#endif
    __syncthreads();
    // (2) q, k l2-normalised a warp a token; the running sum G of g (thread 0)
#if FK_L2
    for (int tt = warp; tt < FK_C; tt += WARPS) {
      float a = 0.f, b2 = 0.f;
      for (int i = lane; i < FK_K; i += 32) { a = fmaf(cq[tt * FK_K + i], cq[tt * FK_K + i], a); b2 = fmaf(ck[tt * FK_K + i], ck[tt * FK_K + i], b2); }
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) { a += __shfl_xor_sync(0xffffffffu, a, off); b2 += __shfl_xor_sync(0xffffffffu, b2, off); }
      const float rq = rsqrtf(a + 1e-6f), rk = rsqrtf(b2 + 1e-6f);
      for (int i = lane; i < FK_K; i += 32) { cq[tt * FK_K + i] *= rq; ck[tt * FK_K + i] *= rk; }
    }
#endif
#if FK_KDA
    for (int i = tid; i < FK_K; i += FK_THREADS) {
      float run = 0.f;
      for (int tt = 0; tt < FK_C; ++tt) { run += cG[tt * FK_K + i]; cG[tt * FK_K + i] = run; }
    }
#else
    if (tid == 0) {
      float run = 0.f;
      for (int tt = 0; tt < FK_C; ++tt) { run += cG[tt]; cG[tt] = run; }
    }
#endif
    __syncthreads();
    // (3) Akk[t][s] = beta_t exp(G_t - G_s) k_t.k_s (s < t), Aqk[t][s] = exp(G_t - G_s) q_t.k_s (s <= t): a warp a pair
    // (KDA: the decay exp(G_t[i] - G_s[i]) inside the sums over the key channels)
    for (int p = warp; p < FK_C * FK_C; p += WARPS) {
      const int tt = p / FK_C, sj = p - tt * FK_C;
      float a = 0.f, b2 = 0.f;
      if (sj <= tt && tt < L) {
        for (int i = lane; i < FK_K; i += 32) {
#if FK_KDA
          const float kk = ck[sj * FK_K + i] * expf(cG[tt * FK_K + i] - cG[sj * FK_K + i]);
#else
          const float kk = ck[sj * FK_K + i];
#endif
          a = fmaf(ck[tt * FK_K + i], kk, a);
          b2 = fmaf(cq[tt * FK_K + i], kk, b2);
        }
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) { a += __shfl_xor_sync(0xffffffffu, a, off); b2 += __shfl_xor_sync(0xffffffffu, b2, off); }
      }
      if (lane == 0) {
#if FK_KDA
        const float dec = sj <= tt && tt < L ? 1.f : 0.f;
#else
        const float dec = sj <= tt && tt < L ? expf(cG[tt] - cG[sj]) : 0.f;
#endif
        cAkk[p] = sj < tt ? cB[tt] * dec * a : 0.f;
        cAqk[p] = dec * b2;
      }
    }
    // (4) k_t^T S0 then q_t^T S0 for the tile's columns: this thread's rows, the warp's row groups, then the warps
    // (KDA: k_t[i] exp(G_t[i]) and q_t[i] exp(G_t[i]); gated DeltaNet's exp(G_t) multiplies in (5) / (6))
#pragma unroll
    for (int pass = 0; pass < 2; ++pass) {
      const float* src = pass == 0 ? ck : cq;
      float* dst = pass == 0 ? cKS : cQS;
      float acc[FK_C][FK_VEC];
#pragma unroll
      for (int tt = 0; tt < FK_C; ++tt)
#pragma unroll
        for (int e = 0; e < FK_VEC; ++e) acc[tt][e] = 0.f;
#pragma unroll
      for (int r = 0; r < RK; ++r) {
        const int i = rg + r * RG;
        if (RK * RG == FK_K || i < FK_K) {
#pragma unroll
          for (int tt = 0; tt < FK_C; ++tt) {
#if FK_KDA
            const float x = src[tt * FK_K + i] * expf(cG[tt * FK_K + i]);
#else
            const float x = src[tt * FK_K + i];
#endif
#pragma unroll
            for (int e = 0; e < FK_VEC; ++e) acc[tt][e] = fmaf(x, s[r][e], acc[tt][e]);
          }
        }
      }
#pragma unroll
      for (int off = CT; off < 32; off <<= 1)
#pragma unroll
        for (int tt = 0; tt < FK_C; ++tt)
#pragma unroll
          for (int e = 0; e < FK_VEC; ++e) acc[tt][e] += __shfl_xor_sync(0xffffffffu, acc[tt][e], off);
      if (lane < CT)
#pragma unroll
        for (int tt = 0; tt < FK_C; ++tt)
#pragma unroll
          for (int e = 0; e < FK_VEC; ++e) cred[(warp * FK_C + tt) * FK_BV + ct * FK_VEC + e] = acc[tt][e];
      __syncthreads();
      for (int x = tid; x < FK_C * FK_BV; x += FK_THREADS) {
        float y = 0.f;
#pragma unroll
        for (int w = 0; w < WARPS; ++w) y += cred[w * FK_C * FK_BV + x];
        dst[x] = y;
      }
      __syncthreads();
    }
    // (5) the corrections u_t = beta_t (v_t - exp(G_t) k_t^T S0) - sum_{s < t} Akk[t][s] u_s, a thread a column, into cv
    for (int c = tid; c < FK_BV; c += FK_THREADS) {
      for (int tt = 0; tt < L; ++tt) {
        float u = cB[tt] * (cv[tt * FK_BV + c] - CHUNK_DECAY(tt) * cKS[tt * FK_BV + c]);
        for (int sj = 0; sj < tt; ++sj) u = fmaf(-cAkk[tt * FK_C + sj], cv[sj * FK_BV + c], u);
        cv[tt * FK_BV + c] = u;
      }
    }
    __syncthreads();
    // (6) o_t = scale (exp(G_t) q_t^T S0 + sum_{s <= t} Aqk[t][s] u_s)
    for (int x = tid; x < FK_C * FK_BV; x += FK_THREADS) {
      const int tt = x / FK_BV, c = x - tt * FK_BV;
      if (tt < L && c0 + c < V) {
        float y = CHUNK_DECAY(tt) * cQS[x];
        for (int sj = 0; sj <= tt; ++sj) y = fmaf(cAqk[tt * FK_C + sj], cv[sj * FK_BV + c], y);
        o[((br * T_len + cs + tt) * HV + hv) * (long long)V + c0 + c] = ST_T(scale * y);
      }
    }
    // (7) the state over the chunk, in registers: exp(G_last) S0 + sum_s exp(G_last - G_s) k_s u_s^T (KDA: row i's G)
    {
#pragma unroll
      for (int r = 0; r < RK; ++r) {
        const int i = rg + r * RG;
        if (RK * RG == FK_K || i < FK_K) {
#if FK_KDA
          const float gl = cG[(L - 1) * FK_K + i];
          const float* gs = cG + i;
          constexpr int GS = FK_K;
#else
          const float gl = cG[L - 1];
          const float* gs = cG;
          constexpr int GS = 1;
#endif
          const float dl = expf(gl);
#pragma unroll
          for (int e = 0; e < FK_VEC; ++e) s[r][e] *= dl;
          for (int sj = 0; sj < L; ++sj) {
            const float kd = ck[sj * FK_K + i] * expf(gl - gs[sj * GS]);
#pragma unroll
            for (int e = 0; e < FK_VEC; ++e) s[r][e] = fmaf(kd, cv[sj * FK_BV + ct * FK_VEC + e], s[r][e]);
          }
        }
      }
    }
    __syncthreads();  // the next chunk overwrites what (6) and (7) read
  }
${STATE_TILE_STORE}}
`;

const INDEX_CTYPE: Readonly<Record<GdnIndexDType, string>> = { i32: 'int', i64: 'long long' };

function header(comment: string, loads: Record<string, GenDType>, stores: Record<string, GenDType>, types: Record<string, string>): string[] {
  return [
    comment,
    '#include <cuda_fp16.h>',
    '#include <cuda_bf16.h>',
    ...Object.entries(types).map(([n, c]) => `typedef ${c} ${n};`),
    ...conversionHelpers(Object.values(loads), Object.values(stores), 'float'),
    ...Object.entries(loads).map(([m, d]) => `#define ${m} fk_ld_${d}`),
    ...Object.entries(stores).map(([m, d]) => `#define ${m} fk_st_${d}`),
    'template <class E, int N> struct alignas(sizeof(E) * N) FkV { E v[N]; };',
  ];
}

/** Floats of the chunked kernel's dynamic shared memory (GDN_CHUNK_BODY's layout; KDA's running gate sums are [C][K]). */
export function gdnChunkSharedFloats(K: number, bv: number, chunk: number, threads: number, gate: 'head' | 'channel' = 'head'): number {
  return 2 * chunk * K + 3 * chunk * bv + (threads / 32) * chunk * bv + 2 * chunk * chunk + chunk + (gate === 'channel' ? chunk * K : chunk);
}

/**
 * One fused_recurrent_gated_delta_rule / chunk_gated_delta_rule variant, or (gate 'channel') one fused_recurrent_kda /
 * chunk_kda variant: its #defines, the dtypes' conversions and the kernel body.
 */
export function gdnSource(spec: GdnKernelSpec): GeneratedKernel {
  const { dtype, K, bv, vec, threads } = spec;
  const kind = spec.kind ?? 'recurrent';
  const kda = spec.gate === 'channel';
  const entry = `fk_${kda ? 'kda' : 'gdn'}_${kind}`;
  if (bv % vec !== 0 || threads % 32 !== 0 || 32 % (bv / vec) !== 0) throw new RangeError(`gdn: bv ${bv} / vec ${vec} / threads ${threads} do not tile (bv / vec must divide 32)`);
  const source = [
    ...header(
      `// ${entry} ${dtype} (g ${spec.gDType}, beta ${spec.betaDType}) K ${K} BV ${bv} x${vec} ${threads} threads${spec.l2norm ? ' l2norm' : ''} (src/ops/recurrent/gdn-source.ts)`,
      { LD_T: dtype, LD_G: spec.gDType, LD_B: spec.betaDType },
      { ST_T: dtype },
      { T: GEN_CTYPE[dtype], TGATE: GEN_CTYPE[spec.gDType], TBETA: GEN_CTYPE[spec.betaDType], CU_T: INDEX_CTYPE[spec.cuDType], SI_T: INDEX_CTYPE[spec.idxDType] },
    ),
    `#define FK_K ${K}`, `#define FK_BV ${bv}`, `#define FK_VEC ${vec}`, `#define FK_THREADS ${threads}`, `#define FK_L2 ${spec.l2norm ? 1 : 0}`, `#define FK_C ${spec.chunk || 1}`,
    `#define FK_KDA ${kda ? 1 : 0}`, `#define FK_ENTRY ${entry}`,
    // the decay of chunk row tt's k_t^T S0 / q_t^T S0: gated DeltaNet's exp(G_t); KDA's is inside them (step 4)
    kda ? '#define CHUNK_DECAY(tt) 1.f' : '#define CHUNK_DECAY(tt) expf(cG[tt])',
    kind === 'chunk' ? GDN_CHUNK_BODY : GDN_BODY,
  ].join('\n');
  return { source, entry, signature: GDN_SIGNATURE };
}

// ---------------------------------------------------------------------------------------------
// the short causal conv

export type ConvHasInitDType = 'bool' | 'u8' | 'i32' | 'i64';

export interface ConvKernelSpec {
  /** x and out; weight and bias; the state read and the state written. */
  readonly dtype: GdnDType;
  readonly wDType: GdnDType;
  readonly sInDType: GdnDType;
  readonly sOutDType: GdnDType;
  readonly cuDType: GdnIndexDType;
  readonly idxDType: GdnIndexDType;
  readonly hisDType: ConvHasInitDType;
  /** Kernel width, channels a CTA, token groups a CTA, silu. */
  readonly W: number;
  readonly ct: number;
  readonly tg: number;
  readonly silu: boolean;
}

/**
 * out, x, weight, bias (0: none); x's element strides (batch, channel, token); s_in and its strides (slot, channel,
 * column), s_out and its strides; query_start_loc / cu, cache indices, has_initial_state (0 when absent); L (tokens a
 * batch row), D, S (state columns).
 */
export const CONV_SIGNATURE: readonly ArgType[] = [
  'ptr', 'ptr', 'ptr', 'ptr', ...I64(3), 'ptr', ...I64(3), 'ptr', ...I64(3), 'ptr', 'ptr', 'ptr', 'i32', 'i32', 'i32',
];

const CONV_BODY = String.raw`
extern "C" __global__ void __launch_bounds__(FK_CT * FK_TG) fk_causal_conv1d(
    T* __restrict__ out, const T* __restrict__ x, const TW* __restrict__ w, const TW* __restrict__ bias,
    long long xb, long long xd, long long xt,
    const TSI* s_in, long long s_in_n, long long s_in_d, long long s_in_j,
    TSO* s_out, long long s_out_n, long long s_out_d, long long s_out_j,
    const CU_T* __restrict__ cu, const SI_T* __restrict__ si, const HI_T* __restrict__ his, int L, int D, int S) {
  constexpr int W1 = FK_W - 1;
  const int c = threadIdx.x % FK_CT, tg = threadIdx.x / FK_CT;
  const int n = blockIdx.y;
  const int d = blockIdx.x * FK_CT + c;
  const bool ch_ok = d < D;
  long long br;
  int t0, t1;
  if (cu != nullptr) { br = 0; t0 = (int)cu[n]; t1 = (int)cu[n + 1]; }
  else { br = n; t0 = 0; t1 = L; }
  const int len = t1 - t0;
  long long slot = n;
  bool rd = s_in != nullptr, wr = s_out != nullptr;
  if (si != nullptr) {
    slot = (long long)si[n];
    if (slot < 0) { rd = false; wr = false; }  // PAD_SLOT_ID
  }
  if (his != nullptr && his[n] == 0) rd = false;  // has_initial_state false: from zeros, the row still written
  float taps[FK_W], tail[W1 > 0 ? W1 : 1];
  float b0 = 0.f;
#pragma unroll
  for (int j = 0; j < FK_W; ++j) taps[j] = ch_ok ? LD_W(w[(long long)d * FK_W + j]) : 0.f;
  if (bias != nullptr && ch_ok) b0 = LD_W(bias[d]);
#pragma unroll
  for (int j = 0; j < W1; ++j) tail[j] = rd && ch_ok ? LD_SI(s_in[slot * s_in_n + d * s_in_d + (long long)(S - W1 + j) * s_in_j]) : 0.f;
  const T* xr = x + br * xb + d * xd;
  if (ch_ok) {
    for (int tt = tg; tt < len; tt += FK_TG) {
      float acc = b0;
#pragma unroll
      for (int j = 0; j < FK_W; ++j) {
        const int p = tt + j - W1;  // position in the sequence; < 0: the state's tail
        float xv = 0.f;
        if (p < 0) {
#pragma unroll
          for (int m = 0; m < W1; ++m) if (m == p + W1) xv = tail[m];  // constant indices: the tail stays in registers
        } else xv = LD_T(xr[(long long)(t0 + p) * xt]);
        acc = fmaf(taps[j], xv, acc);
      }
#if FK_SILU
      acc = acc / (1.f + expf(-acc));
#endif
      out[(br * D + d) * (long long)L + t0 + tt] = ST_T(acc);
    }
  }
  __syncthreads();  // every thread has read the state's tail: the row may be rewritten
  if (wr && ch_ok && tg == 0) {
    // the last S columns of [state (S), x (len)]; in increasing j, old column j + len is read before it is overwritten
    for (int j = 0; j < S; ++j) {
      const int p = len + j;
      float val;
      if (p < S) val = rd ? LD_SI(s_in[slot * s_in_n + d * s_in_d + (long long)p * s_in_j]) : 0.f;
      else val = LD_T(xr[(long long)(t0 + p - S) * xt]);
      s_out[slot * s_out_n + d * s_out_d + (long long)j * s_out_j] = ST_SO(val);
    }
  }
}
`;

const HIS_CTYPE: Readonly<Record<ConvHasInitDType, string>> = { bool: 'unsigned char', u8: 'unsigned char', i32: 'int', i64: 'long long' };

/** One causal-conv variant. */
export function convSource(spec: ConvKernelSpec): GeneratedKernel {
  const { dtype, W, ct, tg } = spec;
  if (W < 1 || ct < 1 || tg < 1 || (ct * tg) % 32 !== 0) throw new RangeError(`causal_conv1d: width ${W}, ${ct} channels x ${tg} token groups (whole warps) do not tile`);
  const source = [
    ...header(
      `// fk_causal_conv1d ${dtype} (weight ${spec.wDType}, state ${spec.sInDType} -> ${spec.sOutDType}) W ${W} ${ct} channels x ${tg} token groups${spec.silu ? ' silu' : ''} (src/ops/recurrent/gdn-source.ts)`,
      { LD_T: dtype, LD_W: spec.wDType, LD_SI: spec.sInDType },
      { ST_T: dtype, ST_SO: spec.sOutDType },
      {
        T: GEN_CTYPE[dtype], TW: GEN_CTYPE[spec.wDType], TSI: GEN_CTYPE[spec.sInDType], TSO: GEN_CTYPE[spec.sOutDType],
        CU_T: INDEX_CTYPE[spec.cuDType], SI_T: INDEX_CTYPE[spec.idxDType], HI_T: HIS_CTYPE[spec.hisDType],
      },
    ),
    `#define FK_W ${W}`, `#define FK_CT ${ct}`, `#define FK_TG ${tg}`, `#define FK_SILU ${spec.silu ? 1 : 0}`,
    CONV_BODY,
  ].join('\n');
  return { source, entry: 'fk_causal_conv1d', signature: CONV_SIGNATURE };
}
