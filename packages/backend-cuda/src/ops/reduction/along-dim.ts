/**
 * Running argmax / argmin, cumsum, var / std, sort and topk on the generated line kernels. Kernels and their argument arrays are
 * cached per numeric key (op, dtypes, threads a line), so a launch after the first builds no string and compiles
 * nothing; the per-call work is the line plan (lines.ts), a contiguous copy for layouts it cannot walk, and the launch.
 */
import { Tensor } from '@fastkernels/core';
import type { ArgValue } from '../../args.js';
import type { CudaKernel } from '../../kernel.js';
import type { CudaRuntime } from '../../runtime.js';
import { DCODE, genDType, type GenDType } from '../ctypes.js';
import { addr } from '../elementwise.js';
import { planReduce } from '../reduce-plan.js';
import type { GenKernelCache } from '../gen-cache.js';
import { argReduceSource } from './arg-source.js';
import { cumsumSource } from './cumsum-source.js';
import { contiguousLines, lineThreads, planLines, type Lines } from './lines.js';
import { planLongSort, planSort, sortThreads, type SortStage } from './sort-plan.js';
import { longSortSource, type LongSortEntry } from './long-sort-source.js';
import { SORT_MAX, keyBytes, sortSource } from './sort-source.js';
import { varSource } from './var-source.js';

interface Entry {
  readonly kernel: CudaKernel;
  readonly args: ArgValue[];
}

export class AlongDimOps {
  private readonly entries = new Map<number, Entry>();

  constructor(
    private readonly cache: GenKernelCache,
    private readonly runtime: () => CudaRuntime,
  ) {}

  /** out (i64, contiguous, the lines' count) = argmax / argmin along dim; dim null: over the flattened input. */
  argReduce(x: Tensor, dim: number | null, largest: boolean, out: Tensor): Tensor {
    if (out.numel === 0) return out;
    const d = genDType(x.dtype, largest ? 'argmax' : 'argmin');
    return this.withLines(x, dim, (src, l) => {
      const t = lineThreads(l, this.sms());
      const e = this.entry(((1 + (largest ? 1 : 0)) * 16 + DCODE[d]) * 2048 + t.tpr, 8, () =>
        this.cache.kernel(`argreduce|${largest}|${d}|${t.tpr}|${t.block}`, () => argReduceSource({ largest, dtype: d, tpr: t.tpr, block: t.block }), 'argreduce-generated'));
      launchLines(e, t, out, src, l);
      return out;
    });
  }

  /** out (contiguous, x's shape, the output dtype) = inclusive prefix sums of x along dim. */
  cumsum(x: Tensor, dim: number, out: Tensor): Tensor {
    if (out.numel === 0) return out;
    const inD = genDType(x.dtype, 'cumsum');
    const outD = genDType(out.dtype, 'cumsum');
    return this.withLines(x, dim, (src, l) => {
      const t = lineThreads(l, this.sms());
      const e = this.entry(((3 * 16 + DCODE[inD]) * 16 + DCODE[outD]) * 2048 + t.tpr, 8, () =>
        this.cache.kernel(`cumsum|${inD}>${outD}|${t.tpr}|${t.block}`, () => cumsumSource({ inDType: inD, outDType: outD, tpr: t.tpr, block: t.block }), 'cumsum-generated'));
      launchLines(e, t, out, src, l);
      return out;
    });
  }

