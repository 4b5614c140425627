import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import {
  BENCH_REPORT_VERSION,
  BenchReportSchema,
  MIN_ROUNDS,
  UserError,
  benchTask,
  errorMessage,
  summarizeResults,
  type Backend,
  type BenchReport,
  type CaseResult,
  type CandidateFile,
  type TaskCase,
  type TaskDefinition,
} from '@fastkernels/core';
import type { Argv } from 'yargs';
import { EsbuildCandidateLoader, listCandidateFiles } from '../candidates/loader.js';
import { environment, findTask, selectBackend } from '../env.js';
import { intFlag, levelFlag, listFlag } from '../flags.js';
import type { Io } from '../io.js';
import { Progress } from '../output/progress.js';
import { formatError, formatMs, formatPercent, formatSpeedup, renderTable } from '../output/table.js';
import { cliVersion } from '../version.js';

export interface BenchArgs {
  candidates: string;
  task?: string[];
  level?: number;
  backend: string;
  rounds: number;
  iters: number;
  warmup: number;
  warmupMs: number;
  seed: number;
  shapes?: string;
  json?: string;
  progress?: boolean;
  keepGoing?: boolean;
}

/** Ctrl-C during a run: the report keeps what was done; exit code 130. */
export class InterruptedError extends Error {
  override readonly name = 'InterruptedError';
}

/** Writes the JSON report atomically (temp file + rename), validated by BenchReportSchema first. */
class ReportWriter {
  constructor(readonly path: string, private readonly base: Omit<BenchReport, 'results' | 'summary' | 'complete' | 'error'>) {}

  write(results: readonly CaseResult[], complete: boolean, error?: string): void {
    const report = { ...this.base, complete, ...(error ? { error } : {}), results, summary: summarizeResults(results) };
    const parsed = BenchReportSchema.safeParse(JSON.parse(JSON.stringify(report)));
    if (!parsed.success) throw new Error(`internal: the bench report does not match its schema: ${parsed.error.issues[0]?.path.join('.')}: ${parsed.error.issues[0]?.message}`);
    const text = JSON.stringify(parsed.data, null, 2) + '\n';
    if (this.path === '-') return;
    try {
      mkdirSync(dirname(resolve(this.path)), { recursive: true });
      const tmp = `${this.path}.partial`;
      writeFileSync(tmp, text);
      renameSync(tmp, this.path);
    } catch (e) {
      throw new UserError(`cannot write the report (${(e as NodeJS.ErrnoException).code ?? errorMessage(e)})`, { file: this.path, field: '--json', fix: 'pass a writable file path' });
    }
  }

  text(results: readonly CaseResult[], complete: boolean): string {
    return JSON.stringify(BenchReportSchema.parse(JSON.parse(JSON.stringify({ ...this.base, complete, results, summary: summarizeResults(results) }))), null, 2) + '\n';
  }
}

function casesFor(task: TaskDefinition, shapes: string): readonly TaskCase[] {
  if (shapes === 'production') return task.cases.production;
  if (shapes === 'all') return [...task.cases.ci, ...task.cases.production];
  return task.cases.ci;
}

function loadFailureRows(task: TaskDefinition | undefined, file: CandidateFile, message: string): CaseResult[] {
  return [{
    task: file.taskId, level: file.level, case: 'load', dtype: task?.cases.ci[0]?.dtype ?? 'f32', status: 'RUNTIME_ERROR',
    maxAbsError: null, maxRelError: null, matchedRatio: null, baselineMs: null, candidateMs: null, speedup: null, ciLow: null, ciHigh: null,
    rounds: 0, iters: 0, detail: `failed to load: ${message}`,
  }];
}

