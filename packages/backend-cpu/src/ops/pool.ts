/**
 * Pooling in float64 with PyTorch's semantics: max_pool{1,2,3}d (dilation, ceil_mode, indices), avg_pool{1,2,3}d
 * (count_include_pad, ceil_mode, divisor_override) and adaptive avg / max pooling (1-D, 2-D; 3-D comes free).
 * Inputs are [N, C, *spatial] or unbatched [C, *spatial], any strides. Like conv.ts, every rank runs a 3-D loop.
 */
import { formatShape, type Backend, type Tensor } from '@fastkernels/core';
import { output } from '../strided.js';
import { ntuple, readSpatial, to3, type IntOrTuple } from './conv.js';

export interface MaxPoolOptions {
  readonly kernel_size: IntOrTuple;
  /** Default: kernel_size (torch's stride=None). */
  readonly stride?: IntOrTuple | null;
  readonly padding?: IntOrTuple;
  readonly dilation?: IntOrTuple;
  readonly ceil_mode?: boolean;
}

export interface AvgPoolOptions {
  readonly kernel_size: IntOrTuple;
  readonly stride?: IntOrTuple | null;
  readonly padding?: IntOrTuple;
  readonly ceil_mode?: boolean;
  /** Count the zero padding in the divisor (default true, as torch). */
  readonly count_include_pad?: boolean;
  /** Divide every window by this instead (avg_pool2d / 3d only, as torch). */
  readonly divisor_override?: number | null;
}

/** torch's pooling_output_shape: the last window must start inside the input or the left padding. */
function pooledSize(what: string, size: number, k: number, pad: number, stride: number, dilation: number, ceil: boolean): number {
  const span = size + 2 * pad - dilation * (k - 1) - 1 + (ceil ? stride - 1 : 0);
  let out = Math.floor(span / stride) + 1;
  if (ceil && (out - 1) * stride >= size + pad) out--;
  if (out < 1) throw new RangeError(`${what}: output size is too small (input ${size}, kernel ${k}, padding ${pad}, stride ${stride}, dilation ${dilation} give ${out})`);
  return out;
}

interface Geometry {
  readonly k: [number, number, number];
  readonly s: [number, number, number];
  readonly p: [number, number, number];
  readonly d: [number, number, number];
  readonly out: [number, number, number];
  readonly outSp: number[];
}

function geometry(what: string, nd: number, S: readonly number[], o: { kernel_size: IntOrTuple; stride?: IntOrTuple | null; padding?: IntOrTuple; dilation?: IntOrTuple; ceil_mode?: boolean }): Geometry {
  const k = ntuple(what, 'kernel_size', o.kernel_size, nd, 1);
  const emptyStride = o.stride === undefined || o.stride === null || (Array.isArray(o.stride) && o.stride.length === 0);
  const s = emptyStride ? k : ntuple(what, 'stride', o.stride!, nd, 1);
  const p = ntuple(what, 'padding', o.padding ?? 0, nd, 0);
  const d = ntuple(what, 'dilation', o.dilation ?? 1, nd, 1);
  p.forEach((pi, i) => {
    if (pi > Math.floor(k[i]! / 2)) throw new RangeError(`${what}: padding ${JSON.stringify(p)} should be at most half of kernel_size ${JSON.stringify(k)}`);
  });
  const sp = S.slice(3 - nd);
  const outSp = sp.map((size, i) => pooledSize(what, size, k[i]!, p[i]!, s[i]!, d[i]!, o.ceil_mode ?? false));
  return { k: to3(k, 1), s: to3(s, 1), p: to3(p, 0), d: to3(d, 1), out: to3(outSp, 1), outSp };
}

