/**
 * Running the layout kernels: gather / index_select, scatter / scatter_add, pad (reflect, replicate, circular),
 * interpolate, flip, tril / triu and one_hot. Kernels, their argument arrays and geometry structs are cached per numeric key (kind, dtypes, rank,
 * mode), so a launch after the first builds no string and compiles nothing. Outputs are fresh and contiguous; inputs
 * may have any strides (broadcast, transposed, sliced).
 */
import { CHANNELS_LAST_ORDER, Tensor, contiguousStrides, interpolatePlan, roundToDType, type InterpolateAttrs } from '@fastkernels/core';
import type { ArgValue } from '../../args.js';
import type { CudaKernel } from '../../kernel.js';
import type { CudaRuntime } from '../../runtime.js';
import { DCODE, genDType, type GenDType } from '../ctypes.js';
import { addr } from '../elementwise.js';
import type { GenKernelCache } from '../gen-cache.js';
import { Geo } from './geo.js';
import { gatherSource, scatterAccDType, scatterSource, type IndexDType } from './index-source.js';
import { channelsLastVec, interpolateScale } from './interpolate-plan.js';
import { interpolateChannelsLastSource, interpolateSource, type InterpolateSpec } from './interpolate-source.js';
import { padSource, type PadMode } from './pad-source.js';
import { flipSource, oneHotSource, triangleSource } from './remap-source.js';

interface Entry {
  readonly kernel: CudaKernel;
  readonly args: ArgValue[];
  readonly geo: Geo;
}

const PAD_CODE: Readonly<Record<PadMode, number>> = { reflect: 0, replicate: 1, circular: 2 };
const MODE_CODE: Readonly<Record<InterpolateSpec['mode'], number>> = { nearest: 0, 'nearest-exact': 1, linear: 2, bilinear: 3, bicubic: 4, trilinear: 5 };
const THREADS = 256;

export class LayoutOps {
  private readonly entries = new Map<number, Entry>();

  constructor(
    private readonly cache: GenKernelCache,
    private readonly runtime: () => CudaRuntime,
  ) {}

  /**
   * out[p] = x[p's coordinates with `dim` replaced by index[p]]: gather (index has out's shape) and index_select (the 1-D
   * index viewed over out's shape: its stride on the dim, 0 elsewhere). `idxStrides` are the index's strides over out.
   */
  gather(x: Tensor, index: Tensor, idxStrides: readonly number[], dim: number, out: Tensor): Tensor {
    const n = out.numel;
    if (n === 0) return out;
    const R = Math.max(1, out.rank);
    const id = index.dtype as IndexDType;
    const e = this.entry(1, (x.itemsize * 16 + DCODE[id]) * 16 + R, 6, 3 * R, 0, () => this.cache.kernel(`gather|${R}|${x.itemsize}|${id}`, () => gatherSource({ rank: R, itemsize: x.itemsize, index: id }), 'layout-generated'));
    const g = e.geo;
    const rank0 = x.rank === 0;
    for (let d = 0; d < R; d++) {
      g.i(d, out.rank === 0 ? 1 : out.shape[d]!);
      g.i(R + d, rank0 || d === dim ? 0 : x.strides[d]!);
      g.i(2 * R + d, out.rank === 0 ? 0 : idxStrides[d]!);
    }
    const a = e.args;
    a[0] = addr(out);
    a[1] = addr(x);
    a[2] = addr(index);
    a[3] = n;
    a[4] = rank0 ? 1 : x.shape[dim]!;
    a[5] = rank0 ? 0 : x.strides[dim]!;
    e.kernel.launch(this.grid(n), THREADS, 0, a);
    return out;
  }

