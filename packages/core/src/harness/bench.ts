import type { Backend, Storage } from '../backend.js';
import { REQUIRED_MATCHED_RATIO, compareOutputs, compareStats, compareTensors, type Comparison } from '../compare.js';
import { withContext, type ExecutionContext } from '../context.js';
import type { DType } from '../dtype.js';
import { errorMessage } from '../errors.js';
import { toHostArray } from '../host.js';
import type { Module } from '../module.js';
import type { ModuleRegistry } from '../registry.js';
import { Rng } from '../rng.js';
import { bootstrapSpeedup, median } from '../stats.js';
import { worstStatus, type Status } from '../status.js';
import { hostArgsFor, toleranceFor, type HostArray, type TaskCase, type TaskDefinition, type WorkCount } from '../task.js';
import { Tensor } from '../tensor.js';
import { floorMs, type MachineProfile } from './floor.js';
import { HarnessGuard, RewardHackError } from './guard.js';

/**
 * The kernel-level bench protocol (design §4), backend-agnostic and free of CLI concerns.
 *
 * Per case:
 *  1. build the baseline and the candidate with the case's init args, each in an execution context
 *     whose registry is the baseline registry / the candidate set's child registry;
 *  2. baseline.initParameters(rng), then candidate.loadStateDict(baseline.stateDict());
 *  3. `rounds` correctness rounds with fresh inputs (seed + round), baseline first in even rounds and the
 *     candidate first in odd ones; each side gets its own clones; with a guard every allocation during a
 *     call is poisoned, outputs must be fresh plain Tensors of the backend's allocator, inputs must come
 *     back unmodified, and protected functions are re-verified after every round; outputs are compared
 *     with the task's tolerance plus a relative-L2 bound (tiny-output abuse); at small shapes both sides
 *     are compared with the float64 reference (golden); optionally a hidden perturbed shape; a task's host
 *     inputs (hostArgs) follow the tensors, a fresh copy per side and call, and the candidate must leave its
 *     copy as it was;
 *  4. only when correct: warm-up, then `iters` timed calls per side, interleaved, each on one of
 *     `inputSets + 1` rotating input slots refilled (rolled floats, so no two calls see the same data)
 *     outside the timed window, after an L2 flush; device-timer and device-synchronised host times; random
 *     timed calls re-verified against the baseline; threads, handles and memory kept watched; escaped work
 *     and times below the physical floor are REWARD_HACK; median per side and a bootstrap CI of the speedup;
 *  5. a re-check round after timing (state drift).
 */

/** Cases whose inputs and parameters hold up to this many elements in total also get the float64 golden check. */
export const GOLDEN_MAX_NUMEL = 1 << 20;

export interface GoldenCheck {
  readonly status: Status;
  readonly maxAbsError: number | null;
  readonly maxRelError: number | null;
  readonly matchedRatio: number;
  readonly detail?: string;
}

export interface CaseResult {
  readonly task: string;
  readonly level: number;
  readonly case: string;
  readonly dtype: DType;
  readonly status: Status;
  /** Worst over the correctness rounds, candidate vs baseline (null: not compared, or infinite). */
  readonly maxAbsError: number | null;
  readonly maxRelError: number | null;
  readonly matchedRatio: number | null;
  /** Median milliseconds per call (null unless timed). */
  readonly baselineMs: number | null;
  readonly candidateMs: number | null;
  /** median(baseline) / median(candidate) and its bootstrap 95% CI. */
  readonly speedup: number | null;
  readonly ciLow: number | null;
  readonly ciHigh: number | null;
  readonly rounds: number;
  readonly iters: number;
  readonly detail?: string;
  /** Both sides against the float64 reference (small shapes only, last round compared). */
  readonly golden?: { readonly baseline: GoldenCheck; readonly candidate: GoldenCheck };
  /** Median host-timed ms of the candidate's timed calls, device-synchronised. */
  readonly hostMs?: number | null;
  /** The physical floor of one call (null: unknown). */
  readonly floorMs?: number | null;
  /** Timed calls re-verified against the baseline. */
  readonly verified?: number;
  /** The hardening checks that ran. */
  readonly checks?: string[];
  /** Wall-clock milliseconds the case took, build, compiles and checks included (where a run's time goes). */
  readonly wallMs?: number;
}

export type BenchPhase = 'build' | 'correctness' | 'warmup' | 'timing' | 'recheck' | 'done';

export interface BenchProgress {
  readonly task: string;
  readonly case: string;
  readonly caseIndex: number;
  readonly caseCount: number;
  readonly phase: BenchPhase;
  readonly done: number;
  readonly total: number;
}

