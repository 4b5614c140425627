/** The reduction group of the op registry in float64 (sums accumulate in float64, results round once on store). */
import { reductionDims, roundToDType, type Backend, type DType, type OpCall, type OpKernelTable, type Shape, type Tensor, type TopkSoftmaxAttrs } from '@fastkernels/core';
import { gather, output } from '../strided.js';
import { topkSoftmax } from './moe-routing.js';

/** The input's values, rounded to `dtype` first when the op's dtype argument asks for a cast (PyTorch casts before). */
function valuesOf(x: Tensor, what: string, dtype?: DType): Float64Array {
  const v = gather(x, what);
  if (dtype !== undefined && dtype !== x.dtype) for (let i = 0; i < v.length; i++) v[i] = roundToDType(v[i]!, dtype);
  return v;
}

/** For each input element (row-major), the linear index of the output element it reduces into. */
function outIndex(shape: Shape, dims: readonly number[]): Int32Array {
  const rank = shape.length;
  const n = shape.reduce((a, b) => a * b, 1);
  const outStride = new Array<number>(rank).fill(0);
  let s = 1;
  for (let d = rank - 1; d >= 0; d--) {
    if (dims.includes(d)) continue;
    outStride[d] = s;
    s *= shape[d]!;
  }
  const map = new Int32Array(n);
  const idx = new Array<number>(rank).fill(0);
  let off = 0;
  for (let i = 0; i < n; i++) {
    map[i] = off;
    for (let d = rank - 1; d >= 0; d--) {
      idx[d]!++;
      off += outStride[d]!;
      if (idx[d]! < shape[d]!) break;
      off -= outStride[d]! * shape[d]!;
      idx[d] = 0;
    }
  }
  return map;
}

interface ReduceAttrs { dim: number | number[] | null; keepdim: boolean; dtype?: DType }

function reduce(backend: Backend, kind: 'sum' | 'mean' | 'amax' | 'amin') {
  return (call: OpCall<ReduceAttrs>): Tensor => {
    const x = call.inputs[0] as Tensor;
    const out = call.outputs[0]!;
    const dims = reductionDims(kind, x.shape, call.attrs.dim);
    const X = valuesOf(x, kind, call.attrs.dtype);
    const map = outIndex(x.shape, dims);
    const m = out.shape.reduce((a, b) => a * b, 1);
    const Y = new Float64Array(m).fill(kind === 'amax' ? -Infinity : kind === 'amin' ? Infinity : 0);
    if (kind === 'amax') for (let i = 0; i < X.length; i++) Y[map[i]!] = Math.max(Y[map[i]!]!, X[i]!);
    else if (kind === 'amin') for (let i = 0; i < X.length; i++) Y[map[i]!] = Math.min(Y[map[i]!]!, X[i]!);
    else for (let i = 0; i < X.length; i++) Y[map[i]!]! += X[i]!;
    if (kind === 'mean') {
      const count = dims.reduce((a, d) => a * x.shape[d]!, 1);
      for (let j = 0; j < m; j++) Y[j]! /= count; // 0 / 0 = NaN for an empty reduction, as torch.mean
    }
    return output(backend, out.shape, out.dtype, Y, kind);
  };
}

function variance(backend: Backend, sqrt = false) {
  return (call: OpCall<{ dim: number | number[] | null; correction: number; keepdim: boolean }>): Tensor => {
    const x = call.inputs[0] as Tensor;
    const out = call.outputs[0]!;
    const dims = reductionDims('var', x.shape, call.attrs.dim);
    const X = gather(x, 'var');
    const map = outIndex(x.shape, dims);
    const m = out.shape.reduce((a, b) => a * b, 1);
    const count = dims.reduce((a, d) => a * x.shape[d]!, 1);
    const mean = new Float64Array(m);
    for (let i = 0; i < X.length; i++) mean[map[i]!]! += X[i]!;
    for (let j = 0; j < m; j++) mean[j]! /= count;
    const Y = new Float64Array(m);
    for (let i = 0; i < X.length; i++) {
      const d = X[i]! - mean[map[i]!]!;
      Y[map[i]!]! += d * d;
    }
    const denom = Math.max(0, count - call.attrs.correction);
    for (let j = 0; j < m; j++) Y[j] = sqrt ? Math.sqrt(Y[j]! / denom) : Y[j]! / denom;
    return output(backend, out.shape, out.dtype, Y, sqrt ? 'std' : 'var');
  };
}

