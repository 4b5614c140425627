import { Rng } from './rng.js';

/** Timing statistics: order statistics and a bootstrap confidence interval of a speedup. */
export function quantile(xs: readonly number[], q: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const pos = (s.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return s[lo]! + (s[hi]! - s[lo]!) * (pos - lo);
}

export const median = (xs: readonly number[]): number => quantile(xs, 0.5);

export interface TimingSummary {
  readonly n: number;
  readonly medianMs: number;
  readonly p10Ms: number;
  readonly p90Ms: number;
  readonly minMs: number;
  readonly meanMs: number;
}

export function summarize(timesMs: readonly number[]): TimingSummary {
  const n = timesMs.length;
  return {
    n,
    medianMs: median(timesMs),
    p10Ms: quantile(timesMs, 0.1),
    p90Ms: quantile(timesMs, 0.9),
    minMs: n ? timesMs.reduce((a, b) => Math.min(a, b), Infinity) : NaN, // no spread: long series overflow the stack
    meanMs: n ? timesMs.reduce((a, b) => a + b, 0) / n : NaN,
  };
}

export interface SpeedupEstimate {
  /** median(baseline) / median(candidate). */
  readonly speedup: number;
  readonly ciLow: number;
  readonly ciHigh: number;
  readonly confidence: number;
}

/**
 * Percentile bootstrap of median(baseline) / median(candidate): resample each side with
 * replacement, seeded, so the interval is reproducible.
 */
export function bootstrapSpeedup(baselineMs: readonly number[], candidateMs: readonly number[], options: { resamples?: number; confidence?: number; seed?: number } = {}): SpeedupEstimate {
  return bootstrapGeomeanSpeedup([{ baselineMs, candidateMs }], options);
}

/**
 * Percentile bootstrap of the geometric mean, over several workloads, of median(baseline) / median(candidate) (e.g.
 * the e2e latency speedup over batch sizes 1 and 32): every resample redraws each workload's two sides with
 * replacement, seeded. bootstrapSpeedup is the case of one workload.
 */
export function bootstrapGeomeanSpeedup(
  workloads: readonly { readonly baselineMs: readonly number[]; readonly candidateMs: readonly number[] }[],
  options: { resamples?: number; confidence?: number; seed?: number } = {},
): SpeedupEstimate {
  const resamples = options.resamples ?? 2000;
  const confidence = options.confidence ?? 0.95;
  if (workloads.length === 0 || workloads.some((w) => w.baselineMs.length === 0 || w.candidateMs.length === 0)) return { speedup: NaN, ciLow: NaN, ciHigh: NaN, confidence };
  const speedup = geomean(workloads.map((w) => median(w.baselineMs) / median(w.candidateMs)));
  const rng = new Rng(options.seed ?? 12345);
  const scratch = workloads.map((w) => ({ b: new Float64Array(w.baselineMs.length), c: new Float64Array(w.candidateMs.length) }));
  const stats = new Float64Array(resamples);
  for (let r = 0; r < resamples; r++) {
    let logSum = 0;
    for (let k = 0; k < workloads.length; k++) {
      const w = workloads[k]!;
      const { b, c } = scratch[k]!;
      for (let i = 0; i < b.length; i++) b[i] = w.baselineMs[rng.int(0, w.baselineMs.length)]!;
      for (let i = 0; i < c.length; i++) c[i] = w.candidateMs[rng.int(0, w.candidateMs.length)]!;
      logSum += Math.log(sortedMedian(b) / sortedMedian(c));
    }
    stats[r] = Math.exp(logSum / workloads.length);
  }
  stats.sort();
  const alpha = (1 - confidence) / 2;
  return { speedup, ciLow: quantile(Array.from(stats), alpha), ciHigh: quantile(Array.from(stats), 1 - alpha), confidence };
}

function sortedMedian(a: Float64Array): number {
  a.sort();
  const m = (a.length - 1) / 2;
  return (a[Math.floor(m)]! + a[Math.ceil(m)]!) / 2;
}

/** Geometric mean of positive numbers (NaN for an empty list). */
export function geomean(xs: readonly number[]): number {
  if (xs.length === 0) return NaN;
  return Math.exp(xs.reduce((a, x) => a + Math.log(x), 0) / xs.length);
}
