import { readFileSync } from 'node:fs';
import { STATUSES, type CandidateFile, type CaseResult, type Status } from '@fastkernels/core';

/**
 * A candidate file may declare the outcome it is written to get, with a line `Expected: STATUS` in its header comment
 * (the comment lines before the first line of code). Demonstration sets use it for their deliberately wrong
 * candidates (examples/candidates/cpu-demo), so that the bench output itself says which failures are on purpose.
 */
export function declaredOutcome(source: string, python = false): Status | undefined {
  if (python) return declaredPythonOutcome(source);
  for (const line of source.split('\n')) {
    const t = line.trim();
    if (!t) continue;
    if (!/^(\/\/|\/\*|\*)/.test(t)) return undefined; // the header comment ended
    const m = /^(?:\/\/|\/\*+|\*)\s*Expected:\s*([A-Z_]+)/.exec(t);
    if (m && (STATUSES as readonly string[]).includes(m[1]!)) return m[1] as Status;
  }
  return undefined;
}

/** A Python candidate's header: `#` comment lines and the module docstring before the first line of code. */
function declaredPythonOutcome(source: string): Status | undefined {
  let doc: string | undefined; // the docstring's quotes while inside it
  for (const line of source.split('\n')) {
    let t = line.trim();
    if (doc === undefined) {
      const open = /^[rRuU]?("""|''')/.exec(t);
      if (!t || t.startsWith('#')) t = t.replace(/^#\s*/, '');
      else if (open) {
        const q = open[1]!;
        t = t.slice(open[0].length);
        if (t.includes(q)) t = t.slice(0, t.indexOf(q));
        else doc = q;
      } else return undefined; // the header ended
    } else if (t.includes(doc)) {
      t = t.slice(0, t.indexOf(doc));
      doc = undefined;
    }
    const m = /^Expected:\s*([A-Z_]+)/.exec(t.trim());
    if (m && (STATUSES as readonly string[]).includes(m[1]!)) return m[1] as Status;
  }
  return undefined;
}

/** taskId -> declared status, for the files that declare one. */
export function declaredOutcomes(files: readonly CandidateFile[]): Map<string, Status> {
  const out = new Map<string, Status>();
  for (const f of files) {
    let source: string;
    try {
      source = readFileSync(f.path, 'utf8');
    } catch {
      continue;
    }
    const s = declaredOutcome(source, f.path.endsWith('.py'));
    if (s) out.set(f.taskId, s);
  }
  return out;
}

/** A task's outcome: PASSED when every case passed, else the first other status of its cases. */
function taskOutcome(rows: readonly CaseResult[]): Status {
  return rows.find((r) => r.status !== 'PASSED')?.status ?? 'PASSED';
}

/**
 * The lines printed under the bench table when candidates declare their outcome: each such task, its outcome and
 * whether it is the declared one. Empty when no file declares one.
 */
export function expectedOutcomeLines(declared: ReadonlyMap<string, Status>, results: readonly CaseResult[]): string[] {
  const rows: string[][] = [];
  for (const [task, want] of [...declared].sort(([a], [b]) => a.localeCompare(b))) {
    const mine = results.filter((r) => r.task === task);
    if (!mine.length) continue;
    const got = taskOutcome(mine);
    const verdict = got !== want ? `NOT as declared (the file says ${want})` : want === 'PASSED' ? 'as declared' : 'as declared: wrong on purpose, a demonstration of this status';
    rows.push([task, got, verdict]);
  }
  if (!rows.length) return [];
  const w = [0, 1].map((i) => Math.max(...rows.map((r) => r[i]!.length)));
  return [
    'declared outcomes (an `Expected: STATUS` line in the candidate file\'s header comment):',
    ...rows.map((r) => `  ${r[0]!.padEnd(w[0]!)}  ${r[1]!.padEnd(w[1]!)}  ${r[2]}`),
  ];
}
