/**
 * Running the generated reductions: sum / mean / amax / amin over any dims (with an optional elementwise prologue; rows,
 * or columns of [outer, R, inner] in place, R split across CTAs in two launches only when even narrowed tiles cannot
 * fill the device and R is long) and softmax / log_softmax along one dim. Kernels are cached per (op, prologue, dtypes,
 * layout, launch shape) in the GenKernelCache; the per-call work is the layout plan (reduce-plan.ts) and the launch.
 */
import { Tensor, type DType } from '@fastkernels/core';
import type { CudaKernel } from '../kernel.js';
import type { CudaRuntime } from '../runtime.js';
import { DCODE, GEN_ITEMSIZE, computeType, genDType, type GenDType } from './ctypes.js';
import { addr } from './elementwise.js';
import { exprKey, type Expr } from './expr.js';
import type { GenKernelCache } from './gen-cache.js';
import { columnVec, planColumns, planReduce, rowLaunch, rowVec, splitRows, type ColumnLaunch, type ReducePlan } from './reduce-plan.js';
import { columnReduceSource, rowReduceSource, rowSoftmaxSource, type ReduceOp } from './reduce-source.js';

const OP_CODE: Readonly<Record<ReduceOp, number>> = { sum: 0, mean: 1, amax: 2, amin: 3 };

export class GeneratedReductions {
  /** Row kernels without a prologue and softmax kernels by a numeric key (no string work per launch). */
  private readonly rowKernels = new Map<number, CudaKernel>();
  /** Column kernels without a prologue by a numeric key of (op, dtypes, vec, tx, ty). */
  private readonly colKernels = new Map<number, CudaKernel>();

  constructor(
    private readonly cache: GenKernelCache,
    private readonly runtime: () => CudaRuntime,
  ) {}

  /**
   * out (contiguous, the kept dims in order; keepdim's size-1 dims change nothing) = op over `dims` of pro(x).
   * An empty reduction gives the identity: 0 for sum, NaN for mean (amax / amin of nothing is refused by infer).
   */
  reduce(op: ReduceOp, x: Tensor, dims: readonly number[], out: Tensor, prologue?: Expr): Tensor {
    if (out.numel === 0) return out;
    const inD = genDType(x.dtype, op);
    const outD = genDType(out.dtype, op);
    if (x.numel === 0) {
      out.backend.ops.fill(out, op === 'mean' ? NaN : 0);
      return out;
    }
    const sms = this.runtime().properties().multiprocessors;
    const proKey = prologue ? exprKey(prologue) : '';
    const p = planReduce(x.shape, x.strides, dims);
    if (p.kind === 'columns') {
      this.columns(op, prologue, proKey, x, out, p, sms);
      return out;
    }
    let src = x;
    let rowStride = p.kind === 'rows' ? p.rowStride : p.D;
    let tmp: Tensor | undefined;
    if (p.kind === 'copy') {
      const kept = x.shape.map((_, d) => d).filter((d) => !dims.includes(d));
      const view = x.permute([...kept, ...dims]);
      tmp = view.contiguous();
      view.dispose();
      src = tmp;
      rowStride = p.D;
    }
    try {
      const S = splitRows(p.rows, p.D, rowStride, sms);
      if (S === 1) {
        this.rows(op, prologue, proKey, src, out, p.rows, p.D, rowStride, 1, sms);
      } else {
        // few long rows: S pieces a row into partials (the accumulation type), then the partials of each row
        const acc: GenDType = computeType([inD, outD]) === 'double' ? 'f64' : 'f32';
        const part = Tensor.empty(x.backend, [p.rows * S], acc, { device: x.device });
        try {
          const first = op === 'mean' ? 'sum' : op;
          this.rows(first, prologue, proKey, src, part, p.rows * S, p.D / S, p.D / S, 1, sms);
          this.rows(first, undefined, '', part, out, p.rows, S, S, op === 'mean' ? 1 / p.D : 1, sms);
        } finally {
          part.dispose();
        }
      }
    } finally {
      tmp?.dispose();
    }
    return out;
  }

  /**
   * A reduction over the middle dim of [outer, R, inner] (inner contiguous), in place, in one pass where the tiles over
   * outer x inner (narrowed if need be) fill the device. Else R is cut into S slices whose partials ([S, outer * inner],
   * the accumulation type) a second launch folds in order, mean dividing by the true R there.
   */
  private columns(op: ReduceOp, prologue: Expr | undefined, proKey: string, x: Tensor, out: Tensor, p: Extract<ReducePlan, { kind: 'columns' }>, sms: number): void {
    const inD = x.dtype as GenDType;
    const outD = out.dtype as GenDType;
    const vec = columnVec(GEN_ITEMSIZE[inD], p.inner, p.sOuter, p.sR, [addr(x)]);
    const { launch: l, split } = planColumns(p.outer, p.R, p.inner, vec, GEN_ITEMSIZE[inD], sms);
    if (split.S === 1) {
      this.columnPass(op, prologue, proKey, x, out, l, 1, [p.outer, p.R, p.inner, p.sOuter, p.sR, p.R, p.R]);
      return;
    }
    const acc: GenDType = computeType([inD, outD]) === 'double' ? 'f64' : 'f32';
    const n = p.outer * p.inner;
    const part = Tensor.empty(x.backend, [split.S * n], acc, { device: x.device });
    try {
      this.columnPass(op === 'mean' ? 'sum' : op, prologue, proKey, x, part, l, split.S, [p.outer, p.R, p.inner, p.sOuter, p.sR, split.rChunk, p.R]);
      const l2 = planColumns(1, split.S, n, columnVec(GEN_ITEMSIZE[acc], n, 0, n, [addr(part)]), GEN_ITEMSIZE[acc], sms, { split: false }).launch;
      this.columnPass(op, undefined, '', part, out, l2, 1, [1, split.S, n, 0, n, split.S, p.R]);
    } finally {
      part.dispose();
    }
  }

