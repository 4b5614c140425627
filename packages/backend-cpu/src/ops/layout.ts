/**
 * The index-driven layout ops of the op registry (gather, index_select, scatter, scatter_add, one_hot, pad in every
 * mode, interpolate) on the host. Views, cat / stack / repeat / contiguous and pixel (un)shuffle need no kernel: core
 * builds them from Tensor views and the backend's strided copy.
 */
import {
  OpError, contiguousStrides, emptyLikeMemoryFormat, interpolatePlan, numel,
  type Backend, type InterpolateAttrs, type OpCall, type OpKernelTable, type Shape, type Tensor,
} from '@fastkernels/core';
import { gather, gatherInts, output, scatter } from '../strided.js';

/** Row-major multi-index of linear position `i` of `shape` into `idx`. */
function unravel(i: number, shape: Shape, idx: number[]): void {
  for (let d = shape.length - 1; d >= 0; d--) {
    const s = shape[d]!;
    idx[d] = i % s;
    i = Math.floor(i / s);
  }
}

function checkIndex(op: string, v: number, size: number, dim: number): void {
  if (!(v >= 0 && v < size)) throw new OpError(op, `index ${v} is out of bounds for dim ${dim} with size ${size}`);
}

const normDim = (dim: number, rank: number) => (dim < 0 ? dim + Math.max(rank, 1) : dim);

function gatherKernel(backend: Backend) {
  return (call: OpCall<{ dim: number }>): Tensor => {
    const x = call.inputs[0] as Tensor;
    const index = call.inputs[1] as Tensor;
    const out = call.outputs[0]!;
    const d = normDim(call.attrs.dim, x.rank);
    const X = gather(x, 'gather input');
    const I = gatherInts(index, 'gather index');
    const xs = contiguousStrides(x.shape);
    const idx = new Array<number>(index.rank).fill(0);
    const Y = new Float64Array(I.length);
    for (let i = 0; i < I.length; i++) {
      unravel(i, index.shape, idx);
      checkIndex('gather', I[i]!, x.rank === 0 ? 1 : x.shape[d]!, call.attrs.dim);
      let off = 0;
      for (let k = 0; k < x.rank; k++) off += (k === d ? I[i]! : idx[k]!) * xs[k]!;
      Y[i] = X[off]!;
    }
    return output(backend, out.shape, out.dtype, Y, 'gather');
  };
}

function indexSelectKernel(backend: Backend) {
  return (call: OpCall<{ dim: number }>): Tensor => {
    const x = call.inputs[0] as Tensor;
    const out = call.outputs[0]!;
    const I = gatherInts(call.inputs[1] as Tensor, 'index_select index');
    const X = gather(x, 'index_select input');
    if (x.rank === 0) {
      for (const v of I) checkIndex('index_select', v, 1, call.attrs.dim);
      return output(backend, out.shape, out.dtype, X, 'index_select');
    }
    const d = normDim(call.attrs.dim, x.rank);
    const outer = numel(x.shape.slice(0, d));
    const D = x.shape[d]!;
    const inner = numel(x.shape.slice(d + 1));
    for (const v of I) checkIndex('index_select', v, D, call.attrs.dim);
    const Y = new Float64Array(outer * I.length * inner);
    for (let o = 0; o < outer; o++) {
      for (let j = 0; j < I.length; j++) {
        const src = (o * D + I[j]!) * inner;
        const dst = (o * I.length + j) * inner;
        for (let k = 0; k < inner; k++) Y[dst + k] = X[src + k]!;
      }
    }
    return output(backend, out.shape, out.dtype, Y, 'index_select');
  };
}

function scatterKernel(backend: Backend, op: 'scatter' | 'scatter_add') {
  return (call: OpCall<{ dim: number; reduce?: 'add' | 'multiply' | null }>): Tensor => {
    const x = call.inputs[0] as Tensor;
    const index = call.inputs[1] as Tensor;
    const srcArg = call.inputs[2]!;
    const out = call.outputs[0]!;
    const d = normDim(call.attrs.dim, x.rank);
    const Y = gather(x, `${op} input`);
    const I = gatherInts(index, `${op} index`);
    const scalar = typeof srcArg === 'number' ? srcArg : undefined;
    const src = typeof srcArg === 'number' ? undefined : (srcArg as Tensor);
    const S = src ? gather(src, `${op} src`) : undefined;
    const ss = src ? contiguousStrides(src.shape) : [];
    const xs = contiguousStrides(x.shape);
    const reduce = op === 'scatter_add' ? 'add' : call.attrs.reduce ?? null;
    const idx = new Array<number>(index.rank).fill(0);
    for (let i = 0; i < I.length; i++) {
      unravel(i, index.shape, idx);
      checkIndex(op, I[i]!, x.shape[d]!, call.attrs.dim);
      let dst = 0;
      let so = 0;
      for (let k = 0; k < x.rank; k++) {
        dst += (k === d ? I[i]! : idx[k]!) * xs[k]!;
        so += idx[k]! * (ss[k] ?? 0);
      }
      const v = scalar ?? S![so]!;
      if (reduce === 'add') Y[dst]! += v;
      else if (reduce === 'multiply') Y[dst]! *= v;
      else Y[dst] = v;
    }
    return output(backend, out.shape, out.dtype, Y, op);
  };
}

