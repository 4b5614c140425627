import { geomean } from '@fastkernels/core';
import { caseLevel, type KernelCase } from './kernel-input.js';

/**
 * Kernel-level aggregation (reference/fastkernels.md §5.3):
 * - an op is correct when every case PASSED; an op whose cases were all SKIPPED (the baseline could not
 *   run them) is not benched at all; both as core's `summarizeResults`, so `bench` and `score` agree;
 * - its speedup is the geometric mean over its cases;
 * - per level: ops benched and correct, the geometric mean over correct ops, fast_1 / fast_2 (correct
 *   and speedup > 1 / > 2);
 * - a winner is correct with speedup ≥ the gate (1.0): only winners are deployed end to end.
 */
export interface OpResult {
  readonly task: string;
  readonly level: number;
  readonly cases: number;
  /** Every case SKIPPED: not benched. */
  readonly skipped: boolean;
  readonly correct: boolean;
  /** Geometric mean of the case speedups; null when a case has no positive finite speedup. */
  readonly speedup: number | null;
  readonly winner: boolean;
}

export interface LevelSummary {
  readonly benched: number;
  readonly correct: number;
  /** Geometric mean of per-op speedups over correct ops (null when none is correct). */
  readonly geomean: number | null;
  readonly fast_1: number;
  readonly fast_2: number;
  readonly winners: number;
}

export interface KernelSummary {
  readonly ops: readonly OpResult[];
  /** Keyed `L1`, `L2`, ... */
  readonly levels: Readonly<Record<string, LevelSummary>>;
  /** All levels pooled (the x axis of the kernel-vs-end-to-end chart). */
  readonly overall: LevelSummary;
}

export function aggregateOps(cases: readonly KernelCase[], winnerMinSpeedup = 1): OpResult[] {
  const byTask = new Map<string, KernelCase[]>();
  for (const c of cases) {
    const list = byTask.get(c.task);
    if (list) list.push(c);
    else byTask.set(c.task, [c]);
  }
  const ops: OpResult[] = [];
  for (const [task, list] of byTask) {
    const skipped = list.every((c) => c.status === 'SKIPPED');
    const correct = list.every((c) => c.status === 'PASSED');
    const speeds = list.map((c) => c.speedup);
    const usable = speeds.length > 0 && speeds.every((s): s is number => typeof s === 'number' && Number.isFinite(s) && s > 0);
    const speedup = usable ? geomean(speeds as number[]) : null;
    const levels = new Set(list.map(caseLevel));
    if (levels.size !== 1) throw new Error(`task ${task}: cases disagree on the level (${[...levels].join(', ')})`);
    const level = [...levels][0]!;
    const ok = correct && speedup !== null;
    ops.push({ task, level, cases: list.length, skipped, correct: ok, speedup, winner: ok && speedup >= winnerMinSpeedup });
  }
  return ops.sort((a, b) => a.level - b.level || a.task.localeCompare(b.task));
}

export function summarizeLevel(all: readonly OpResult[]): LevelSummary {
  const ops = all.filter((o) => !o.skipped);
  const correct = ops.filter((o) => o.correct);
  const speeds = correct.map((o) => o.speedup!);
  return {
    benched: ops.length,
    correct: correct.length,
    geomean: speeds.length ? geomean(speeds) : null,
    fast_1: speeds.filter((s) => s > 1).length,
    fast_2: speeds.filter((s) => s > 2).length,
    winners: ops.filter((o) => o.winner).length,
  };
}

export function summarizeKernels(cases: readonly KernelCase[], winnerMinSpeedup = 1): KernelSummary {
  const ops = aggregateOps(cases, winnerMinSpeedup);
  const levels: Record<string, LevelSummary> = {};
  for (const level of [...new Set(ops.map((o) => o.level))].sort((a, b) => a - b)) {
    levels[`L${level}`] = summarizeLevel(ops.filter((o) => o.level === level));
  }
  return { ops, levels, overall: summarizeLevel(ops) };
}

/** One composition delta: `to` mode's level geomean over `from`'s, paired over ops correct in both. */
export interface CompositionDelta {
  /** Ops correct in both modes. */
  readonly n: number;
  /** Geometric mean over the paired ops in the `from` mode. */
  readonly from: number | null;
  readonly to: number | null;
  /** to / from (null when n = 0). */
  readonly ratio: number | null;
  /** Winners of the `from` mode that are not correct in the `to` mode (or absent from it). */
  readonly broke: number;
}

export function compositionDelta(from: readonly OpResult[], to: readonly OpResult[], level: number): CompositionDelta {
  const toByTask = new Map(to.filter((o) => o.level === level).map((o) => [o.task, o]));
  const fromAtLevel = from.filter((o) => o.level === level);
  const pairs = fromAtLevel.filter((o) => o.correct && toByTask.get(o.task)?.correct).map((o) => [o.speedup!, toByTask.get(o.task)!.speedup!] as const);
  const broke = fromAtLevel.filter((o) => o.winner && !toByTask.get(o.task)?.correct).length;
  if (pairs.length === 0) return { n: 0, from: null, to: null, ratio: null, broke };
  const gFrom = geomean(pairs.map((p) => p[0]));
  const gTo = geomean(pairs.map((p) => p[1]));
  return { n: pairs.length, from: gFrom, to: gTo, ratio: gTo / gFrom, broke };
}

export type ModeKey = 'ind' | 'comp' | 'seq';

/**
 * Composition deltas of one agent: independent → composed and composed → sequential, at every level
 * from 2 up (level 1 has no lower levels to compose over). Keys as the original's: `ind_to_comp_L2`.
 */
export function compositionDeltas(modes: Partial<Record<ModeKey, readonly OpResult[]>>): Record<string, CompositionDelta> {
  const out: Record<string, CompositionDelta> = {};
  const levels = new Set<number>();
  for (const ops of Object.values(modes)) for (const o of ops ?? []) if (o.level >= 2) levels.add(o.level);
  const sorted = [...levels].sort((a, b) => a - b);
  const pairs: Array<[ModeKey, ModeKey]> = [['ind', 'comp'], ['comp', 'seq']];
  for (const [a, b] of pairs) {
    const from = modes[a];
    const to = modes[b];
    if (!from || !to) continue;
    for (const level of sorted) out[`${a}_to_${b}_L${level}`] = compositionDelta(from, to, level);
  }
  return out;
}
