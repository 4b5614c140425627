import type { DType } from './dtype.js';
import { formatShape, shapesEqual } from './shape.js';
import { worstStatus, type Status } from './status.js';
import type { HostArray, Tolerance } from './task.js';
import type { Tensor } from './tensor.js';

/** Element passes when |a - e| <= atol + rtol * |e|; a tensor passes when this share of elements does. */
export const REQUIRED_MATCHED_RATIO = 0.99;

export interface Comparison {
  readonly status: Status;
  readonly maxAbsError: number;
  readonly maxRelError: number;
  /** Share of elements within tolerance (1 for empty tensors). */
  readonly matchedRatio: number;
  readonly detail?: string;
}

interface Values {
  readonly shape: readonly number[];
  readonly data: ArrayLike<number>;
  readonly dtype?: DType;
}

function values(x: Tensor | HostArray): Values {
  if ('data' in x) return x;
  return { shape: x.shape, data: x.toFloat64Array(), dtype: x.dtype };
}

/**
 * Compare an actual output with the expected one (the baseline's output, or the float64 golden
 * reference). Checks in order: shape, dtype (when both are tensors), non-finite values where the
 * expected is finite, an all-zero output where the expected is not, then the tolerance.
 */
export function compareTensors(actual: Tensor | HostArray, expected: Tensor | HostArray, tol: Tolerance): Comparison {
  const a = values(actual);
  const e = values(expected);
  const zero = { maxAbsError: Infinity, maxRelError: Infinity, matchedRatio: 0 };
  if (!shapesEqual(a.shape, e.shape)) {
    return { status: 'INCORRECT_SHAPE', ...zero, detail: `shape ${formatShape(a.shape)}, expected ${formatShape(e.shape)}` };
  }
  if (a.dtype && e.dtype && a.dtype !== e.dtype) {
    return { status: 'INCORRECT_DTYPE', ...zero, detail: `dtype ${a.dtype}, expected ${e.dtype}` };
  }
  const n = e.data.length;
  if (n === 0) return { status: 'PASSED', maxAbsError: 0, maxRelError: 0, matchedRatio: 1 };
  let maxAbs = 0;
  let maxRel = 0;
  let matched = 0;
  let nonFinite = 0;
  let actualNonZero = false;
  let expectedNonZero = false;
  for (let i = 0; i < n; i++) {
    const av = a.data[i]!;
    const ev = e.data[i]!;
    if (av !== 0) actualNonZero = true;
    if (ev !== 0) expectedNonZero = true;
    if (!Number.isFinite(av)) {
      // A non-finite value only matches the same non-finite expected value.
      if (Object.is(av, ev) || (Number.isNaN(av) && Number.isNaN(ev))) {
        matched++;
        continue;
      }
      if (Number.isFinite(ev)) nonFinite++;
      continue;
    }
    if (!Number.isFinite(ev)) continue;
    const abs = Math.abs(av - ev);
    const rel = abs / Math.max(Math.abs(ev), Number.MIN_VALUE);
    if (abs > maxAbs) maxAbs = abs;
    if (abs > 0 && rel > maxRel) maxRel = rel;
    if (abs <= tol.atol + tol.rtol * Math.abs(ev)) matched++;
  }
  const matchedRatio = matched / n;
  const stats = { maxAbsError: nonFinite ? Infinity : maxAbs, maxRelError: nonFinite ? Infinity : maxRel, matchedRatio };
  if (nonFinite > 0) return { status: 'INCORRECT_NUMERICAL', ...stats, detail: `${nonFinite} NaN/Inf values where the expected output is finite` };
  if (!actualNonZero && expectedNonZero) return { status: 'INCORRECT_NUMERICAL', ...stats, detail: 'output is all zeros, expected is not' };
  if (matchedRatio < REQUIRED_MATCHED_RATIO) {
    return { status: 'INCORRECT_NUMERICAL', ...stats, detail: `${(matchedRatio * 100).toFixed(2)}% of elements within atol=${tol.atol}, rtol=${tol.rtol} (need ${REQUIRED_MATCHED_RATIO * 100}%)` };
  }
  return { status: 'PASSED', ...stats };
}

/** Compare lists of outputs: counts must match; the worst tensor (by status severity) decides. */
export function compareOutputs(actual: readonly (Tensor | HostArray)[], expected: readonly (Tensor | HostArray)[], tolFor: (dtype: DType | undefined) => Tolerance): Comparison {
  if (actual.length !== expected.length) {
    return { status: 'INCORRECT_SHAPE', maxAbsError: Infinity, maxRelError: Infinity, matchedRatio: 0, detail: `${actual.length} outputs, expected ${expected.length}` };
  }
  let worst: Comparison = { status: 'PASSED', maxAbsError: 0, maxRelError: 0, matchedRatio: 1 };
  for (let i = 0; i < expected.length; i++) {
    const e = expected[i]!;
    const c = compareTensors(actual[i]!, e, tolFor('dtype' in e ? e.dtype : undefined));
    // The most severe status wins (a shape error beats a numerical one, whatever the order); its detail goes with it.
    const status = worstStatus([worst.status, c.status]);
    const cDetail = c.detail ? `output ${i}: ${c.detail}` : undefined;
    const merged: Comparison = {
      status,
      maxAbsError: Math.max(worst.maxAbsError, c.maxAbsError),
      maxRelError: Math.max(worst.maxRelError, c.maxRelError),
      matchedRatio: Math.min(worst.matchedRatio, c.matchedRatio),
      detail: status !== worst.status ? cDetail : (worst.detail ?? cDetail),
    };
    worst = merged;
  }
  return worst;
}