  /**
   * A copy of x with src (a tensor or a scalar) written at index along dim; `add` accumulates (atomically, in f32 for
   * 16-bit floats: the order of the adds varies from run to run, as PyTorch's CUDA scatter_add).
   */
  scatter(x: Tensor, index: Tensor, src: Tensor | number, dim: number, add: boolean): Tensor {
    const xd = genDType(x.dtype, 'scatter');
    const accD: GenDType = add ? scatterAccDType(xd)! : xd;
    const out = Tensor.empty(x.backend, x.shape, x.dtype, { device: x.device });
    if (out.numel === 0) return out;
    const buf = accD === xd ? out : Tensor.empty(x.backend, x.shape, accD, { device: x.device });
    try {
      x.backend.ops.copy(buf, x);
      const n = index.numel;
      if (n > 0) {
        const R = index.rank;
        const sd = typeof src === 'number' ? null : genDType(src.dtype, 'scatter src');
        const id = index.dtype as IndexDType;
        const code = (((DCODE[accD] * 16 + (sd ? DCODE[sd] : 0)) * 16 + DCODE[id]) * 2 + (add ? 1 : 0)) * 16 + R;
        const e = this.entry(2, code, 7, 4 * R, 0, () => this.cache.kernel(`scatter|${R}|${accD}|${sd}|${id}|${add}`, () => scatterSource({ rank: R, outDType: accD, srcDType: sd, index: id, add }), 'layout-generated'));
        const g = e.geo;
        const os = contiguousStrides(x.shape);
        for (let d = 0; d < R; d++) {
          g.i(d, index.shape[d]!);
          g.i(R + d, d === dim ? 0 : os[d]!);
          g.i(2 * R + d, typeof src === 'number' ? 0 : src.strides[d]!);
          g.i(3 * R + d, index.strides[d]!);
        }
        const a = e.args;
        a[0] = addr(buf);
        a[1] = typeof src === 'number' ? 0 : addr(src);
        a[2] = addr(index);
        a[3] = n;
        a[4] = x.shape[dim]!;
        a[5] = os[dim]!;
        // a scalar rounds to the input's dtype first, as PyTorch casts it
        a[6] = typeof src === 'number' ? roundToDType(src, x.dtype) : 0;
        e.kernel.launch(this.grid(n), THREADS, 0, a);
      }
      if (buf !== out) x.backend.ops.copy(out, buf);
    } catch (err) {
      out.dispose();
      throw err;
    } finally {
      if (buf !== out) buf.dispose();
    }
    return out;
  }

  /** F.pad in a non-constant mode: `pad` = [last_left, last_right, prev_left, ...]. */
  pad(x: Tensor, pad: readonly number[], mode: PadMode, out: Tensor): Tensor {
    const n = out.numel;
    if (n === 0) return out;
    const R = Math.max(1, x.rank);
    const e = this.entry(3, (x.itemsize * 4 + PAD_CODE[mode]) * 16 + R, 3, 4 * R, 0, () => this.cache.kernel(`pad|${mode}|${R}|${x.itemsize}`, () => padSource({ rank: R, itemsize: x.itemsize, mode }), 'layout-generated'));
    const g = e.geo;
    for (let d = 0; d < R; d++) {
      const k = x.rank - 1 - d;
      g.i(d, x.rank === 0 ? 1 : out.shape[d]!);
      g.i(R + d, x.rank === 0 ? 1 : x.shape[d]!);
      g.i(2 * R + d, x.rank === 0 ? 0 : x.strides[d]!);
      g.i(3 * R + d, 2 * k < pad.length ? pad[2 * k]! : 0);
    }
    const a = e.args;
    a[0] = addr(out);
    a[1] = addr(x);
    a[2] = n;
    e.kernel.launch(this.grid(n), THREADS, 0, a);
    return out;
  }

  /**
   * F.interpolate of [N, C, *spatial] into `out`: contiguous, or channels-last (dense [N, *spatial, C] in memory, what
   * the op allocates for a channels-last x, as PyTorch) on the kernel that walks C in vectors.
   */
  interpolate(x: Tensor, attrs: InterpolateAttrs, out: Tensor): Tensor {
    const n = out.numel;
    if (n === 0) return out;
    const d = genDType(x.dtype, 'interpolate');
    const S = x.rank - 2;
    const ac = attrs.align_corners ?? false;
    const { scales } = interpolatePlan(x.shape, attrs);
    const code = ((DCODE[d] * 8 + MODE_CODE[attrs.mode]) * 2 + (ac ? 1 : 0)) * 4 + S;
    const cl = !out.isContiguous();
    if (cl && !denseChannelsLast(out)) throw new Error(`interpolate: internal error, output strides [${out.strides}] are neither contiguous nor channels-last`);
    const vec = cl ? channelsLastVec(x.shape, x.strides, x.itemsize, addr(x), addr(out)) : 1;
    const spec = { mode: attrs.mode, alignCorners: ac, spatial: S, dtype: d };
    const e = cl
      ? this.entry(8, code * 32 + vec, 3, 3 + 3 * S, S, () => this.cache.kernel(`interpolate-cl|${attrs.mode}|${ac}|${S}|${d}|${vec}`, () => interpolateChannelsLastSource({ ...spec, vec }), 'layout-generated'))
      : this.entry(4, code, 3, 3 + 3 * S, S, () => this.cache.kernel(`interpolate|${attrs.mode}|${ac}|${S}|${d}`, () => interpolateSource(spec), 'layout-generated'));
    const g = e.geo;
    g.i(0, x.shape[1]!);
    for (let k = 0; k < S; k++) {
      g.i(1 + k, out.shape[2 + k]!);
      g.i(1 + S + k, x.shape[2 + k]!);
      g.f(k, interpolateScale(attrs.mode, ac, x.shape[2 + k]!, out.shape[2 + k]!, scales[k]!));
    }
    for (let k = 0; k < S + 2; k++) g.i(1 + 2 * S + k, x.strides[k]!);
    const a = e.args;
    a[0] = addr(out);
    a[1] = addr(x);
    a[2] = n / vec;
    e.kernel.launch(this.grid(n / vec), THREADS, 0, a);
    return out;
  }