function logsumexp(backend: Backend) {
  return (call: OpCall<{ dim: number | number[] | null; keepdim: boolean }>): Tensor => {
    const x = call.inputs[0] as Tensor;
    const out = call.outputs[0]!;
    const dims = reductionDims('logsumexp', x.shape, call.attrs.dim);
    const X = gather(x, 'logsumexp');
    const map = outIndex(x.shape, dims);
    const m = out.shape.reduce((a, b) => a * b, 1);
    const max = new Float64Array(m).fill(-Infinity);
    for (let i = 0; i < X.length; i++) max[map[i]!] = Math.max(max[map[i]!]!, X[i]!);
    // an all -inf slice gives -inf (not NaN from inf - inf); +inf gives +inf
    for (let j = 0; j < m; j++) if (!Number.isFinite(max[j]!)) max[j] = Number.isNaN(max[j]!) ? NaN : 0;
    const sum = new Float64Array(m);
    for (let i = 0; i < X.length; i++) sum[map[i]!]! += Math.exp(X[i]! - max[map[i]!]!);
    const Y = new Float64Array(m);
    for (let j = 0; j < m; j++) Y[j] = Math.log(sum[j]!) + max[j]!;
    return output(backend, out.shape, out.dtype, Y, 'logsumexp');
  };
}

/** [outer, D, inner] of a tensor split at `dim` (a 0-d tensor is [1, 1, 1]). */
function around(shape: Shape, dim: number): [number, number, number] {
  if (shape.length === 0) return [1, 1, 1];
  const d = dim < 0 ? dim + shape.length : dim;
  const outer = shape.slice(0, d).reduce((a, b) => a * b, 1);
  const inner = shape.slice(d + 1).reduce((a, b) => a * b, 1);
  return [outer, shape[d]!, inner];
}

function argReduce(backend: Backend, largest: boolean) {
  const name = largest ? 'argmax' : 'argmin';
  // NaN wins (PyTorch returns the first NaN's index); otherwise strictly better, so ties keep the first index
  const better = (v: number, best: number) => !Number.isNaN(best) && (Number.isNaN(v) || (largest ? v > best : v < best));
  return (call: OpCall<{ dim: number | null; keepdim: boolean }>): Tensor => {
    const x = call.inputs[0] as Tensor;
    const out = call.outputs[0]!;
    const X = gather(x, name);
    const [outer, D, inner] = call.attrs.dim === null ? [1, X.length, 1] : around(x.shape, call.attrs.dim);
    const Y = new Float64Array(outer * inner);
    for (let o = 0; o < outer; o++) {
      for (let i = 0; i < inner; i++) {
        const base = o * D * inner + i;
        let best = X[base]!;
        let at = 0;
        for (let k = 1; k < D; k++) {
          const v = X[base + k * inner]!;
          if (better(v, best)) {
            best = v;
            at = k;
          }
        }
        Y[o * inner + i] = at;
      }
    }
    return output(backend, out.shape, 'i64', Y, name);
  };
}

function softmaxKernel(backend: Backend, log: boolean) {
  const name = log ? 'log_softmax' : 'softmax';
  return (call: OpCall<{ dim: number; dtype?: DType }>): Tensor => {
    const x = call.inputs[0] as Tensor;
    const out = call.outputs[0]!;
    const X = valuesOf(x, name, call.attrs.dtype);
    const [outer, D, inner] = around(x.shape, call.attrs.dim);
    const Y = new Float64Array(X.length);
    for (let o = 0; o < outer; o++) {
      for (let i = 0; i < inner; i++) {
        const base = o * D * inner + i;
        let max = -Infinity;
        for (let k = 0; k < D; k++) max = Math.max(max, X[base + k * inner]!);
        if (max === -Infinity) max = 0; // an all -inf row gives NaN (0/0) like torch, not a NaN from inf - inf
        let sum = 0;
        for (let k = 0; k < D; k++) sum += Math.exp(X[base + k * inner]! - max);
        const lse = Math.log(sum);
        for (let k = 0; k < D; k++) {
          const z = X[base + k * inner]! - max;
          Y[base + k * inner] = log ? z - lse : Math.exp(z) / sum;
        }
      }
    }
    return output(backend, out.shape, out.dtype, Y, name);
  };
}

