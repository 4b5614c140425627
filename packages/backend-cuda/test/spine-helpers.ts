/**
 * Helpers for the spine GPU tests (the Llama-path launchers' src/ops/<group>/*.gpu.test.ts): inputs built on the float64 CPU backend and copied
 * to CUDA, comparisons with design §4's tolerances (core's DEFAULT_TOLERANCE / the task's), output poisoning,
 * and running a model-zoo L1 task's baseline module on CUDA against the task's float64 reference.
 * Outside src/ so tsc's build of the package does not see the CPU backend or model-zoo (devDependencies).
 */
import { CpuBackend } from '@fastkernels/backend-cpu';
import {
  DEFAULT_TOLERANCE,
  ModuleRegistry,
  Rng,
  Tensor,
  callOp,
  compareTensors,
  hostArgsFor,
  opRoute,
  toHostArray,
  toleranceFor,
  withContext,
  type Backend,
  type DType,
  type ExecutionContext,
  type HostArray,
  type Module,
  type TaskCase,
  type TaskDefinition,
  type Tolerance,
} from '@fastkernels/core';
import { cosSinCacheReference, denseMoeLlmTasks, initNormal } from '@fastkernels/model-zoo';
import { afterAll } from 'vitest';
import { gpu } from '../src/gpu-test-util.js';

export const G = { tags: ['gpu'] };
export { gpu };

let cpuBackend: Backend | undefined;
export function cpu(): Backend {
  return (cpuBackend ??= new CpuBackend());
}

export function task(id: string): TaskDefinition {
  const t = denseMoeLlmTasks.find((x) => x.id === id);
  if (!t) throw new Error(`no task ${id}`);
  return t;
}

/** vLLM's rotary cos | sin cache rows [maxPos, rot] for base `theta`, rounded to dtype, on the CPU backend. */
export function cosSinCpu(maxPos: number, rot: number, dtype: DType, theta: number): Tensor {
  return Tensor.fromArray(cpu(), cosSinCacheReference(rot, maxPos, theta).data, [maxPos, rot], dtype);
}

/** N(0, scale^2) values on the CPU backend, rounded to dtype. */
export function randCpu(shape: readonly number[], dtype: DType, seed: number, scale = 1): Tensor {
  const n = shape.reduce((a, b) => a * b, 1);
  return Tensor.fromArray(cpu(), new Rng(seed).fillNormal(n, scale), shape, dtype);
}

export function intsCpu(values: readonly number[], shape: readonly number[], dtype: DType = 'i64'): Tensor {
  return Tensor.fromArray(cpu(), values, shape, dtype);
}

/** The same values on the GPU (a contiguous copy). */
export function toGpu(t: Tensor): Tensor {
  return t.to(gpu());
}

/**
 * Runs fn with `keep`, which records the tensors it is given (and returns them) for disposal when fn returns or throws:
 * GPU tests release their device memory rather than leave it to the garbage collector (which the runtime warns about).
 * Keep whole tensors, not views of them (a view shares its tensor's storage).
 */
export function releasing<R>(fn: (keep: <T extends Tensor | readonly Tensor[]>(t: T) => T) => R): R {
  const held: Tensor[] = [];
  const keep = <T extends Tensor | readonly Tensor[]>(t: T): T => {
    if (t instanceof Tensor) held.push(t);
    else held.push(...(t as readonly Tensor[]));
    return t;
  };
  try {
    return fn(keep);
  } finally {
    for (const t of held) t.dispose();
  }
}

/**
 * Fill freed blocks of the caching allocator with NaN, so an output allocated next (same size class) that a kernel
 * fails to write shows up as NaN instead of stale data that might match.
 */
export function poison(...elementCounts: number[]): void {
  for (const n of elementCounts) {
    const t = Tensor.empty(gpu(), [Math.max(1, Math.ceil(n))], 'f32');
    t.fill_(NaN);
    gpu().runtime.synchronize();
    t.dispose();
  }
}

