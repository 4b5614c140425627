import { Rng } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { LAMBDA_KEYS, resolveConfig } from './config.js';
import type { E2eModelRecord, Outcome } from './e2e-record.js';
import { macroEval, scoreRecords, universeFromRecords, type MacroScore } from './macroeval.js';

/** A tiny seeded generator of e2e records (core's Rng), for properties that must hold on any board. */
const config = resolveConfig();
const FAMILIES = ['llm', 'linear_attn', 'vision', 'multimodal', 'edge', 'robotics'];

function genRecord(rng: Rng, id: string, family: string): E2eModelRecord {
  const r = rng.uniform();
  const outcome: Outcome = r < 0.12 ? 'crash' : r < 0.16 ? 'timeout' : r < 0.2 ? 'incomplete' : 'ok';
  const drift = rng.uniform() < 0.25 ? rng.uniform() * 0.3 : 0;
  const n = rng.int(1, 30);
  return {
    model: id,
    family,
    outcome,
    throughputSpeedup: Math.exp(0.3 * rng.normal()),
    latencySpeedup: Math.exp(0.3 * rng.normal()),
    discrepancies: outcome === 'ok' ? Array.from({ length: n }, () => Math.abs(drift + 0.01 * rng.normal())) : [],
    unrelatedDistance: 1,
    noiseDiscrepancies: Array.from({ length: rng.int(0, 20) }, () => Math.abs(0.01 * rng.normal())),
    drops: [],
  };
}

function genBoard(seed: number): E2eModelRecord[] {
  const rng = new Rng(seed);
  const records: E2eModelRecord[] = [];
  const nFam = rng.int(1, FAMILIES.length + 1);
  for (let f = 0; f < nFam; f++) {
    const size = rng.int(1, 5);
    for (let i = 0; i < size; i++) records.push(genRecord(rng, `${FAMILIES[f]}-${i}`, FAMILIES[f]!));
  }
  return records;
}

function score(records: readonly E2eModelRecord[]): MacroScore {
  return macroEval(universeFromRecords(records), scoreRecords(records, config));
}

const SEEDS = Array.from({ length: 300 }, (_, i) => 1000 + i);

describe('MacroEval properties (300 seeded boards each)', () => {
  it('a faster valid model never lowers S (nor the Score), at every λ', () => {
    let checked = 0;
    for (const seed of SEEDS) {
      const records = genBoard(seed);
      const before = score(records);
      const scores = scoreRecords(records, config);
      const rng = new Rng(seed ^ 0x5bd1e995);
      const valid = records.filter((r) => scores.get(r.model)!.valid);
      if (!valid.length) continue;
      const pick = valid[rng.int(0, valid.length)]!;
      const faster = records.map((r) => (r === pick ? { ...r, throughputSpeedup: r.throughputSpeedup! * (1 + rng.uniform()), latencySpeedup: r.latencySpeedup! * (1 + rng.uniform()) } : r));
      const after = score(faster);
      for (const k of LAMBDA_KEYS) {
        expect(after.S_macro[k]!).toBeGreaterThanOrEqual(before.S_macro[k]! * (1 - 1e-12));
        expect(after.score[k]).toBeGreaterThanOrEqual(before.score[k] * (1 - 1e-12));
      }
      expect(after.C_macro).toBe(before.C_macro);
      checked++;
    }
    expect(checked).toBeGreaterThan(200);
  });

  it('a failed model counts 0 in C and coverage and does not enter S', () => {
    for (const seed of SEEDS) {
      const records = genBoard(seed);
      const rng = new Rng(seed + 7);
      const pick = records[rng.int(0, records.length)]!;
      const failed = records.map((r) => (r === pick ? { ...r, outcome: 'crash' as const, detail: 'runtime' } : r));
      const universe = universeFromRecords(failed);
      const scores = scoreRecords(failed, config);
      expect(scores.get(pick.model)).toMatchObject({ C: 0, valid: false });
      const m = macroEval(universe, scores);
      const fam = m.families[pick.family]!;
      const members = failed.filter((r) => r.family === pick.family);
      const others = members.filter((r) => r !== pick).map((r) => scores.get(r.model)!);
      // C_f and coverage_f: the failed model is in the denominator with 0 in the numerator.
      expect(fam.n).toBe(members.length);
      expect(fam.C_f).toBeCloseTo(others.reduce((a, s) => a + s.C, 0) / members.length, 12);
      expect(fam.coverage_f).toBeCloseTo(others.filter((s) => s.valid).length / members.length, 12);
      // S_f: exactly the S_f of the other models (the failed one's speed is ignored however fast it is).
      const fastFail = failed.map((r) => (r.model === pick.model ? { ...r, throughputSpeedup: 1e6, latencySpeedup: 1e6 } : r));
      expect(macroEval(universe, scoreRecords(fastFail, config)).families[pick.family]!.S_f).toEqual(fam.S_f);
    }
  });

  it('families weigh equally whatever their size', () => {
    for (const seed of SEEDS.slice(0, 100)) {
      const records = genBoard(seed);
      const base = score(records);
      // Replicating every model of one family k times changes nothing: the family's means are the same.
      const fam = records[0]!.family;
      const replicated = records.flatMap((r) => (r.family === fam ? [0, 1, 2].map((k) => ({ ...r, model: `${r.model}#${k}` })) : [r]));
      const rep = score(replicated);
      expect(rep.C_macro).toBeCloseTo(base.C_macro, 12);
      expect(rep.coverage_macro).toBeCloseTo(base.coverage_macro, 12);
      for (const k of LAMBDA_KEYS) {
        if (base.S_macro[k] === null) expect(rep.S_macro[k]).toBeNull();
        else expect(rep.S_macro[k]!).toBeCloseTo(base.S_macro[k]!, 12);
      }
      // And each family's C_f enters with weight 1/F.
      const F = Object.keys(base.families).length;
      expect(base.C_macro).toBeCloseTo(Object.values(base.families).reduce((a, f) => a + f.C_f, 0) / F, 12);
    }
  });

  it('Score = S × C × Coverage, 0 when no model is valid, and lies in [0, S]', () => {
    for (const seed of SEEDS) {
      const m = score(genBoard(seed));
      for (const k of LAMBDA_KEYS) {
        if (m.S_macro[k] === null) {
          expect(m.score[k]).toBe(0);
          expect(m.coverage_macro).toBe(0);
        } else {
          expect(m.score[k]).toBeCloseTo(m.S_macro[k]! * m.C_macro * m.coverage_macro, 12);
          expect(m.score[k]).toBeLessThanOrEqual(m.S_macro[k]! + 1e-12);
        }
      }
      expect(m.C_macro).toBeGreaterThanOrEqual(0);
      expect(m.C_macro).toBeLessThanOrEqual(1);
    }
  });

  it('S is averaged only over families with a valid model', () => {
    const mk = (model: string, family: string, outcome: Outcome, thr: number): E2eModelRecord => ({
      model, family, outcome, throughputSpeedup: thr, latencySpeedup: thr, discrepancies: outcome === 'ok' ? [0] : [], unrelatedDistance: 1, noiseDiscrepancies: [], drops: [],
    });
    const m = score([mk('a', 'x', 'ok', 1.21), mk('b', 'y', 'crash', 5), mk('c', 'z', 'ok', 1)]);
    expect(m.S_macro.blend).toBeCloseTo(1.1, 12);
    expect(m.n_families_valid).toBe(2);
    expect(m.coverage_macro).toBeCloseTo(2 / 3, 12);
  });
});