  /**
   * out (contiguous, the kept dims in order) = var (or std) over `dims` (sorted, unique) with `correction`. The reduced
   * dims are walked in place where they form rows or columns (reduce-plan.ts), else copied with the kept dims first.
   */
  variance(x: Tensor, dims: readonly number[], correction: number, sqrt: boolean, out: Tensor): Tensor {
    if (out.numel === 0) return out;
    const d = genDType(x.dtype, sqrt ? 'std' : 'var');
    const N = dims.reduce((a, k) => a * x.shape[k]!, 1);
    if (N === 0) {
      out.backend.ops.fill(out, NaN); // 0 / 0, as the reference's mean of nothing
      return out;
    }
    const denom = Math.max(0, N - correction);
    const p = planReduce(x.shape, x.strides, dims);
    const run = (src: Tensor, l: Lines) => {
      const t = lineThreads(l, this.sms());
      const e = this.entry(((6 * 16 + DCODE[d]) * 2 + (sqrt ? 1 : 0)) * 2048 + t.tpr, 9, () =>
        this.cache.kernel(`var|${sqrt}|${d}|${t.tpr}|${t.block}`, () => varSource({ dtype: d, sqrt, tpr: t.tpr, block: t.block }), 'var-generated'));
      e.args[8] = denom;
      launchLines(e, t, out, src, l);
      return out;
    };
    if (p.kind === 'rows') return run(x, { outer: p.rows, D: p.D, inner: 1, sO: p.rowStride, sD: 1, sI: 0 });
    if (p.kind === 'columns') return run(x, { outer: p.outer, D: p.R, inner: p.inner, sO: p.sOuter, sD: p.sR, sI: 1 });
    const kept = x.shape.map((_, k) => k).filter((k) => !dims.includes(k));
    const view = x.permute([...kept, ...dims]);
    const c = view.contiguous();
    view.dispose();
    try {
      return run(c, { outer: p.rows, D: p.D, inner: 1, sO: p.D, sD: 1, sI: 0 });
    } finally {
      c.dispose();
    }
  }

  /** Whether a sort / topk of k along a dim of D elements is supported (a reason when not). */
  static sortSupport(D: number, k: number): true | string {
    if (typeof planSort(D, k) !== 'string') return true;
    const long = planLongSort(D);
    return typeof long === 'string' ? long : true;
  }

  /**
   * values / indices (contiguous, x's shape with dim of size k) = the k first of x's line along dim in the wanted order
   * (sort: k = the dim's size). Ties keep the lower index first; NaN is the largest.
   */
  sort(x: Tensor, dim: number, k: number, descending: boolean, values: Tensor, indices: Tensor): [Tensor, Tensor] {
    if (values.numel === 0) return [values, indices];
    const d = genDType(x.dtype, 'sort');
    const D = x.rank === 0 ? 1 : x.shape[dim]!;
    const stages = planSort(D, k);
    if (typeof stages === 'string') return this.longSort(x, dim, d, k, descending, values, indices);
    const e = this.entry((4 * 16 + DCODE[d]) * 2048 + (descending ? 1 : 0), 13, () =>
      this.cache.kernel(`sort|${d}|${descending}`, () => sortSource({ dtype: d, descending }), 'sort-generated'));
    return this.withLines(x, dim, (src, l) => {
      // stage outputs but the last are temporaries, freed when the sort ends (or throws)
      const temps: Tensor[] = [];
      const temp = (shape: number[], dtype: Tensor['dtype']) => {
        const t = Tensor.empty(x.backend, shape, dtype, { device: x.device });
        temps.push(t);
        return t;
      };
      try {
        let curV = src;
        let curI: Tensor | null = null;
        let lines = l;
        for (let n = 0; n < stages.length; n++) {
          const s = stages[n]!;
          const last = n === stages.length - 1;
          const shape = [lines.outer, s.nSeg * s.K, lines.inner];
          const v = last ? values : temp(shape, x.dtype);
          const i = last ? indices : temp(shape, 'i64');
          launchSort(e, s, v, i, curV, curI, lines, keyBytes(d));
          curV = v;
          curI = i;
          lines = contiguousLines(shape, 1);
        }
      } finally {
        for (const t of temps) t.dispose();
      }
      return [values, indices];
    });
  }

