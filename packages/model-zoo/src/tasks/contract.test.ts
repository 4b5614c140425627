/**
 * The contract every registered task meets, checked for all of them from the registry (a new task gets it by being
 * registered): the metadata names the baseline class and fits its constructor and forward (arity, the candidate
 * loader accepts it), every symbolic shape resolves in every case, work counts are finite; a task built on an op
 * (defineL1OpTask) has the op's interface (inputs in the op's order, the module's parameters as bound, the op's shape
 * inference giving the declared outputs); and every L1 task's CPU module, run on each CI case with fresh random inputs,
 * returns the declared shapes and dtypes, matches the task's float64 reference, and leaves no storage allocated beyond
 * its outputs (test/leak-check.ts).
 */
import { getOp, resolveSpecShape, specDType, validateCandidateExports, withContext, type CandidateFile, type ExecutionContext, type Module, type TaskDefinition } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { checkSpecsResolve, constructorParamCount, cpuBackend, expectedOutputShapes, runCase } from '../../test/l1-harness.js';
import { baselineRegistry } from '../index.js';
import { checkCaseAgainstOp, isOpTask } from './define-op-task.js';
import { disposeAndFindLeaks } from '../../test/leak-check.js';

const registry = baselineRegistry();
const tasks: readonly TaskDefinition[] = registry.allTasks();

/** Parameters a method declares (its source's parameter list; Function.length stops at the first default). */
function methodParamCount(fn: Function): number {
  const src = fn.toString();
  let i = src.indexOf('(') + 1;
  let depth = 0;
  let count = 0;
  let token = false;
  for (; i < src.length; i++) {
    const ch = src[i]!;
    if ('([{'.includes(ch)) depth++;
    else if (')]}'.includes(ch)) {
      if (depth === 0) break;
      depth--;
    } else if (ch === ',' && depth === 0) {
      count++;
      token = false;
      continue;
    }
    if (!/\s/.test(ch)) token = true;
  }
  return count + (token ? 1 : 0);
}

describe('every registered task', () => {
  it('the registry holds the shared L1 tasks once, with unique class names per level', () => {
    const ids = tasks.map((t) => t.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ['L1/rms_norm', 'L1/layer_norm', 'L1/group_norm', 'L1/gelu', 'L1/sampler', 'L4/llama']) expect(ids).toContain(id);
  });

  for (const task of tasks) {
    describe(task.id, () => {
      it('names its baseline class, fits its constructor and forward, and the candidate loader accepts the baseline', () => {
        expect(task.className).toBe(task.baseline.name);
        expect(task.id).toBe(`L${task.level}/${task.stem}`);
        const required = task.init.filter((p) => !p.optional).length;
        expect(constructorParamCount(task.baseline), 'constructor parameters vs init').toBe(task.init.length);
        expect(task.baseline.length, 'required constructor parameters').toBe(required);
        const forward = (task.baseline.prototype as { forward: Function }).forward;
        expect(methodParamCount(forward), 'forward parameters vs inputs + host inputs').toBe(task.inputs.length + task.hostInputs.length);
        for (const c of [...task.cases.ci, ...task.cases.production]) {
          expect(c.init.length, c.name).toBeGreaterThanOrEqual(required);
          expect(c.init.length, c.name).toBeLessThanOrEqual(task.init.length);
        }
        const file: CandidateFile = { path: `/c/L${task.level}/${task.stem}.ts`, relPath: `L${task.level}/${task.stem}.ts`, level: task.level, stem: task.stem, taskId: task.id };
        expect(validateCandidateExports(file, task, { [task.className]: task.baseline })).toBe(task.baseline);
      });

      it('resolves every spec in every case; work counts are finite', () => {
        checkSpecsResolve(task);
        for (const c of [...task.cases.ci, ...task.cases.production]) {
          const w = task.work(c);
          expect(Number.isFinite(w.bytes) && w.bytes > 0, c.name).toBe(true);
          expect(Number.isFinite(w.flops) && w.flops >= 0, c.name).toBe(true);
        }
      });

      if (isOpTask(task)) {
        it(`has the interface of op ${task.opBinding.op}: inputs in its order, parameters as bound, outputs as it infers`, () => {
          const spec = getOp(task.opBinding.op);
          const forwardOps = spec.inputs.filter((i) => task.opBinding.forward[i.name]);
          expect(task.inputs.map((s) => [s.name, s.optional])).toEqual(forwardOps.map((i) => [i.name, i.optional ?? false]));
          expect(task.outputs.map((s) => s.name)).toEqual([...spec.outputs]);
          const bound = new Map(Object.entries(task.opBinding.params).map(([opName, a]) => [a.param ?? opName, a] as const));
          for (const c of [...task.cases.ci, ...task.cases.production]) {
            checkCaseAgainstOp(task, c);
            if (!task.cases.ci.includes(c)) continue;
            const ctx: ExecutionContext = { backend: cpuBackend(), device: 0, dtype: c.dtype, registry };
            const m = withContext(ctx, () => registry.create<Module>(task.id, ...c.init));
            for (const [name, p] of m.namedParameters()) {
              const a = bound.get(name);
              expect(a, `${c.name}: parameter '${name}' is not bound to an input of op ${spec.name}`).toBeDefined();
              expect([...p.shape], `${c.name}: ${name}`).toEqual(resolveSpecShape({ name, dtype: 'act', shape: [...a!.shape], optional: false }, c));
              expect(p.dtype, `${c.name}: ${name}`).toBe(a!.dtype && a!.dtype !== 'act' ? a!.dtype : c.dtype);
            }
            m.dispose();
          }
        });
      }

      if (task.level === 1) {
        for (const c of task.cases.ci) {
          it(`the CPU module matches the float64 reference with the declared shapes: ${c.name} (${c.dtype})`, () => {
            // A fresh seed each run (named in the messages, to replay a failure).
            const seed = (Date.now() % 100_000) + 13;
            const run = runCase(task, c, cpuBackend(), seed, true);
            const shapes = expectedOutputShapes(task, c, run.outputs.length);
            expect(run.outputs.length).toBe(run.expected.length);
            run.outputs.forEach((o, i) => {
              expect([...o.shape], `output ${i} shape`).toEqual(shapes[i]!.shape);
              expect(o.dtype, `output ${i} dtype`).toBe(shapes[i]!.dtype);
              expect(o.dtype).toBe(specDType(task.outputs[i]!, c));
            });
            run.comparisons.forEach((cmp, i) => expect(cmp.status, `seed ${seed} output ${i}: ${cmp.detail ?? ''} maxAbs ${cmp.maxAbsError}`).toBe('PASSED'));
            // In-place tasks (store_kvcache writes the caches it is given) name their outputs with collectOutputs.
            if (!task.collectOutputs) expect(run.inputsUnchanged, 'forward changed an input').toBe(true);
            // Leaks: forward's intermediates are released; what is left once its outputs are disposed is a leak per call.
            expect(disposeAndFindLeaks(run.leaks!, run.result, run.outputs, run.module), 'what forward leaves beyond its outputs').toEqual([]);
            for (const t of run.inputs) t?.dispose();
          });
        }
      }
    });
  }
});