function maxPoolImpl(backend: Backend, nd: 1 | 2 | 3, input: Tensor, options: MaxPoolOptions): [Tensor, Tensor] {
  const what = `max_pool${nd}d`;
  const { X, N, C, S, batched } = readSpatial(what, input, nd);
  const g = geometry(what, nd, S, options);
  const [ID, IH, IW] = S;
  const [OD, OH, OW] = g.out;
  const Y = new Float64Array(N * C * OD * OH * OW);
  const I = new Float64Array(Y.length);
  let yo = 0;
  for (let nc = 0; nc < N * C; nc++) {
    const x0 = nc * ID * IH * IW;
    for (let od = 0; od < OD; od++) {
      for (let oh = 0; oh < OH; oh++) {
        for (let ow = 0; ow < OW; ow++, yo++) {
          let best = -Infinity;
          let bestIdx = -1;
          for (let kd = 0; kd < g.k[0]; kd++) {
            const id = od * g.s[0] - g.p[0] + kd * g.d[0];
            if (id < 0 || id >= ID) continue;
            for (let kh = 0; kh < g.k[1]; kh++) {
              const ih = oh * g.s[1] - g.p[1] + kh * g.d[1];
              if (ih < 0 || ih >= IH) continue;
              for (let kw = 0; kw < g.k[2]; kw++) {
                const iw = ow * g.s[2] - g.p[2] + kw * g.d[2];
                if (iw < 0 || iw >= IW) continue;
                const idx = (id * IH + ih) * IW + iw;
                const v = X[x0 + idx]!;
                // NaN wins and stays (torch propagates it); the first valid element seeds the index
                if (bestIdx < 0 || v > best || (Number.isNaN(v) && !Number.isNaN(best))) {
                  best = v;
                  bestIdx = idx;
                }
              }
            }
          }
          Y[yo] = best;
          I[yo] = bestIdx;
        }
      }
    }
  }
  const shape = [N, C, ...g.outSp];
  const outShape = batched ? shape : shape.slice(1);
  const out = output(backend, outShape, input.dtype, Y, what);
  return [out, output(backend, outShape, 'i64', I, what)];
}

/** F.max_pool{nd}d(input, kernel_size, stride, padding, dilation, ceil_mode); padding is -inf. */
export function maxPoolNd(backend: Backend, nd: 1 | 2 | 3, input: Tensor, options: MaxPoolOptions): Tensor {
  const [out, idx] = maxPoolImpl(backend, nd, input, options);
  idx.dispose();
  return out;
}

/** max_pool with return_indices=True: [out, indices (i64, flat over each input plane, as torch)]. */
export function maxPoolNdWithIndices(backend: Backend, nd: 1 | 2 | 3, input: Tensor, options: MaxPoolOptions): [Tensor, Tensor] {
  return maxPoolImpl(backend, nd, input, options);
}

/** F.avg_pool{nd}d(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override). */
export function avgPoolNd(backend: Backend, nd: 1 | 2 | 3, input: Tensor, options: AvgPoolOptions): Tensor {
  const what = `avg_pool${nd}d`;
  const div = options.divisor_override ?? null;
  if (div !== null && (nd === 1 || !Number.isFinite(div) || div === 0)) {
    throw new RangeError(nd === 1 ? `${what}: has no divisor_override (torch's avg_pool1d neither)` : `${what}: divisor_override must be a non-zero number, got ${div}`);
  }
  const includePad = options.count_include_pad ?? true;
  const { X, N, C, S, batched } = readSpatial(what, input, nd);
  const g = geometry(what, nd, S, { ...options, dilation: 1 });
  const [ID, IH, IW] = S;
  const [OD, OH, OW] = g.out;
  const Y = new Float64Array(N * C * OD * OH * OW);
  let yo = 0;
  for (let nc = 0; nc < N * C; nc++) {
    const x0 = nc * ID * IH * IW;
    for (let od = 0; od < OD; od++) {
      for (let oh = 0; oh < OH; oh++) {
        for (let ow = 0; ow < OW; ow++, yo++) {
          // window clipped to the padded input (counted with count_include_pad), then to the input itself
          let d0 = od * g.s[0] - g.p[0];
          let h0 = oh * g.s[1] - g.p[1];
          let w0 = ow * g.s[2] - g.p[2];
          let d1 = Math.min(d0 + g.k[0], ID + g.p[0]);
          let h1 = Math.min(h0 + g.k[1], IH + g.p[1]);
          let w1 = Math.min(w0 + g.k[2], IW + g.p[2]);
          const poolSize = (d1 - d0) * (h1 - h0) * (w1 - w0);
          d0 = Math.max(d0, 0);
          h0 = Math.max(h0, 0);
          w0 = Math.max(w0, 0);
          d1 = Math.min(d1, ID);
          h1 = Math.min(h1, IH);
          w1 = Math.min(w1, IW);
          if (d0 >= d1 || h0 >= h1 || w0 >= w1) continue; // a window wholly in the ceil overhang: 0, as torch
          let s = 0;
          for (let id = d0; id < d1; id++) for (let ih = h0; ih < h1; ih++) for (let iw = w0; iw < w1; iw++) s += X[x0 + (id * IH + ih) * IW + iw]!;
          Y[yo] = s / (div ?? (includePad ? poolSize : (d1 - d0) * (h1 - h0) * (w1 - w0)));
        }
      }
    }
  }
  const shape = [N, C, ...g.outSp];
  return output(backend, batched ? shape : shape.slice(1), input.dtype, Y, what);
}

