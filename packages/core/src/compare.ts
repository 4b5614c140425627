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

function dataOf(x: Tensor | HostArray): ArrayLike<number> {
  return 'data' in x ? x.data : x.toFloat64Array();
}

/**
 * Element-wise statistics of actual against expected (both widened to float64):
 * - a non-finite actual matches only the same non-finite expected; where the expected is finite it counts
 *   as `nonFinite`; a non-finite expected never matches a finite actual;
 * - over finite pairs: max |a - e|, max |a - e| / max(|e|, MIN_VALUE) (where |a - e| > 0), the sums of
 *   (a - e)^2 and e^2 (the relative L2 error), and `matched` where |a - e| <= atol + rtol * |e|.
 * Device backends compute the same numbers (Backend.harnessKernels); `compareStats` picks the device when
 * both are tensors of a backend that has it, and this host loop otherwise.
 */
export interface CompareStats {
  readonly n: number;
  readonly matched: number;
  readonly nonFinite: number;
  readonly actualNonZero: boolean;
  readonly expectedNonZero: boolean;
  readonly maxAbs: number;
  readonly maxRel: number;
  readonly sumSqDiff: number;
  readonly sumSqRef: number;
}

export function compareStatsHost(a: ArrayLike<number>, e: ArrayLike<number>, tol: Tolerance): CompareStats {
  const n = e.length;
  let maxAbs = 0;
  let maxRel = 0;
  let matched = 0;
  let nonFinite = 0;
  let actualNonZero = false;
  let expectedNonZero = false;
  let sumSqDiff = 0;
  let sumSqRef = 0;
  for (let i = 0; i < n; i++) {
    const av = a[i]!;
    const ev = e[i]!;
    if (av !== 0) actualNonZero = true;
    if (ev !== 0) expectedNonZero = true;
    if (!Number.isFinite(av)) {
      if (Object.is(av, ev) || (Number.isNaN(av) && Number.isNaN(ev))) matched++;
      else if (Number.isFinite(ev)) nonFinite++;
      continue;
    }
    if (!Number.isFinite(ev)) continue;
    const d = av - ev;
    const abs = Math.abs(d);
    const rel = abs / Math.max(Math.abs(ev), Number.MIN_VALUE);
    if (abs > maxAbs) maxAbs = abs;
    if (abs > 0 && rel > maxRel) maxRel = rel;
    if (abs <= tol.atol + tol.rtol * Math.abs(ev)) matched++;
    sumSqDiff += d * d;
    sumSqRef += ev * ev;
  }
  return { n, matched, nonFinite, actualNonZero, expectedNonZero, maxAbs, maxRel, sumSqDiff, sumSqRef };
}

/** The statistics of two same-shape outputs: on the device when the backend can, else on the host. */
export function compareStats(actual: Tensor | HostArray, expected: Tensor | HostArray, tol: Tolerance): CompareStats {
  if (!('data' in actual) && !('data' in expected) && actual.backend === expected.backend) {
    const device = actual.backend.harnessKernels?.compareStats(actual, expected, tol);
    if (device) return device;
  }
  return compareStatsHost(dataOf(actual), dataOf(expected), tol);
}

/**
 * Compare an actual output with the expected one (the baseline's output, or the float64 golden
 * reference). Checks in order: shape, dtype (when both are tensors), non-finite values where the
 * expected is finite, an all-zero output where the expected is not, then the tolerance.
 */
export function compareTensors(actual: Tensor | HostArray, expected: Tensor | HostArray, tol: Tolerance): Comparison {
  const zero = { maxAbsError: Infinity, maxRelError: Infinity, matchedRatio: 0 };
  if (!shapesEqual(actual.shape, expected.shape)) {
    return { status: 'INCORRECT_SHAPE', ...zero, detail: `shape ${formatShape(actual.shape)}, expected ${formatShape(expected.shape)}` };
  }
  const aType = 'data' in actual ? undefined : actual.dtype;
  const eType = 'data' in expected ? undefined : expected.dtype;
  if (aType && eType && aType !== eType) {
    return { status: 'INCORRECT_DTYPE', ...zero, detail: `dtype ${aType}, expected ${eType}` };
  }
  const s = compareStats(actual, expected, tol);
  if (s.n === 0) return { status: 'PASSED', maxAbsError: 0, maxRelError: 0, matchedRatio: 1 };
  const matchedRatio = s.matched / s.n;
  const stats = { maxAbsError: s.nonFinite ? Infinity : s.maxAbs, maxRelError: s.nonFinite ? Infinity : s.maxRel, matchedRatio };
  if (s.nonFinite > 0) return { status: 'INCORRECT_NUMERICAL', ...stats, detail: `${s.nonFinite} NaN/Inf values where the expected output is finite` };
  if (!s.actualNonZero && s.expectedNonZero) return { status: 'INCORRECT_NUMERICAL', ...stats, detail: 'output is all zeros, expected is not' };
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
