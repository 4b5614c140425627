/**
 * The CUDA source of the conv fallback (used where cuDNN is absent, declines a shape, or is switched off) and of the
 * in-place bias add that follows a cuDNN conv. Generated here rather than kept in kernels/ so a dtype / direction is
 * a few #defines over one body; implicit-gemm-nvcc.test.ts compiles every variant for sm_90a with no spills.
 *
 * fk_conv_igemm: an implicit GEMM per group g. Rows are the N x OD x OH x OW output pixels, columns the K / G output
 * channels of the group, the reduction runs over (kd, kh, kw, c) of the C / G input channels, c fastest (contiguous in
 * channels-last inputs). A 64-pixel x 64-channel tile a block of 256 threads, each thread 4 x 4 outputs in f32, the
 * operands staged 16 reduction steps at a time in shared memory and read from global memory through arbitrary element
 * strides (NCHW, channels-last, any view: nothing is copied first), zero padding by bounds checks. conv1d / conv2d run
 * as conv3d with unit leading dims. FK_TRANSPOSED gathers conv_transpose's input instead: output position o takes
 * input i where o + pad - k * dil = i * stride. Bias and the activation of conv2d_act (in f32) and one rounding to the
 * output dtype in the epilogue.
 */
import { GEN_CTYPE, loadFn, storeFn } from '../ctypes.js';
import type { ArgType } from '../../args.js';
import type { GeneratedKernel } from '../elementwise-source.js';

export type ConvDType = 'f32' | 'f16' | 'bf16';
/** The epilogue activation: 'none' for the conv ops, conv2d_act's 'silu' / 'relu' (core's ConvActivation). */
export type ConvEpilogueAct = 'none' | 'silu' | 'relu';
export const CONV_ACTS: readonly ConvEpilogueAct[] = ['none', 'silu', 'relu'];

export interface IgemmSpec {
  readonly dtype: ConvDType;
  readonly transposed: boolean;
  readonly bias: boolean;
  readonly act?: ConvEpilogueAct;
}

/** Block tile: pixels x channels x reduction steps, and threads (each computes TM x TN = 4 x 4 outputs). */
export const IGEMM_TILE = { BM: 64, BN: 64, BK: 16, threads: 256 } as const;

const I32 = (n: number): ArgType[] => new Array<ArgType>(n).fill('i32');
const I64 = (n: number): ArgType[] => new Array<ArgType>(n).fill('i64');

/**
 * Arguments, in order: y, x, w, bias (0 without), then i32 N C D H W, K OD OH OW, KD KH KW, G, stride d h w, pad d h w
 * (the leading pad), dilation d h w, then i64 strides of x (n c d h w), of w (out-channel, in-channel, kd, kh, kw: the
 * roles, whichever dims of the weight they are) and of y (n c d h w), all in elements.
 */
export const IGEMM_SIGNATURE: readonly ArgType[] = ['ptr', 'ptr', 'ptr', 'ptr', ...I32(5), ...I32(4), ...I32(3), 'i32', ...I32(9), ...I64(15)];

const IGEMM_BODY = String.raw`
#define BM 64
#define BN 64
#define BK 16
extern "C" __global__ void __launch_bounds__(256) fk_conv_igemm(
    T* __restrict__ y, const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
    int N, int C, int D, int H, int W, int K, int OD, int OH, int OW, int KD, int KH, int KW, int G,
    int sd, int sh, int sw, int pd, int ph, int pw, int dd, int dh, int dw,
    long long xn, long long xc, long long xd, long long xh, long long xw,
    long long wo, long long wi, long long wd, long long wh, long long ww,
    long long yn, long long yc, long long yd, long long yh, long long yw) {
  __shared__ float As[BK][BM + 4];
  __shared__ float Bs[BK][BN + 4];
  const int Cg = C / G, Kg = K / G;
  const int g = blockIdx.z;
  const int M = N * OD * OH * OW;
  const int R = Cg * KD * KH * KW;  // reduction length
  const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
  const int t = threadIdx.x;
  // the pixel this thread loads A for (fixed over the reduction), decoded once
  const int lm = t % BM, lk = t / BM;  // lk in [0, 4): rows lk, lk + 4, lk + 8, lk + 12 of the tile
  const int am = m0 + lm;
  int an = 0, aod = 0, aoh = 0, aow = 0;
  if (am < M) {
    int r = am;
    aow = r % OW; r /= OW;
    aoh = r % OH; r /= OH;
    aod = r % OD; an = r / OD;
  }
  const T* xg = x + (long long)an * xn + (long long)g * Cg * xc;
  // the output channel this thread loads B for
  const int bk = n0 + lm;  // local output channel
#if FK_TRANSPOSED
  const T* wg = w + (long long)bk * wo + (long long)g * Cg * wi;
#else
  const T* wg = w + (long long)(g * Kg + bk) * wo;
#endif
  const int ty = t / 16, tx = t % 16;
  float acc[4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;

  for (int k0 = 0; k0 < R; k0 += BK) {
    float av[4], bv[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int kk = k0 + lk + 4 * i;
      float a = 0.f, b = 0.f;
      if (kk < R) {
        int r = kk;
        const int c = r % Cg; r /= Cg;
        const int kw = r % KW; r /= KW;
        const int kh = r % KH;
        const int kd = r / KH;
        if (am < M) {
#if FK_TRANSPOSED
          const int td = aod + pd - kd * dd, th = aoh + ph - kh * dh, tw = aow + pw - kw * dw;
          const int id = td / sd, ih = th / sh, iw = tw / sw;
          const bool ok = td >= 0 && th >= 0 && tw >= 0 && td - id * sd == 0 && th - ih * sh == 0 && tw - iw * sw == 0 &&
                          id < D && ih < H && iw < W;
#else
          const int id = aod * sd - pd + kd * dd, ih = aoh * sh - ph + kh * dh, iw = aow * sw - pw + kw * dw;
          const bool ok = id >= 0 && ih >= 0 && iw >= 0 && id < D && ih < H && iw < W;
#endif
          if (ok) a = fk_ld(xg[c * xc + id * xd + ih * xh + iw * xw]);
        }
        if (bk < Kg) b = fk_ld(wg[c * wi + kd * wd + kh * wh + kw * ww]);
      }
      av[i] = a;
      bv[i] = b;
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      As[lk + 4 * i][lm] = av[i];
      Bs[lk + 4 * i][lm] = bv[i];
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = As[k][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < 4; ++j) b[j] = Bs[k][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int m = m0 + ty + 16 * i;
    if (m >= M) continue;
    int r = m;
    const int ow = r % OW; r /= OW;
    const int oh = r % OH; r /= OH;
    const int od = r % OD;
    const int n = r / OD;
    T* yp = y + (long long)n * yn + od * yd + oh * yh + ow * yw;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int kl = n0 + tx + 16 * j;
      if (kl >= Kg) continue;
      const int k = g * Kg + kl;
      float v = acc[i][j];
#if FK_BIAS
      v += fk_ld(bias[k]);
#endif
      yp[(long long)k * yc] = fk_st(fk_act(v));
    }
  }
}
`;

