import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import {
  BENCH_REPORT_VERSION,
  BenchReportSchema,
  DEFAULT_MAX_SHAPES,
  MIN_ROUNDS,
  RESULTS_FORMAT,
  RESULTS_VERSION,
  UserError,
  errorMessage,
  shardTasks,
  summarizeResults,
  type Backend,
  type BenchConfig,
  type BenchProgress,
  type BenchReport,
  type CaseResult,
  type CandidateFile,
  type MachineProfile,
  type PreflightFailure,
  type RunEnvironment,
  type Shard,
  type TaskCase,
  type TaskDefinition,
} from '@fastkernels/core';
import { launchEnv, type LaunchEnv } from '@fastkernels/backend-nccl';
import type { Argv } from 'yargs';
import { listCandidateFiles } from '../candidates/loader.js';
import { capturedCasesFor, loadCaptures, type LoadedCaptures } from '../bench/captures.js';
import { WorkerProc, type ReadyInfo } from '../bench/pool.js';
import { ResultsFile } from '../bench/results-file.js';
import { loadRow } from '../bench/worker.js';
import { formBenchGroup, groupWorkerEnv, type BenchGroup } from '../bench/group.js';
import { runsInGroup, worldSizeSkipReason } from '../bench/world-size.js';
import { environment, findTask, selectBackend } from '../env.js';
import { intFlag, levelFlag, listFlag } from '../flags.js';
import type { Io } from '../io.js';
import { Progress } from '../output/progress.js';
import { formatError, formatMs, formatPercent, formatSpeedup, renderTable } from '../output/table.js';
import { QUIET_IO, checkTensorParallelDevices, relaunchAsRanks, tensorParallelRole, tpFlag } from '../tensor-parallel.js';
import { cliVersion } from '../version.js';
import { declaredOutcomes, expectedOutcomeLines } from '../candidates/expected.js';

export interface BenchArgs {
  candidates?: string;
  selfTest?: boolean;
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
  gpus?: string;
  taskTimeout: string | number;
  stallTimeout: string | number;
  results?: string;
  resume?: boolean;
  captures?: string;
  maxShapes: number;
  shard?: string;
  flushBytes?: number;
  inputSets: number;
  hiddenShape: boolean;
  verbose?: boolean;
  tp?: number;
}

/** Ctrl-C during a run: the report keeps what was done; exit code 130. */
export class InterruptedError extends Error {
  override readonly name = 'InterruptedError';
}

type ReportBase = Omit<BenchReport, 'results' | 'summary' | 'complete' | 'error' | 'machine'>;

/** Writes the JSON report atomically (temp file + rename), validated by BenchReportSchema first. */
class ReportWriter {
  machine: RunEnvironment[] = [];
  constructor(readonly path: string, private readonly base: ReportBase) {}

  private report(results: readonly CaseResult[], complete: boolean, error?: string): BenchReport {
    const report = { ...this.base, complete, ...(error ? { error } : {}), ...(this.machine.length ? { machine: this.machine } : {}), results, summary: summarizeResults(results) };
    const parsed = BenchReportSchema.safeParse(JSON.parse(JSON.stringify(report)));
    if (!parsed.success) throw new Error(`internal: the bench report does not match its schema: ${parsed.error.issues[0]?.path.join('.')}: ${parsed.error.issues[0]?.message}`);
    return parsed.data;
  }

  write(results: readonly CaseResult[], complete: boolean, error?: string): void {
    const text = JSON.stringify(this.report(results, complete, error), null, 2) + '\n';
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
    return JSON.stringify(this.report(results, complete), null, 2) + '\n';
  }
}

function casesFor(task: TaskDefinition, shapes: string): readonly TaskCase[] {
  if (shapes === 'production') return task.cases.production;
  if (shapes === 'all') return [...task.cases.ci, ...task.cases.production];
  return task.cases.ci;
}

/** Seconds, or a number with s/m/h ('20m'); a UserError naming the flag otherwise. */
export function durationFlag(name: string, value: unknown): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$/.exec(String(value));
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const;
  const ms = m ? Number(m[1]) * unit[(m[2] ?? 's') as keyof typeof unit] : NaN;
  if (!Number.isFinite(ms) || ms <= 0 || ms > 7 * 86_400_000) {
    throw new UserError(`must be a positive duration (seconds, or with s/m/h), got ${JSON.stringify(value)}`, { field: `--${name}`, fix: `pass e.g. --${name} 600 or --${name} 20m` });
  }
  return Math.round(ms);
}

