/**
 * The CUDA sources of gated linear attention (FLA's fused_recurrent_gla / chunk_gla with vLLM's state pool), generated
 * here so a variant is a few #defines over one body (gla-nvcc.test.ts compiles each for sm_90a with no spills).
 *
 * Both kernels: a CTA per (V tile, head, sequence) holding the [K, BV] f32 slice of the sequence's state in registers
 * (gla-plan.ts: thread (ct, rg) owns columns c0 + ct * VEC .. + VEC of rows rg + r * RG). The sequence's tokens are
 * [cu[n], cu[n+1]) of batch row 0 with cu_seqlens, else [0, T) of batch row n; its state comes from s_in[slot] and goes
 * to s_out[slot], slot = si[n] with a pool (s_in == s_out: read and written in place; si[n] < 0 is a padding row: zero
 * state, nothing written), else n (s_in null: a zero state; s_out null: no final state). Nothing is read on the host,
 * so a captured graph replays for whatever the index tensors hold. Live sequences need distinct slots, as vLLM gives
 * them: the CTAs of two sequences on one slot run at once and race on its tiles (no order is defined; issue 32).
 *
 * fk_gla_recurrent (decode, short prefills): token by token, S = diag(exp(g_t)) S + k_t^T v_t and o_t = scale q_t S,
 * q / k / exp(g) / v staged in shared memory (double-buffered: two barriers a token), o's sum over K reduced over the
 * row groups by warp shuffles, then across warps in shared memory.
 *
 * fk_gla_chunk (prefill): FLA's chunked form with CUDA-core FMAs in f32, C = FK_C tokens at a time. With b_t the
 * running sum of g inside the chunk: A[t][s] = sum_i q_t,i k_s,i exp(b_t,i - b_s,i) (s <= t), o_t = scale (q_t exp(b_t))
 * S_0 + scale sum_{s <= t} A[t][s] v_s, and S_C = exp(b_last) S_0 + sum_s (k_s exp(b_last - b_s))^T v_s. Every
 * exponent is <= 0 when g <= 0 (FLA's log-space gates). One barrier round a chunk instead of a token; the scores are
 * recomputed by each V tile (a first step: the tensor-core form computes them once a chunk, docs/cuda-ops.md).
 */
import type { ArgType } from '../../args.js';
import { GEN_CTYPE, loadFn, storeFn } from '../ctypes.js';
import type { GeneratedKernel } from '../elementwise-source.js';
import { STATE_TILE_CONSTS, STATE_TILE_STORE, stateTileSetup } from './state-tile-source.js';

export type GlaDType = 'f32' | 'f16' | 'bf16';
export type GlaIndexDType = 'i32' | 'i64';

export interface GlaKernelSpec {
  readonly kind: 'recurrent' | 'chunk';
  readonly dtype: GlaDType;
  /** cu_seqlens' and ssm_state_indices' dtypes (i32 when absent). */
  readonly cuDType: GlaIndexDType;
  readonly idxDType: GlaIndexDType;
  readonly K: number;
  readonly bv: number;
  readonly vec: number;
  readonly threads: number;
  /** Tokens a chunk (the chunked kernel). */
  readonly chunk: number;
}

const I64 = (n: number): ArgType[] => new Array<ArgType>(n).fill('i64');

/**
 * o, q, k, v, g; element strides (batch, token, head) of q, k, v, g; s_in and its slot stride, s_out and its slot
 * stride (floats); cu_seqlens, ssm_state_indices (0 when absent); T (tokens a batch row), H, V, scale.
 */
export const GLA_SIGNATURE: readonly ArgType[] = [
  'ptr', 'ptr', 'ptr', 'ptr', 'ptr', ...I64(12), 'ptr', 'i64', 'ptr', 'i64', 'ptr', 'ptr', 'i32', 'i32', 'i32', 'f32',
];

