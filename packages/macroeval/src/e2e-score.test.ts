import { describe, expect, it } from 'vitest';
import { resolveConfig } from './config.js';
import { E2eModelRecordSchema, type E2eRun } from './e2e-record.js';
import { blendSpeed, calibratedCorrectness, itemCredit, noiseFloor, scoreRun } from './e2e-score.js';

const config = resolveConfig();
const run = (over: Partial<E2eRun>): E2eRun => ({ outcome: 'ok', throughputSpeedup: 1.1, latencySpeedup: 1.2, discrepancies: [], unrelatedDistance: 1, ...over });

describe('config', () => {
  it('defaults are the original leaderboard config', () => {
    expect(config).toMatchObject({ tau: 0.9, g_quantile: 0.95, g_floor: 0.001, g_cap: 0.5, g_fallback: 0.02, f_default: 0.5, lambdas: { blend: 0.5, thr: 1, lat: 0 }, broken_threshold: 0.5, empty_policy: 'invalid', sensitivity_scales: [0.5, 1, 2] });
  });
  it('rejects bad values', () => {
    expect(() => resolveConfig({ tau: 1.5 })).toThrow();
    expect(() => resolveConfig({ g_floor: 0.6, g_cap: 0.5 })).toThrow(/g_floor/);
    expect(() => resolveConfig({ tua: 1 } as never)).toThrow();
  });
});

describe('per-model speed', () => {
  it('s = thr^λ · lat^(1−λ) (the published Llama/Dr. Kernel blend)', () => {
    expect(blendSpeed(0.96426, 0.98865, 0.5)).toBeCloseTo(0.97638, 5);
    expect(blendSpeed(2, 8, 1)).toBe(2);
    expect(blendSpeed(2, 8, 0)).toBe(8);
    expect(blendSpeed(2, undefined, 0)).toBe(2);
  });
});

describe('noise floor g', () => {
  it('is the 95th percentile of the noise run, clamped to [g_floor, g_cap], g_fallback without one', () => {
    const noise = Array.from({ length: 101 }, (_, i) => i / 1000); // 0 .. 0.1
    expect(noiseFloor(noise, config)).toBeCloseTo(0.095, 12);
    expect(noiseFloor([0, 0, 0], config)).toBe(0.001);
    expect(noiseFloor([0.9, 0.9], config)).toBe(0.5);
    expect(noiseFloor([], config)).toBe(0.02);
  });
});