  /** One column-kernel launch, S slices of R along grid y; dims: outer, R, inner, sOuter, sR, rChunk, the mean's divisor. */
  private columnPass(op: ReduceOp, prologue: Expr | undefined, proKey: string, x: Tensor, out: Tensor, l: ColumnLaunch, S: number, dims: readonly number[]): void {
    const inD = x.dtype as GenDType;
    const outD = out.dtype as GenDType;
    const make = () =>
      this.cache.kernel(`colred|${op}|${proKey}|${inD}>${outD}|${l.vec}|${l.tx}|${l.ty}`, () => columnReduceSource({ op, prologue, inDType: inD, outDType: outD, vec: l.vec, tx: l.tx, ty: l.ty }), 'reduce-generated');
    let k: CudaKernel;
    if (prologue) {
      k = make();
    } else {
      const key = ((((OP_CODE[op] * 16 + DCODE[inD]) * 16 + DCODE[outD]) * 16 + l.vec) * 1024 + l.tx) * 1024 + l.ty;
      let found = this.colKernels.get(key);
      if (!found) this.colKernels.set(key, (found = make()));
      k = found;
    }
    k.launch(S > 1 ? [l.grid, S] : l.grid, l.block, 0, [addr(out), addr(x), ...dims]);
  }

  /** One row-kernel launch: out[r] = fold over the D elements of row r (rows `rowStride` apart) of pro(x), times post. */
  private rows(op: ReduceOp, prologue: Expr | undefined, proKey: string, x: Tensor, out: Tensor, rows: number, D: number, rowStride: number, post: number, sms: number): void {
    const inD = x.dtype as GenDType;
    const outD = out.dtype as GenDType;
    const vec = rowVec(GEN_ITEMSIZE[inD], D, rowStride, [addr(x)]);
    const l = rowLaunch(rows, D / vec, vec, sms);
    const gen = () => rowReduceSource({ op, prologue, inDType: inD, outDType: outD, vec, tpr: l.tpr, block: l.block });
    const k = prologue
      ? this.cache.kernel(`rowred|${op}|${proKey}|${inD}>${outD}|${vec}|${l.tpr}|${l.block}`, gen, 'reduce-generated')
      : this.rowKernel(OP_CODE[op], inD, outD, vec, l.tpr, l.block, () => this.cache.kernel(`rowred|${op}||${inD}>${outD}|${vec}|${l.tpr}|${l.block}`, gen, 'reduce-generated'));
    k.launch(l.grid, l.block, 0, [addr(out), addr(x), rows, D, rowStride, post]);
  }

  /** softmax / log_softmax of x along dim into a fresh contiguous tensor of dtype `outDType`. */
  softmax(x: Tensor, dim: number, outDType: DType, log: boolean): Tensor {
    const out = Tensor.empty(x.backend, x.shape, outDType, { device: x.device });
    if (out.numel === 0) return out;
    const last = x.rank - 1;
    if (x.rank === 0 || dim === last) {
      this.softmaxRows(x, out, log);
      return out;
    }
    // along another dim: the dim made last (a copy), then the result written back through the transposed view
    const moved = x.transpose(dim, last);
    const tmp = Tensor.empty(x.backend, moved.shape, outDType, { device: x.device });
    try {
      this.softmaxRows(moved, tmp, log);
      const back = tmp.transpose(dim, last);
      out.backend.ops.copy(out, back);
      back.dispose();
    } finally {
      moved.dispose();
      tmp.dispose();
    }
    return out;
  }

  /** out (contiguous, x's shape) = softmax over x's last dim. */
  private softmaxRows(x: Tensor, out: Tensor, log: boolean): void {
    const inD = genDType(x.dtype, 'softmax');
    const outD = genDType(out.dtype, 'softmax');
    const D = x.rank === 0 ? 1 : x.shape[x.rank - 1]!;
    const dims = x.rank === 0 ? [] : [x.rank - 1];
    const p = planReduce(x.shape, x.strides, dims);
    let src = x;
    let rowStride = p.kind === 'rows' ? p.rowStride : D;
    let tmp: Tensor | undefined;
    if (p.kind !== 'rows') {
      tmp = x.contiguous();
      src = tmp;
      rowStride = D;
    }
    try {
      const rows = out.numel / D;
      const sms = this.runtime().properties().multiprocessors;
      const vec = Math.min(rowVec(GEN_ITEMSIZE[inD], D, rowStride, [addr(src)]), rowVec(GEN_ITEMSIZE[outD], D, D, [addr(out)]));
      const l = rowLaunch(rows, D / vec, vec, sms);
      const k = this.rowKernel(log ? 5 : 4, inD, outD, vec, l.tpr, l.block, () =>
        this.cache.kernel(`softmax|${log}|${inD}>${outD}|${vec}|${l.tpr}|${l.block}`, () => rowSoftmaxSource({ log, inDType: inD, outDType: outD, vec, tpr: l.tpr, block: l.block }), 'softmax-generated'),
      );
      k.launch(l.grid, l.block, 0, [addr(out), addr(src), rows, D, rowStride]);
    } finally {
      tmp?.dispose();
    }
  }

  private rowKernel(op: number, inD: GenDType, outD: GenDType, vec: number, tpr: number, block: number, make: () => CudaKernel): CudaKernel {
    const key = ((((op * 16 + DCODE[inD]) * 16 + DCODE[outD]) * 32 + vec) * 64 + tpr / 32) * 64 + block / 32;
    let k = this.rowKernels.get(key);
    if (!k) this.rowKernels.set(key, (k = make()));
    return k;
  }
}