/**
 * actual vs expected with (atol, rtol): the comparator must say PASSED (>= 99% within tolerance, no NaN/Inf, not all
 * zero) and, stricter than the harness, no element may be off by more than 8x the tolerance. Throws with details.
 */
export function expectClose(actual: Tensor, expected: Tensor | HostArray, tol: Tolerance, label: string): void {
  const c = compareTensors(actual, expected, tol);
  if (c.status !== 'PASSED') throw new Error(`${label}: ${c.status} ${c.detail ?? ''} (maxAbs ${c.maxAbsError}, matched ${c.matchedRatio})`);
  const a = actual.toFloat64Array();
  const e = 'data' in expected ? expected.data : expected.toFloat64Array();
  let worst = 0;
  let at = -1;
  for (let i = 0; i < a.length; i++) {
    if (a[i] === e[i] || Object.is(a[i], e[i]) || (Number.isNaN(a[i]!) && Number.isNaN(e[i]!))) continue;
    const r = Math.abs(a[i]! - e[i]!) / (tol.atol + tol.rtol * Math.abs(e[i]!));
    if (!(r <= worst)) {
      worst = Number.isNaN(r) ? Infinity : r;
      at = i;
    }
  }
  if (worst > 8) throw new Error(`${label}: element ${at} is ${a[at]} vs ${e[at]} (${worst.toFixed(1)}x the tolerance)`);
}

export function tolOf(dtype: DType): Tolerance {
  return DEFAULT_TOLERANCE[dtype];
}

/** Exact equality of two integer tensors (token ids), with the first difference in the message. */
export function expectSameInts(actual: Tensor, expected: Tensor, label: string): void {
  const a = actual.toFloat64Array();
  const e = expected.toFloat64Array();
  if (a.length !== e.length) throw new Error(`${label}: ${a.length} values vs ${e.length}`);
  const diffs: string[] = [];
  for (let i = 0; i < a.length; i++) if (a[i] !== e[i]) diffs.push(`[${i}] ${a[i]} vs ${e[i]}`);
  if (diffs.length) throw new Error(`${label}: ${diffs.length} of ${a.length} differ: ${diffs.slice(0, 8).join(', ')}`);
}

/** A variant of a task case with other dims / init / options. */
export function variant(base: TaskCase, name: string, patch: { dims?: Record<string, number>; init?: unknown[]; options?: Record<string, unknown>; dtype?: DType }): TaskCase {
  return {
    ...base,
    name,
    dtype: patch.dtype ?? base.dtype,
    dims: { ...base.dims, ...(patch.dims ?? {}) },
    init: patch.init ?? base.init,
    options: { ...base.options, ...(patch.options ?? {}) },
  } as TaskCase;
}

/**
 * Run a task's baseline module on CUDA (registry -> module -> initParameters -> makeInputs on a CUDA context ->
 * forward -> collectOutputs) and compare every output with the task's float64 reference on host arrays.
 */