// the activation in f32 before the one rounding; the same expressions as the generated silu / relu ops (expr.ts)
const ACT_FN = String.raw`
__device__ __forceinline__ float fk_act(float v) {
#if FK_ACT == 1
  return v / (1.0f + expf(-v));
#elif FK_ACT == 2
  return v <= 0.0f ? 0.0f : v;
#else
  return v;
#endif
}
`;

function prelude(dtype: ConvDType, act: ConvEpilogueAct): string {
  return [
    '#include <cuda_fp16.h>',
    '#include <cuda_bf16.h>',
    `typedef ${GEN_CTYPE[dtype]} T;`,
    loadFn(dtype, 'float').replace(`fk_ld_${dtype}`, 'fk_ld'),
    storeFn(dtype, 'float').replace(`fk_st_${dtype}`, 'fk_st'),
    `#define FK_ACT ${CONV_ACTS.indexOf(act)}`,
    ACT_FN,
  ].join('\n');
}

/** The fallback conv kernel for one dtype / direction / bias / activation. */
export function igemmSource(spec: IgemmSpec): GeneratedKernel {
  const act = spec.act ?? 'none';
  const head = `// fk_conv_igemm ${spec.dtype}${spec.transposed ? ' transposed' : ''}${spec.bias ? ' +bias' : ''}${act === 'none' ? '' : ` +${act}`} (src/ops/conv/implicit-gemm-source.ts)\n`;
  const defs = `#define FK_TRANSPOSED ${spec.transposed ? 1 : 0}\n#define FK_BIAS ${spec.bias ? 1 : 0}\n`;
  return { source: head + prelude(spec.dtype, act) + '\n' + defs + IGEMM_BODY, entry: 'fk_conv_igemm', signature: IGEMM_SIGNATURE };
}

/** Arguments: y, bias (0 without), n (elements of y), C, inner (elements between channels: H x W for NCHW, 1 for channels-last). */
export const BIAS_SIGNATURE: readonly ArgType[] = ['ptr', 'ptr', 'i64', 'i32', 'i64'];

/**
 * y[i] = act(y[i] + bias[channel of i]) in place over a contiguous (NCHW or channels-last) conv output (the bias and
 * activation cuDNN's conv leaves to a second pass; either may be absent, not both), FK_VEC elements a thread per step
 * (16-byte accesses when the host found y aligned and its size a multiple), in f32 with one rounding.
 */
export function biasAddSource(dtype: ConvDType, vec: number, act: ConvEpilogueAct = 'none', bias = true): GeneratedKernel {
  const body = String.raw`
template <int N> struct alignas(sizeof(T) * N) Vec { T v[N]; };
extern "C" __global__ void fk_conv_bias_add(T* __restrict__ y, const T* __restrict__ bias, long long n, int C, long long inner) {
  typedef Vec<FK_VEC> V;
  const long long nv = n / FK_VEC;
  for (long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x; j < nv; j += (long long)gridDim.x * blockDim.x) {
    V a = reinterpret_cast<V*>(y)[j];
#pragma unroll
    for (int e = 0; e < FK_VEC; ++e) {
#if FK_BIAS
      const int c = (int)(((j * FK_VEC + e) / inner) % C);
      a.v[e] = fk_st(fk_act(fk_ld(a.v[e]) + fk_ld(bias[c])));
#else
      a.v[e] = fk_st(fk_act(fk_ld(a.v[e])));
#endif
    }
    reinterpret_cast<V*>(y)[j] = a;
  }
}
`;
  return {
    source: `// fk_conv_bias_add ${dtype} x${vec}${bias ? ' +bias' : ''}${act === 'none' ? '' : ` +${act}`} (src/ops/conv/implicit-gemm-source.ts)\n${prelude(dtype, act)}\n#define FK_VEC ${vec}\n#define FK_BIAS ${bias ? 1 : 0}\n${body}`,
    entry: 'fk_conv_bias_add',
    signature: BIAS_SIGNATURE,
  };
}