export function shardFlag(value: unknown): Shard {
  if (value === undefined) return { index: 0, count: 1 };
  const m = /^(\d+)\/(\d+)$/.exec(String(value).trim());
  if (!m) throw new UserError(`must look like i/n (e.g. 0/4), got ${JSON.stringify(value)}`, { field: '--shard', fix: 'pass --shard INDEX/COUNT with 0 <= INDEX < COUNT (e.g. --shard $SLURM_ARRAY_TASK_ID/4)' });
  const index = Number(m[1]);
  const count = Number(m[2]);
  if (count < 1 || index >= count) {
    throw new UserError(`${index}/${count} is out of range: the index runs from 0 to ${Math.max(0, count - 1)}`, { field: '--shard', fix: `pass --shard i/${Math.max(1, count)} with 0 <= i < ${Math.max(1, count)} (Slurm: $SLURM_ARRAY_TASK_ID with --array=0-${Math.max(0, count - 1)})` });
  }
  return { index, count };
}

function gpusFlag(value: string | undefined, backend: Backend): number[] {
  const devices = backend.devices().map((d) => d.index);
  if (value === undefined) return [devices[0] ?? 0];
  const list = listFlag(value);
  const out: number[] = [];
  for (const v of list) {
    if (!/^\d+$/.test(v)) throw new UserError(`'${v}' is not a device index`, { field: '--gpus', fix: `pass indices from ${devices.join(', ') || 'none'} (e.g. --gpus 0,1)` });
    const n = Number(v);
    if (!devices.includes(n)) {
      throw new UserError(`device ${n} does not exist: the ${backend.name} backend has ${devices.length ? `device${devices.length > 1 ? 's' : ''} ${devices.join(', ')}` : 'no devices'}`, { field: '--gpus', fix: `pass indices from ${devices.join(', ') || '(none)'}${backend.name === 'cpu' ? ' (the CPU backend has one worker: device 0)' : ''}` });
    }
    if (!out.includes(n)) out.push(n);
  }
  if (!out.length) throw new UserError('names no device', { field: '--gpus', fix: 'pass e.g. --gpus 0,1' });
  return out;
}

/** The launch this bench runs in, when it has more than one rank (then it is a rank of a bench group). */
function groupLaunch(): LaunchEnv | undefined {
  const le = launchEnv();
  return le && le.world > 1 ? le : undefined;
}

function digestFiles(files: readonly CandidateFile[]): string {
  const h = createHash('sha256');
  for (const f of files) h.update(f.taskId).update('\0').update(readFileSync(f.path)).update('\0');
  return h.digest('hex');
}

