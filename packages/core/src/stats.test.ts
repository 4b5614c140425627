import { describe, expect, it } from 'vitest';
import { Rng } from './rng.js';
import { bootstrapGeomeanSpeedup, bootstrapSpeedup, geomean, median, quantile, summarize } from './stats.js';

/** n lognormal samples with median exp(mu). */
function lognormal(seed: number, n: number, medianMs: number, sigma: number): number[] {
  const r = new Rng(seed);
  return Array.from({ length: n }, () => medianMs * Math.exp(sigma * r.normal()));
}

describe('quantile / median', () => {
  it('median of odd and even lengths, unsorted input left untouched', () => {
    const xs = [5, 1, 3];
    expect(median(xs)).toBe(3);
    expect(xs).toEqual([5, 1, 3]);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(median([7])).toBe(7);
    expect(median([])).toBeNaN();
  });

  it('linear interpolation between order statistics (numpy "linear")', () => {
    const xs = [10, 20, 30, 40, 50];
    expect(quantile(xs, 0)).toBe(10);
    expect(quantile(xs, 1)).toBe(50);
    expect(quantile(xs, 0.25)).toBe(20);
    expect(quantile(xs, 0.1)).toBeCloseTo(14, 12);
    expect(quantile(xs, 0.9)).toBeCloseTo(46, 12);
    expect(quantile([1, 2], 0.5)).toBe(1.5);
    expect(quantile([3, 1, 2, 10], 0.75)).toBe(4.75);
  });

  it('sorts numerically, not as strings', () => {
    expect(median([100, 9, 20])).toBe(20);
    expect(quantile([1000, 200, 30, 4], 0)).toBe(4);
  });

  it('summarize', () => {
    const s = summarize([4, 1, 3, 2, 10]);
    expect(s).toMatchObject({ n: 5, medianMs: 3, minMs: 1, meanMs: 4 });
    expect(s.p10Ms).toBeCloseTo(1.4, 12);
    expect(s.p90Ms).toBeCloseTo(7.6, 12);
    const e = summarize([]);
    expect(e.n).toBe(0);
    expect(e.medianMs).toBeNaN();
    expect(e.minMs).toBeNaN();
    expect(e.meanMs).toBeNaN();
  });

  it('summarize handles long series', () => {
    const xs = Array.from({ length: 300_000 }, (_, i) => 1 + (i % 1000));
    const s = summarize(xs);
    expect(s.minMs).toBe(1);
    expect(s.n).toBe(300_000);
  });
});

describe('geomean', () => {
  it('values', () => {
    expect(geomean([2, 8])).toBeCloseTo(4, 12);
    expect(geomean([1, 10, 100])).toBeCloseTo(10, 12);
    expect(geomean([5])).toBeCloseTo(5, 12);
    expect(geomean([0.5, 2])).toBeCloseTo(1, 12);
    expect(geomean([])).toBeNaN();
  });
});