export function checkTaskOnCuda(t: TaskDefinition, c: TaskCase, seed: number, withChildren?: ModuleRegistry): void {
  // a composite task's children resolve through `withChildren` (e.g. model-zoo's baselineRegistry())
  const registry = withChildren ?? new ModuleRegistry();
  if (!withChildren) registry.registerTask(t);
  const ctx: ExecutionContext = { backend: gpu(), device: 0, dtype: c.dtype, registry };
  const module = registry.createIn<Module>(ctx, t.id, ...c.init);
  const rng = new Rng(seed);
  if (t.initParameters) t.initParameters(module, c, rng);
  else initNormal(module, rng, 1);
  const inputs = withContext(ctx, () => t.makeInputs(c, ctx, rng));
  const hostInputs = inputs.map((x) => (x ? toHostArray(x) : null));
  const params = new Map(module.namedParameters().map(([k, p]) => [k, toHostArray(p)] as const));
  for (const x of inputs) if (x) poison(x.numel * 2);
  const host = hostArgsFor(t, inputs, c); // the task's host inputs (the sampler's hint), as the harness passes them
  const result = withContext(ctx, () => (module as unknown as { forward(...a: unknown[]): unknown }).forward(...inputs, ...host));
  const outputs = t.collectOutputs
    ? t.collectOutputs(inputs, result)
    : (Array.isArray(result) ? (result as (Tensor | null)[]) : [result as Tensor]).filter((x): x is Tensor => x !== null && x !== undefined);
  const expected = t.reference(hostInputs, params, c);
  if (outputs.length !== expected.length) throw new Error(`${t.id} ${c.name}: ${outputs.length} outputs, expected ${expected.length}`);
  outputs.forEach((o, i) => {
    if (o.dtype === 'i64' || o.dtype === 'i32') {
      const a = o.toFloat64Array();
      const e = expected[i]!.data;
      const bad: string[] = [];
      for (let j = 0; j < a.length; j++) if (a[j] !== e[j]) bad.push(`[${j}] ${a[j]} vs ${e[j]}`);
      if (bad.length) throw new Error(`${t.id} ${c.name} seed ${seed} output ${i}: ${bad.length} differ: ${bad.slice(0, 8).join(', ')}`);
    } else {
      expectClose(o, expected[i]!, toleranceFor(t, o.dtype), `${t.id} ${c.name} (${c.dtype}) seed ${seed} output ${i}`);
    }
  });
  module.dispose();
  for (const x of [...outputs, ...inputs]) x?.dispose();
}

/** Every CI case of the task with 2 seeds, then the extra cases with 1 seed. */
export function taskCases(t: TaskDefinition, extra: readonly TaskCase[]): { c: TaskCase; seed: number }[] {
  const out: { c: TaskCase; seed: number }[] = [];
  for (const c of t.cases.ci) for (const seed of [11, 12]) out.push({ c, seed });
  for (const c of extra) out.push({ c, seed: 13 });
  return out;
}

/** Lines a describe block's speed tests push, printed together once the block is done (call inside describe). */
export function printedAfterAll(): string[] {
  const lines: string[] = [];
  afterAll(() => {
    if (lines.length) console.log(lines.join('\n'));
  });
  return lines;
}

/**
 * Median device time of `reps` calls of fn (device events), after 3 warm-up calls. For printed speed lines. With
 * `flushL2`, a write of twice the L2's size before every timed call (outside the events), as bench/lib/timing.mjs
 * times kernels: fn then reads its inputs from memory, not from what the last call left in L2.
 */
export function medianMs(fn: () => void, reps: number, options: { readonly flushL2?: boolean } = {}): number {
  const b = gpu();
  const flush = options.flushL2 ? Tensor.empty(b, [(2 * (b.runtime.properties().l2CacheBytes || 64 * 2 ** 20)) / 4], 'f32') : null;
  try {
    for (let i = 0; i < 3; i++) fn();
    const ts: number[] = [];
    for (let i = 0; i < reps; i++) {
      flush?.fill_(0);
      const timer = b.createTimer();
      timer.start();
      fn();
      timer.stop();
      ts.push(timer.elapsedMs());
    }
    ts.sort((x, y) => x - y);
    return ts[Math.floor(ts.length / 2)]!;
  } finally {
    flush?.dispose();
  }
}

/**
 * Device time of one call of fn as a decode graph sees it: `inner` calls (fn(i), i = 0..inner-1) captured back to
 * back into one CUDA graph, replayed `reps` times after 2 warm-up replays, median replay time / inner. medianMs times
 * one eager call, host launch cost included: for a 10-40 us kernel that cost is most of the figure (run 10: an M 1
 * linear measured eagerly at 31% of copy ran at 72-98% of it inside the bs-1 decode graph under ncu). Outputs come
 * from the graph's own pool (`poolBytes`); fn should dispose what it allocates.
 */