function oneHotKernel(backend: Backend) {
  return (call: OpCall<{ num_classes: number }>): Tensor => {
    const x = call.inputs[0] as Tensor;
    const n = call.attrs.num_classes;
    const I = gatherInts(x, 'one_hot');
    const Y = new Float64Array(I.length * n);
    for (let i = 0; i < I.length; i++) {
      if (!(I[i]! >= 0 && I[i]! < n)) throw new OpError('one_hot', `class value ${I[i]} is outside [0, num_classes = ${n})`);
      Y[i * n + I[i]!] = 1;
    }
    return output(backend, call.outputs[0]!.shape, 'i64', Y, 'one_hot');
  };
}

/** For one padded dim: the source coordinate of each output coordinate, or -1 for the constant value. */
function padMap(size: number, left: number, outSize: number, mode: string): Int32Array {
  const m = new Int32Array(outSize);
  for (let o = 0; o < outSize; o++) {
    let s = o - left;
    if (mode === 'constant') s = s >= 0 && s < size ? s : -1;
    else if (mode === 'reflect') s = s < 0 ? -s : s >= size ? 2 * (size - 1) - s : s;
    else if (mode === 'replicate') s = Math.min(Math.max(s, 0), size - 1);
    else s = ((s % size) + size) % size; // circular
    m[o] = s;
  }
  return m;
}

function padKernel(backend: Backend) {
  return (call: OpCall<{ pad: number[]; mode: string; value: number | null }>): Tensor => {
    const x = call.inputs[0] as Tensor;
    const out = call.outputs[0]!;
    const X = gather(x, 'pad');
    const xs = contiguousStrides(x.shape);
    const maps = x.shape.map((size, d) => {
      const k = x.rank - 1 - d;
      const left = 2 * k < call.attrs.pad.length ? call.attrs.pad[2 * k]! : 0;
      return padMap(size, left, out.shape[d]!, call.attrs.mode);
    });
    const n = numel(out.shape);
    const Y = new Float64Array(n);
    const idx = new Array<number>(x.rank).fill(0);
    const value = call.attrs.value ?? 0;
    for (let i = 0; i < n; i++) {
      unravel(i, out.shape, idx);
      let off = 0;
      let fill = false;
      for (let d = 0; d < x.rank; d++) {
        const s = maps[d]![idx[d]!]!;
        if (s < 0) {
          fill = true;
          break;
        }
        off += s * xs[d]!;
      }
      Y[i] = fill ? value : X[off]!;
    }
    return output(backend, out.shape, out.dtype, Y, 'pad');
  };
}

/** Per output coordinate of one spatial dim: `taps` source coordinates and their weights (1, 2 or 4 taps). */
interface Axis { taps: number; idx: Int32Array; w: Float64Array }

/** PyTorch's cubic convolution coefficients (A = -0.75) for a fractional position t. */
function cubicCoefficients(t: number): [number, number, number, number] {
  const A = -0.75;
  const c1 = (x: number) => ((A + 2) * x - (A + 3)) * x * x + 1; // |x| <= 1
  const c2 = (x: number) => ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; // 1 < |x| < 2
  return [c2(t + 1), c1(t), c1(1 - t), c2(2 - t)];
}

function axis(mode: InterpolateAttrs['mode'], alignCorners: boolean, inSize: number, outSize: number, scale: number | null): Axis {
  if (mode === 'nearest' || mode === 'nearest-exact') {
    const a: Axis = { taps: 1, idx: new Int32Array(outSize), w: new Float64Array(outSize).fill(1) };
    // PyTorch computes the nearest source index in float32
    const sc = scale !== null && scale > 0 ? Math.fround(1 / scale) : Math.fround(inSize / outSize);
    for (let o = 0; o < outSize; o++) {
      if (mode === 'nearest') a.idx[o] = outSize === inSize ? o : outSize === 2 * inSize ? o >> 1 : Math.min(Math.floor(Math.fround(o * sc)), inSize - 1);
      else a.idx[o] = Math.min(Math.floor(Math.fround((o + 0.5) * sc)), inSize - 1);
    }
    return a;
  }
  const sc = alignCorners ? (outSize > 1 ? (inSize - 1) / (outSize - 1) : 0) : scale !== null && scale > 0 ? 1 / scale : inSize / outSize;
  if (mode === 'bicubic') {
    // no clamp of the source position at 0 (cubic), taps clamped into the input (replicate border)
    const a: Axis = { taps: 4, idx: new Int32Array(outSize * 4), w: new Float64Array(outSize * 4) };
    for (let o = 0; o < outSize; o++) {
      const src = alignCorners ? sc * o : sc * (o + 0.5) - 0.5;
      const i0 = Math.floor(src);
      const cf = cubicCoefficients(src - i0);
      for (let k = 0; k < 4; k++) {
        a.idx[o * 4 + k] = Math.min(Math.max(i0 - 1 + k, 0), inSize - 1);
        a.w[o * 4 + k] = cf[k]!;
      }
    }
    return a;
  }
  const a: Axis = { taps: 2, idx: new Int32Array(outSize * 2), w: new Float64Array(outSize * 2) };
  for (let o = 0; o < outSize; o++) {
    const src = alignCorners ? sc * o : Math.max(sc * (o + 0.5) - 0.5, 0);
    const i0 = Math.min(Math.floor(src), inSize - 1);
    const l1 = Math.min(Math.max(src - i0, 0), 1);
    a.idx[o * 2] = i0;
    a.idx[o * 2 + 1] = i0 + (i0 < inSize - 1 ? 1 : 0);
    a.w[o * 2] = 1 - l1;
    a.w[o * 2 + 1] = l1;
  }
  return a;
}