export async function runBench(argv: BenchArgs, io: Io): Promise<void> {
  // ---- flags -------------------------------------------------------------------------------------
  const rounds = intFlag('rounds', argv.rounds, MIN_ROUNDS, 1000);
  const iters = intFlag('iters', argv.iters, 0, 100_000);
  const warmup = intFlag('warmup', argv.warmup, 0, 10_000);
  const warmupMs = intFlag('warmup-ms', argv.warmupMs, 0, 600_000);
  const seed = intFlag('seed', argv.seed, 0, 2 ** 31 - 1);
  const level = levelFlag(argv.level);
  const env = environment();
  const wanted = listFlag(argv.task).map((t) => findTask(env, t, '--task'));
  const backend: Backend = selectBackend(env, argv.backend);
  const shapes = argv.shapes ?? (backend.name === 'cpu' ? 'ci' : 'production');
  const jsonOut = argv.json === undefined ? undefined : argv.json === '' ? '-' : argv.json;

  // ---- the candidate set ---------------------------------------------------------------------------
  const files = listCandidateFiles(argv.candidates);
  const selected = (f: CandidateFile) => (level === undefined || f.level === level) && (wanted.length === 0 || wanted.some((t) => t.id === f.taskId));
  for (const t of wanted) {
    if (!files.some((f) => f.taskId === t.id)) {
      throw new UserError(`has no candidate for ${t.id} (it holds ${files.map((f) => f.taskId).join(', ') || 'none'})`, {
        file: argv.candidates, field: '--task', fix: `add ${argv.candidates}/L${t.level}/${t.stem}.ts, or drop --task`,
      });
    }
  }
  if (!files.some(selected)) {
    throw new UserError(files.length ? 'holds no candidate for the selected tasks/level' : 'holds no candidate files', {
      file: argv.candidates, field: '--candidates',
      fix: 'put candidates at L<level>/<task stem>.ts (e.g. L1/rms_norm.ts); `fastkernels stubs --out DIR` writes skeletons',
    });
  }
  const progress = new Progress({ force: argv.progress });
  progress.update(`loading candidates from ${argv.candidates} ...`);
  const set = await new EsbuildCandidateLoader({ filter: selected }).load(argv.candidates, env.taskMap);
  progress.clear();
  if (set.failures.length && !argv.keepGoing) {
    const first = set.failures[0]!.error;
    if (set.failures.length === 1) throw first;
    throw new UserError(`${set.failures.length} candidate files failed to load:\n${set.failures.map((f) => `  ${f.error.describe().replace(/\n/g, '\n    ')}`).join('\n')}`, {
      fix: 'fix the files above, or pass --keep-going to bench the others (failures become RUNTIME_ERROR rows)',
    });
  }

  const candidateRegistry = env.registry.child(`candidates:${argv.candidates}`);
  for (const c of set.candidates) candidateRegistry.override(c.task.id, c.cls);

  // ---- the report --------------------------------------------------------------------------------
  const device = backend.devices()[0];
  const writer = jsonOut
    ? new ReportWriter(jsonOut, {
        version: BENCH_REPORT_VERSION,
        createdAt: new Date().toISOString(),
        candidates: argv.candidates,
        backend: backend.name,
        device: {
          index: device?.index ?? 0, name: device?.name ?? backend.name, totalMemory: device?.totalMemory ?? 0, multiprocessors: device?.multiprocessors ?? 0,
          ...(device?.computeCapability ? { computeCapability: device.computeCapability } : {}),
        },
        versions: { fastkernels: cliVersion(), node: process.version, ...backend.versions() },
        options: { rounds, iters, warmup, warmupMs, seed, shapes },
      })
    : undefined;
  const results: CaseResult[] = [];
  for (const f of set.failures) results.push(...loadFailureRows(env.taskMap.get(f.file.taskId), f.file, f.error.message));
  writer?.write(results, false); // fails early (exit 2) when the path is not writable

  // ---- bench, task by task; the report is rewritten after each task --------------------------------
  let interrupted = false;
  const onSigint = () => {
    interrupted = true;
  };
  process.once('SIGINT', onSigint);
  try {
    const todo = set.candidates.map((c) => c.task).sort((a, b) => a.level - b.level || a.id.localeCompare(b.id));
    for (const [i, task] of todo.entries()) {
      if (interrupted) throw new InterruptedError(`interrupted after ${i} of ${todo.length} tasks${writer && jsonOut !== '-' ? `; the results so far are in ${jsonOut}` : ''}`);
      const cases = casesFor(task, shapes);
      const rs = await benchTask({
        task, baseline: env.registry, candidate: candidateRegistry, backend, device: device?.index ?? 0,
        cases, rounds, warmup, warmupMs, iters, seed, correctnessOnly: iters === 0,
        onProgress: (p) => progress.update(
          `[${i + 1}/${todo.length}] ${p.task} ${p.case} (${p.caseIndex + 1}/${p.caseCount}): ${p.phase}${p.total > 1 ? ` ${p.done}/${p.total}` : ''}`,
          `${p.task}/${p.case}/${p.phase}`,
        ),
      });
      results.push(...rs);
      writer?.write(results, false);
    }
  } catch (e) {
    progress.clear();
    if (writer) {
      try {
        writer.write(results, false, errorMessage(e));
      } catch {
        // keep the original error
      }
    }
    throw e;
  } finally {
    process.removeListener('SIGINT', onSigint);
  }
  progress.clear();
  writer?.write(results, true);

  if (jsonOut === '-') {
    io.out(writer!.text(results, true));
    return;
  }
  printResults(io, results, backend, argv.candidates, shapes);
  if (writer) io.out(`\nreport: ${jsonOut}\n`);
}