  /** out = x with the dims flagged in `flipped` (normalised, distinct) reversed. */
  flip(x: Tensor, flipped: readonly number[], out: Tensor): Tensor {
    const n = out.numel;
    if (n === 0) return out;
    const R = Math.max(1, x.rank);
    const e = this.entry(5, x.itemsize * 16 + R, 3, 3 * R, 0, () => this.cache.kernel(`flip|${R}|${x.itemsize}`, () => flipSource({ rank: R, itemsize: x.itemsize }), 'layout-generated'));
    const g = e.geo;
    for (let d = 0; d < R; d++) {
      g.i(d, x.rank === 0 ? 1 : x.shape[d]!);
      g.i(R + d, x.rank === 0 ? 0 : x.strides[d]!);
      g.i(2 * R + d, flipped.includes(d) ? 1 : 0);
    }
    return this.launchCopy(e, out, x, n);
  }

  /** tril (lower) / triu of the last two dims: (i, j) kept where j - i <= diagonal (tril) or >= diagonal (triu). */
  triangle(x: Tensor, lower: boolean, diagonal: number, out: Tensor): Tensor {
    const n = out.numel;
    if (n === 0) return out;
    const R = x.rank;
    const e = this.entry(6, (x.itemsize * 2 + (lower ? 1 : 0)) * 16 + R, 4, 2 * R, 0, () =>
      this.cache.kernel(`triangle|${lower}|${R}|${x.itemsize}`, () => triangleSource({ rank: R, itemsize: x.itemsize, lower }), 'layout-generated'));
    for (let d = 0; d < R; d++) {
      e.geo.i(d, x.shape[d]!);
      e.geo.i(R + d, x.strides[d]!);
    }
    e.args[3] = diagonal;
    return this.launchCopy(e, out, x, n);
  }

  /** out [..., classes] i64 = 1 where the last index equals x's class. */
  oneHot(x: Tensor, classes: number, out: Tensor): Tensor {
    const n = out.numel;
    if (n === 0) return out;
    const d = genDType(x.dtype, 'one_hot');
    const R = Math.max(1, x.rank);
    const e = this.entry(7, DCODE[d] * 16 + R, 4, 2 * R, 0, () => this.cache.kernel(`one_hot|${R}|${d}`, () => oneHotSource({ rank: R, dtype: d }), 'layout-generated'));
    for (let k = 0; k < R; k++) {
      e.geo.i(k, x.rank === 0 ? 1 : x.shape[k]!);
      e.geo.i(R + k, x.rank === 0 ? 0 : x.strides[k]!);
    }
    e.args[3] = classes;
    return this.launchCopy(e, out, x, n);
  }

  /** (out, x, n, ...) with the geometry already written. */
  private launchCopy(e: Entry, out: Tensor, x: Tensor, n: number): Tensor {
    e.args[0] = addr(out);
    e.args[1] = addr(x);
    e.args[2] = n;
    e.kernel.launch(this.grid(n), THREADS, 0, e.args);
    return out;
  }

  private grid(n: number): number {
    return Math.max(1, Math.min(Math.ceil(n / THREADS), this.runtime().properties().multiprocessors * 32));
  }

  /** The cached kernel of (kind, code < 2^24): nArgs scalar / pointer arguments, then the geometry struct of ni / nf slots. */
  private entry(kind: number, code: number, nArgs: number, ni: number, nf: number, make: () => CudaKernel): Entry {
    const key = kind * 16777216 + code;
    let e = this.entries.get(key);
    if (!e) {
      const geo = new Geo(ni, nf);
      const args = new Array<ArgValue>(nArgs + 1).fill(0);
      args[nArgs] = geo.bytes;
      e = { kernel: make(), args, geo };
      this.entries.set(key, e);
    }
    return e;
  }
}

/** Dense channels-last: [N, *spatial, C] packed in memory (size-1 dims' strides ignored). */
function denseChannelsLast(t: Tensor): boolean {
  const order = CHANNELS_LAST_ORDER[t.rank];
  if (!order) return false;
  let expect = 1;
  for (let k = order.length - 1; k >= 0; k--) {
    const dim = order[k]!;
    if (t.shape[dim]! !== 1 && t.strides[dim] !== expect) return false;
    expect *= t.shape[dim]!;
  }
  return true;
}
