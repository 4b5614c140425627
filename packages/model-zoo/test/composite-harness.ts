/**
 * Test-only contract for composite tasks (L2-L4): built through the full baseline registry (their imports
 * resolve there), every CI case run against the float64 reference and leaving no storage allocated beyond its outputs
 * (leak-check.ts), the bench harness (baseline vs baseline,
 * golden check included) passing, and the metadata consistent with the class.
 */
import { Rng, benchTask, compareTensors, resolveSpecShape, specDType, toHostArray, toleranceFor, withContext, type Backend, type ExecutionContext, type Module, type TaskDefinition, type Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { baselineRegistry } from '../src/index.js';
import { constructorParamCount } from './l1-harness.js';
import { disposeAndFindLeaks, leakSnapshot } from './leak-check.js';

export function describeCompositeContract(task: TaskDefinition, backend: () => Backend): void {
  describe(`${task.id} contract`, () => {
    it('metadata: class name, level, imports registered, specs resolve, work finite', () => {
      const registry = baselineRegistry();
      expect(task.className).toBe(task.baseline.name);
      expect(task.id).toBe(`L${task.level}/${task.stem}`);
      for (const dep of task.imports) {
        const t = registry.task(dep);
        expect(t, dep).toBeDefined();
        // a lower level, or the same one where production composes so (vLLM's MoE blocks, L2, call fused_experts, L2)
        expect(t!.level, dep).toBeLessThanOrEqual(task.level);
        expect(dep, 'a task does not import itself').not.toBe(task.id);
      }
      expect(task.cases.ci.some((c) => c.dtype === 'f32')).toBe(true);
      expect(task.cases.ci.some((c) => c.dtype === 'bf16')).toBe(true);
      expect(constructorParamCount(task.baseline)).toBe(task.init.length);
      expect(task.baseline.length).toBe(task.init.filter((p) => !p.optional).length);
      for (const c of [...task.cases.ci, ...task.cases.production]) {
        for (const s of [...task.inputs, ...task.outputs]) resolveSpecShape(s, c);
        const w = task.work(c);
        expect(Number.isFinite(w.bytes) && w.bytes > 0, c.name).toBe(true);
        expect(Number.isFinite(w.flops) && w.flops > 0, c.name).toBe(true);
      }
    });

    for (const c of task.cases.ci) {
      it(`baseline matches the float64 reference: ${c.name} (${c.dtype})`, () => {
        const registry = baselineRegistry();
        const ctx: ExecutionContext = { backend: backend(), device: 0, dtype: c.dtype, registry };
        for (const seed of [11, 12]) {
          const module = registry.createIn<Module>(ctx, task.id, ...c.init);
          const rng = new Rng(seed);
          task.initParameters!(module, c, rng);
          const inputs = withContext(ctx, () => task.makeInputs(c, ctx, rng));
          const host = inputs.map((t) => (t ? toHostArray(t) : null));
          const params = new Map(module.namedParameters().map(([k, t]) => [k, toHostArray(t)] as const));
          // Counted after makeInputs: an engine step's caches, metadata and state pools (task-batch.ts, qwen3-next-step.ts,
          // kimi-linear-step.ts) are built there and live across calls on purpose; only what forward leaves is counted.
          const leaks = leakSnapshot(ctx.backend, inputs, module);
          const result = withContext(ctx, () => (module as unknown as { forward(...a: unknown[]): unknown }).forward(...inputs));
          const outs = (Array.isArray(result) ? result : [result]) as Tensor[];
          const ref = task.reference(host, params, c);
          expect(outs.length).toBe(ref.length);
          outs.forEach((o, i) => {
            expect([...o.shape]).toEqual(resolveSpecShape(task.outputs[i]!, c));
            expect(o.dtype).toBe(specDType(task.outputs[i]!, c));
            const cmp = compareTensors(o, ref[i]!, toleranceFor(task, o.dtype));
            expect(cmp.status, `${c.name} seed ${seed} output ${i}: ${cmp.detail ?? ''} maxAbs ${cmp.maxAbsError} maxRel ${cmp.maxRelError} matched ${cmp.matchedRatio}`).toBe('PASSED');
          });
          // inputs untouched
          inputs.forEach((t, i) => {
            if (t) expect([...t.toFloat64Array()], `input ${i}`).toEqual([...host[i]!.data]);
          });
          if (leaks) expect(disposeAndFindLeaks(leaks, result, outs, module), `${c.name} seed ${seed}: what forward leaves beyond its outputs`).toEqual([]);
          else module.dispose();
        }
      });
    }

    it('the bench harness passes baseline vs baseline, golden check included, on every CI case', async () => {
      const registry = baselineRegistry();
      const results = await benchTask({ task, baseline: registry, candidate: registry.child('self'), backend: backend(), correctnessOnly: true, seed: 99 });
      expect(results.length).toBe(task.cases.ci.length);
      for (const r of results) {
        expect(r.status, `${r.case}: ${r.detail ?? ''}`).toBe('PASSED');
        expect(r.golden?.baseline.status, `${r.case} golden: ${r.golden?.baseline.detail ?? ''} maxAbs ${r.golden?.baseline.maxAbsError}`).toBe('PASSED');
      }
    });
  });
}
