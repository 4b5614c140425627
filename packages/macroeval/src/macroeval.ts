import { geomean, UserError } from '@fastkernels/core';
import { LAMBDA_KEYS, type LambdaKey, type MacroEvalConfig } from './config.js';
import type { E2eModelRecord } from './e2e-record.js';
import { scoreRun, type ModelScore } from './e2e-score.js';

/**
 * Family and macro aggregation (reference/fastkernels.md §6.1):
 * per family, C_f and coverage_f are means over all its models (a failed model counts 0) and S_f the
 * geometric mean of s over its valid models; the macro C and coverage are means over families and the
 * macro S the geometric mean over families with a valid model, so every family weighs the same whatever
 * its size; Score = S × C × Coverage.
 */
export type PerLambda<T> = Record<LambdaKey, T>;

export interface UniverseModel {
  readonly id: string;
  readonly label: string;
  readonly family: string;
}

export interface Universe {
  readonly families: readonly string[];
  readonly models: readonly UniverseModel[];
}

export interface FamilyScore {
  readonly n: number;
  readonly n_valid: number;
  readonly C_f: number;
  readonly coverage_f: number;
  /** Null when no model of the family is valid. */
  readonly S_f: PerLambda<number | null>;
}

export interface MacroScore {
  readonly n_items: number;
  readonly n_valid: number;
  readonly coverage_macro: number;
  readonly C_macro: number;
  readonly S_macro: PerLambda<number | null>;
  readonly score: PerLambda<number>;
  readonly n_families: number;
  readonly n_families_valid: number;
  readonly families: Record<string, FamilyScore>;
}

export function familyScore(models: readonly ModelScore[]): FamilyScore {
  const counted = models.filter((m) => !m.excluded);
  const n = counted.length;
  const valid = counted.filter((m) => m.valid);
  const S_f = {} as PerLambda<number | null>;
  for (const k of LAMBDA_KEYS) S_f[k] = valid.length ? geomean(valid.map((m) => m.s![k])) : null;
  return {
    n,
    n_valid: valid.length,
    C_f: n ? counted.reduce((a, m) => a + m.C, 0) / n : 0,
    coverage_f: n ? valid.length / n : 0,
    S_f,
  };
}

/** Macro averages from per-family values (families with no counted model are left out). */
export function macroFromFamilies(families: Readonly<Record<string, FamilyScore>>): Omit<MacroScore, 'families'> {
  const fams = Object.values(families).filter((f) => f.n > 0);
  const F = fams.length;
  const withValid = fams.filter((f) => f.n_valid > 0);
  const S_macro = {} as PerLambda<number | null>;
  const score = {} as PerLambda<number>;
  const C_macro = F ? fams.reduce((a, f) => a + f.C_f, 0) / F : 0;
  const coverage_macro = F ? fams.reduce((a, f) => a + f.coverage_f, 0) / F : 0;
  for (const k of LAMBDA_KEYS) {
    S_macro[k] = withValid.length ? geomean(withValid.map((f) => f.S_f[k]!)) : null;
    score[k] = S_macro[k] === null ? 0 : S_macro[k] * C_macro * coverage_macro;
  }
  return {
    n_items: fams.reduce((a, f) => a + f.n, 0),
    n_valid: fams.reduce((a, f) => a + f.n_valid, 0),
    coverage_macro,
    C_macro,
    S_macro,
    score,
    n_families: F,
    n_families_valid: withValid.length,
  };
}

export function macroEval(universe: Universe, scores: ReadonlyMap<string, ModelScore>): MacroScore {
  const families: Record<string, FamilyScore> = {};
  for (const family of universe.families) {
    const members = universe.models.filter((m) => m.family === family).map((m) => scores.get(m.id) ?? MISSING);
    families[family] = familyScore(members);
  }
  return { ...macroFromFamilies(families), families };
}

/** A universe model with no record in an entry: it did not run. */
export const MISSING: ModelScore = { outcome: 'incomplete', detail: 'no e2e record', valid: false, excluded: false, C: 0, s: null, mean_d: null, g: NaN, n_items: 0 };

/** Universe from records: families in first-seen order, models in first-seen order. */
export function universeFromRecords(records: Iterable<Pick<E2eModelRecord, 'model' | 'label' | 'family'>>): Universe {
  const models = new Map<string, UniverseModel>();
  for (const r of records) {
    const prev = models.get(r.model);
    if (prev && prev.family !== r.family) {
      throw new UserError(`model ${r.model} is in family ${prev.family} in one e2e record and ${r.family} in another`, {
        field: 'models[].family',
        fix: 'give each model the same family in every e2e report',
      });
    }
    if (!prev) models.set(r.model, { id: r.model, label: r.label ?? r.model, family: r.family });
  }
  const families = [...new Set([...models.values()].map((m) => m.family))];
  return { families, models: [...models.values()] };
}

export type RunKind = 'deployable' | 'asIs';

/** Score every record's deployable (or as-is) run; a record without an as-is run is missing for `asIs`. */
export function scoreRecords(records: readonly E2eModelRecord[], config: MacroEvalConfig, kind: RunKind = 'deployable', scale = 1): Map<string, ModelScore> {
  const out = new Map<string, ModelScore>();
  for (const r of records) {
    const run = kind === 'deployable' ? r : r.asIs;
    if (!run) continue;
    out.set(r.model, scoreRun(run, r.family, r.noiseDiscrepancies, config, scale));
  }
  return out;
}