function printResults(io: Io, results: readonly CaseResult[], backend: Backend, dir: string, shapes: string): void {
  io.out(`fastkernels bench: ${dir} on ${backend.name} (${backend.devices()[0]?.name ?? 'device 0'}), ${shapes} shapes\n\n`);
  io.out(renderTable(
    [
      { header: 'task' }, { header: 'case' }, { header: 'dtype' }, { header: 'status' }, { header: 'max err', align: 'right' },
      { header: 'baseline ms', align: 'right' }, { header: 'cand ms', align: 'right' }, { header: 'speedup [95% CI]', align: 'right' },
    ],
    results.map((r) => [r.task, r.case, r.dtype, r.status, formatError(r.maxAbsError), formatMs(r.baselineMs), formatMs(r.candidateMs), formatSpeedup(r.speedup, r.ciLow, r.ciHigh)]),
  ));
  const notes = results.filter((r) => r.detail);
  if (notes.length) {
    io.out('\ndetails:\n');
    for (const r of notes) io.out(`  ${r.task} ${r.case}: ${r.status}: ${r.detail}\n`);
  }
  const s = summarizeResults(results);
  io.out('\nsummary (a task is correct when all its cases pass; its speedup is the geometric mean over its cases):\n');
  io.out(renderTable(
    [{ header: 'level' }, { header: 'benched', align: 'right' }, { header: 'correct', align: 'right' }, { header: 'fast_1', align: 'right' }, { header: 'fast_2', align: 'right' }, { header: 'geomean speedup (correct)', align: 'right' }],
    [...s.levels.map((l) => ({ ...l, name: `L${l.level}` })), { ...s.total, name: 'all' }].map((l) => [
      l.name, String(l.benched), String(l.correct), String(l.fast1), String(l.fast2), formatSpeedup(l.geomeanSpeedup),
    ]),
    '  ',
  ));
  const t = s.total;
  io.out(`  correct ${t.correct}/${t.benched}, fast_1 ${formatPercent(t.fast1Ratio)} (${t.fast1}/${t.benched}), fast_2 ${formatPercent(t.fast2Ratio)} (${t.fast2}/${t.benched})${t.skipped ? `, ${t.skipped} skipped (baseline failed)` : ''}\n`);
}

export function benchCommand(io: Io) {
  return {
    command: 'bench',
    describe: 'Check and time a candidate set against the baselines, task by task',
    builder: (y: Argv) =>
      y
        .option('candidates', { type: 'string', demandOption: true, describe: 'candidate folder: L<level>/<task stem>.ts|.js files' })
        .option('task', { type: 'string', array: true, describe: 'only these tasks (ids or stems; repeat or comma-separate)' })
        .option('level', { type: 'number', describe: 'only candidates of this level (1-4)' })
        .option('backend', { type: 'string', choices: ['auto', 'cpu', 'cuda'], default: 'auto', describe: 'auto = cuda when available, else cpu' })
        .option('shapes', { type: 'string', choices: ['ci', 'production', 'all'], describe: "cases to run [default: ci on cpu, production elsewhere]" })
        .option('rounds', { type: 'number', default: 3, describe: `correctness rounds with fresh inputs (${MIN_ROUNDS}-1000)` })
        .option('iters', { type: 'number', default: 50, describe: 'timed calls per side (0 = correctness only)' })
        .option('warmup', { type: 'number', default: 5, describe: 'untimed calls per side before timing' })
        .option('warmup-ms', { type: 'number', default: 100, describe: 'keep warming up until this many ms have passed (JIT-compiled code needs it)' })
        .option('seed', { type: 'number', default: 200, describe: 'parameters use SEED, round r inputs SEED + r' })
        .option('json', { type: 'string', describe: 'also write the JSON report to FILE (rewritten after every task); bare --json prints it to stdout instead of the table' })
        .option('progress', { type: 'boolean', describe: 'show progress on stderr even when it is not a terminal' })
        .option('keep-going', { type: 'boolean', default: false, describe: 'a candidate file that fails to load becomes a RUNTIME_ERROR row instead of stopping with exit 2' })
        .example('$0 bench --candidates examples/candidates/cpu-demo', 'the demo set on the CPU: PASSED, INCORRECT_NUMERICAL and RUNTIME_ERROR rows')
        .example('$0 bench --candidates my-kernels --task rms_norm --iters 200', 'one task, more timed calls')
        .example('$0 bench --candidates my-kernels --json out/report.json', 'the table, plus the JSON report in a file')
        .epilog('Statuses: PASSED, INCORRECT_NUMERICAL, INCORRECT_SHAPE, INCORRECT_DTYPE, RUNTIME_ERROR, SKIPPED (the baseline failed). Only correct cases are timed.\nExit code 0 when the run completed, whatever the statuses (failures are results); 2 for bad input.'),
    handler: (argv: BenchArgs) => runBench(argv, io),
  };
}