  /** sort / topk of lines longer than a block's shared memory: the bitonic network over pairs in global memory. */
  private longSort(x: Tensor, dim: number, d: GenDType, k: number, descending: boolean, values: Tensor, indices: Tensor): [Tensor, Tensor] {
    const plan = planLongSort(x.shape[dim]!);
    if (typeof plan === 'string') throw new RangeError(`sort / topk: ${plan}`);
    const kernel = (entry: LongSortEntry, n: number, nArgs: number) =>
      this.entry((5 * 16 + DCODE[d]) * 2048 + (descending ? 1 : 0) * 4 + n, nArgs, () =>
        this.cache.kernel(`lsort|${d}|${descending}|${entry}`, () => longSortSource(d, descending, entry), 'sort-generated'));
    const [init, local, global, out] = [kernel('fk_lsort_init', 0, 10), kernel('fk_lsort_local', 1, 5), kernel('fk_lsort_global', 2, 6), kernel('fk_lsort_out', 3, 11)];
    return this.withLines(x, dim, (src, l) => {
      const lines = l.outer * l.inner;
      const P = plan.P;
      const keys = Tensor.empty(x.backend, [lines, P], keyBytes(d) === 8 ? 'i64' : 'i32', { device: x.device });
      const pos = Tensor.empty(x.backend, [lines, P], 'i32', { device: x.device });
      try {
        const grid = (n: number) => Math.max(1, Math.min(Math.ceil(n / 256), this.sms() * 32));
        launch(init, grid(lines * P), 256, [addr(keys), addr(pos), addr(src), lines, l.inner, l.D, l.sO, l.sD, l.sI, P]);
        for (const s of plan.steps) {
          if (s.local) launch(local, lines * (P / SORT_MAX), 1024, [addr(keys), addr(pos), P, s.kLo, s.kHi]);
          else launch(global, grid((lines * P) / 2), 256, [addr(keys), addr(pos), lines, P, s.k, s.j]);
        }
        launch(out, grid(lines * k), 256, [addr(values), addr(indices), addr(src), addr(pos), lines, l.inner, l.sO, l.sD, l.sI, P, k]);
      } finally {
        keys.dispose();
        pos.dispose();
      }
      return [values, indices];
    });
  }

  /** Run `f` on x's lines along dim (a contiguous copy first when its layout does not split into lines). */
  private withLines<R>(x: Tensor, dim: number | null, f: (src: Tensor, l: Lines) => R): R {
    if (dim === null) {
      const c = x.contiguous();
      try {
        return f(c, { outer: 1, D: c.numel, inner: 1, sO: 0, sD: 1, sI: 0 });
      } finally {
        c.dispose();
      }
    }
    const l = planLines(x.shape, x.strides, dim);
    if (l) return f(x, l);
    const c = x.contiguous();
    try {
      return f(c, contiguousLines(c.shape, dim));
    } finally {
      c.dispose();
    }
  }

  private sms(): number {
    return this.runtime().properties().multiprocessors;
  }

  private entry(code: number, nArgs: number, make: () => CudaKernel): Entry {
    let e = this.entries.get(code);
    if (!e) this.entries.set(code, (e = { kernel: make(), args: new Array<ArgValue>(nArgs).fill(0) }));
    return e;
  }
}

/** Write `vals` into the entry's reused argument array and launch. */
function launch(e: Entry, grid: number, block: number, vals: readonly ArgValue[]): void {
  for (let i = 0; i < vals.length; i++) e.args[i] = vals[i]!;
  e.kernel.launch(grid, block, 0, e.args);
}

/** (out, x, lines, inner, D, sO, sD, sI) */
function launchLines(e: Entry, t: { block: number; grid: number }, out: Tensor, x: Tensor, l: Lines): void {
  const a = e.args;
  a[0] = addr(out);
  a[1] = addr(x);
  a[2] = l.outer * l.inner;
  a[3] = l.inner;
  a[4] = l.D;
  a[5] = l.sO;
  a[6] = l.sD;
  a[7] = l.sI;
  e.kernel.launch(t.grid, t.block, 0, a);
}

/** (outV, outI, x, xIdx, inner, D, sO, sD, sI, K, segLen, nSeg, P); a block a (line, segment). */
function launchSort(e: Entry, s: SortStage, v: Tensor, i: Tensor, x: Tensor, xIdx: Tensor | null, l: Lines, keyBytes: number): void {
  const a = e.args;
  a[0] = addr(v);
  a[1] = addr(i);
  a[2] = addr(x);
  a[3] = xIdx ? addr(xIdx) : 0;
  a[4] = l.inner;
  a[5] = s.D;
  a[6] = l.sO;
  a[7] = l.sD;
  a[8] = l.sI;
  a[9] = s.K;
  a[10] = s.segLen;
  a[11] = s.nSeg;
  a[12] = s.P;
  e.kernel.launch(l.outer * l.inner * s.nSeg, sortThreads(s.P), s.P * (keyBytes + 4), a);
}