export interface BenchTaskOptions {
  readonly task: TaskDefinition;
  /** The root registry (baselines). */
  readonly baseline: ModuleRegistry;
  /** The candidate set: a child of `baseline` that overrides this task (or not: then baseline vs baseline). */
  readonly candidate: ModuleRegistry;
  readonly backend: Backend;
  readonly device?: number;
  /** Cases to run (defaults to the task's CI cases). */
  readonly cases?: readonly TaskCase[];
  /** Correctness rounds (at least 3; default 3). */
  readonly rounds?: number;
  /** Untimed calls per side before timing (default 3). */
  readonly warmup?: number;
  /**
   * Keep warming up (both sides, interleaved) until this many milliseconds have passed, as Triton's
   * do_bench does: JIT-compiled backends (the CPU backend runs on V8) need many calls at small shapes
   * before their code is optimised. Capped at 100 x warmup + 1000 calls. Default 0.
   */
  readonly warmupMs?: number;
  /** Timed calls per side (default 50). */
  readonly iters?: number;
  /** Base seed: parameters use `seed`, round r's inputs use `seed + r` (default 200). */
  readonly seed?: number;
  /** Skip timing (correctness only). */
  readonly correctnessOnly?: boolean;
  readonly onProgress?: (p: BenchProgress) => void;
  /**
   * The integrity guard (installed before candidates loaded). With it: outputs poisoned before every
   * correctness call, outputs checked (allocator-owned, fresh, plain Tensor), inputs checked for
   * mutation, harness functions re-verified at every checkpoint, threads/handles/memory watched.
   */
  readonly guard?: HarnessGuard;
  /** Measured rates for the physical floor (none: no floor check). */
  readonly profile?: MachineProfile;
  /** Bytes of the L2 flush written before every timed call (default: 2 x the device's l2CacheBytes, at most 1 MiB on the CPU). */
  readonly flushBytes?: number;
  /** Distinct input sets rotated through the timed calls (default 3); each call also rolls the float inputs. */
  readonly inputSets?: number;
  /** Seed choosing which timed calls are re-verified (default: random, so it cannot be predicted). */
  readonly verifySeed?: number;
  /** Also check the candidate on a hidden shape (a perturbed token/batch dim) the set does not list. */
  readonly hiddenShape?: boolean;
  /** Replace generated inputs with captured values (captures), after makeInputs. */
  readonly prepareInputs?: (c: TaskCase, inputs: (Tensor | null)[]) => void;
  /**
   * A candidate that runs in another process times itself (a PyTorch candidate: CUDA events in its worker), so the
   * IPC round trip is not its time: for such a candidate instance, the call that runs forward and returns the
   * result with the other process's device and host times. Given by the bench worker, which alone can tell such
   * instances (never by a candidate).
   */
  readonly selfTimed?: (candidate: Module) => SelfTimedForward | undefined;
}

/** A forward call timed by the process that runs it: the result, its device time and its device-synchronised host time. */
export type SelfTimedForward = (args: readonly unknown[]) => { readonly result: unknown; readonly deviceMs: number; readonly hostMs: number };

export const MIN_ROUNDS = 3;
/** Poison written into every allocation during correctness calls (0xff: NaN in every float format). */
export const OUTPUT_POISON = 0xff;

/** Run the protocol for every case of one task. Never throws for candidate or baseline failures. */
export async function benchTask(opts: BenchTaskOptions): Promise<CaseResult[]> {
  const cases = opts.cases ?? opts.task.cases.ci;
  const out: CaseResult[] = [];
  for (let i = 0; i < cases.length; i++) {
    out.push(await benchCase(opts, cases[i]!, i, cases.length));
    await yieldToEventLoop();
  }
  return out;
}

const yieldToEventLoop = () => new Promise<void>((r) => setImmediate(r));

type Side = 'baseline' | 'candidate';

class SideError extends Error {
  constructor(
    readonly side: Side,
    readonly during: string,
    override readonly cause: unknown,
  ) {
    super(`${side} ${during}: ${errorMessage(cause)}`);
  }
}

function fin(x: number): number | null {
  return Number.isFinite(x) ? x : null;
}

/** Run fn on one side, turning exceptions into a SideError that says which side failed and when. */
function onSide<T>(side: Side, during: string, fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    if (e instanceof RewardHackError) throw e;
    throw new SideError(side, during, e);
  }
}

const PASSED_CMP: Comparison = { status: 'PASSED', maxAbsError: 0, maxRelError: 0, matchedRatio: 1 };

function mergeCmp(worst: Comparison, c: Comparison, label: string): Comparison {
  return {
    status: worstStatus([worst.status, c.status]),
    maxAbsError: Math.max(worst.maxAbsError, c.maxAbsError),
    maxRelError: Math.max(worst.maxRelError, c.maxRelError),
    matchedRatio: Math.min(worst.matchedRatio, c.matchedRatio),
    detail: worst.detail ?? (c.detail ? `${label}: ${c.detail}` : undefined),
  };
}

/** Everything one case needs, shared by the rounds and the timing. */
interface CaseEnv {
  readonly opts: BenchTaskOptions;
  readonly c: TaskCase;
  readonly device: number;
  readonly baseCtx: ExecutionContext;
  readonly candCtx: ExecutionContext;
  readonly baseline: Module;
  readonly candidate: Module;
  readonly checks: Set<string>;
  readonly workersAtStart: number;
}

function tolFor(task: TaskDefinition, c: TaskCase) {
  return (d: DType | undefined) => toleranceFor(task, d ?? c.dtype);
}

/** Integrity checkpoint: protected functions intact, no worker thread started. */
function checkpoint(env: CaseEnv, point: string): void {
  const g = env.opts.guard;
  if (!g) return;
  env.checks.add('integrity');
  const bad = g.verify(point);
  if (bad.length) throw new RewardHackError(bad[0]!);
  const w = g.resources().workers;
  if (w > env.workersAtStart) throw new RewardHackError(`${w - env.workersAtStart} worker thread(s) started by the candidate (${point})`);
}