/** output_size: an int, or a tuple whose null entries keep the input's size (torch's None). */
export type AdaptiveSize = number | readonly (number | null)[];

function adaptiveImpl(backend: Backend, nd: 1 | 2 | 3, input: Tensor, outputSize: AdaptiveSize, kind: 'avg' | 'max'): [Tensor, Tensor | null] {
  const what = `adaptive_${kind}_pool${nd}d`;
  const { X, N, C, S, batched } = readSpatial(what, input, nd);
  const sp = S.slice(3 - nd);
  if (sp.some((d) => d === 0)) throw new RangeError(`${what}: input ${formatShape(input.shape)} has an empty spatial dim`);
  const raw = typeof outputSize === 'number' ? new Array<number>(nd).fill(outputSize) : [...outputSize];
  if (raw.length !== nd) throw new RangeError(`${what}: output_size must be an int or a tuple of ${nd}, got ${JSON.stringify(outputSize)}`);
  const outSp = raw.map((o, i) => (o === null ? sp[i]! : o));
  if (outSp.some((o) => !Number.isInteger(o) || o < 0)) throw new RangeError(`${what}: output_size ${JSON.stringify(outputSize)} must be non-negative ints`);
  const [ID, IH, IW] = S;
  const [OD, OH, OW] = to3(outSp, 1);
  // window o of an adaptive pool covers [floor(o * I / O), ceil((o + 1) * I / O))
  const lo = (o: number, I: number, O: number) => Math.floor((o * I) / O);
  const hi = (o: number, I: number, O: number) => Math.ceil(((o + 1) * I) / O);
  const Y = new Float64Array(N * C * OD * OH * OW);
  const Iv = kind === 'max' ? new Float64Array(Y.length) : null;
  let yo = 0;
  for (let nc = 0; nc < N * C; nc++) {
    const x0 = nc * ID * IH * IW;
    for (let od = 0; od < OD; od++) {
      const d0 = lo(od, ID, OD);
      const d1 = hi(od, ID, OD);
      for (let oh = 0; oh < OH; oh++) {
        const h0 = lo(oh, IH, OH);
        const h1 = hi(oh, IH, OH);
        for (let ow = 0; ow < OW; ow++, yo++) {
          const w0 = lo(ow, IW, OW);
          const w1 = hi(ow, IW, OW);
          let acc = kind === 'max' ? -Infinity : 0;
          let bestIdx = -1;
          for (let id = d0; id < d1; id++) {
            for (let ih = h0; ih < h1; ih++) {
              for (let iw = w0; iw < w1; iw++) {
                const idx = (id * IH + ih) * IW + iw;
                const v = X[x0 + idx]!;
                if (kind === 'avg') acc += v;
                else if (bestIdx < 0 || v > acc || (Number.isNaN(v) && !Number.isNaN(acc))) {
                  acc = v;
                  bestIdx = idx;
                }
              }
            }
          }
          Y[yo] = kind === 'avg' ? acc / ((d1 - d0) * (h1 - h0) * (w1 - w0)) : acc;
          if (Iv) Iv[yo] = bestIdx;
        }
      }
    }
  }
  const shape = [N, C, ...outSp];
  const outShape = batched ? shape : shape.slice(1);
  const out = output(backend, outShape, input.dtype, Y, what);
  return [out, Iv ? output(backend, outShape, 'i64', Iv, what) : null];
}

/** F.adaptive_avg_pool{nd}d(input, output_size). */
export function adaptiveAvgPoolNd(backend: Backend, nd: 1 | 2 | 3, input: Tensor, outputSize: AdaptiveSize): Tensor {
  return adaptiveImpl(backend, nd, input, outputSize, 'avg')[0];
}

/** F.adaptive_max_pool{nd}d(input, output_size); with indices when asked (return_indices=True). */
export function adaptiveMaxPoolNd(backend: Backend, nd: 1 | 2 | 3, input: Tensor, outputSize: AdaptiveSize): Tensor {
  const [out, idx] = adaptiveImpl(backend, nd, input, outputSize, 'max');
  idx!.dispose();
  return out;
}

export function adaptiveMaxPoolNdWithIndices(backend: Backend, nd: 1 | 2 | 3, input: Tensor, outputSize: AdaptiveSize): [Tensor, Tensor] {
  const [out, idx] = adaptiveImpl(backend, nd, input, outputSize, 'max');
  return [out, idx!];
}
