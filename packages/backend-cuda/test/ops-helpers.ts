/**
 * Helpers for the generated-op GPU tests (src/ops/*.gpu.test.ts): run one registry call on the float64 CPU backend and
 * on CUDA over the same values and the same view of them, check that CUDA took its registered kernel, and compare with
 * design §4's tolerance for the output dtype.
 */
import { Tensor, callOp, opRoute, type DType, type OpArg } from '@fastkernels/core';
import { expect } from 'vitest';
import { cpu, expectClose, randCpu, toGpu, tolOf } from './spine-helpers.js';

export { cpu, randCpu };

/** A view applied alike on both backends (transpose, narrow, expand, ...). */
export type View = (t: Tensor) => Tensor;

export interface Case {
  readonly op: string;
  /** CPU tensors (values already rounded to their dtype), numbers, nulls. */
  readonly inputs: readonly OpArg[];
  readonly attrs?: unknown;
  /** Per input: a view taken of it on both backends. */
  readonly views?: readonly (View | undefined)[];
  /** 'kernel' (default): CUDA must run its registered kernel; 'decomposition': its supports() must decline. */
  readonly via?: 'kernel' | 'ops' | 'decomposition' | 'any';
}

/** Run the case on both backends, compare every output, dispose everything. */
export function checkOp(label: string, c: Case): void {
  const owned: Tensor[] = [];
  const keep = (t: Tensor) => (owned.push(t), t);
  try {
    const view = (a: OpArg, i: number): OpArg => (a instanceof Tensor && c.views?.[i] ? keep(c.views[i]!(a)) : a);
    const cpuIn = c.inputs.map(view);
    const gpuIn = c.inputs.map((a) => (a instanceof Tensor ? keep(toGpu(a)) : a)).map(view);
    const route = opRoute(c.op, gpuIn, c.attrs);
    if ((c.via ?? 'kernel') !== 'any') expect(route, `${label}: route`).toEqual({ via: c.via ?? 'kernel' });
    const want = callOp(c.op, cpuIn, c.attrs).map(keep);
    const got = callOp(c.op, gpuIn, c.attrs).map(keep);
    got.forEach((g, i) => {
      expect(g.shape, `${label}: shape`).toEqual(want[i]!.shape);
      expect(g.dtype, `${label}: dtype`).toBe(want[i]!.dtype);
      if (g.numel > 0) expectClose(g, want[i]!, tolOf(g.dtype), label);
    });
  } finally {
    for (const t of owned) t.dispose();
  }
}

/** Random N(0, scale^2) values on the CPU, rounded to dtype; `positive` maps them to |x| + 0.25 (log, sqrt, pow). */
export function rand(shape: readonly number[], dtype: DType, seed: number, opts: { scale?: number; positive?: boolean } = {}): Tensor {
  const t = randCpu(shape, dtype, seed, opts.scale ?? 1);
  if (!opts.positive) return t;
  const d = t.toFloat64Array().map((x) => Math.abs(x) + 0.25);
  t.dispose();
  return Tensor.fromArray(cpu(), d, shape, dtype);
}

/** Integer values in [lo, hi) on the CPU. */
export function randInts(shape: readonly number[], dtype: DType, seed: number, lo = -50, hi = 50): Tensor {
  const t = randCpu(shape, 'f64', seed, 1);
  const d = t.toFloat64Array().map((x) => lo + (Math.floor(Math.abs(x) * 1e6) % (hi - lo)));
  t.dispose();
  return Tensor.fromArray(cpu(), d, shape, dtype);
}