const PARAMS = String.raw`
    T* __restrict__ o, const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, const T* __restrict__ g,
    long long qb, long long qt, long long qh, long long kb, long long kt, long long kh,
    long long vb, long long vt, long long vh, long long gb, long long gt, long long gh,
    const float* s_in, long long s_in_n, float* s_out, long long s_out_n,
    const CU_T* __restrict__ cu, const SI_T* __restrict__ si, int T_len, int H, int V, float scale`;

/** The tile's constants, the sequence's tokens and slot, this thread's slice of the state (state-tile-source.ts). */
const SETUP = `\n${STATE_TILE_CONSTS}${stateTileSetup('gla')}`;
const STORE = `\n${STATE_TILE_STORE}`;

const RECURRENT_BODY = String.raw`
extern "C" __global__ void __launch_bounds__(FK_THREADS) fk_gla_recurrent(${PARAMS}) {
  __shared__ float sq[2][FK_K], sk[2][FK_K], sd[2][FK_K], sv[2][FK_BV];
  __shared__ float red[2][FK_THREADS / 32][FK_BV];
${SETUP}
  for (int t = t0; t < t1; ++t) {
    const int b = (t - t0) & 1;  // buffer b was last read two tokens ago, before the barriers of the token between
    const T* qp = q + bt * qb + t * qt + h * qh;
    const T* kp = k + bt * kb + t * kt + h * kh;
    const T* gp = g + bt * gb + t * gt + h * gh;
    const T* vp = v + bt * vb + t * vt + h * vh;
    for (int i = tid; i < FK_K; i += FK_THREADS) {
      sq[b][i] = fk_ld(qp[i]);
      sk[b][i] = fk_ld(kp[i]);
      sd[b][i] = expf(fk_ld(gp[i]));
    }
    for (int c = tid; c < FK_BV; c += FK_THREADS) sv[b][c] = c0 + c < V ? fk_ld(vp[c0 + c]) : 0.f;
    __syncthreads();
    float acc[FK_VEC];
#pragma unroll
    for (int e = 0; e < FK_VEC; ++e) acc[e] = 0.f;
#pragma unroll
    for (int r = 0; r < RK; ++r) {
      const int i = rg + r * RG;
      if (RK * RG == FK_K || i < FK_K) {
        const float d = sd[b][i], kk = sk[b][i], qq = sq[b][i];
#pragma unroll
        for (int e = 0; e < FK_VEC; ++e) {
          s[r][e] = fmaf(s[r][e], d, kk * sv[b][ct * FK_VEC + e]);
          acc[e] = fmaf(qq, s[r][e], acc[e]);
        }
      }
    }
    // lanes ct, ct + CT, ... of a warp hold the same columns of other rows
#pragma unroll
    for (int off = CT; off < 32; off <<= 1)
#pragma unroll
      for (int e = 0; e < FK_VEC; ++e) acc[e] += __shfl_xor_sync(0xffffffffu, acc[e], off);
    if (lane < CT)
#pragma unroll
      for (int e = 0; e < FK_VEC; ++e) red[b][warp][ct * FK_VEC + e] = acc[e];
    __syncthreads();
    for (int c = tid; c < FK_BV; c += FK_THREADS) {
      if (c0 + c < V) {
        float x = 0.f;
#pragma unroll
        for (int w = 0; w < WARPS; ++w) x += red[b][w][c];
        o[((long long)bt * T_len + t) * ((long long)H * V) + (long long)h * V + c0 + c] = fk_st(x * scale);
      }
    }
  }
${STORE}
}
`;

