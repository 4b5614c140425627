/**
 * Test-only helpers for L1 task tests: run a task's baseline end to end on a backend and compare it
 * with the task's float64 reference, the way the harness does (registry -> module -> initParameters ->
 * makeInputs -> forward -> collectOutputs), plus checks of the metadata against the class.
 */
import {
  ModuleRegistry,
  Rng,
  benchTask,
  validateCandidateExports,
  compareTensors,
  hostArgsFor,
  resolveSpecShape,
  specDType,
  toHostArray,
  toleranceFor,
  withContext,
  type Backend,
  type CandidateFile,
  type Comparison,
  type ExecutionContext,
  type HostArray,
  type Module,
  type ModuleClass,
  type TaskCase,
  type TaskDefinition,
  type Tensor,
} from '@fastkernels/core';
import { CpuBackend } from '@fastkernels/backend-cpu';
import { describe, expect, it } from 'vitest';
import { initNormal } from '../src/common/inputs.js';
import { disposeAndFindLeaks, leakSnapshot, type LeakSnapshot } from './leak-check.js';

let cpu: Backend | undefined;
/** The CPU backend (one shared instance). */
export function cpuBackend(): Backend {
  return (cpu ??= new CpuBackend());
}

export interface CaseRun {
  readonly outputs: Tensor[];
  readonly expected: HostArray[];
  readonly comparisons: Comparison[];
  readonly module: Module;
  readonly inputs: (Tensor | null)[];
  /** Whether every input holds the same values after forward as before (none of these tasks is in place). */
  readonly inputsUnchanged: boolean;
  /** What forward returned (before collectOutputs), for the leak check. */
  readonly result: unknown;
  /** Taken right before forward with trackLeaks (null: not asked, or the backend counts nothing), for leak-check.ts. */
  readonly leaks: LeakSnapshot | null;
}

/**
 * Build the baseline through a root registry holding just this task, run one case with a seed, compare to the reference.
 * trackLeaks: snapshot for the leak check right before forward (the caller then runs disposeAndFindLeaks).
 */
export function runCase(task: TaskDefinition, c: TaskCase, backend: Backend, seed: number, trackLeaks = false): CaseRun {
  const registry = new ModuleRegistry();
  registry.registerTask(task);
  const ctx: ExecutionContext = { backend, device: 0, dtype: c.dtype, registry };
  const module = registry.createIn<Module>(ctx, task.id, ...c.init);
  const rng = new Rng(seed);
  if (task.initParameters) task.initParameters(module, c, rng);
  else initNormal(module, rng, 1);
  const inputs = withContext(ctx, () => task.makeInputs(c, ctx, rng));
  // Host copies taken before forward: a module must not change its inputs (none of these are in-place).
  const hostInputs = inputs.map((t) => (t ? toHostArray(t) : null));
  const params = new Map(module.namedParameters().map(([k, t]) => [k, toHostArray(t)] as const));
  const host = hostArgsFor(task, inputs, c); // the task's host inputs (the sampler's hint), as the harness passes them
  const leaks = trackLeaks ? leakSnapshot(backend, inputs, module) : null;
  const result = withContext(ctx, () => (module as unknown as { forward(...a: unknown[]): unknown }).forward(...inputs, ...host));
  const outputs = task.collectOutputs
    ? task.collectOutputs(inputs, result)
    : (Array.isArray(result) ? (result as (Tensor | null)[]) : [result as Tensor]).filter((t): t is Tensor => t !== null && t !== undefined);
  const expected = task.reference(hostInputs, params, c);
  const comparisons = outputs.map((o, i) => compareTensors(o, expected[i]!, toleranceFor(task, o.dtype)));
  const inputsUnchanged = inputs.every((t, i) => {
    if (!t) return true;
    const before = hostInputs[i]!.data;
    const after = t.toFloat64Array();
    return after.every((v, j) => Object.is(v, before[j]));
  });
  return { outputs, expected, comparisons, module, inputs, inputsUnchanged, result, leaks };
}

/** Output specs present for a case (optional ones only when the run produced them). */
export function expectedOutputShapes(task: TaskDefinition, c: TaskCase, count: number): { shape: number[]; dtype: string }[] {
  return task.outputs.slice(0, count).map((s) => ({ shape: resolveSpecShape(s, c), dtype: specDType(s, c) }));
}

/**
 * Count a class's constructor parameters from its source (Function.length stops at the first default).
 * Walks up to the nearest class that declares a constructor.
 */
