import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { BENCH_REPORT_VERSION, BenchReportSchema, UserError, errorMessage, mergeResults, summarizeResults, type RunEnvironment } from '@fastkernels/core';
import type { Argv } from 'yargs';
import { readResultsFile } from '../bench/results-file.js';
import type { Io } from '../io.js';
import { cliVersion } from '../version.js';

export interface MergeArgs {
  files?: string[];
  out?: string;
  json?: string;
}

function writeAtomic(path: string, text: string, field: string): void {
  try {
    mkdirSync(dirname(resolve(path)), { recursive: true });
    writeFileSync(`${path}.partial`, text);
    renameSync(`${path}.partial`, path);
  } catch (e) {
    throw new UserError(`cannot write it (${(e as NodeJS.ErrnoException).code ?? errorMessage(e)})`, { file: path, field, fix: 'pass a writable path' });
  }
}

/** `fastkernels merge A.jsonl B.jsonl ...`: combine result files of shards (or reruns) of one configuration. */
export function runMerge(argv: MergeArgs, io: Io): void {
  const files = argv.files ?? [];
  if (files.length === 0) throw new UserError('no result files given', { field: 'files', fix: 'pass the --results files of the shards: `fastkernels merge out/shard-*.jsonl --out out/all.jsonl`' });
  const inputs = files.map((f) => ({ path: f, ...readResultsFile(f, 'files') }));
  let merged;
  try {
    merged = mergeResults(inputs);
  } catch (e) {
    throw new UserError(errorMessage(e), { field: 'files', fix: 'merge only shards of one run (same flags, same candidate set, same CLI version)' });
  }
  const expected = new Set(merged.header.config.tasks);
  const missing = [...expected].filter((t) => !merged.lines.some((l) => l.task === t));
  const shardsSeen = new Set(merged.shards.map((s) => `${s.index}/${s.count}`));
  const results = merged.lines.flatMap((l) => l.results);
  if (argv.out) {
    writeAtomic(argv.out, [merged.header, ...merged.lines].map((x) => JSON.stringify(x)).join('\n') + '\n', '--out');
  }
  if (argv.json) {
    const envs: RunEnvironment[] = [];
    for (const l of merged.lines) if (l.env && !envs.some((e) => JSON.stringify(e) === JSON.stringify(l.env))) envs.push(l.env);
    const c = merged.header.config;
    const e0 = envs[0];
    const report = BenchReportSchema.parse(JSON.parse(JSON.stringify({
      version: BENCH_REPORT_VERSION, createdAt: new Date().toISOString(), complete: missing.length === 0,
      ...(missing.length ? { error: `${missing.length} task(s) missing from the merged files: ${missing.slice(0, 10).join(', ')}` } : {}),
      candidates: c.candidates, backend: c.backend,
      device: { index: e0?.deviceIndex ?? 0, name: e0?.device ?? c.backend, totalMemory: 0, multiprocessors: 0 },
      versions: { fastkernels: cliVersion(), ...(e0?.versions ?? {}) },
      options: { rounds: c.rounds, iters: c.iters, warmup: c.warmup, warmupMs: c.warmupMs, seed: c.seed, shapes: c.shapes, maxShapes: c.maxShapes, flushBytes: c.flushBytes },
      ...(envs.length ? { machine: envs } : {}),
      ...(merged.conflicts.length ? { conflicts: merged.conflicts } : {}),
      results, summary: summarizeResults(results),
    })));
    writeAtomic(argv.json, JSON.stringify(report, null, 2) + '\n', '--json');
  }
  for (const c of merged.conflicts) io.err(`fastkernels merge: conflict: ${c.task} differs between ${c.files.join(' and ')}: ${c.detail} (kept the first)\n`);
  io.out(`merged ${files.length} file(s) (shards ${[...shardsSeen].join(', ')}): ${merged.lines.length} tasks, ${results.length} cases, ${merged.duplicates} duplicate(s) dropped, ${merged.conflicts.length} conflict(s)${missing.length ? `, ${missing.length} task(s) missing: ${missing.slice(0, 10).join(', ')}` : ''}\n`);
  if (argv.out) io.out(`results: ${argv.out}\n`);
  if (argv.json) io.out(`report: ${argv.json}\n`);
}

export function mergeCommand(io: Io) {
  return {
    command: 'merge <files..>',
    describe: 'Combine --results files of shards (or reruns) of one bench configuration',
    builder: (y: Argv) =>
      y
        .positional('files', { type: 'string', array: true, describe: 'results files (.jsonl) written by bench --results' })
        .option('out', { type: 'string', describe: 'write the merged results file (.jsonl)' })
        .option('json', { type: 'string', describe: 'write the merged JSON report' })
        .example('$0 merge out/shard-*.jsonl --out out/all.jsonl --json out/report.json', 'the shards of a Slurm array or a Kubernetes indexed Job')
        .epilog('Duplicates (a task in two files) are dropped; when their statuses differ that is a conflict: reported, the first kept.\nFiles from another configuration or results format version are an error (exit 2).'),
    handler: (argv: MergeArgs) => runMerge(argv, io),
  };
}
