/**
 * The baseline's measured times for a task from the last recorded GPU run: `bench/results/<device>/kernels.json`
 * (the kernels suite: our baseline kernel per case, with PyTorch's beside it), newest run first by the suite's
 * history.jsonl. Read with zod; a file that does not parse is skipped with the reason, never trusted.
 */
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';

const RowSchema = z.looseObject({
  task: z.string(),
  case: z.string(),
  dtype: z.string(),
  dims: z.record(z.string(), z.number()),
  options: z.record(z.string(), z.unknown()).default({}),
  status: z.string(),
  ms: z.number().nullable(),
  torchEagerMs: z.number().nullable().optional(),
  torchCompiledMs: z.number().nullable().optional(),
});
const KernelsFileSchema = z.looseObject({ commit: z.string().nullable().optional(), gpu: z.string(), rows: z.array(RowSchema) });
const HistorySchema = z.looseObject({ date: z.string(), suite: z.string(), run: z.number().optional() });

export interface RecordedTime {
  readonly case: string;
  readonly dtype: string;
  readonly dims: Readonly<Record<string, number>>;
  readonly options: Readonly<Record<string, unknown>>;
  readonly ms: number | null;
  readonly torchMs: number | null;
}

export interface RecordedRun {
  /** The file, relative to the results folder (h200/kernels.json). */
  readonly file: string;
  readonly device: string;
  readonly commit: string | null;
  /** The run's date from history.jsonl, when it says. */
  readonly date: string | null;
  readonly rows: readonly RecordedTime[];
}

/** The results folders to look in: --results, ./bench/results, and the repository's (beside this package). */
export function resultsFolders(explicit?: string): string[] {
  const out = explicit ? [resolve(explicit)] : [];
  out.push(resolve('bench/results'));
  try {
    out.push(resolve(dirname(fileURLToPath(import.meta.url)), '../../../../bench/results'));
  } catch {
    /* bundled: no file URL */
  }
  return [...new Set(out)].filter((d) => existsSync(d));
}

function lastKernelsRunDate(deviceDir: string): string | null {
  const path = join(deviceDir, 'history.jsonl');
  if (!existsSync(path)) return null;
  let date: string | null = null;
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    if (!line.trim()) continue;
    try {
      const h = HistorySchema.safeParse(JSON.parse(line));
      if (h.success && h.data.suite === 'kernels') date = h.data.date;
    } catch {
      /* a malformed line says nothing */
    }
  }
  return date;
}

/** The recorded baseline times of a task, newest run first; `skipped` lists files that did not parse. */
export function recordedBaselineTimes(taskId: string, folders: readonly string[]): { runs: RecordedRun[]; skipped: string[] } {
  const runs: RecordedRun[] = [];
  const skipped: string[] = [];
  for (const root of folders) {
    for (const dev of readdirSync(root, { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name).sort()) {
      const path = join(root, dev, 'kernels.json');
      if (!existsSync(path)) continue;
      let parsed;
      try {
        parsed = KernelsFileSchema.safeParse(JSON.parse(readFileSync(path, 'utf8')));
      } catch (e) {
        skipped.push(`${path}: ${(e as Error).message}`);
        continue;
      }
      if (!parsed.success) {
        skipped.push(`${path}: ${parsed.error.issues[0]?.path.join('.')}: ${parsed.error.issues[0]?.message}`);
        continue;
      }
      const rows = parsed.data.rows
        .filter((r) => r.task === taskId && r.status === 'ok')
        .map((r) => ({ case: r.case, dtype: r.dtype, dims: r.dims, options: r.options, ms: r.ms, torchMs: minOf(r.torchEagerMs, r.torchCompiledMs) }));
      if (rows.length) runs.push({ file: `${dev}/kernels.json`, device: parsed.data.gpu, commit: parsed.data.commit?.slice(0, 7) ?? null, date: lastKernelsRunDate(join(root, dev)), rows });
    }
    if (runs.length) break; // the first folder that has any: an explicit --results wins over the repository's
  }
  runs.sort((a, b) => (b.date ?? '').localeCompare(a.date ?? ''));
  return { runs, skipped };
}

/** Is a recorded row the same shape as a task case (dtype, every shared dim, the same options)? */
export function sameCase(r: RecordedTime, c: { dtype: string; dims: Readonly<Record<string, number>>; options: Readonly<Record<string, unknown>> }): boolean {
  const shared = Object.keys(r.dims).filter((k) => k in c.dims);
  const opts = (o: Readonly<Record<string, unknown>>) => JSON.stringify(Object.fromEntries(Object.entries(o).filter(([, v]) => v !== false && v !== undefined).sort()));
  return r.dtype === c.dtype && shared.length > 0 && shared.every((k) => r.dims[k] === c.dims[k]) && opts(r.options) === opts(c.options);
}

function minOf(a: number | null | undefined, b: number | null | undefined): number | null {
  const xs = [a, b].filter((x): x is number => typeof x === 'number');
  return xs.length ? Math.min(...xs) : null;
}
