import type { Backend } from '../backend.js';
import { compareOutputs, compareTensors, type Comparison } from '../compare.js';
import { withContext, type ExecutionContext } from '../context.js';
import type { DType } from '../dtype.js';
import { errorMessage } from '../errors.js';
import { toHostArray } from '../host.js';
import type { Module } from '../module.js';
import type { ModuleRegistry } from '../registry.js';
import { Rng } from '../rng.js';
import { bootstrapSpeedup, median } from '../stats.js';
import { worstStatus, type Status } from '../status.js';
import { toleranceFor, type HostArray, type TaskCase, type TaskDefinition } from '../task.js';
import { Tensor } from '../tensor.js';

/**
 * The kernel-level bench protocol (design §4), backend-agnostic and free of CLI concerns.
 *
 * Per case:
 *  1. build the baseline and the candidate with the case's init args, each in an execution context
 *     whose registry is the baseline registry / the candidate set's child registry;
 *  2. baseline.initParameters(rng), then candidate.loadStateDict(baseline.stateDict());
 *  3. `rounds` correctness rounds, each with fresh inputs (seed + round); baseline and candidate get
 *     their own clones (same layout), so an op that mutates its inputs cannot leak into the other side;
 *     outputs compared with the task's tolerance; at small shapes both sides are also compared with the
 *     task's float64 reference (the golden check);
 *  4. only when correct: warm-up, then `iters` timed calls per side, candidate and baseline interleaved
 *     call by call (alternating which goes first), fresh clones made outside the timed window, each call
 *     timed by a backend timer; median per side and a bootstrap CI of the speedup.
 */

/** Inputs up to this many elements in total also get the float64 golden check. */
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
}

export type BenchPhase = 'build' | 'correctness' | 'warmup' | 'timing' | 'done';

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
}

export const MIN_ROUNDS = 3;

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
    throw new SideError(side, during, e);
  }
}