const CHUNK_BODY = String.raw`
extern "C" __global__ void __launch_bounds__(FK_THREADS) fk_gla_chunk(${PARAMS}) {
  constexpr int C = FK_C;
  extern __shared__ float smem[];
  float* sq = smem;               // [C][K]: q, then q * exp(b)
  float* sk = sq + C * FK_K;      // [C][K]: k, then k * exp(b_last - b)
  float* sb = sk + C * FK_K;      // [C][K]: g, then its running sum b inside the chunk
  float* sv = sb + C * FK_K;      // [C][BV]
  float* sA = sv + C * FK_BV;     // [C][C]: the intra-chunk scores
  float* sdec = sA + C * C;       // [K]: exp(b_last), the chunk's decay of the state
  float* red = sdec + FK_K;       // [WARPS][C][BV]: o's inter-chunk partials of each warp
${SETUP}
  for (int cs = t0; cs < t1; cs += C) {
    const int L = min(C, t1 - cs);
    // (1) the chunk's q, k, g (rows past L: zeros, so they add nothing) and the v tile, in float
    for (int x = tid; x < C * FK_K; x += FK_THREADS) {
      const int tt = x / FK_K, i = x - tt * FK_K;
      float qv = 0.f, kv = 0.f, gv = 0.f;
      if (tt < L) {
        const long long t = cs + tt;
        qv = fk_ld(q[bt * qb + t * qt + h * qh + i]);
        kv = fk_ld(k[bt * kb + t * kt + h * kh + i]);
        gv = fk_ld(g[bt * gb + t * gt + h * gh + i]);
      }
      sq[x] = qv;
      sk[x] = kv;
      sb[x] = gv;
    }
    for (int x = tid; x < C * FK_BV; x += FK_THREADS) {
      const int tt = x / FK_BV, c = x - tt * FK_BV;
      sv[x] = tt < L && c0 + c < V ? fk_ld(v[bt * vb + (long long)(cs + tt) * vt + h * vh + c0 + c]) : 0.f;
    }
    __syncthreads();
    // (2) b: the running sum of g down each key channel; the chunk's decay
    for (int i = tid; i < FK_K; i += FK_THREADS) {
      float run = 0.f;
#pragma unroll
      for (int tt = 0; tt < C; ++tt) {
        run += sb[tt * FK_K + i];
        sb[tt * FK_K + i] = run;
      }
      sdec[i] = expf(run);
    }
    __syncthreads();
    // (3) A[t][s] for s <= t < L: a warp a pair, its lanes over the key channels
    for (int p = warp; p < C * C; p += WARPS) {
      const int tt = p / C, sj = p - tt * C;
      float a = 0.f;
      if (sj <= tt && tt < L) {
        for (int i = lane; i < FK_K; i += 32) a += sq[tt * FK_K + i] * sk[sj * FK_K + i] * expf(sb[tt * FK_K + i] - sb[sj * FK_K + i]);
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) a += __shfl_xor_sync(0xffffffffu, a, off);
      }
      if (lane == 0) sA[p] = a;
    }
    __syncthreads();
    // (4) in place: the inter-chunk query q_t exp(b_t) and the update's key k_s exp(b_last - b_s)
    for (int x = tid; x < C * FK_K; x += FK_THREADS) {
      const int i = x % FK_K;
      const float bx = sb[x];
      sq[x] *= expf(bx);
      sk[x] *= expf(sb[(C - 1) * FK_K + i] - bx);
    }
    __syncthreads();
    // (5) o's inter-chunk part over this thread's rows, summed over the warp's row groups, to shared memory
    float acc[C][FK_VEC];
#pragma unroll
    for (int tt = 0; tt < C; ++tt)
#pragma unroll
      for (int e = 0; e < FK_VEC; ++e) acc[tt][e] = 0.f;
#pragma unroll
    for (int r = 0; r < RK; ++r) {
      const int i = rg + r * RG;
      if (RK * RG == FK_K || i < FK_K) {
#pragma unroll
        for (int tt = 0; tt < C; ++tt) {
          const float qe = sq[tt * FK_K + i];
#pragma unroll
          for (int e = 0; e < FK_VEC; ++e) acc[tt][e] = fmaf(qe, s[r][e], acc[tt][e]);
        }
      }
    }
#pragma unroll
    for (int off = CT; off < 32; off <<= 1)
#pragma unroll
      for (int tt = 0; tt < C; ++tt)
#pragma unroll
        for (int e = 0; e < FK_VEC; ++e) acc[tt][e] += __shfl_xor_sync(0xffffffffu, acc[tt][e], off);
    if (lane < CT)
#pragma unroll
      for (int tt = 0; tt < C; ++tt)
#pragma unroll
        for (int e = 0; e < FK_VEC; ++e) red[(warp * C + tt) * FK_BV + ct * FK_VEC + e] = acc[tt][e];
    // (6) the state over the chunk, in this thread's registers (S_0 was read above; kd and v are read-only now)
#pragma unroll
    for (int r = 0; r < RK; ++r) {
      const int i = rg + r * RG;
      if (RK * RG == FK_K || i < FK_K) {
        const float d = sdec[i];
#pragma unroll
        for (int e = 0; e < FK_VEC; ++e) s[r][e] *= d;
#pragma unroll
        for (int sj = 0; sj < C; ++sj) {
          const float kd = sk[sj * FK_K + i];
#pragma unroll
          for (int e = 0; e < FK_VEC; ++e) s[r][e] = fmaf(kd, sv[sj * FK_BV + ct * FK_VEC + e], s[r][e]);
        }
      }
    }
    __syncthreads();
    // (7) o_t = scale * (inter + sum_{s <= t} A[t][s] v_s)
    for (int x = tid; x < C * FK_BV; x += FK_THREADS) {
      const int tt = x / FK_BV, c = x - tt * FK_BV;
      if (tt < L && c0 + c < V) {
        float y = 0.f;
#pragma unroll
        for (int w = 0; w < WARPS; ++w) y += red[(w * C + tt) * FK_BV + c];
        for (int sj = 0; sj <= tt; ++sj) y = fmaf(sA[tt * C + sj], sv[sj * FK_BV + c], y);
        o[((long long)bt * T_len + cs + tt) * ((long long)H * V) + (long long)h * V + c0 + c] = fk_st(y * scale);
      }
    }
    __syncthreads();  // the next chunk overwrites what (7) read
  }
${STORE}
}
`;