export async function runBench(argv: BenchArgs, processIo: Io, rawArgs: readonly string[] = process.argv.slice(2)): Promise<void> {
  let io = processIo;
  // ---- flags -------------------------------------------------------------------------------------
  const rounds = intFlag('rounds', argv.rounds, MIN_ROUNDS, 1000);
  const iters = intFlag('iters', argv.iters, 0, 100_000);
  const warmup = intFlag('warmup', argv.warmup, 0, 10_000);
  const warmupMs = intFlag('warmup-ms', argv.warmupMs, 0, 600_000);
  const seed = intFlag('seed', argv.seed, 0, 2 ** 31 - 1);
  const maxShapes = intFlag('max-shapes', argv.maxShapes, 1, 1000);
  const inputSets = intFlag('input-sets', argv.inputSets, 1, 64);
  const flushBytes = argv.flushBytes === undefined ? null : intFlag('flush-bytes', argv.flushBytes, 0, 2 ** 40);
  const taskMs = durationFlag('task-timeout', argv.taskTimeout);
  const stallMs = durationFlag('stall-timeout', argv.stallTimeout);
  const shard = shardFlag(argv.shard);
  const level = levelFlag(argv.level);
  if (argv.selfTest && argv.candidates) throw new UserError('--self-test benches the baselines against themselves; it takes no --candidates', { field: '--self-test', fix: 'drop --candidates, or drop --self-test' });
  if (!argv.selfTest && !argv.candidates) throw new UserError('missing --candidates', { field: '--candidates', fix: 'pass --candidates DIR (a folder of L<level>/<task>.ts files), or --self-test' });
  if (argv.resume && !argv.results) throw new UserError('--resume needs --results FILE.jsonl', { field: '--resume', fix: 'pass the results file of the run to continue' });
  // --tp N, or a launch: the tasks that need a process group run in one of the ranks' bench workers (bench/group.ts)
  const tp = tpFlag(argv.tp);
  const role = tensorParallelRole(tp);
  const grouped = role.kind === 'parent' ? undefined : groupLaunch();
  const groupWorld = role.kind === 'parent' ? tp : (grouped?.world ?? 1);
  const primary = !grouped || grouped.rank === 0;
  if (!primary) io = QUIET_IO; // rank 0 reports; the others run the group tasks with it and print nothing but errors
  const env = environment();
  const wanted = listFlag(argv.task).map((t) => findTask(env, t, '--task'));
  const backend: Backend = selectBackend(env, argv.backend);
  const gpus = gpusFlag(argv.gpus, backend);
  const shapes = argv.shapes ?? (backend.name === 'cpu' ? 'ci' : 'production');
  const jsonOut = argv.json === undefined ? undefined : argv.json === '' ? '-' : argv.json;
  const captures: LoadedCaptures | undefined = argv.captures ? loadCaptures(argv.captures) : undefined;
  const setName = argv.selfTest ? 'self-test' : argv.candidates!;

  // ---- the tasks (the parent never imports candidate code) ----------------------------------------
  let files: CandidateFile[] = [];
  let tasks: TaskDefinition[];
  const selected = (id: string, lvl: number) => (level === undefined || lvl === level) && (wanted.length === 0 || wanted.some((t) => t.id === id));
  if (argv.selfTest) {
    tasks = env.tasks.filter((t) => selected(t.id, t.level));
    if (!wanted.length) {
      // The self-test of "everything" covers what this machine can bench; tasks named with --task get SKIPPED rows.
      const left = tasks.filter((t) => worldSizeSkipReason(t, groupWorld));
      if (left.length && role.kind !== 'parent') io.err(`bench: leaving out ${left.map((t) => t.id).join(', ')}: ${worldSizeSkipReason(left[0]!, groupWorld)}\n`);
      tasks = tasks.filter((t) => !left.includes(t));
    }
    if (!tasks.length) throw new UserError('no task matches --task/--level', { field: '--level', fix: 'run `fastkernels list`' });
  } else {
    const all = listCandidateFiles(argv.candidates!);
    for (const t of wanted) {
      if (!all.some((f) => f.taskId === t.id)) {
        throw new UserError(`has no candidate for ${t.id} (it holds ${all.map((f) => f.taskId).join(', ') || 'none'})`, {
          file: argv.candidates, field: '--task', fix: `add ${argv.candidates}/L${t.level}/${t.stem}.ts, or drop --task`,
        });
      }
    }
    files = all.filter((f) => selected(f.taskId, f.level));
    if (!files.length) {
      throw new UserError(all.length ? 'holds no candidate for the selected tasks/level' : 'holds no candidate files', {
        file: argv.candidates, field: '--candidates',
        fix: 'put candidates at L<level>/<task stem>.ts (e.g. L1/rms_norm.ts); `fastkernels stubs --out DIR` writes skeletons',
      });
    }
    tasks = files.map((f) => env.taskMap.get(f.taskId) ?? ({ id: f.taskId, level: f.level, stem: f.stem, cases: { ci: [], production: [] } } as unknown as TaskDefinition));
  }
  const allIds = tasks.map((t) => t.id).sort();
  const mine = shardTasks(tasks, shard);
  if (role.kind === 'parent') {
    // bad flags, files and tasks were refused above (exit 2); now what the ranks need: CUDA, tp GPUs, NCCL
    checkTensorParallelDevices(tp, backend);
    return relaunchAsRanks(tp, rawArgs, io);
  }
  /** The tasks benched in the ranks' process group, in the order every rank runs them. */
  const groupTasks = grouped ? mine.filter((t) => env.taskMap.has(t.id) && runsInGroup(t, grouped.world)).sort((a, b) => a.id.localeCompare(b.id)) : [];

  // ---- cases per task (captured shapes replace nothing: they are added to the --shapes cases) ------
  const casesOf = new Map<string, (TaskCase & { values?: Record<string, { file: string; tensor: string }> })[]>();
  for (const t of mine) {
    if (!env.taskMap.has(t.id)) continue;
    const base = casesFor(t, shapes).map((c) => ({ ...c }));
    const cap = captures ? capturedCasesFor(t, captures, maxShapes) : [];
    casesOf.set(t.id, [...base, ...cap.map(({ source: _s, ...c }) => c as TaskCase & { values?: Record<string, { file: string; tensor: string }> })]);
  }

  // ---- the results file and the report ----------------------------------------------------------------
  const config: BenchConfig = {
    candidates: setName, candidatesDigest: argv.selfTest ? 'self-test' : digestFiles(files), backend: backend.name,
    rounds, iters, warmup, warmupMs, seed, shapes, capturesDigest: captures?.digest ?? null, maxShapes, flushBytes, tasks: allIds, shard,
  };
  const opened = argv.results && primary
    ? ResultsFile.open(argv.results, { kind: 'header', format: RESULTS_FORMAT, version: RESULTS_VERSION, cli: cliVersion(), createdAt: new Date().toISOString(), config }, Boolean(argv.resume))
    : undefined;
  // What --resume took from the file: said on stderr and recorded in the report, so a resumed run is not mistaken for
  // a fresh one (and a repaired file is not a silent edit).
  const reused = (opened?.done ?? []).filter((l) => mine.some((t) => t.id === l.task)).length;
  const resumed = argv.resume && opened ? { file: argv.results!, reusedTasks: reused, repairedBytes: opened.repairedBytes } : undefined;
  if (resumed) {
    const repaired = resumed.repairedBytes ? `; repaired a torn last line (${resumed.repairedBytes} bytes of a task cut short, which runs again)` : '';
    io.err(`bench: --resume: reused ${reused} of ${mine.length} task${mine.length === 1 ? '' : 's'} from ${resumed.file}${repaired}\n`);
  }
  const device = backend.devices().find((d) => d.index === gpus[0]);
  const writer = jsonOut && primary
    ? new ReportWriter(jsonOut, {
        version: BENCH_REPORT_VERSION,
        createdAt: new Date().toISOString(),
        candidates: setName,
        backend: backend.name,
        device: {
          index: device?.index ?? 0, name: device?.name ?? backend.name, totalMemory: device?.totalMemory ?? 0, multiprocessors: device?.multiprocessors ?? 0,
          ...(device?.computeCapability ? { computeCapability: device.computeCapability } : {}),
        },
        versions: { fastkernels: cliVersion(), node: process.version, ...backend.versions() },
        options: {
          rounds, iters, warmup, warmupMs, seed, shapes, maxShapes, flushBytes, shard, gpus,
          ...(argv.captures ? { captures: argv.captures } : {}), ...(argv.selfTest ? { selfTest: true } : {}), ...(grouped ? { processGroup: grouped.world } : {}),
        },
        ...(resumed ? { resumed } : {}),
      })
    : undefined;
  const results: CaseResult[] = [];
  const done = new Set<string>();
  for (const l of opened?.done ?? []) {
    if (!mine.some((t) => t.id === l.task)) continue;
    results.push(...l.results);
    done.add(l.task);
    if (l.env && writer && !writer.machine.some((m) => JSON.stringify(m) === JSON.stringify(l.env))) writer.machine.push(l.env);
  }
  const record = (task: string, rs: CaseResult[], runEnv?: RunEnvironment) => {
    results.push(...rs);
    done.add(task);
    opened?.file.append({ kind: 'task', task, finishedAt: new Date().toISOString(), ...(runEnv ? { env: runEnv } : {}), results: rs });
    if (runEnv && writer && !writer.machine.some((m) => JSON.stringify(m) === JSON.stringify(runEnv))) writer.machine.push(runEnv);
    writer?.write(results, false);
  };
  try {
    writer?.write(results, false); // fails early (exit 2) when the path is not writable
  } catch (e) {
    opened?.file.close();
    throw e;
  }

  // ---- tasks that need a process group (worldSize > 1): a SKIPPED row per case, with the reason -------------
  for (const t of mine) {
    const why = !done.has(t.id) && env.taskMap.has(t.id) ? worldSizeSkipReason(t, groupWorld) : null;
    if (!why) continue;
    io.err(`bench: skipping ${t.id}: ${why}\n`);
    const cs = casesOf.get(t.id) ?? [];
    record(t.id, cs.length ? cs.map((c) => loadRow(t, c.name, c.dtype, 'SKIPPED', why)) : [loadRow(t, 'world-size', 'f32', 'SKIPPED', why)]);
  }

  // ---- workers -----------------------------------------------------------------------------------------
  const progress = new Progress({ force: argv.progress, off: !primary });
  // the other ranks of a group run the group tasks only (rank 0 runs the rest as a single bench would)
  const todo = primary ? mine.filter((t) => !done.has(t.id) && !groupTasks.includes(t)).sort((a, b) => a.level - b.level || a.id.localeCompare(b.id)) : [];
  const groupTodo = primary ? groupTasks.filter((t) => !done.has(t.id)) : [];
  const options = { rounds, iters, warmup, warmupMs, seed, flushBytes, inputSets, hiddenShape: argv.hiddenShape };
  const live = new Set<WorkerProc>();
  const killAll = () => {
    for (const w of live) w.kill();
  };
  process.once('exit', killAll);
  let profile: MachineProfile | undefined;
  const spawn = async (gpu: number, preflight: readonly string[], group?: BenchGroup): Promise<{ w: WorkerProc; ready: ReadyInfo }> => {
    const w = new WorkerProc({
      backend: backend.name, physicalDevice: gpu, candidates: argv.selfTest ? null : resolve(argv.candidates!), options, verbose: Boolean(argv.verbose),
      ...(argv.verbose ? { onLog: (l: string) => io.err(`${l}\n`) } : {}), ...(group ? { group: { env: groupWorkerEnv(group) } } : {}),
    });
    live.add(w);
    try {
      const ready = await w.start(preflight, profile, Math.max(stallMs, 120_000));
      profile ??= ready.profile;
      return { w, ready };
    } catch (e) {
      live.delete(w);
      const usage = (e as { usage?: boolean }).usage;
      if (usage) throw new UserError(errorMessage(e), { field: '--backend', fix: 'run `fastkernels doctor`' });
      throw e;
    }
  };

  let interrupted = false;
  const onSigint = () => {
    interrupted = true;
  };
  process.once('SIGINT', onSigint);
  let benched = 0;
  try {
    // The first worker preflights every candidate still to run: files that fail to load stop the run
    // with exit 2 (or become RUNTIME_ERROR rows with --keep-going); tampering at import is REWARD_HACK.
    let first: { w: WorkerProc; ready: ReadyInfo } | undefined;
    if (todo.length || (groupTodo.length && !argv.selfTest)) {
      progress.update(`starting the bench worker${argv.selfTest ? '' : ` and loading candidates from ${argv.candidates}`} ...`);
      let failures: readonly PreflightFailure[];
      try {
        first = await spawn(gpus[0]!, argv.selfTest ? [] : [...todo, ...groupTodo].map((t) => t.id));
        failures = first.ready.failures;
      } catch (e) {
        const f = (e as { failures?: PreflightFailure[] }).failures;
        if (!f) throw e;
        failures = f;
      }
      progress.clear();
      const loadErrors = failures.filter((f) => !f.hack);
      if (loadErrors.length && !argv.keepGoing) {
        const describe = (f: PreflightFailure) => `${f.file}: ${f.message}${f.fix ? `\nfix: ${f.fix}` : ''}`;
        if (loadErrors.length === 1) {
          const f = loadErrors[0]!;
          throw new UserError(f.message, { file: f.file, ...(f.fix ? { fix: f.fix } : {}) });
        }
        throw new UserError(`${loadErrors.length} candidate files failed to load:\n${loadErrors.map((f) => `  ${describe(f).replace(/\n/g, '\n    ')}`).join('\n')}`, {
          fix: 'fix the files above, or pass --keep-going to bench the others (failures become RUNTIME_ERROR rows)',
        });
      }
      for (const f of failures) {
        const t = env.taskMap.get(f.taskId);
        const cs = casesOf.get(f.taskId) ?? [];
        const rows = f.hack && cs.length
          ? cs.map((c) => loadRow({ id: f.taskId, level: t?.level ?? 1 }, c.name, c.dtype, 'REWARD_HACK', f.message))
          : [loadRow({ id: f.taskId, level: t?.level ?? Number(f.taskId[1]) }, 'load', t?.cases.ci[0]?.dtype ?? 'f32', f.hack ? 'REWARD_HACK' : 'RUNTIME_ERROR', f.hack ? f.message : `failed to load: ${f.message}`)];
        record(f.taskId, rows, first?.ready.env);
      }
      if (first && (first.ready.dirty || failures.some((f) => f.hack))) {
        first.w.kill();
        live.delete(first.w);
        first = undefined;
      }
    }
    const started = performance.now();
    /** Seconds since the run started, so a long sweep's log shows where the time goes. */
    const elapsed = () => `${((performance.now() - started) / 1000).toFixed(1).padStart(6)}s`;
    /** A worker's progress callback: "<elapsed> <where> task case (i/n): phase [done/total]". */
    const onProgress = (where: () => string) => (p: BenchProgress) =>
      progress.update(
        `${elapsed()} ${where()} ${p.task} ${p.case} (${p.caseIndex + 1}/${p.caseCount}): ${p.phase}${p.total > 1 ? ` ${p.done}/${p.total}` : ''}`,
        `${p.task}/${p.case}/${p.phase}`,
      );

    // ---- the group tasks, on every rank at once (bench/group.ts), before the rest ----------------------------------
    if (grouped) {
      const g = await formBenchGroup(grouped, primary ? groupTasks.map((t) => !done.has(t.id)) : null);
      try {
        if (g.run.length !== groupTasks.length) throw new Error(`bench: rank 0 runs ${g.run.length} group task(s), this rank lists ${groupTasks.length}: every rank must run the same \`fastkernels bench\` command`);
        const run = groupTasks.filter((_, i) => g.run[i]);
        let gw: { w: WorkerProc; ready: ReadyInfo } | undefined;
        let stopped: string | undefined;
        if (run.length) {
          progress.update(`starting the process group of ${g.world} bench workers (rank ${g.rank} on GPU ${g.device}) ...`);
          gw = await spawn(g.device, [], g);
          progress.clear();
        }
        for (const [k, task] of run.entries()) {
          if (interrupted) break;
          const cs = casesOf.get(task.id) ?? [];
          if (!gw) {
            record(task.id, cs.map((c) => loadRow(task, c.name, c.dtype, 'RUNTIME_ERROR', `not run: ${stopped}`)));
            continue;
          }
          const outcome = await gw.w.runTask(task, cs, { taskMs, stallMs }, onProgress(() => `[group ${k + 1}/${run.length}, ${g.world} ranks]`));
          record(task.id, outcome.results, gw.ready.env);
          benched++;
          if (outcome.recycle) {
            gw.w.kill();
            live.delete(gw.w);
            gw = undefined;
            stopped = `the process group's bench workers were stopped after ${task.id} (a crash, a timeout or a tainted worker on some rank) and are not replaced in this run; rerun the task${argv.results ? ' (--resume)' : ''}`;
          }
        }
        if (gw) {
          await gw.w.stop();
          live.delete(gw.w);
        }
      } finally {
        g.server?.close();
        progress.clear();
      }
    }

    const queue = todo.filter((t) => !done.has(t.id));
    const total = todo.length;
    const slot = async (gpu: number, initial: { w: WorkerProc; ready: ReadyInfo } | undefined) => {
      let cur = initial;
      for (;;) {
        if (interrupted) return;
        const task = queue.shift();
        if (!task) break;
        if (!cur) cur = await spawn(gpu, []);
        const n = total - queue.length;
        const outcome = await cur.w.runTask(task, casesOf.get(task.id) ?? [], { taskMs, stallMs }, onProgress(() => `[${n}/${total}]${gpus.length > 1 ? ` gpu ${gpu}` : ''}`));
        record(task.id, outcome.results, cur.ready.env);
        benched++;
        if (outcome.recycle) {
          cur.w.kill();
          live.delete(cur.w);
          cur = undefined;
        }
      }
      if (cur) {
        await cur.w.stop();
        live.delete(cur.w);
      }
    };
    await Promise.all(gpus.map((g, i) => slot(g, i === 0 ? first : undefined)));
    if (interrupted) {
      throw new InterruptedError(`interrupted after ${benched} of ${total + groupTodo.length} tasks${opened ? `; the results so far are in ${argv.results} (continue with --resume)` : writer && jsonOut !== '-' ? `; the results so far are in ${jsonOut}` : ''}`);
    }
  } catch (e) {
    progress.clear();
    killAll();
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
    process.removeListener('exit', killAll);
    opened?.file.close();
  }
  progress.clear();
  if (!primary) return;
  writer?.write(results, true);

  if (jsonOut === '-') {
    io.out(writer!.text(results, true));
    return;
  }
  printResults(io, results, backend, setName, shapes);
  const declared = expectedOutcomeLines(declaredOutcomes(files), results);
  if (declared.length) io.out(`\n${declared.join('\n')}\n`);
  if (opened) io.out(`\nresults: ${argv.results}\n`);
  if (writer) io.out(`\nreport: ${jsonOut}\n`);
}