function cumsum(backend: Backend) {
  return (call: OpCall<{ dim: number; dtype?: DType }>): Tensor => {
    const x = call.inputs[0] as Tensor;
    const out = call.outputs[0]!;
    const X = valuesOf(x, 'cumsum', call.attrs.dtype);
    const [outer, D, inner] = around(x.shape, call.attrs.dim);
    for (let o = 0; o < outer; o++) {
      for (let i = 0; i < inner; i++) {
        const base = o * D * inner + i;
        for (let k = 1; k < D; k++) X[base + k * inner]! += X[base + (k - 1) * inner]!;
      }
    }
    return output(backend, out.shape, out.dtype, X, 'cumsum');
  };
}

/** Order of two (value, index) pairs: descending puts NaN first, ascending last; equal values keep index order. */
function comparator(X: Float64Array, descending: boolean): (a: number, b: number) => number {
  return (a, b) => {
    const va = X[a]!;
    const vb = X[b]!;
    const na = Number.isNaN(va);
    const nb = Number.isNaN(vb);
    if (na || nb) {
      if (na && nb) return a - b;
      return (na ? 1 : -1) * (descending ? -1 : 1);
    }
    if (va !== vb) return descending ? vb - va : va - vb;
    return a - b;
  };
}

/** sort and topk: along dim, order each line and keep the first k. */
function ordered(backend: Backend, name: 'sort' | 'topk') {
  return (call: OpCall<{ dim: number; descending?: boolean; largest?: boolean; k?: number }>): Tensor[] => {
    const x = call.inputs[0] as Tensor;
    const [vMeta, iMeta] = call.outputs as [{ shape: Shape; dtype: DType }, { shape: Shape; dtype: DType }];
    const X = gather(x, name);
    const [outer, D, inner] = around(x.shape, call.attrs.dim);
    const k = name === 'topk' ? call.attrs.k! : D;
    const descending = name === 'topk' ? call.attrs.largest! : call.attrs.descending!;
    const V = new Float64Array(outer * k * inner);
    const I = new Float64Array(outer * k * inner);
    const line = new Float64Array(D);
    const cmp = comparator(line, descending);
    const order = new Array<number>(D);
    for (let o = 0; o < outer; o++) {
      for (let i = 0; i < inner; i++) {
        for (let j = 0; j < D; j++) {
          line[j] = X[o * D * inner + j * inner + i]!;
          order[j] = j;
        }
        order.sort(cmp);
        for (let j = 0; j < k; j++) {
          V[o * k * inner + j * inner + i] = line[order[j]!]!;
          I[o * k * inner + j * inner + i] = order[j]!;
        }
      }
    }
    return [output(backend, vMeta.shape, vMeta.dtype, V, name), output(backend, iMeta.shape, 'i64', I, name)];
  };
}

export function registerReductionKernels(table: OpKernelTable, backend: Backend): void {
  for (const k of ['sum', 'mean', 'amax', 'amin'] as const) table.register(k, reduce(backend, k));
  table.register('var', variance(backend));
  table.register('std', variance(backend, true));
  table.register('logsumexp', logsumexp(backend));
  table.register('argmax', argReduce(backend, true));
  table.register('argmin', argReduce(backend, false));
  table.register('softmax', softmaxKernel(backend, false));
  table.register('log_softmax', softmaxKernel(backend, true));
  table.register('cumsum', cumsum(backend));
  table.register('sort', ordered(backend, 'sort'));
  table.register('topk', ordered(backend, 'topk'));
  table.register('topk_softmax', (call: OpCall<TopkSoftmaxAttrs>) => topkSoftmax(backend, call.inputs[0] as Tensor, call.attrs));
}
