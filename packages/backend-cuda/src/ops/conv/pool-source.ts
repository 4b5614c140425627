/**
 * The CUDA source of the pooling ops (max / avg / adaptive avg / adaptive max, 1-d to 3-d, with or without indices):
 * one thread an output element, its window read through arbitrary input strides, as PyTorch's own CUDA pooling kernels
 * do (PyTorch does not pool through cuDNN). Ranks below 3 run as 3-d with unit leading dims. Threads walk the output in
 * its memory order (FK_CL: channels innermost) so stores coalesce. Semantics are backend-cpu/src/ops/pool.ts's: max
 * pads with -inf, the first NaN wins and stays, indices are flat over each input plane; avg clips its window to the
 * padded input for the count (count_include_pad) and to the input for the sum; divisor_override replaces the count.
 */
import type { ArgType } from '../../args.js';
import { GEN_CTYPE, loadFn, storeFn } from '../ctypes.js';
import type { GeneratedKernel } from '../elementwise-source.js';
import type { ConvDType } from './implicit-gemm-source.js';

export type PoolKind = 'max' | 'avg' | 'adaptive_avg' | 'adaptive_max';
export const POOL_KIND_CODE: Readonly<Record<PoolKind, number>> = { max: 0, avg: 1, adaptive_avg: 2, adaptive_max: 3 };

export interface PoolSpec {
  readonly dtype: ConvDType;
  readonly kind: PoolKind;
  /** Also write the i64 index of each maximum (max kinds). */
  readonly indices: boolean;
  /** The output is channels-last: threads take channels innermost. */
  readonly channelsLast: boolean;
}

/**
 * Arguments: y, indices (0 without), x, then i32 N C D H W OD OH OW, kernel d h w, stride d h w, pad d h w, dilation
 * d h w, countIncludePad, f32 divisor (0: none), i64 x strides (n c d h w), i64 y strides (n c d h w).
 */
export const POOL_SIGNATURE: readonly ArgType[] = ['ptr', 'ptr', 'ptr', ...new Array<ArgType>(8 + 12 + 1).fill('i32'), 'f32', ...new Array<ArgType>(10).fill('i64')];