async function benchCase(opts: BenchTaskOptions, c: TaskCase, caseIndex: number, caseCount: number): Promise<CaseResult> {
  const { task, backend } = opts;
  const device = opts.device ?? 0;
  const rounds = Math.max(MIN_ROUNDS, opts.rounds ?? MIN_ROUNDS);
  const iters = opts.correctnessOnly ? 0 : Math.max(1, opts.iters ?? 50);
  const warmup = Math.max(0, opts.warmup ?? 3);
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
  const tolFor = (d: DType | undefined) => toleranceFor(task, d ?? c.dtype);

  let baseline: Module | undefined;
  let candidate: Module | undefined;
  let worst: Comparison = { status: 'PASSED', maxAbsError: 0, maxRelError: 0, matchedRatio: 1 };
  let golden: CaseResult['golden'];
  try {
    progress('build', 0, 1);
    baseline = onSide('baseline', 'constructor', () => opts.baseline.createIn(baseCtx, task.id, ...c.init));
    candidate = onSide('candidate', 'constructor', () => opts.candidate.createIn(candCtx, task.id, ...c.init));
    const b = baseline;
    const cand = candidate;
    onSide('baseline', 'initParameters', () => withContext(baseCtx, () => (task.initParameters ? task.initParameters(b, c, new Rng(seed)) : initNormalDefault(b, new Rng(seed)))));
    const load = onSide('candidate', 'loadStateDict', () => withContext(candCtx, () => cand.loadStateDict(b.stateDict())));
    const loadNote = load.missing.length || load.unexpected.length
      ? `state dict: candidate lacks [${load.missing.join(', ')}], baseline has extra [${load.unexpected.join(', ')}]`
      : undefined;

    // ---- correctness -------------------------------------------------------------------------
    for (let r = 0; r < rounds; r++) {
      progress('correctness', r, rounds);
      const round = runRound(opts, c, baseCtx, candCtx, b, cand, seed + r, tolFor);
      worst = {
        status: worstStatus([worst.status, round.cmp.status]),
        maxAbsError: Math.max(worst.maxAbsError, round.cmp.maxAbsError),
        maxRelError: Math.max(worst.maxRelError, round.cmp.maxRelError),
        matchedRatio: Math.min(worst.matchedRatio, round.cmp.matchedRatio),
        detail: worst.detail ?? (round.cmp.detail ? `round ${r}: ${round.cmp.detail}` : undefined),
      };
      if (round.golden) golden = round.golden;
      if (worst.status !== 'PASSED') break;
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
    if (loadNote) detail = detail ? `${detail}; ${loadNote}` : loadNote;
    const errors = { maxAbsError: fin(worst.maxAbsError), maxRelError: fin(worst.maxRelError), matchedRatio: worst.matchedRatio };
    if (status !== 'PASSED' || iters === 0) {
      return { ...base, ...empty, ...errors, status, detail, golden } as CaseResult;
    }

    // ---- timing --------------------------------------------------------------------------------
    const timeRng = new Rng(seed + 100_003);
    const inputs = onSide('baseline', 'makeInputs', () => withContext(baseCtx, () => task.makeInputs(c, baseCtx, timeRng)));
    try {
      progress('warmup', 0, warmup);
      const warmupMs = Math.max(0, opts.warmupMs ?? 0);
      const t0 = performance.now();
      for (let i = 0; i < warmup || (performance.now() - t0 < warmupMs && i < 100 * warmup + 1000); i++) {
        timedCall('candidate', candCtx, cand, inputs, backend, device);
        timedCall('baseline', baseCtx, b, inputs, backend, device);
      }
      const bt: number[] = [];
      const ct: number[] = [];
      for (let i = 0; i < iters; i++) {
        if (i % 2 === 0) {
          ct.push(timedCall('candidate', candCtx, cand, inputs, backend, device));
          bt.push(timedCall('baseline', baseCtx, b, inputs, backend, device));
        } else {
          bt.push(timedCall('baseline', baseCtx, b, inputs, backend, device));
          ct.push(timedCall('candidate', candCtx, cand, inputs, backend, device));
        }
        if (i % 8 === 7) progress('timing', i + 1, iters);
      }
      const est = bootstrapSpeedup(bt, ct, { seed });
      progress('done', 1, 1);
      return {
        ...base, ...errors, status, detail, golden, iters,
        baselineMs: fin(median(bt)), candidateMs: fin(median(ct)),
        speedup: fin(est.speedup), ciLow: fin(est.ciLow), ciHigh: fin(est.ciHigh),
      } as CaseResult;
    } finally {
      disposeAll(inputs);
    }
  } catch (e) {
    if (e instanceof SideError) {
      const status: Status = e.side === 'candidate' ? 'RUNTIME_ERROR' : 'SKIPPED';
      const detail = e.side === 'candidate' ? `${e.during}: ${errorMessage(e.cause)}` : `baseline failed (${e.during}): ${errorMessage(e.cause)}`;
      return { ...base, ...empty, status, detail, golden } as CaseResult;
    }
    throw e;
  } finally {
    safely(() => baseline?.dispose());
    safely(() => candidate?.dispose());
  }
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

function runRound(opts: BenchTaskOptions, c: TaskCase, baseCtx: ExecutionContext, candCtx: ExecutionContext, baseline: Module, candidate: Module, seed: number, tolFor: (d: DType | undefined) => ReturnType<typeof toleranceFor>): RoundResult {
  const { task } = opts;
  const owned = new Set<Tensor>();
  try {
    const inputs = onSide('baseline', 'makeInputs', () => withContext(baseCtx, () => task.makeInputs(c, baseCtx, new Rng(seed))));
    for (const t of inputs) if (t) owned.add(t);
    const wantGolden = inputs.reduce((n, t) => n + (t ? t.numel : 0), 0) <= GOLDEN_MAX_NUMEL;
    // Host copies for the golden reference, taken before any call can touch the inputs.
    const hostInputs = wantGolden ? inputs.map((t) => (t ? toHostArray(t) : null)) : undefined;

    const baseArgs = inputs.map((t) => (t ? track(owned, cloneLayout(t)) : null));
    const baseOut = onSide('baseline', 'forward', () => {
      const result = withContext(baseCtx, () => (baseline.forward as (...a: unknown[]) => unknown)(...baseArgs));
      return collect(task, baseArgs, result);
    });
    for (const t of baseOut) owned.add(t);

    const candArgs = inputs.map((t) => (t ? track(owned, cloneLayout(t)) : null));
    const candOut = onSide('candidate', 'forward', () => {
      const result = withContext(candCtx, () => (candidate.forward as (...a: unknown[]) => unknown)(...candArgs));
      return collect(task, candArgs, result);
    });
    for (const t of candOut) owned.add(t);

    const cmp = onSide('candidate', 'output', () => compareOutputs(candOut, baseOut, tolFor));
    if (!hostInputs) return { cmp };
    let ref: HostArray[];
    try {
      const params = new Map([...baseline.stateDict()].map(([k, t]) => [k, toHostArray(t)] as const));
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
    disposeAll(owned);
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
  for (const t of ts) t?.dispose();
}

/** One timed forward call on fresh clones; the clones and outputs are disposed after the timer stops. */
function timedCall(side: Side, ctx: ExecutionContext, m: Module, inputs: readonly (Tensor | null)[], backend: Backend, device: number): number {
  const args = inputs.map((t) => (t ? cloneLayout(t) : null));
  let result: unknown;
  try {
    backend.synchronize(device);
    const timer = backend.createTimer(device);
    result = onSide(side, 'forward (timing)', () => {
      timer.start();
      const r = withContext(ctx, () => (m.forward as (...a: unknown[]) => unknown)(...args));
      timer.stop();
      return r;
    });
    return timer.elapsedMs();
  } finally {
    disposeResult(result);
    disposeAll(args);
  }
}

function disposeResult(r: unknown): void {
  if (r instanceof Tensor) r.dispose();
  else if (Array.isArray(r)) for (const x of r) if (x instanceof Tensor) x.dispose();
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
