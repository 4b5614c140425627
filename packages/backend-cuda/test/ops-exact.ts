/**
 * An exact variant of ops-helpers' checkOp for ops that only select or move values (argmax, sort, topk, gather, pad,
 * nearest interpolation): every output element must equal the float64 CPU backend's bit for bit (NaN equals NaN),
 * indices included, and CUDA must take its registered kernel.
 */
import { Tensor, callOp, opRoute, type OpArg } from '@fastkernels/core';
import { expect } from 'vitest';
import { toGpu } from './spine-helpers.js';
import type { Case } from './ops-helpers.js';

export function checkExact(label: string, c: Case): void {
  const owned: Tensor[] = [];
  const keep = (t: Tensor) => (owned.push(t), t);
  try {
    const view = (a: OpArg, i: number): OpArg => (a instanceof Tensor && c.views?.[i] ? keep(c.views[i]!(a)) : a);
    const cpuIn = c.inputs.map(view);
    const gpuIn = c.inputs.map((a) => (a instanceof Tensor ? keep(toGpu(a)) : a)).map(view);
    if ((c.via ?? 'kernel') !== 'any') expect(opRoute(c.op, gpuIn, c.attrs), `${label}: route`).toEqual({ via: c.via ?? 'kernel' });
    const want = callOp(c.op, cpuIn, c.attrs).map(keep);
    const got = callOp(c.op, gpuIn, c.attrs).map(keep);
    got.forEach((g, k) => {
      expect(g.shape, `${label}: shape of output ${k}`).toEqual(want[k]!.shape);
      expect(g.dtype, `${label}: dtype of output ${k}`).toBe(want[k]!.dtype);
      const a = g.toFloat64Array();
      const e = want[k]!.toFloat64Array();
      const diffs: string[] = [];
      for (let i = 0; i < a.length; i++) if (!(a[i] === e[i] || (Number.isNaN(a[i]!) && Number.isNaN(e[i]!)))) diffs.push(`[${i}] ${a[i]} vs ${e[i]}`);
      if (diffs.length) throw new Error(`${label}: output ${k}: ${diffs.length} of ${a.length} differ: ${diffs.slice(0, 8).join(', ')}`);
    });
  } finally {
    for (const t of owned) t.dispose();
  }
}