const BODY = String.raw`
extern "C" __global__ void __launch_bounds__(256) fk_pool(
    T* __restrict__ y, long long* __restrict__ yi, const T* __restrict__ x,
    int N, int C, int D, int H, int W, int OD, int OH, int OW,
    int kd, int kh, int kw, int sd, int sh, int sw, int pd, int ph, int pw, int dd, int dh, int dw,
    int countPad, float divisor,
    long long xn, long long xc, long long xd, long long xh, long long xw,
    long long yn, long long yc, long long yd, long long yh, long long yw) {
  const int total = N * C * OD * OH * OW;  // < 2^31 (the host checks): 32-bit index math, no 64-bit division calls
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    int r = i;
    int c, ow, oh, od, n;
#if FK_CL
    c = r % C; r /= C;
    ow = r % OW; r /= OW;
    oh = r % OH; r /= OH;
    od = r % OD; n = r / OD;
#else
    ow = r % OW; r /= OW;
    oh = r % OH; r /= OH;
    od = r % OD; r /= OD;
    c = r % C; n = r / C;
#endif
    const T* xp = x + (long long)n * xn + (long long)c * xc;
    const long long yo = (long long)n * yn + (long long)c * yc + od * yd + oh * yh + ow * yw;
#if FK_KIND == 0 || FK_KIND == 3
    // max: the window's elements in order; the first valid one seeds, a larger one or the first NaN replaces
#if FK_KIND == 0
    const int d0 = od * sd - pd, h0 = oh * sh - ph, w0 = ow * sw - pw;
    const int nd_ = kd, nh_ = kh, nw_ = kw, ed = dd, eh = dh, ew = dw;
#else
    // adaptive windows [floor(o I / O), ceil((o + 1) I / O)) in 32 bits (the host checks I x O < 2^31)
    const int d0 = od * D / OD, h0 = oh * H / OH, w0 = ow * W / OW;
    const int nd_ = ((od + 1) * D + OD - 1) / OD - d0, nh_ = ((oh + 1) * H + OH - 1) / OH - h0, nw_ = ((ow + 1) * W + OW - 1) / OW - w0;
    const int ed = 1, eh = 1, ew = 1;
#endif
    float best = __int_as_float(0xff800000);  // -inf (NVRTC has no math.h INFINITY)
    long long bi = -1;
    for (int a = 0; a < nd_; ++a) {
      const int id = d0 + a * ed;
      if (id < 0 || id >= D) continue;
      for (int b = 0; b < nh_; ++b) {
        const int ih = h0 + b * eh;
        if (ih < 0 || ih >= H) continue;
        for (int e = 0; e < nw_; ++e) {
          const int iw = w0 + e * ew;
          if (iw < 0 || iw >= W) continue;
          const float v = fk_ld(xp[id * xd + ih * xh + iw * xw]);
          if (bi < 0 || v > best || (isnan(v) && !isnan(best))) {
            best = v;
            bi = ((long long)id * H + ih) * W + iw;
          }
        }
      }
    }
    y[yo] = fk_st(best);
#if FK_INDICES
    yi[yo] = bi;
#endif
#else
    // average
#if FK_KIND == 1
    int d0 = od * sd - pd, h0 = oh * sh - ph, w0 = ow * sw - pw;
    int d1 = min(d0 + kd, D + pd), h1 = min(h0 + kh, H + ph), w1 = min(w0 + kw, W + pw);
    const int padded = (d1 - d0) * (h1 - h0) * (w1 - w0);
    d0 = max(d0, 0); h0 = max(h0, 0); w0 = max(w0, 0);
    d1 = min(d1, D); h1 = min(h1, H); w1 = min(w1, W);
#else
    const int d0 = od * D / OD, h0 = oh * H / OH, w0 = ow * W / OW;
    const int d1 = ((od + 1) * D + OD - 1) / OD, h1 = ((oh + 1) * H + OH - 1) / OH, w1 = ((ow + 1) * W + OW - 1) / OW;
    const int padded = (d1 - d0) * (h1 - h0) * (w1 - w0);
#endif
    float s = 0.f;
    if (d0 < d1 && h0 < h1 && w0 < w1) {
      for (int id = d0; id < d1; ++id)
        for (int ih = h0; ih < h1; ++ih)
          for (int iw = w0; iw < w1; ++iw) s += fk_ld(xp[id * xd + ih * xh + iw * xw]);
      const float cnt = divisor != 0.f ? divisor : (countPad ? (float)padded : (float)((d1 - d0) * (h1 - h0) * (w1 - w0)));
      s /= cnt;
    }
    y[yo] = fk_st(s);
#endif
  }
}
`;

/** The pooling kernel for one dtype / kind / indices / output order. */
export function poolSource(spec: PoolSpec): GeneratedKernel {
  const head = `// fk_pool ${spec.kind} ${spec.dtype}${spec.indices ? ' +indices' : ''}${spec.channelsLast ? ' channels-last' : ''} (src/ops/conv/pool-source.ts)\n`;
  const prelude = [
    '#include <cuda_fp16.h>',
    '#include <cuda_bf16.h>',
    `typedef ${GEN_CTYPE[spec.dtype]} T;`,
    loadFn(spec.dtype, 'float').replace(`fk_ld_${spec.dtype}`, 'fk_ld'),
    storeFn(spec.dtype, 'float').replace(`fk_st_${spec.dtype}`, 'fk_st'),
    `#define FK_KIND ${POOL_KIND_CODE[spec.kind]}`,
    `#define FK_INDICES ${spec.indices ? 1 : 0}`,
    `#define FK_CL ${spec.channelsLast ? 1 : 0}`,
  ].join('\n');
  return { source: head + prelude + '\n' + BODY, entry: 'fk_pool', signature: POOL_SIGNATURE };
}