async function benchCase(opts: BenchTaskOptions, c: TaskCase, caseIndex: number, caseCount: number): Promise<CaseResult> {
  const { task, backend } = opts;
  const device = opts.device ?? 0;
  const rounds = Math.max(MIN_ROUNDS, opts.rounds ?? MIN_ROUNDS);
  const iters = opts.correctnessOnly ? 0 : Math.max(1, opts.iters ?? 50);
  const seed = opts.seed ?? 200;
  const progress = (phase: BenchPhase, done: number, total: number) =>
    opts.onProgress?.({ task: task.id, case: c.name, caseIndex, caseCount, phase, done, total });

  const baseCtx: ExecutionContext = { backend, device, dtype: c.dtype, registry: opts.baseline };
  const candCtx: ExecutionContext = { backend, device, dtype: c.dtype, registry: opts.candidate };
  const base: Partial<CaseResult> & Pick<CaseResult, 'task' | 'level' | 'case' | 'dtype' | 'rounds'> = {
    task: task.id, level: task.level, case: c.name, dtype: c.dtype, rounds,
  };
  const empty = {
    maxAbsError: null, maxRelError: null, matchedRatio: null,
    baselineMs: null, candidateMs: null, speedup: null, ciLow: null, ciHigh: null, iters: 0,
  };
  const checks = new Set<string>(['clone-inputs', 'compare', `rounds:${rounds}`]);
  const guard = opts.guard;
  const workersAtStart = guard?.workersBaseline ?? 0;

  let baseline: Module | undefined;
  let candidate: Module | undefined;
  let worst: Comparison = PASSED_CMP;
  let golden: CaseResult['golden'];
  const started = performance.now();
  const finish = (r: Partial<CaseResult>): CaseResult => ({ ...base, ...empty, ...r, checks: [...checks], wallMs: performance.now() - started }) as CaseResult;
  try {
    progress('build', 0, 1);
    baseline = onSide('baseline', 'constructor', () => opts.baseline.createIn(baseCtx, task.id, ...c.init));
    candidate = onSide('candidate', 'constructor', () => opts.candidate.createIn(candCtx, task.id, ...c.init));
    const b = baseline;
    const cand = candidate;
    const env: CaseEnv = { opts, c, device, baseCtx, candCtx, baseline: b, candidate: cand, checks, workersAtStart };
    checkpoint(env, 'after the constructor');
    onSide('baseline', 'initParameters', () => withContext(baseCtx, () => (task.initParameters ? task.initParameters(b, c, new Rng(seed)) : initNormalDefault(b, new Rng(seed)))));
    const load = onSide('candidate', 'loadStateDict', () => withContext(candCtx, () => cand.loadStateDict(b.stateDict())));
    const loadNote = load.missing.length || load.unexpected.length
      ? `state dict: candidate lacks [${load.missing.join(', ')}], baseline has extra [${load.unexpected.join(', ')}]`
      : undefined;

    // ---- correctness: baseline first in even rounds, candidate first in odd ones -----------------
    for (let r = 0; r < rounds; r++) {
      progress('correctness', r, rounds);
      const round = runRound(env, c, seed + r, r % 2 === 1);
      worst = mergeCmp(worst, round.cmp, `round ${r}`);
      if (round.golden) golden = round.golden;
      checkpoint(env, `after correctness round ${r}`);
      if (worst.status !== 'PASSED') break;
    }
    if (worst.status === 'PASSED' && opts.hiddenShape) {
      const hidden = hiddenCase(task, c, new Rng(opts.verifySeed ?? secretSeed()));
      if (hidden) {
        const h = runHidden(env, hidden.c, seed + 50_021);
        if (h) {
          checks.add('hidden-shape');
          if (h.status !== 'PASSED') worst = { ...h, detail: `on a shape the set does not list (${hidden.what}): ${h.detail ?? h.status}` };
        }
      }
    }
    let detail = worst.detail;
    let status = worst.status;
    if (status === 'PASSED' && golden && golden.candidate.status !== 'PASSED') {
      if (golden.baseline.status === 'PASSED') {
        status = 'INCORRECT_NUMERICAL';
        detail = `matches the baseline but not the float64 reference: ${golden.candidate.detail ?? golden.candidate.status}`;
      } else {
        detail = `note: baseline and candidate both differ from the float64 reference (${golden.baseline.detail ?? golden.baseline.status})`;
      }
    }
    if (golden) checks.add('golden-f64');
    if (loadNote) detail = detail ? `${detail}; ${loadNote}` : loadNote;
    const errors = { maxAbsError: fin(worst.maxAbsError), maxRelError: fin(worst.maxRelError), matchedRatio: worst.matchedRatio };
    if (status !== 'PASSED' || iters === 0) {
      if (status === 'PASSED' && guard) {
        const re = runRound(env, c, seed + 7919, true);
        checks.add('recheck');
        if (re.cmp.status !== 'PASSED') return finish({ ...errors, status: re.cmp.status, detail: `state drift: correct at first, wrong on a later call: ${re.cmp.detail ?? re.cmp.status}`, golden });
      }
      return finish({ ...errors, status, detail, golden });
    }

    // ---- timing ----------------------------------------------------------------------------------
    const timing = timeCase(env, seed, iters, progress);
    checkpoint(env, 'after timing');

    // ---- re-check after timing (state drift) -------------------------------------------------------
    progress('recheck', 0, 1);
    const re = runRound(env, c, seed + 7919, true);
    checks.add('recheck');
    checkpoint(env, 'after the re-check');
    if (re.cmp.status !== 'PASSED') {
      return finish({ ...errors, status: re.cmp.status, detail: `state drift: correct before timing, wrong after it: ${re.cmp.detail ?? re.cmp.status}`, golden });
    }
    const est = bootstrapSpeedup(timing.bt, timing.ct, { seed });
    progress('done', 1, 1);
    return finish({
      ...errors, status, detail, golden, iters,
      baselineMs: fin(median(timing.bt)), candidateMs: fin(median(timing.ct)),
      speedup: fin(est.speedup), ciLow: fin(est.ciLow), ciHigh: fin(est.ciHigh),
      hostMs: fin(median(timing.ch)), floorMs: timing.floorMs, verified: timing.verified,
    });
  } catch (e) {
    const hack = e instanceof RewardHackError ? e.message : e instanceof SideError && e.side === 'candidate' ? (e.cause instanceof RewardHackError ? e.cause.message : guard?.tamperAttempt(e.cause)) : undefined;
    if (hack) return finish({ status: 'REWARD_HACK', detail: hack, golden });
    if (e instanceof SideError) {
      const status: Status = e.side === 'candidate' ? 'RUNTIME_ERROR' : 'SKIPPED';
      const detail = e.side === 'candidate' ? `${e.during}: ${errorMessage(e.cause)}` : `baseline failed (${e.during}): ${errorMessage(e.cause)}`;
      return finish({ status, detail, golden });
    }
    throw e;
  } finally {
    guard?.setPoison(undefined);
    safely(() => baseline?.dispose());
    safely(() => candidate?.dispose());
  }
}

