import { quantile } from '@fastkernels/core';
import { fFor, LAMBDA_KEYS, type LambdaKey, type MacroEvalConfig } from './config.js';
import type { E2eRun, Outcome } from './e2e-record.js';

/**
 * Per-model end-to-end scoring (reference/fastkernels.md §6.1):
 * - speed s(λ) = thr^λ · lat^(1−λ);
 * - noise floor g = the g_quantile (95th percentile) of the noise run's discrepancies, clamped to
 *   [g_floor, g_cap], g_fallback without a noise run;
 * - per item credit c(d) = clip((z − d) / (z − g), 0, 1) with z = f · D_unrel (full credit up to g,
 *   none from z on); C = mean item credit; a run that did not finish (crash, timeout, incomplete) has C = 0;
 * - valid when the run is `ok` and C ≥ τ.
 */

/** Comparisons against τ allow this much float noise, so a C that is τ up to rounding counts as τ. */
export const C_EPSILON = 1e-12;

export type Speeds = Readonly<Record<LambdaKey, number>>;

export function blendSpeed(thr: number | undefined, lat: number | undefined, lambda: number): number | null {
  if (thr !== undefined && lat !== undefined) return thr ** lambda * lat ** (1 - lambda);
  // A model measured on one kind of workload only: that kind stands for both.
  return thr ?? lat ?? null;
}

export function modelSpeeds(run: Pick<E2eRun, 'throughputSpeedup' | 'latencySpeedup'>, config: MacroEvalConfig): Speeds | null {
  if (run.throughputSpeedup === undefined && run.latencySpeedup === undefined) return null;
  const out = {} as Record<LambdaKey, number>;
  for (const k of LAMBDA_KEYS) out[k] = blendSpeed(run.throughputSpeedup, run.latencySpeedup, config.lambdas[k])!;
  return out;
}

export function noiseFloor(noise: readonly number[], config: MacroEvalConfig): number {
  if (noise.length === 0) return config.g_fallback;
  const q = quantile(noise, config.g_quantile);
  return Math.min(config.g_cap, Math.max(config.g_floor, q));
}

/** Credit of one item: 1 up to and including g, 0 from z (= f · D_unrel) on, linear between. */
export function itemCredit(d: number, g: number, z: number): number {
  if (d <= g) return 1;
  if (d >= z) return 0;
  return (z - d) / (z - g);
}

export function calibratedCorrectness(discrepancies: readonly number[], g: number, z: number): number {
  if (discrepancies.length === 0) return 0;
  let sum = 0;
  for (const d of discrepancies) sum += itemCredit(d, g, z);
  return sum / discrepancies.length;
}

export interface ModelScore {
  /** The run's outcome; an `ok` run with C below broken_threshold is reported as `broken`. */
  readonly outcome: Outcome;
  readonly detail: string | null;
  readonly valid: boolean;
  /** Left out of its family (a run with no items under empty_policy `exclude`). */
  readonly excluded: boolean;
  readonly C: number;
  /** Speeds at each λ; null when the run measured none. */
  readonly s: Speeds | null;
  readonly mean_d: number | null;
  readonly g: number;
  readonly n_items: number;
}

const FINISHED: ReadonlySet<Outcome> = new Set(['ok', 'broken']);

/**
 * Score one run of a model. `scale` multiplies the discrepancy thresholds (g and f) for the
 * sensitivity ranks; 1 is the board's own score.
 */
export function scoreRun(run: E2eRun, family: string, noise: readonly number[], config: MacroEvalConfig, scale = 1): ModelScore {
  const g = noiseFloor(noise, config) * scale;
  const z = fFor(config, family) * run.unrelatedDistance * scale;
  const n = run.discrepancies.length;
  const mean_d = n ? run.discrepancies.reduce((a, b) => a + b, 0) / n : null;
  const s = modelSpeeds(run, config);
  const detail = run.detail ?? null;
  if (!FINISHED.has(run.outcome)) {
    return { outcome: run.outcome, detail, valid: false, excluded: false, C: 0, s, mean_d, g, n_items: n };
  }
  if (n === 0) {
    const excluded = run.outcome === 'ok' && config.empty_policy === 'exclude';
    return { outcome: run.outcome, detail: detail ?? 'no items', valid: false, excluded, C: 0, s, mean_d, g, n_items: 0 };
  }
  const C = calibratedCorrectness(run.discrepancies, g, z);
  const outcome: Outcome = run.outcome === 'ok' && C < config.broken_threshold - C_EPSILON ? 'broken' : run.outcome;
  const valid = outcome === 'ok' && C >= config.tau - C_EPSILON;
  return { outcome, detail, valid, excluded: false, C, s, mean_d, g, n_items: n };
}