const INDEX_CTYPE: Readonly<Record<GlaIndexDType, string>> = { i32: 'int', i64: 'long long' };

export function glaEntry(kind: 'recurrent' | 'chunk'): string {
  return kind === 'recurrent' ? 'fk_gla_recurrent' : 'fk_gla_chunk';
}

/** One variant's source: its #defines, the dtype's conversions, the shared prelude and the kernel body. */
export function glaSource(spec: GlaKernelSpec): GeneratedKernel {
  const { kind, dtype, K, bv, vec, threads } = spec;
  if (bv % vec !== 0 || threads % 32 !== 0 || 32 % (bv / vec) !== 0) throw new RangeError(`gla ${kind}: bv ${bv} / vec ${vec} / threads ${threads} do not tile (bv / vec must divide 32)`);
  const defs = [`#define FK_K ${K}`, `#define FK_BV ${bv}`, `#define FK_VEC ${vec}`, `#define FK_THREADS ${threads}`, `#define FK_C ${spec.chunk || 1}`];
  const source = [
    `// ${glaEntry(kind)} ${dtype} K ${K} BV ${bv} x${vec} ${threads} threads${kind === 'chunk' ? ` chunk ${spec.chunk}` : ''} (src/ops/recurrent/gla-source.ts)`,
    '#include <cuda_fp16.h>',
    '#include <cuda_bf16.h>',
    `typedef ${GEN_CTYPE[dtype]} T;`,
    `typedef ${INDEX_CTYPE[spec.cuDType]} CU_T;`,
    `typedef ${INDEX_CTYPE[spec.idxDType]} SI_T;`,
    loadFn(dtype, 'float').replace(`fk_ld_${dtype}`, 'fk_ld'),
    storeFn(dtype, 'float').replace(`fk_st_${dtype}`, 'fk_st'),
    'template <class E, int N> struct alignas(sizeof(E) * N) FkV { E v[N]; };',
    ...defs,
    kind === 'recurrent' ? RECURRENT_BODY : CHUNK_BODY,
  ].join('\n');
  return { source, entry: glaEntry(kind), signature: GLA_SIGNATURE };
}