function secretSeed(): number {
  return Math.floor(Math.random() * 2 ** 31);
}

function safely(fn: () => void): void {
  try {
    fn();
  } catch {
    // a broken candidate's dispose must not hide its result
  }
}

interface RoundResult {
  cmp: Comparison;
  golden?: { baseline: GoldenCheck; candidate: GoldenCheck };
}

const FLOAT_DTYPES = new Set<DType>(['f64', 'f32', 'f16', 'bf16', 'fp8e4m3', 'fp8e5m2']);

/** The relative L2 error an output may have, on top of the element-wise tolerance (tiny-output abuse). */
export function relL2Limit(task: TaskDefinition, dtype: DType): number {
  return Math.max(0.05, 2 * toleranceFor(task, dtype).rtol);
}

/** ||a - e|| / ||e|| per float output; the first one over its limit, as a failing comparison. */
function relL2Check(task: TaskDefinition, actual: readonly Tensor[], expected: readonly Tensor[]): Comparison | undefined {
  for (let i = 0; i < expected.length; i++) {
    const e = expected[i]!;
    const a = actual[i];
    if (!a || !FLOAT_DTYPES.has(e.dtype)) continue;
    const tol = toleranceFor(task, e.dtype);
    const s = compareStats(a, e, tol);
    if (s.sumSqRef === 0) continue;
    const rel = Math.sqrt(s.sumSqDiff / s.sumSqRef);
    const limit = relL2Limit(task, e.dtype);
    if (rel > limit) {
      return {
        status: 'INCORRECT_NUMERICAL', maxAbsError: Infinity, maxRelError: rel, matchedRatio: 0,
        detail: `output ${i}: relative L2 error ${rel.toPrecision(3)} > ${limit} although ${REQUIRED_MATCHED_RATIO * 100}% of elements are within atol/rtol (outputs near or below atol, or skipped elements: tolerance abuse)`,
      };
    }
  }
  return undefined;
}

/**
 * The bytes of an input before any call, to tell later whether a call wrote to it: a device copy compared
 * on the device when the backend has harness kernels, else a host copy.
 */
interface Pristine {
  /** Whether `t`'s storage still holds the snapshot's bytes. */
  same(t: Tensor): boolean;
  dispose(): void;
}

