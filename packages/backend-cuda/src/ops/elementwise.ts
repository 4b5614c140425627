/**
 * Running a generated elementwise kernel: out = expr(inputs, params). One ElementwiseRunner per expression keeps, per
 * (dtypes, class), the compiled kernel with its argument array and geometry buffer, so a launch after the first does
 * no string work and no compile: a dtype code and a class code (numbers) pick the entry, the arguments are written
 * into the reused array.
 */
import { Tensor } from '@fastkernels/core';
import type { ArgValue } from '../args.js';
import type { CudaKernel } from '../kernel.js';
import type { CudaRuntime } from '../runtime.js';
import { DCODE, genDType, type GenDType } from './ctypes.js';
import { EW_STRIDED_UNROLL, EW_THREADS, contigUnroll, elementwiseSource, geoBytes, loadedInputs, type EwClass } from './elementwise-source.js';
import { encodeGeometry, planElementwise, type EwOperand } from './elementwise-plan.js';
import { exprKey, validateExpr, type Expr } from './expr.js';
import type { GenKernelCache } from './gen-cache.js';


interface Entry {
  readonly kernel: CudaKernel;
  readonly args: ArgValue[];
  readonly geo: Uint8Array | null;
}

/** Device address of a tensor's first element. */
export function addr(t: Tensor): number {
  const p = t.storage.devicePtr;
  if (p === undefined) throw new TypeError(`${t} is not a CUDA tensor`);
  return p + t.offset * t.itemsize;
}

function operand(t: Tensor, what: string): EwOperand {
  return { shape: t.shape, strides: t.strides, ptr: addr(t), dtype: genDType(t.dtype, what) };
}

function classCode(c: EwClass): number {
  if (c.kind === 'contig') return c.vec;
  let bits = 0;
  c.innerContig.forEach((b, k) => (bits |= (b ? 1 : 0) << k));
  return 32 + c.vec + 64 * c.rank + 1024 * (c.index === 'i32' ? 0 : 1) + 2048 * bits;
}

export class ElementwiseRunner {
  /** Expression text: the cache key's first part. */
  readonly key: string;
  private readonly byDTypes = new Map<number, Map<number, Entry>>();
  /** Vectors a thread of the contiguous class loads per input before the math (the grid follows it). */
  private readonly unroll: number;

  constructor(
    readonly expr: Expr,
    private readonly cache: GenKernelCache,
    private readonly runtime: () => CudaRuntime,
  ) {
    validateExpr(expr);
    this.key = exprKey(expr);
    this.unroll = contigUnroll(loadedInputs(expr));
  }

  /** out (any strides; usually fresh and contiguous) = expr(ins) with runtime scalars `params`. */
  run(out: Tensor, ins: readonly Tensor[], params: readonly number[] = NO_PARAMS): void {
    if (ins.length !== this.expr.inputs) throw new RangeError(`elementwise: expression takes ${this.expr.inputs} inputs, got ${ins.length}`);
    if (params.length !== (this.expr.params ?? 0)) throw new RangeError(`elementwise: expression takes ${this.expr.params ?? 0} scalars, got ${params.length}`);
    const n = out.numel;
    if (n === 0) return;
    let dcode = DCODE[genDType(out.dtype, 'elementwise output')];
    for (let k = 0; k < ins.length; k++) dcode = dcode * 16 + DCODE[genDType(ins[k]!.dtype, `elementwise input ${k}`)];
    let byClass = this.byDTypes.get(dcode);
    if (!byClass) this.byDTypes.set(dcode, (byClass = new Map()));
    const rt = this.runtime();
    const sms = rt.properties().multiprocessors;
    const P = params.length;
    const outOp = operand(out, 'elementwise output');
    const inOps = ins.map((t, k) => operand(t, `elementwise input ${k}`));
    const plan = planElementwise(outOp, inOps);
    const e = this.entry(byClass, plan.cls, out, ins);
    fill(e.args, out, ins, params);
    if (plan.cls.kind === 'contig') {
      e.args[1 + ins.length + P] = n;
      const tiles = Math.ceil(n / plan.cls.vec / (EW_THREADS * this.unroll));
      e.kernel.launch(Math.max(1, Math.min(tiles, sms * 64)), EW_THREADS, 0, e.args);
      return;
    }
    const sp = plan as Extract<typeof plan, { sizes: readonly number[] }>;
    e.args[1 + ins.length + P] = encodeGeometry(e.geo!, sp.sizes, sp.strides, sp.cls.index);
    e.args[2 + ins.length + P] = sp.n;
    e.kernel.launch(Math.max(1, Math.min(Math.ceil(sp.n / (EW_THREADS * EW_STRIDED_UNROLL)), sms * 32)), EW_THREADS, 0, e.args);
  }

  /** The compiled kernel count (for tests: one per dtype combination and class). */
  get kernels(): number {
    let k = 0;
    for (const m of this.byDTypes.values()) k += m.size;
    return k;
  }

  private entry(byClass: Map<number, Entry>, cls: EwClass, out: Tensor, ins: readonly Tensor[]): Entry {
    const code = classCode(cls);
    let e = byClass.get(code);
    if (!e) {
      const inDTypes = ins.map((t) => t.dtype as GenDType);
      const outDType = out.dtype as GenDType;
      const key = `ew|${this.key}|${outDType}<-${inDTypes.join(',')}|${JSON.stringify(cls)}`;
      const kernel = this.cache.kernel(key, () => elementwiseSource({ expr: this.expr, inDTypes, outDType, cls }), 'elementwise-generated');
      const nArgs = 1 + ins.length + (this.expr.params ?? 0) + (cls.kind === 'contig' ? 1 : 2);
      const geo = cls.kind === 'strided' ? new Uint8Array(geoBytes(cls.rank, ins.length, cls.index)) : null;
      e = { kernel, args: new Array<ArgValue>(nArgs).fill(0), geo };
      byClass.set(code, e);
    }
    return e;
  }
}

const NO_PARAMS: readonly number[] = [];

function fill(args: ArgValue[], out: Tensor, ins: readonly Tensor[], params: readonly number[]): void {
  args[0] = addr(out);
  for (let k = 0; k < ins.length; k++) args[1 + k] = addr(ins[k]!);
  for (let k = 0; k < params.length; k++) args[1 + ins.length + k] = params[k]!;
}

/** A fresh contiguous output of `shape` / `dtype` on `like`'s device, filled by the runner. */
export function runInto(runner: ElementwiseRunner, like: Tensor, shape: readonly number[], dtype: Tensor['dtype'], ins: readonly Tensor[], params?: readonly number[]): Tensor {
  const out = Tensor.empty(like.backend, shape, dtype, { device: like.device });
  runner.run(out, ins, params);
  return out;
}