describe('calibrated correctness: the edges', () => {
  const g = 0.02;
  const z = 0.5; // f · D_unrel
  it('full credit at exactly g, none at exactly f · D_unrel, linear between', () => {
    expect(itemCredit(g, g, z)).toBe(1);
    expect(itemCredit(z, g, z)).toBe(0);
    expect(itemCredit(0.26, g, z)).toBeCloseTo(0.5, 12);
    expect(itemCredit(1, g, z)).toBe(0);
    expect(itemCredit(g + 1e-12, g, z)).toBeLessThan(1);
    expect(itemCredit(z - 1e-12, g, z)).toBeGreaterThan(0);
  });
  it('a floor at or above the zero point is a step at g (no division by zero)', () => {
    expect(itemCredit(0.5, 0.5, 0.5)).toBe(1);
    expect(itemCredit(0.50001, 0.5, 0.5)).toBe(0);
  });
  it('C is the mean item credit', () => {
    expect(calibratedCorrectness([0, 0.26, 0.9], g, z)).toBeCloseTo(0.5, 12);
  });
  it('the zero point scales with f and the unrelated-output distance', () => {
    const r = run({ discrepancies: [1], unrelatedDistance: 4 });
    expect(scoreRun(r, 'llm', [], config).C).toBeCloseTo((2 - 1) / (2 - 0.02), 12);
    expect(scoreRun(run({ discrepancies: [0.3] }), 'x', [], resolveConfig({ f: { x: 0.25 } })).C).toBe(0);
  });
  it('C exactly τ is valid; just below is not', () => {
    // 10 items: 9 at zero discrepancy, one at the zero point → C = 0.9 = τ.
    const at = run({ discrepancies: [...Array(9).fill(0), 0.5] });
    const s = scoreRun(at, 'llm', [], config);
    expect(s.C).toBe(0.9);
    expect(s.valid).toBe(true);
    const below = scoreRun(run({ discrepancies: [...Array(9).fill(0), 0.5].map((d, i) => (i === 0 ? 0.021 : d)) }), 'llm', [], config);
    expect(below.C).toBeLessThan(0.9);
    expect(below.valid).toBe(false);
    // A C that is τ up to float rounding still counts as τ.
    const thirds = run({ discrepancies: Array.from({ length: 30 }, (_, i) => (i < 27 ? 0 : 0.5)) });
    expect(scoreRun(thirds, 'llm', [], config).valid).toBe(true);
  });
  it('failed runs: crash, timeout and incomplete count C = 0 and are invalid; broken is invalid', () => {
    for (const outcome of ['crash', 'timeout', 'incomplete'] as const) {
      const s = scoreRun(run({ outcome, discrepancies: [0, 0] }), 'llm', [], config);
      expect(s).toMatchObject({ C: 0, valid: false, outcome });
    }
    const broken = scoreRun(run({ outcome: 'broken', discrepancies: [0, 0] }), 'llm', [], config);
    expect(broken).toMatchObject({ C: 1, valid: false, outcome: 'broken' });
  });
  it('an ok run below broken_threshold is reported broken; above it but below τ stays ok and invalid', () => {
    expect(scoreRun(run({ discrepancies: [0.5, 0.5, 0] }), 'llm', [], config)).toMatchObject({ outcome: 'broken', valid: false });
    expect(scoreRun(run({ discrepancies: [0.5, 0, 0] }), 'llm', [], config)).toMatchObject({ outcome: 'ok', valid: false });
  });
  it('a run with no items follows empty_policy', () => {
    expect(scoreRun(run({}), 'llm', [], config)).toMatchObject({ C: 0, valid: false, excluded: false });
    expect(scoreRun(run({}), 'llm', [], resolveConfig({ empty_policy: 'exclude' }))).toMatchObject({ valid: false, excluded: true });
  });
  it('sensitivity scale multiplies both thresholds', () => {
    const r = run({ discrepancies: [0.3] });
    expect(scoreRun(r, 'llm', [], config, 0.5).C).toBe(0);
    expect(scoreRun(r, 'llm', [], config, 2).C).toBeCloseTo((1 - 0.3) / (1 - 0.04), 12);
  });
});

describe('the e2e record schema', () => {
  it('needs a speedup for an ok run and takes the as-is run nested', () => {
    expect(E2eModelRecordSchema.safeParse({ model: 'm', family: 'llm', outcome: 'ok', discrepancies: [0] }).success).toBe(false);
    const r = E2eModelRecordSchema.parse({ model: 'm', family: 'llm', outcome: 'ok', latencySpeedup: 1.1, discrepancies: [0], asIs: { outcome: 'crash', detail: 'compile' } });
    expect(r).toMatchObject({ noiseDiscrepancies: [], drops: [], unrelatedDistance: 1, asIs: { outcome: 'crash', discrepancies: [] } });
    expect(E2eModelRecordSchema.safeParse({ model: 'm', family: 'llm', outcome: 'crash', drops: [{ task: 'L1/x', category: 'oops' }] }).success).toBe(false);
  });

  it('takes the speedups\' bootstrap intervals as [low, high] of positive finite numbers', () => {
    const base = { model: 'm', family: 'llm', outcome: 'ok', throughputSpeedup: 1.01, latencySpeedup: 1.0, discrepancies: [0] };
    const r = E2eModelRecordSchema.parse({ ...base, throughputSpeedupCi: [0.99, 1.02], latencySpeedupCi: [0.998, 1.004] });
    expect(r.throughputSpeedupCi).toEqual([0.99, 1.02]);
    for (const bad of [[0.99], [0, 1.02], [0.99, Number.POSITIVE_INFINITY], [0.99, 1.02, 1.1], 'x']) {
      expect(E2eModelRecordSchema.safeParse({ ...base, latencySpeedupCi: bad }).success, JSON.stringify(bad)).toBe(false);
    }
  });
});