function snapshot(t: Tensor): Pristine {
  const { backend } = t;
  const n = t.storage.byteLength;
  const k = backend.harnessKernels;
  if (k) {
    const copy = backend.allocate(n, t.device);
    backend.copyBytes(copy, 0, t.storage, 0, n);
    return { same: (x) => x.storage.byteLength === n && k.countDifferentBytes(x.storage, 0, copy, 0, n) === 0, dispose: () => copy.release() };
  }
  const bytes = backend.read(t.storage, 0, n);
  return { same: (x) => sameBytes(backend.read(x.storage, 0, x.storage.byteLength), bytes), dispose: () => {} };
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.byteLength !== b.byteLength) return false;
  for (let i = 0; i < a.byteLength; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * A side's own copy of the task's host arguments for one call: a candidate that changes its copy (to mislead the
 * baseline's launch choice on a later call) changes nothing the baseline sees; checkedCall also catches it.
 */
function ownHostArgs(host: readonly unknown[]): unknown[] {
  return host.map((v) => structuredClone(v));
}

/** Which host argument `after` (a side's copy after its call) no longer equals `host` in, or undefined. */
function changedHostArg(task: TaskDefinition, host: readonly unknown[], after: readonly unknown[]): string | undefined {
  const i = host.findIndex((v, j) => JSON.stringify(v) !== JSON.stringify(after[j]));
  return i < 0 ? undefined : (task.hostInputs[i]?.name ?? String(i));
}

/** One forward call in a correctness round: poisoned allocations, device sync, output checks. */
function checkedCall(env: CaseEnv, side: Side, args: readonly (Tensor | null)[], owned: Set<Tensor>, host: readonly unknown[] = []): Tensor[] {
  const { opts, device } = env;
  const g = opts.guard;
  const ctx = side === 'baseline' ? env.baseCtx : env.candCtx;
  const m = side === 'baseline' ? env.baseline : env.candidate;
  const seq0 = g?.allocationSeq ?? 0;
  const state0 = g?.probes.state?.();
  const hostCopy = ownHostArgs(host);
  g?.setPoison(OUTPUT_POISON);
  let outs: Tensor[];
  try {
    outs = onSide(side, 'forward', () => {
      const result = withContext(ctx, () => (m.forward as (...a: unknown[]) => unknown)(...args, ...hostCopy));
      opts.backend.synchronize(device);
      return collect(opts.task, args, result);
    });
  } finally {
    g?.setPoison(undefined);
  }
  if (g && side === 'candidate') {
    env.checks.add('outputs-owned-fresh').add('poison');
    const bad = g.checkOutputs(outs, seq0, args);
    if (bad) throw new RewardHackError(bad); // not disposed: a hostile object's methods are not called
  }
  if (side === 'candidate' && host.length) {
    env.checks.add('host-args-intact');
    const changed = changedHostArg(opts.task, host, hostCopy);
    if (changed !== undefined) throw new RewardHackError(`the candidate modified its host argument '${changed}' (each side gets its own copy; a module reads it only)`);
  }
  for (const t of outs) owned.add(t);
  if (g && side === 'candidate') {
    if (g.probes.state && g.probes.state() !== state0) throw new RewardHackError(`the candidate changed the harness's execution state (${state0} -> ${g.probes.state()})`);
  }
  return outs;
}

function runRound(env: CaseEnv, c: TaskCase, seed: number, candidateFirst: boolean): RoundResult {
  const { opts } = env;
  const { task } = opts;
  const owned = new Set<Tensor>();
  let pristineAll: (Pristine | null)[] | undefined;
  try {
    const inputs = makeCaseInputs(env, c, seed);
    for (const t of inputs) if (t) owned.add(t);
    // Parameters count too: the reference reads them on the host (a 1 GiB embedding table took seconds a round).
    const paramNumel = [...env.baseline.stateDict().values()].reduce((n, t) => n + t.numel, 0);
    const wantGolden = inputs.reduce((n, t) => n + (t ? t.numel : 0), paramNumel) <= GOLDEN_MAX_NUMEL;
    // Host copies for the golden reference, taken before any call can touch the inputs.
    const hostInputs = wantGolden ? inputs.map((t) => (t ? toHostArray(t) : null)) : undefined;
    const strict = opts.guard !== undefined && !task.collectOutputs;
    const pristine = strict ? inputs.map((t) => (t ? snapshot(t) : null)) : undefined;
    pristineAll = pristine;

    const host = onSide('baseline', 'hostArgs', () => hostArgsFor(task, inputs, c));
    const baseArgs = inputs.map((t) => (t ? track(owned, cloneLayout(t)) : null));
    const candArgs = inputs.map((t) => (t ? track(owned, cloneLayout(t)) : null));
    let baseOut: Tensor[];
    let candOut: Tensor[];
    if (candidateFirst) {
      env.checks.add('candidate-first');
      candOut = checkedCall(env, 'candidate', candArgs, owned, host);
      baseOut = checkedCall(env, 'baseline', baseArgs, owned, host);
    } else {
      baseOut = checkedCall(env, 'baseline', baseArgs, owned, host);
      candOut = checkedCall(env, 'candidate', candArgs, owned, host);
    }
    if (pristine) {
      env.checks.add('input-mutation');
      for (const [j, p] of pristine.entries()) {
        if (!p) continue;
        const baseKept = p.same(baseArgs[j]!);
        const candKept = p.same(candArgs[j]!);
        if (baseKept && !candKept) {
          throw new RewardHackError(`the candidate modified its input '${task.inputs[j]?.name ?? j}', which the task does not write (the baseline leaves it intact)`);
        }
      }
    }

    let cmp = onSide('candidate', 'output', () => compareOutputs(candOut, baseOut, tolFor(task, c)));
    if (cmp.status === 'PASSED') {
      const l2 = relL2Check(task, candOut, baseOut);
      env.checks.add('relative-l2');
      if (l2) cmp = l2;
    }
    if (!hostInputs) return { cmp };
    let ref: HostArray[];
    try {
      const params = new Map([...env.baseline.stateDict()].map(([k, t]) => [k, toHostArray(t)] as const));
      ref = task.reference(hostInputs, params, c);
    } catch (e) {
      return { cmp: cmp.status === 'PASSED' ? { ...cmp, detail: `golden reference failed: ${errorMessage(e)}` } : cmp };
    }
    return {
      cmp,
      golden: {
        baseline: toGolden(compareWithGolden(baseOut, ref, task, c.dtype)),
        candidate: toGolden(compareWithGolden(candOut, ref, task, c.dtype)),
      },
    };
  } finally {
    for (const p of pristineAll ?? []) p?.dispose();
    disposeAll(owned);
  }
}

function makeCaseInputs(env: CaseEnv, c: TaskCase, seed: number): (Tensor | null)[] {
  const { opts } = env;
  return onSide('baseline', 'makeInputs', () =>
    withContext(env.baseCtx, () => {
      const inputs = opts.task.makeInputs(c, env.baseCtx, new Rng(seed));
      opts.prepareInputs?.(c, inputs);
      return inputs;
    }),
  );
}

/** A case with its token/batch dim changed (not part of the listed cases), or undefined when the task has none. */
export function hiddenCase(task: TaskDefinition, c: TaskCase, rng: Rng): { c: TaskCase; what: string } | undefined {
  const names = Object.keys(c.dims);
  if (names.some((n) => /[^A-Za-z0-9_]/.test(n))) return undefined;
  const dim = ['T', 'B', 'M'].find((n) => (c.dims[n] ?? 0) >= 1);
  if (!dim) return undefined;
  const v = c.dims[dim]!;
  const nv = v + 1 + rng.int(0, Math.max(2, Math.min(v, 16)));
  const hc: TaskCase = { ...c, name: `${c.name}~hidden`, dims: { ...c.dims, [dim]: nv } };
  void task;
  return { c: hc, what: `${dim}=${nv} instead of ${v}` };
}

/** The hidden-shape round; undefined when the baseline cannot run it or disagrees with the float64 reference. */
function runHidden(env: CaseEnv, hc: TaskCase, seed: number): Comparison | undefined {
  try {
    const r = runRound(env, hc, seed, false);
    if (r.golden && r.golden.baseline.status !== 'PASSED') return undefined;
    return r.cmp;
  } catch (e) {
    if (e instanceof SideError && e.side === 'baseline') return undefined;
    throw e;
  }
}

// ---- timing ------------------------------------------------------------------------------------------

interface Timing {
  bt: number[];
  ct: number[];
  ch: number[];
  verified: number;
  floorMs: number | null;
}

/** Copy `src`'s storage into `dst`'s, rolled by `shift` elements when it holds floats (so each call sees new data). */
function fillRolled(backend: Backend, dst: Tensor, src: Tensor, shift: number): void {
  const n = src.storage.byteLength;
  const item = src.itemsize;
  const elems = Math.floor(n / item);
  const s = FLOAT_DTYPES.has(src.dtype) && elems > 1 ? (shift % elems) * item : 0;
  if (s === 0) {
    backend.copyBytes(dst.storage, 0, src.storage, 0, n);
    return;
  }
  backend.copyBytes(dst.storage, 0, src.storage, s, n - s);
  backend.copyBytes(dst.storage, n - s, src.storage, 0, s);
}

export function defaultFlushBytes(backend: Backend, device: number): number {
  const l2 = backend.devices().find((d) => d.index === device)?.l2CacheBytes ?? 0;
  return backend.name === 'cpu' ? Math.min(2 * l2, 1 << 20) : 2 * l2;
}

// The order of a timed pair: alternating, and flipped again at each progress report (one every 8 pairs). A report wakes
// the parent process and the IPC pipe, which slows the call right after it; with plain alternation that call was always
// the candidate's, and CPU self-tests read the baselines 2-8% slower as candidates (harness.test: "equally often").
const CANDIDATE_FIRST: readonly Side[] = ['candidate', 'baseline'];
const BASELINE_FIRST: readonly Side[] = ['baseline', 'candidate'];
const PAIRS_PER_REPORT = 8;
const pairOrder = (i: number): readonly Side[] => ((i + Math.floor(i / PAIRS_PER_REPORT)) % 2 === 0 ? CANDIDATE_FIRST : BASELINE_FIRST);

function timeCase(env: CaseEnv, seed: number, iters: number, progress: (p: BenchPhase, d: number, t: number) => void): Timing {
  const { opts, c, device } = env;
  const { task, backend } = opts;
  const g = opts.guard;
  const sets = Math.max(1, opts.inputSets ?? 3);
  const poolSize = sets + 1;
  const owned = new Set<Tensor>();
  const storages: Storage[] = [];
  try {
    const bases = Array.from({ length: sets }, (_, k) => makeCaseInputs(env, c, seed + 100_003 + k));
    for (const set of bases) for (const t of set) if (t) owned.add(t);
    // the host arguments of each input set (the rolling below keeps them: TaskBehaviour.hostArgs), read before timing
    const hosts = bases.map((set) => onSide('baseline', 'hostArgs', () => hostArgsFor(task, set, c)));
    const slots = {
      baseline: Array.from({ length: poolSize }, () => bases[0]!.map((t) => (t ? track(owned, cloneLayout(t)) : null))),
      candidate: Array.from({ length: poolSize }, () => bases[0]!.map((t) => (t ? track(owned, cloneLayout(t)) : null))),
    };
    env.checks.add(`input-sets:${sets}x${poolSize}-slots`);
    const flushBytes = Math.max(0, Math.floor(opts.flushBytes ?? defaultFlushBytes(backend, device)));
    const flush = flushBytes > 0 ? [backend.allocate(flushBytes, device), backend.allocate(flushBytes, device)] : undefined;
    if (flush) {
      storages.push(...flush);
      env.checks.add(`l2-flush:${flushBytes}`);
    }
    let flushDir = 0;
    let timing = false;
    const timerFor = () => backend.createTimer(device);
    const selfTimed = opts.selfTimed?.(env.candidate);
    if (selfTimed) env.checks.add('worker-clock');

    /** One call: refill the slot, flush, time with the device timer and with a device-synchronised host clock. */
    const call = (side: Side, i: number, keep: boolean): { ev: number; host: number; outs?: Tensor[] } => {
      const ctx = side === 'baseline' ? env.baseCtx : env.candCtx;
      const m = side === 'baseline' ? env.baseline : env.candidate;
      const args = slots[side][i % poolSize]!;
      const src = bases[i % sets]!;
      for (let j = 0; j < args.length; j++) if (args[j] && src[j]) fillRolled(backend, args[j]!, src[j]!, i * 7919 + 13);
      const hostCopy = ownHostArgs(hosts[i % sets]!);
      if (flush) {
        backend.copyBytes(flush[flushDir]!, 0, flush[1 - flushDir]!, 0, flushBytes);
        flushDir = 1 - flushDir;
      }
      backend.synchronize(device);
      const timer = timerFor();
      const seq0 = g?.allocationSeq ?? 0;
      const state0 = g?.probes.state?.();
      let result: unknown;
      const h0 = performance.now();
      const self = side === 'candidate' ? selfTimed : undefined;
      let own: { deviceMs: number; hostMs: number } | undefined;
      g?.track(timing ? `timed-${side}` : undefined);
      try {
        result = onSide(side, 'forward (timing)', () => {
          if (self) {
            const r = withContext(ctx, () => self([...args, ...hostCopy]));
            own = r;
            return r.result;
          }
          timer.start();
          const r = withContext(ctx, () => (m.forward as (...a: unknown[]) => unknown)(...args, ...hostCopy));
          timer.stop();
          return r;
        });
      } finally {
        g?.track(undefined);
      }
      backend.synchronize(device);
      const host = own ? own.hostMs : performance.now() - h0;
      const ev = own ? own.deviceMs : timer.elapsedMs();
      if (own && !(Number.isFinite(ev) && Number.isFinite(host) && ev >= 0 && host >= 0)) {
        disposeResult(result, args);
        throw new RewardHackError(`timed call ${i}: the candidate's worker reported no valid time (device ${ev} ms, host ${host} ms)`);
      }
      let outs: Tensor[];
      try {
        outs = onSide(side, 'output (timing)', () => collect(task, args, result));
      } catch (e) {
        disposeResult(result, args);
        throw e;
      }
      if (g && side === 'candidate') {
        const bad = g.checkOutputs(outs, seq0, args);
        if (bad) throw new RewardHackError(`timed call ${i}: ${bad}`);
        if (g.probes.state && g.probes.state() !== state0) throw new RewardHackError(`timed call ${i}: the candidate changed the harness's execution state (${state0} -> ${g.probes.state()})`);
      }
      if (keep) return { ev, host, outs };
      disposeResult(result, args);
      for (const o of outs) if (!args.includes(o)) o.dispose();
      return { ev, host };
    };

    // ---- warm-up ----
    const warmup = Math.max(0, opts.warmup ?? 3);
    const warmupMs = Math.max(0, opts.warmupMs ?? 0);
    progress('warmup', 0, warmup);
    let idx = 0;
    const t0 = performance.now();
    for (let w = 0; w < warmup || (performance.now() - t0 < warmupMs && w < 100 * warmup + 1000); w++, idx++) {
      call('candidate', idx, false);
      call('baseline', idx, false);
      if (w % 16 === 15) progress('warmup', w + 1, warmup);
    }

    // ---- which timed calls are re-verified (private seed) ----
    const vr = new Rng(opts.verifySeed ?? secretSeed());
    const toVerify = new Set<number>();
    const want = Math.min(iters, Math.max(3, Math.ceil(iters / 10)));
    const lo = Math.min(poolSize, Math.max(0, iters - want));
    while (toVerify.size < want) toVerify.add(lo + vr.int(0, Math.max(1, iters - lo)));
    toVerify.add(iters - 1);
    env.checks.add('reverify-timed-calls');

    const before = g?.resources();
    timing = true;
    const bt: number[] = [];
    const ct: number[] = [];
    const bh: number[] = [];
    const ch: number[] = [];
    let verified = 0;
    for (let i = 0; i < iters; i++, idx++) {
      const keep = toVerify.has(i);
      const got: Partial<Record<Side, { ev: number; host: number; outs?: Tensor[] }>> = {};
      for (const side of pairOrder(i)) got[side] = call(side, idx, keep);
      const b = got.baseline!;
      const k = got.candidate!;
      bt.push(b.ev);
      bh.push(b.host);
      ct.push(k.ev);
      ch.push(k.host);
      if (keep) {
        const args = new Set([...slots.baseline[idx % poolSize]!, ...slots.candidate[idx % poolSize]!]);
        try {
          const cmp = compareOutputs(k.outs!, b.outs!, tolFor(task, c));
          verified++;
          if (cmp.status !== 'PASSED') {
            throw new RewardHackError(`timed call ${i}: the output differs from the baseline's on the same inputs (${cmp.detail ?? cmp.status}), although correctness passed: a cached, replayed or deferred output`);
          }
        } finally {
          for (const o of [...k.outs!, ...b.outs!]) if (!args.has(o)) o.dispose();
        }
      }
      if (i % PAIRS_PER_REPORT === PAIRS_PER_REPORT - 1) progress('timing', i + 1, iters);
    }

    // ---- after timing: threads, handles, memory, escaped work, the physical floor ----
    if (g && before) {
      const grew = HarnessGuard.growth(before, g.resources(), 'during timing');
      env.checks.add('threads-handles');
      if (grew) throw new RewardHackError(grew);
      // Memory allocated during the timed calls and still alive: the candidate may not keep more than the baseline.
      const keptC = g.liveTracked('timed-candidate');
      const keptB = g.liveTracked('timed-baseline');
      env.checks.add('memory-kept');
      if (keptC - keptB > 64 * 1024) throw new RewardHackError(`the candidate kept ${keptC} bytes allocated during the timed calls alive after them (the baseline ${keptB}): an output cache?`);
    }
    const mc = median(ct);
    const mch = median(ch);
    const escaped = mch - mc - (median(bh) - median(bt));
    // Only where a device timer runs beside the host clock: on the CPU backend both are the host's clock around the same
    // synchronous call, so the gap is only the harness's own code and the OS scheduler (a test run on a loaded 2-core
    // machine saw it flag a plain candidate); work a CPU candidate moves off the call needs a thread, which the guard
    // catches (exploit background-thread).
    if (backend.name !== 'cpu') env.checks.add('escape');
    if (backend.name !== 'cpu' && escaped > Math.max(0.25 * mch, 0.05) && mc < 0.75 * mch) {
      throw new RewardHackError(`work escaped the timed window: the device timer says ${mc.toPrecision(3)} ms, a device-synchronised host clock ${mch.toPrecision(3)} ms per call (side stream, thread or deferred work?)`);
    }
    let work: WorkCount | undefined;
    try {
      work = task.work(c);
    } catch {
      work = undefined;
    }
    const floor = floorMs(work, opts.profile, c.dtype);
    if (floor !== null) {
      env.checks.add('physical-floor');
      if (mc < floor) {
        throw new RewardHackError(`${mc.toPrecision(3)} ms per call is below this machine's physical floor of ${floor.toPrecision(3)} ms (${work!.bytes} bytes, ${work!.flops} FLOP at the measured copy/matmul rates with head-room): the work was skipped, cached or escaped the timer`);
      }
    }
    return { bt, ct, ch, verified, floorMs: floor };
  } finally {
    disposeAll(owned);
    for (const s of storages) s.release();
  }
}

function toGolden(c: Comparison): GoldenCheck {
  return { status: c.status, maxAbsError: fin(c.maxAbsError), maxRelError: fin(c.maxRelError), matchedRatio: c.matchedRatio, ...(c.detail ? { detail: c.detail } : {}) };
}

/** Like compareOutputs, with each output's tolerance taken from the actual tensor's dtype. */
function compareWithGolden(actual: readonly Tensor[], ref: readonly HostArray[], task: TaskDefinition, caseDType: DType): Comparison {
  if (actual.length !== ref.length) {
    return { status: 'INCORRECT_SHAPE', maxAbsError: Infinity, maxRelError: Infinity, matchedRatio: 0, detail: `${actual.length} outputs, the reference has ${ref.length}` };
  }
  let worst: Comparison = { status: 'PASSED', maxAbsError: 0, maxRelError: 0, matchedRatio: 1 };
  for (let i = 0; i < ref.length; i++) {
    const c = compareTensors(actual[i]!, ref[i]!, toleranceFor(task, actual[i]?.dtype ?? caseDType));
    worst = {
      status: worst.status === 'PASSED' ? c.status : worst.status,
      maxAbsError: Math.max(worst.maxAbsError, c.maxAbsError),
      maxRelError: Math.max(worst.maxRelError, c.maxRelError),
      matchedRatio: Math.min(worst.matchedRatio, c.matchedRatio),
      detail: worst.detail ?? (c.detail ? `output ${i}: ${c.detail}` : undefined),
    };
  }
  return worst;
}

function track(set: Set<Tensor>, t: Tensor): Tensor {
  set.add(t);
  return t;
}

/** The tensors to compare: the task's collectOutputs, else the returned tensor(s). */
function collect(task: TaskDefinition, args: readonly (Tensor | null)[], result: unknown): Tensor[] {
  if (task.collectOutputs) return task.collectOutputs(args, result);
  if (result instanceof Tensor) return [result];
  if (Array.isArray(result)) {
    const out: Tensor[] = [];
    for (const r of result) {
      if (r instanceof Tensor) out.push(r);
      else if (r !== null && r !== undefined) throw new Error(`forward returned an array holding a ${typeof r}, expected tensors`);
    }
    return out;
  }
  if (result === undefined || result === null) return [];
  throw new Error(`forward returned a ${typeof result}, expected a Tensor or an array of tensors`);
}

/**
 * A copy of t with the same shape, strides and offset (a copy of its whole storage), so
 * non-contiguous and broadcast inputs reach both sides exactly as makeInputs built them.
 */
export function cloneLayout(t: Tensor): Tensor {
  const backend = t.backend;
  const storage = backend.allocate(t.storage.byteLength, t.device);
  try {
    backend.copyBytes(storage, 0, t.storage, 0, t.storage.byteLength);
    return new Tensor({ storage, dtype: t.dtype, shape: t.shape, strides: t.strides, offset: t.offset });
  } finally {
    storage.release();
  }
}

function disposeAll(ts: Iterable<Tensor | null>): void {
  for (const t of ts) {
    try {
      t?.dispose();
    } catch {
      // a candidate's broken output must not take the harness down
    }
  }
}

function disposeResult(r: unknown, keep: readonly (Tensor | null)[] = []): void {
  if (r instanceof Tensor) {
    if (!keep.includes(r)) r.dispose();
  } else if (Array.isArray(r)) {
    for (const x of r) if (x instanceof Tensor && !keep.includes(x)) x.dispose();
  }
}

/** N(0, 1) for every floating-point parameter (the default when a task gives no initParameters). */
export function initNormalDefault(m: Module, rng: Rng): void {
  for (const [, p] of m.namedParameters()) {
    if (!['f64', 'f32', 'f16', 'bf16', 'fp8e4m3', 'fp8e5m2'].includes(p.dtype)) continue;
    const t = Tensor.fromArray(p.backend, rng.fillNormal(p.numel), p.shape, p.dtype, { device: p.device });
    p.copy_(t);
    t.dispose();
  }
}