export function constructorParamCount(cls: ModuleClass): number {
  for (let k: unknown = cls; typeof k === 'function'; k = Object.getPrototypeOf(k)) {
    const src = (k as { toString(): string }).toString();
    const at = src.search(/\bconstructor\s*\(/);
    if (at < 0) continue;
    let i = src.indexOf('(', at) + 1;
    let depth = 0;
    let count = 0;
    let sawToken = false;
    for (; i < src.length; i++) {
      const ch = src[i]!;
      if (ch === '(' || ch === '[' || ch === '{') depth++;
      else if (ch === ')' || ch === ']' || ch === '}') {
        if (depth === 0) break;
        depth--;
      } else if (ch === ',' && depth === 0) {
        count++;
        sawToken = false;
        continue;
      }
      if (!/\s/.test(ch)) sawToken = true;
    }
    return count + (sawToken ? 1 : 0);
  }
  return 0;
}

/** Every dim a spec names must be in every case's dims (non-optional specs are always needed). */
export function checkSpecsResolve(task: TaskDefinition): void {
  for (const c of [...task.cases.ci, ...task.cases.production]) {
    for (const s of [...task.inputs, ...task.outputs]) resolveSpecShape(s, c);
  }
}

/**
 * The contract every L1 task test checks: metadata against the class, specs against the cases, work counts,
 * and (with a backend) every CI case end to end against the float64 reference with fresh seeds.
 */
export function describeTaskContract(task: TaskDefinition, backend: () => Backend | undefined, seeds: readonly number[] = [1, 2, 3]): void {
  describe(`${task.id} contract`, () => {
    it('metadata names the baseline class and resolves every spec in every case', () => {
      expect(task.className).toBe(task.baseline.name);
      expect(task.id).toBe(`L1/${task.stem}`);
      expect(task.level).toBe(1);
      expect(task.family.length).toBeGreaterThan(0);
      expect(task.cases.ci.length).toBeGreaterThanOrEqual(2);
      expect(task.cases.ci.some((c) => c.dtype === 'f32')).toBe(true);
      expect(task.cases.ci.some((c) => c.dtype === 'bf16')).toBe(true);
      expect(task.cases.production.every((c) => c.dtype === 'bf16')).toBe(true);
      checkSpecsResolve(task);
    });

    it('init params match the constructor arity and every case init', () => {
      const required = task.init.filter((p) => !p.optional).length;
      expect(constructorParamCount(task.baseline)).toBe(task.init.length);
      // Function.length counts the parameters before the first default: the required ones.
      expect(task.baseline.length).toBe(required);
      for (const c of [...task.cases.ci, ...task.cases.production]) {
        expect(c.init.length, c.name).toBeGreaterThanOrEqual(required);
        expect(c.init.length, c.name).toBeLessThanOrEqual(task.init.length);
      }
    });

    it('work counts are finite and positive for every case', () => {
      for (const c of [...task.cases.ci, ...task.cases.production]) {
        const w = task.work(c);
        expect(Number.isFinite(w.bytes) && w.bytes > 0, c.name).toBe(true);
        expect(Number.isFinite(w.flops) && w.flops >= 0, c.name).toBe(true);
      }
    });

    it('the candidate loader accepts the baseline class under the task\'s class name', () => {
      const file: CandidateFile = { path: `/candidates/L1/${task.stem}.ts`, relPath: `L1/${task.stem}.ts`, level: 1, stem: task.stem, taskId: task.id };
      expect(validateCandidateExports(file, task, { [task.className]: task.baseline })).toBe(task.baseline);
    });

    it.skipIf(!backend())('the bench harness passes baseline vs baseline, golden check included, on every CI case', async () => {
      const registry = new ModuleRegistry();
      registry.registerTask(task);
      const results = await benchTask({ task, baseline: registry, candidate: registry.child('self'), backend: backend()!, correctnessOnly: true, seed: 4242 });
      expect(results.length).toBe(task.cases.ci.length);
      for (const r of results) {
        expect(r.status, `${r.case}: ${r.detail ?? ''}`).toBe('PASSED');
        expect(r.golden?.baseline.status, `${r.case} golden: ${r.golden?.baseline.detail ?? ''}`).toBe('PASSED');
      }
    });

    for (const c of task.cases.ci) {
      it.skipIf(!backend())(`baseline matches the float64 reference: ${c.name} (${c.dtype})`, () => {
        const b = backend()!;
        for (const seed of seeds) {
          const run = runCase(task, c, b, seed * 7919 + 17, true);
          const shapes = expectedOutputShapes(task, c, run.outputs.length);
          expect(run.outputs.length).toBe(run.expected.length);
          run.outputs.forEach((o, i) => {
            expect([...o.shape], `${c.name} output ${i} shape`).toEqual(shapes[i]!.shape);
            expect(o.dtype, `${c.name} output ${i} dtype`).toBe(shapes[i]!.dtype);
          });
          run.comparisons.forEach((cmp, i) => {
            expect(cmp.status, `${c.name} seed ${seed} output ${i}: ${cmp.detail ?? ''} maxAbs ${cmp.maxAbsError}`).toBe('PASSED');
          });
          expect(run.inputsUnchanged, `${c.name}: forward changed an input`).toBe(true);
          if (run.leaks) expect(disposeAndFindLeaks(run.leaks, run.result, run.outputs, run.module), `${c.name} seed ${seed}: what forward leaves beyond its outputs`).toEqual([]);
          else {
            run.module.dispose();
            for (const t of run.outputs) t.dispose();
          }
          for (const t of run.inputs) t?.dispose();
        }
      });
    }
  });
}
