import { geomean } from '../stats.js';
import { worstStatus, type Status } from '../status.js';
import type { CaseResult } from './bench.js';

/**
 * Kernel-level aggregation (KernelBench's conventions):
 * - a task's status is the worst over its cases; it is correct when every case PASSED;
 * - a task's speedup is the geometric mean over its cases (so is its CI, bound by bound: a summary,
 *   not a statistical interval);
 * - fast_p is the share of benched tasks that are correct AND faster than p x the baseline;
 * - tasks whose baseline failed (SKIPPED) are not counted as benched.
 */
export interface TaskSummary {
  readonly task: string;
  readonly level: number;
  readonly status: Status;
  readonly correct: boolean;
  readonly cases: number;
  readonly speedup: number | null;
  readonly ciLow: number | null;
  readonly ciHigh: number | null;
  readonly fast1: boolean;
  readonly fast2: boolean;
}

export interface LevelSummary {
  readonly level: number;
  readonly benched: number;
  readonly correct: number;
  readonly fast1: number;
  readonly fast2: number;
  /** Geometric mean of the speedups of the correct tasks (null when none is correct and timed). */
  readonly geomeanSpeedup: number | null;
}

export interface BenchSummary {
  readonly tasks: readonly TaskSummary[];
  readonly levels: readonly LevelSummary[];
  readonly total: LevelSummary & {
    /** fast_1 and fast_2 as shares of the benched tasks (0 when nothing was benched). */
    readonly fast1Ratio: number;
    readonly fast2Ratio: number;
    readonly skipped: number;
  };
}

const finiteOrNull = (x: number): number | null => (Number.isFinite(x) ? x : null);

function taskSummary(task: string, cases: readonly CaseResult[]): TaskSummary {
  const status = worstStatus(cases.map((c) => c.status));
  const correct = cases.length > 0 && cases.every((c) => c.status === 'PASSED');
  const timed = correct && cases.every((c) => c.speedup !== null && c.speedup > 0);
  const speedup = timed ? finiteOrNull(geomean(cases.map((c) => c.speedup!))) : null;
  const bounds = (k: 'ciLow' | 'ciHigh') => (timed && cases.every((c) => c[k] !== null && c[k]! > 0) ? finiteOrNull(geomean(cases.map((c) => c[k]!))) : null);
  return {
    task,
    level: cases[0]?.level ?? 0,
    status: cases.length > 0 && cases.every((c) => c.status === 'SKIPPED') ? 'SKIPPED' : status,
    correct,
    cases: cases.length,
    speedup,
    ciLow: bounds('ciLow'),
    ciHigh: bounds('ciHigh'),
    fast1: speedup !== null && speedup > 1,
    fast2: speedup !== null && speedup > 2,
  };
}

function levelSummary(level: number, tasks: readonly TaskSummary[]): LevelSummary {
  const benched = tasks.filter((t) => t.status !== 'SKIPPED');
  const speeds = benched.filter((t) => t.correct && t.speedup !== null).map((t) => t.speedup!);
  return {
    level,
    benched: benched.length,
    correct: benched.filter((t) => t.correct).length,
    fast1: benched.filter((t) => t.fast1).length,
    fast2: benched.filter((t) => t.fast2).length,
    geomeanSpeedup: speeds.length ? finiteOrNull(geomean(speeds)) : null,
  };
}

export function summarizeResults(results: readonly CaseResult[]): BenchSummary {
  const byTask = new Map<string, CaseResult[]>();
  for (const r of results) {
    const list = byTask.get(r.task) ?? [];
    list.push(r);
    byTask.set(r.task, list);
  }
  const tasks = [...byTask].map(([t, cs]) => taskSummary(t, cs)).sort((a, b) => a.level - b.level || a.task.localeCompare(b.task));
  const levels = [...new Set(tasks.map((t) => t.level))].sort((a, b) => a - b).map((l) => levelSummary(l, tasks.filter((t) => t.level === l)));
  const all = levelSummary(0, tasks);
  return {
    tasks,
    levels,
    total: {
      ...all,
      fast1Ratio: all.benched ? all.fast1 / all.benched : 0,
      fast2Ratio: all.benched ? all.fast2 / all.benched : 0,
      skipped: tasks.length - all.benched,
    },
  };
}
