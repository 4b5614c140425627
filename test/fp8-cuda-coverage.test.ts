/**
 * The fp8 tasks as the CUDA backend would run them, on the CPU: CudaCoverageBackend (cuda-coverage-backend.ts) keeps
 * only the registry kernels CUDA has, so per_token_group_quant_fp8 and fp8_dequant take their decompositions (float32
 * math, the converting copy to fp8) as on the GPU. Each CI case must meet the task's float64 reference with no gap;
 * the UE8M0 cases are left out (that form has no decomposition: the CUDA backend needs a kernel for it).
 */
import { ModuleRegistry, Rng, compareTensors, toHostArray, toleranceFor, withContext, type Backend, type Module, type TaskCase, type TaskDefinition, type Tensor } from '@fastkernels/core';
import { fp8LinearTask, perTokenGroupQuantFp8Task, siluMulQuantFp8Task } from '@fastkernels/model-zoo';
import { describe, expect, it } from 'vitest';
import { CudaCoverageBackend } from './cuda-coverage-backend.js';

/** One case on a backend: the baseline's outputs against the task's float64 reference. */
function runCase(task: TaskDefinition, c: TaskCase, backend: Backend, seed: number) {
  const registry = new ModuleRegistry();
  registry.registerTask(task);
  const ctx = { backend, device: 0, dtype: c.dtype, registry };
  const module = registry.createIn<Module & { forward(...a: unknown[]): Tensor | Tensor[] }>(ctx, task.id, ...c.init);
  const rng = new Rng(seed);
  task.initParameters?.(module, c, rng);
  const inputs = withContext(ctx, () => task.makeInputs(c, ctx, rng));
  const params = new Map(module.namedParameters().map(([k, t]) => [k, toHostArray(t)] as const));
  const expected = task.reference(inputs.map((t) => (t ? toHostArray(t) : null)), params, c);
  const result = withContext(ctx, () => module.forward(...inputs));
  const outputs = Array.isArray(result) ? result : [result];
  return { comparisons: outputs.map((o, i) => compareTensors(o, expected[i]!, toleranceFor(task, o.dtype))) };
}

describe('fp8 tasks on the CUDA routes (decompositions, on the CPU)', () => {
  for (const task of [perTokenGroupQuantFp8Task, fp8LinearTask, siluMulQuantFp8Task]) {
    for (const c of task.cases.ci.filter((k) => !k.name.includes('ue8m0'))) {
      it(`${task.id} ${c.name}`, () => {
        const backend = new CudaCoverageBackend();
        for (const seed of [1, 2, 3]) {
          const run = runCase(task, c, backend, seed);
          run.comparisons.forEach((cmp, i) => expect(cmp.status, `seed ${seed} output ${i}: ${cmp.detail ?? ''}`).toBe('PASSED'));
        }
        expect([...backend.report.gaps.keys()]).toEqual([]);
        expect(backend.report.routes.get('per_token_group_quant_fp8')).toEqual(new Set(['decomposition']));
      });
    }
  }
});