export function graphMs(fn: (i: number) => void, inner: number, reps = 10, poolBytes = 256 << 20): number {
  const b = gpu();
  fn(0); // compile / choose the kernel outside the capture
  b.synchronize();
  const g = b.runtime.capture(() => {
    for (let i = 0; i < inner; i++) fn(i);
  }, { poolBytes });
  try {
    for (let i = 0; i < 2; i++) g.replay();
    const ts: number[] = [];
    for (let i = 0; i < reps; i++) {
      const timer = b.createTimer();
      timer.start();
      g.replay();
      timer.stop();
      ts.push(timer.elapsedMs());
    }
    ts.sort((x, y) => x - y);
    return ts[Math.floor(ts.length / 2)]! / inner;
  } finally {
    g.destroy();
  }
}

/**
 * `op`'s device time in a graph (graphMs) through its kernel and through its decomposition (the kernel declines while
 * that runs), as "kernel X us, decomposition Y us" for a printed comparison; a decomposition that fails is said so.
 */
export function kernelVsDecomposition(op: string, inputs: readonly (Tensor | null)[], attrs: Record<string, unknown>): string {
  const table = gpu().opKernels;
  const run = () => callOp(op, inputs, attrs).forEach((t: Tensor) => t.dispose());
  const kernel = graphMs(run, 20);
  const entry = table.get(op)!;
  table.register(op, entry.kernel, () => 'timing the decomposition');
  let decomposed = 'n/a';
  try {
    const route = opRoute(op, inputs, attrs);
    if (!('via' in route) || route.via !== 'decomposition') throw new Error('the kernel did not decline');
    decomposed = `${(graphMs(run, 5) * 1000).toFixed(1)} us`;
  } catch (e) {
    decomposed = `failed (${(e as Error).message.slice(0, 80)})`;
  } finally {
    table.register(op, entry.kernel, entry.supports);
  }
  return `kernel ${(kernel * 1000).toFixed(1)} us, decomposition ${decomposed}`;
}

/**
 * `op` on one GPU input captured in a CUDA graph (after a call that compiles it), then replayed `rounds` times, each
 * over new values copied into the captured input: next(r) gives them (a CPU tensor) and the check of that replay's
 * outputs; `keep` is releasing's. The routing kernels use it to show they read nothing on the host.
 */
export function checkGraphReplays(
  keep: <T extends Tensor | readonly Tensor[]>(t: T) => T,
  op: string,
  input: Tensor,
  attrs: Record<string, unknown>,
  rounds: number,
  next: (r: number) => { values: Tensor; check: (outs: Tensor[]) => void },
): void {
  keep(callOp(op, [input], attrs)); // compiles before the capture
  const rt = gpu().runtime;
  rt.synchronize();
  let outs: Tensor[] = [];
  const graph = rt.capture(() => {
    outs = callOp(op, [input], attrs);
  }, { poolBytes: 4 << 20 });
  try {
    for (let r = 0; r < rounds; r++) {
      const { values, check } = next(r);
      input.copy_(keep(toGpu(values)));
      graph.replay();
      rt.synchronize();
      check(outs);
    }
  } finally {
    for (const t of outs) t.dispose();
    graph.destroy();
  }
}

/** Device-to-device copy of `elements` f32 values: [ms, GB/s counting bytes read and written] — the floor's bandwidth. */
export function measureCopy(elements: number): { ms: number; gbs: number } {
  const b = gpu();
  const src = Tensor.empty(b, [elements], 'f32');
  src.fill_(1);
  const dst = Tensor.empty(b, [elements], 'f32');
  const ms = medianMs(() => b.ops.copy(dst, src), 10);
  src.dispose();
  dst.dispose();
  return { ms, gbs: (2 * 4 * elements) / ms / 1e6 };
}

// tests patch knobs of one section of the tuning in force, then put them back: withTuning('linear', { gemvMaxRows: 0 }, fn)
export { withTuning } from '../src/tuning/load.js';