function printResults(io: Io, results: readonly CaseResult[], backend: Backend, dir: string, shapes: string): void {
  io.out(`fastkernels bench: ${dir} on ${backend.name} (${backend.devices()[0]?.name ?? 'device 0'}), ${shapes} shapes\n\n`);
  io.out(renderTable(
    [
      { header: 'task' }, { header: 'case' }, { header: 'dtype' }, { header: 'status' }, { header: 'max err', align: 'right' },
      { header: 'baseline ms', align: 'right' }, { header: 'cand ms', align: 'right' }, { header: 'speedup [95% CI]', align: 'right' },
      { header: 'wall s', align: 'right' },
    ],
    results.map((r) => [
      r.task, r.case, r.dtype, r.status, formatError(r.maxAbsError), formatMs(r.baselineMs), formatMs(r.candidateMs), formatSpeedup(r.speedup, r.ciLow, r.ciHigh),
      r.wallMs === undefined ? '-' : (r.wallMs / 1000).toFixed(2),
    ]),
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
  io.out(`  correct ${t.correct}/${t.benched}, fast_1 ${formatPercent(t.fast1Ratio)} (${t.fast1}/${t.benched}), fast_2 ${formatPercent(t.fast2Ratio)} (${t.fast2}/${t.benched})${t.skipped ? `, ${t.skipped} skipped (see the details)` : ''}\n`);
}

export function benchCommand(io: Io, rawArgs: readonly string[] = process.argv.slice(2)) {
  return {
    command: 'bench',
    describe: 'Check and time a candidate set against the baselines, task by task',
    builder: (y: Argv) =>
      y
        .option('candidates', { type: 'string', describe: 'candidate folder: L<level>/<task stem>.ts|.js files, or .cu with a .cu.json binding' })
        .option('self-test', { type: 'boolean', default: false, describe: 'bench every baseline against itself (every check must pass, speedup CI around 1)' })
        .option('task', { type: 'string', array: true, describe: 'only these tasks (ids or stems; repeat or comma-separate)' })
        .option('level', { type: 'number', describe: 'only candidates of this level (1-4)' })
        .option('backend', { type: 'string', choices: ['auto', 'cpu', 'cuda'], default: 'auto', describe: 'auto = cuda when available, else cpu' })
        .option('gpus', { type: 'string', describe: 'device indices, one worker process each (e.g. 0,1) [default: the first device]' })
        .option('shapes', { type: 'string', choices: ['ci', 'production', 'all'], describe: "cases to run [default: ci on cpu, production elsewhere]" })
        .option('captures', { type: 'string', describe: 'folder of capture indexes (*.json + safetensors): their shapes (and values) are added as cases' })
        .option('max-shapes', { type: 'number', default: DEFAULT_MAX_SHAPES, describe: 'captured cases per task: smallest, largest, median, then most frequent' })
        .option('rounds', { type: 'number', default: 3, describe: `correctness rounds with fresh inputs (${MIN_ROUNDS}-1000)` })
        .option('iters', { type: 'number', default: 50, describe: 'timed calls per side (0 = correctness only)' })
        .option('warmup', { type: 'number', default: 5, describe: 'untimed calls per side before timing' })
        .option('warmup-ms', { type: 'number', default: 100, describe: 'keep warming up until this many ms have passed (JIT-compiled code needs it)' })
        .option('seed', { type: 'number', default: 200, describe: 'parameters use SEED, round r inputs SEED + r' })
        .option('flush-bytes', { type: 'number', describe: 'L2 flush written before every timed call [default: 2 x the L2 size; 1 MiB max on the CPU]' })
        .option('input-sets', { type: 'number', default: 3, describe: 'distinct input sets rotated through the timed calls' })
        .option('hidden-shape', { type: 'boolean', default: true, describe: 'also check each case at a perturbed token/batch size the set does not list' })
        .option('task-timeout', { type: 'string', default: '20m', describe: 'wall-clock limit per task (seconds, or 90s/20m/1h): the worker is killed, the task is TIMEOUT' })
        .option('stall-timeout', { type: 'string', default: '10m', describe: 'kill the worker when it reports no progress for this long (TIMEOUT)' })
        .option('results', { type: 'string', describe: 'append each finished task to FILE.jsonl (flushed), so a killed run can --resume' })
        .option('resume', { type: 'boolean', default: false, describe: 'continue --results FILE: skip the tasks already in it (same configuration required)' })
        .option('shard', { type: 'string', describe: 'run shard i of n (0-based) of the tasks, e.g. --shard 0/4; combine with `fastkernels merge`' })
        .option('json', { type: 'string', describe: 'also write the JSON report to FILE (rewritten after every task); bare --json prints it to stdout instead of the table' })
        .option('progress', { type: 'boolean', describe: 'show progress on stderr even when it is not a terminal' })
        .option('keep-going', { type: 'boolean', default: false, describe: 'a candidate file that fails to load becomes a RUNTIME_ERROR row instead of stopping with exit 2' })
        .option('tp', { type: 'number', default: 1, describe: 'bench the tasks that need a process group (L1/allreduce, the L2 parallel linear layers) on N GPUs: the command re-runs itself as N ranks under `fastkernels launch`, their bench workers form an NCCL group and run those tasks in lockstep; rank 0 runs the other tasks and reports' })
        .example('$0 bench --candidates examples/candidates/cpu-demo', 'the demo set on the CPU: PASSED, INCORRECT_NUMERICAL and RUNTIME_ERROR rows')
        .example('$0 bench --candidates my-kernels --task rms_norm --iters 200', 'one task, more timed calls')
        .example('$0 bench --candidates my-kernels --gpus 0,1 --results out/run.jsonl', 'two GPU workers; results appended as they finish (add --resume after a crash)')
        .example('$0 bench --candidates my-kernels --shard 1/4 --results out/shard1.jsonl', 'the second of four shards (then `fastkernels merge out/shard*.jsonl`)')
        .example('$0 bench --self-test --level 1', 'every L1 baseline against itself: all PASSED, speedup CI around 1')
        .example('$0 bench --candidates my-kernels --task allreduce --tp 2', 'an all-reduce candidate on 2 GPUs (as `fastkernels launch --nproc 2 -- fastkernels bench ...` does)')
        .epilog('Statuses: PASSED, INCORRECT_NUMERICAL, INCORRECT_SHAPE, INCORRECT_DTYPE, RUNTIME_ERROR, TIMEOUT, REWARD_HACK, SKIPPED (the baseline failed, or the task needs a process group of world size N > 1:\nrun with --tp N, or under `fastkernels launch --nproc N`).\nCandidates run only in worker processes (one per GPU), watched by a watchdog; only correct cases are timed.\nExit code 0 when the run completed, whatever the statuses (failures are results); 2 for bad input.'),
    handler: (argv: BenchArgs) => runBench(argv, io, rawArgs),
  };
}
