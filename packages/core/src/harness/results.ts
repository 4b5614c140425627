import { z } from 'zod';
import { CaseResultSchema, RunEnvironmentSchema } from './report.js';

/**
 * The results file of `fastkernels bench --results FILE.jsonl`: one JSON object per line, flushed as
 * each task finishes, so a killed run resumes (`--resume`) with nothing lost or duplicated.
 *   line 1: the header (format, version, configuration);
 *   then one `task` line per finished task (all its cases).
 * A line cut short by a kill is dropped on resume. Shards of one run (`--shard i/n`) have headers that
 * differ only in `shard`; `fastkernels merge` combines them.
 */
export const RESULTS_FORMAT = 'fastkernels-bench-results';
export const RESULTS_VERSION = 1;

export const ShardSchema = z.object({ index: z.number().int().nonnegative(), count: z.number().int().positive() });
export type Shard = z.infer<typeof ShardSchema>;

/** What must match for results to be comparable (resume: all of it; merge: all but `shard`). */
export const BenchConfigSchema = z.object({
  candidates: z.string(),
  /** sha256 over the candidate files (path + content), or 'self-test'. */
  candidatesDigest: z.string(),
  backend: z.string(),
  rounds: z.number().int().positive(),
  iters: z.number().int().nonnegative(),
  warmup: z.number().int().nonnegative(),
  warmupMs: z.number().nonnegative(),
  seed: z.number().int(),
  shapes: z.string(),
  /** sha256 over the capture indexes used, or null. */
  capturesDigest: z.string().nullable(),
  maxShapes: z.number().int().positive(),
  flushBytes: z.number().int().nonnegative().nullable(),
  tasks: z.array(z.string()),
  shard: ShardSchema,
});
export type BenchConfig = z.infer<typeof BenchConfigSchema>;

export const ResultsHeaderSchema = z.object({
  kind: z.literal('header'),
  format: z.literal(RESULTS_FORMAT),
  version: z.number().int(),
  cli: z.string(),
  createdAt: z.string(),
  config: BenchConfigSchema,
});
export type ResultsHeader = z.infer<typeof ResultsHeaderSchema>;


export const ResultsTaskLineSchema = z.object({
  kind: z.literal('task'),
  task: z.string(),
  finishedAt: z.string(),
  env: RunEnvironmentSchema.optional(),
  results: z.array(CaseResultSchema).min(1),
});
export type ResultsTaskLine = z.infer<typeof ResultsTaskLineSchema>;

/** Why two configurations differ (field names and values), or [] when they agree. */
export function configDifferences(a: BenchConfig, b: BenchConfig, options: { ignoreShard?: boolean } = {}): string[] {
  const out: string[] = [];
  for (const k of Object.keys(BenchConfigSchema.shape) as (keyof BenchConfig)[]) {
    if (options.ignoreShard && k === 'shard') continue;
    if (k === 'candidates') continue; // where the set lies differs between hosts; its digest decides
    const x = JSON.stringify(a[k]);
    const y = JSON.stringify(b[k]);
    if (x !== y) out.push(`${k}: ${x.length > 60 ? `${x.slice(0, 57)}...` : x} vs ${y.length > 60 ? `${y.slice(0, 57)}...` : y}`);
  }
  return out;
}

/** Deterministic split of tasks over shards: sorted by id, task k goes to shard k mod n. */
export function shardTasks<T extends { readonly id: string }>(tasks: readonly T[], shard: Shard): T[] {
  return [...tasks].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)).filter((_, k) => k % shard.count === shard.index);
}

export interface MergeInput {
  readonly path: string;
  readonly header: ResultsHeader;
  readonly lines: readonly ResultsTaskLine[];
}

export interface MergeConflict {
  readonly task: string;
  readonly files: readonly string[];
  readonly detail: string;
}

/** The statuses of a task line, case by case (what must agree between duplicates). */
function outcome(l: ResultsTaskLine): string {
  return l.results.map((r) => `${r.case}:${r.status}`).join(',');
}

/**
 * Merge result files of one configuration (shards, or reruns): the first line per task is kept,
 * duplicates with the same per-case statuses are dropped, duplicates that disagree are conflicts
 * (the first is kept, the conflict reported). Throws when the configurations differ.
 */
export function mergeResults(inputs: readonly MergeInput[]): { header: ResultsHeader; lines: ResultsTaskLine[]; duplicates: number; conflicts: MergeConflict[]; shards: Shard[] } {
  if (inputs.length === 0) throw new Error('nothing to merge');
  const first = inputs[0]!;
  for (const inp of inputs.slice(1)) {
    const diff = configDifferences(first.header.config, inp.header.config, { ignoreShard: true });
    if (diff.length) throw new Error(`${inp.path} was run with another configuration than ${first.path}: ${diff.join('; ')}`);
    if (inp.header.version !== first.header.version) throw new Error(`${inp.path} has results format version ${inp.header.version}, ${first.path} has ${first.header.version}`);
  }
  const kept = new Map<string, { line: ResultsTaskLine; path: string }>();
  const conflicts: MergeConflict[] = [];
  let duplicates = 0;
  for (const inp of inputs) {
    for (const l of inp.lines) {
      const prev = kept.get(l.task);
      if (!prev) {
        kept.set(l.task, { line: l, path: inp.path });
        continue;
      }
      duplicates++;
      if (outcome(prev.line) !== outcome(l)) {
        conflicts.push({ task: l.task, files: [prev.path, inp.path], detail: `${outcome(prev.line)} vs ${outcome(l)}` });
      }
    }
  }
  const shards = inputs.map((i) => i.header.config.shard);
  const lines = [...kept.values()].map((k) => k.line).sort((a, b) => (a.task < b.task ? -1 : a.task > b.task ? 1 : 0));
  const header: ResultsHeader = { ...first.header, config: { ...first.header.config, shard: { index: 0, count: 1 } } };
  return { header, lines, duplicates, conflicts, shards };
}