function interpolateKernel() {
  return (call: OpCall<InterpolateAttrs>): Tensor => {
    const x = call.inputs[0] as Tensor;
    const out = call.outputs[0]!;
    const X = gather(x, 'interpolate');
    const { scales } = interpolatePlan(x.shape, call.attrs);
    const inSp = x.shape.slice(2);
    const outSp = out.shape.slice(2);
    const axes = inSp.map((s, i) => axis(call.attrs.mode, call.attrs.align_corners ?? false, s, outSp[i]!, scales[i]!));
    const planes = x.shape[0]! * x.shape[1]!;
    const inPlane = numel(inSp);
    const outPlane = numel(outSp);
    const inStr = contiguousStrides(inSp);
    const nsp = inSp.length;
    const combos = axes.reduce((p, a) => p * a.taps, 1);
    const Y = new Float64Array(planes * outPlane);
    const idx = new Array<number>(nsp).fill(0);
    for (let p = 0; p < outPlane; p++) {
      unravel(p, outSp, idx);
      // every combination of one tap per spatial dim (the separable product of 1-D filters)
      for (let c = 0; c < combos; c++) {
        let w = 1;
        let off = 0;
        let rest = c;
        for (let k = nsp - 1; k >= 0; k--) {
          const ax = axes[k]!;
          const tap = rest % ax.taps;
          rest = Math.floor(rest / ax.taps);
          w *= ax.w[idx[k]! * ax.taps + tap]!;
          off += ax.idx[idx[k]! * ax.taps + tap]! * inStr[k]!;
        }
        if (w === 0) continue;
        for (let q = 0; q < planes; q++) Y[q * outPlane + p]! += w * X[q * inPlane + off]!;
      }
    }
    // in the input's memory format, as PyTorch's upsample: a channels-last net stays channels-last through its neck
    const y = emptyLikeMemoryFormat(x, out.shape, out.dtype);
    try {
      scatter(y, Y, 'interpolate');
    } catch (e) {
      y.dispose();
      throw e;
    }
    return y;
  };
}

function flipKernel(backend: Backend) {
  return (call: OpCall<{ dims: number[] }>): Tensor => {
    const x = call.inputs[0] as Tensor;
    const X = gather(x, 'flip');
    const flipped = new Set(call.attrs.dims.map((d) => normDim(d, x.rank)));
    const xs = contiguousStrides(x.shape);
    const idx = new Array<number>(x.rank).fill(0);
    const Y = new Float64Array(X.length);
    for (let i = 0; i < X.length; i++) {
      unravel(i, x.shape, idx);
      let off = 0;
      for (let d = 0; d < x.rank; d++) off += (flipped.has(d) ? x.shape[d]! - 1 - idx[d]! : idx[d]!) * xs[d]!;
      Y[i] = X[off]!;
    }
    return output(backend, x.shape, x.dtype, Y, 'flip');
  };
}

/** tril / triu over the last two dims: keep (i, j) when j - i <= diagonal (tril) or >= diagonal (triu). */
function triangleKernel(backend: Backend, lower: boolean) {
  return (call: OpCall<{ diagonal: number }>): Tensor => {
    const x = call.inputs[0] as Tensor;
    const Y = gather(x, lower ? 'tril' : 'triu');
    const [R, C] = x.shape.slice(-2) as [number, number];
    const k = call.attrs.diagonal;
    for (let b = 0; R * C > 0 && b < Y.length; b += R * C) {
      for (let i = 0; i < R; i++) for (let j = 0; j < C; j++) if (lower ? j - i > k : j - i < k) Y[b + i * C + j] = 0;
    }
    return output(backend, x.shape, x.dtype, Y, lower ? 'tril' : 'triu');
  };
}

export function registerLayoutKernels(table: OpKernelTable, backend: Backend): void {
  table.register('gather', gatherKernel(backend));
  table.register('index_select', indexSelectKernel(backend));
  table.register('scatter', scatterKernel(backend, 'scatter'));
  table.register('scatter_add', scatterKernel(backend, 'scatter_add'));
  table.register('one_hot', oneHotKernel(backend));
  table.register('pad', padKernel(backend));
  table.register('interpolate', interpolateKernel());
  table.register('flip', flipKernel(backend));
  table.register('tril', triangleKernel(backend, true));
  table.register('triu', triangleKernel(backend, false));
}