describe('bootstrapSpeedup', () => {
  it('point estimate is median(baseline) / median(candidate)', () => {
    const e = bootstrapSpeedup([4, 2, 6], [1, 2, 3], { resamples: 100 });
    expect(e.speedup).toBe(2);
    expect(e.confidence).toBe(0.95);
    // resampled medians are samples: the ratios lie in [2/3, 6], and this seeded interval holds the point estimate
    expect(e.ciLow).toBeGreaterThanOrEqual(2 / 3);
    expect(e.ciHigh).toBeLessThanOrEqual(6);
    expect(e.ciLow).toBeLessThanOrEqual(e.speedup);
    expect(e.speedup).toBeLessThanOrEqual(e.ciHigh);
    expect(e.ciHigh).toBeGreaterThan(e.ciLow);
  });

  it('the CI contains the true ratio for lognormal samples with known medians', () => {
    // true medians 2 ms and 1 ms: true speedup 2
    const base = lognormal(1, 200, 2, 0.25);
    const cand = lognormal(2, 200, 1, 0.25);
    const e = bootstrapSpeedup(base, cand, { resamples: 2000, seed: 42 });
    expect(e.ciLow).toBeLessThan(2);
    expect(e.ciHigh).toBeGreaterThan(2);
    expect(e.ciLow).toBeLessThanOrEqual(e.speedup);
    expect(e.ciHigh).toBeGreaterThanOrEqual(e.speedup);
    expect(e.ciLow).toBeGreaterThan(1.7);
    expect(e.ciHigh).toBeLessThan(2.3);
  });

  it('covers the true ratio in most of many independent experiments', () => {
    let covered = 0;
    const trials = 40;
    for (let t = 0; t < trials; t++) {
      const base = lognormal(100 + t, 60, 3, 0.3);
      const cand = lognormal(500 + t, 60, 2, 0.3);
      const e = bootstrapSpeedup(base, cand, { resamples: 400, seed: t });
      if (e.ciLow <= 1.5 && 1.5 <= e.ciHigh) covered++;
    }
    // nominal 95%; allow generous slack for the percentile bootstrap at small n
    expect(covered).toBeGreaterThanOrEqual(33);
  });

  it('the CI of identical distributions contains 1', () => {
    const a = lognormal(3, 150, 5, 0.2);
    const b = lognormal(4, 150, 5, 0.2);
    const e = bootstrapSpeedup(a, b, { resamples: 2000, seed: 1 });
    expect(e.ciLow).toBeLessThan(1);
    expect(e.ciHigh).toBeGreaterThan(1);
    // the same sample against itself: the point estimate is exactly 1
    expect(bootstrapSpeedup(a, a, { resamples: 500 }).speedup).toBe(1);
  });

  it('the CI narrows as n grows', () => {
    const width = (n: number) => {
      const e = bootstrapSpeedup(lognormal(10, n, 2, 0.3), lognormal(11, n, 1, 0.3), { resamples: 1000, seed: 5 });
      return e.ciHigh - e.ciLow;
    };
    const w50 = width(50);
    const w800 = width(800);
    expect(w800).toBeLessThan(w50 / 2); // ~ 1/sqrt(16) = 1/4 in theory
  });

  it('higher confidence gives a wider interval', () => {
    const a = lognormal(20, 100, 2, 0.3);
    const b = lognormal(21, 100, 1, 0.3);
    const e90 = bootstrapSpeedup(a, b, { confidence: 0.9, seed: 3 });
    const e99 = bootstrapSpeedup(a, b, { confidence: 0.99, seed: 3 });
    expect(e99.ciLow).toBeLessThanOrEqual(e90.ciLow);
    expect(e99.ciHigh).toBeGreaterThanOrEqual(e90.ciHigh);
    expect(e99.confidence).toBe(0.99);
  });

  it('is reproducible with the same seed and changes with another', () => {
    const a = lognormal(30, 80, 2, 0.3);
    const b = lognormal(31, 80, 1.5, 0.3);
    const x = bootstrapSpeedup(a, b, { resamples: 500, seed: 9 });
    const y = bootstrapSpeedup(a, b, { resamples: 500, seed: 9 });
    const z = bootstrapSpeedup(a, b, { resamples: 500, seed: 10 });
    expect(x).toEqual(y);
    expect(z.ciLow === x.ciLow && z.ciHigh === x.ciHigh).toBe(false);
    // the default seed is fixed too
    expect(bootstrapSpeedup(a, b, { resamples: 300 })).toEqual(bootstrapSpeedup(a, b, { resamples: 300 }));
  });

  it('does not modify its inputs', () => {
    const a = [3, 1, 2];
    const b = [2, 3, 1];
    bootstrapSpeedup(a, b, { resamples: 50 });
    expect(a).toEqual([3, 1, 2]);
    expect(b).toEqual([2, 3, 1]);
  });

  it('empty inputs give NaN', () => {
    const e = bootstrapSpeedup([], [1, 2]);
    expect(e.speedup).toBeNaN();
    expect(e.ciLow).toBeNaN();
    expect(e.ciHigh).toBeNaN();
    expect(bootstrapSpeedup([1], []).speedup).toBeNaN();
  });

  it('constant samples give a degenerate interval at the ratio', () => {
    const e = bootstrapSpeedup([3, 3, 3], [1.5, 1.5], { resamples: 100 });
    expect(e).toEqual({ speedup: 2, ciLow: 2, ciHigh: 2, confidence: 0.95 });
  });
});

describe('bootstrapGeomeanSpeedup', () => {
  it('one workload (bootstrapSpeedup): the point is median(baseline) / median(candidate), inside its interval', () => {
    const b = lognormal(1, 5, 10, 0.05);
    const c = lognormal(2, 5, 8, 0.05);
    const one = bootstrapGeomeanSpeedup([{ baselineMs: b, candidateMs: c }], { resamples: 500, seed: 7 });
    expect(one.speedup).toBeCloseTo(median(b) / median(c), 12);
    expect(one.ciLow).toBeLessThan(one.speedup);
    expect(one.ciHigh).toBeGreaterThan(one.speedup);
  });

  it('a candidate identical in distribution to the baseline: the interval holds 1 (fresh seeds), and a 1.3x one excludes it', () => {
    let holds = 0;
    for (let s = 0; s < 40; s++) {
      const w = [10, 40].map((ms, k) => ({ baselineMs: lognormal(100 * s + k, 5, ms, 0.03), candidateMs: lognormal(100 * s + k + 50, 5, ms, 0.03) }));
      const e = bootstrapGeomeanSpeedup(w, { resamples: 400, seed: s });
      if (e.ciLow <= 1 && 1 <= e.ciHigh) holds++;
      expect(e.ciLow).toBeLessThanOrEqual(e.speedup);
      expect(e.ciHigh).toBeGreaterThanOrEqual(e.speedup);
    }
    expect(holds).toBeGreaterThanOrEqual(30); // ~95% nominal; percentile bootstrap of 5 samples runs a bit narrow
    const fast = [10, 40].map((ms, k) => ({ baselineMs: lognormal(k + 1, 5, ms, 0.03), candidateMs: lognormal(k + 9, 5, ms / 1.3, 0.03) }));
    const e = bootstrapGeomeanSpeedup(fast, { resamples: 400 });
    expect(e.ciLow).toBeGreaterThan(1.15);
    expect(e.speedup).toBeGreaterThan(1.2);
  });

  it('the point estimate is the geomean over workloads of the median ratios; empty input gives NaN', () => {
    const e = bootstrapGeomeanSpeedup([{ baselineMs: [4, 4, 4], candidateMs: [2, 2, 2] }, { baselineMs: [3, 3], candidateMs: [6, 6] }], { resamples: 50 });
    expect(e.speedup).toBeCloseTo(1, 12); // sqrt(2 * 0.5)
    expect(e.ciLow).toBeCloseTo(1, 12);
    expect(Number.isNaN(bootstrapGeomeanSpeedup([]).speedup)).toBe(true);
    expect(Number.isNaN(bootstrapGeomeanSpeedup([{ baselineMs: [], candidateMs: [1] }]).ciLow)).toBe(true);
  });
});
