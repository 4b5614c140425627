/**
 * Capture options of the interface-mirroring attention tasks (flash-attn's and FlashInfer's): a recorded call keeps the
 * sequence lengths and whether sinks came, which their case builders read back.
 */
import { Rng, withContext, type Module } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cpuBackend } from '../../test/l1-harness.js';
import { baselineRegistry } from '../index.js';
import { flashAttnPrefillTask } from '../tasks/L1/attention/flash_attn_prefill.js';
import { flashinferDecodeTask } from '../tasks/L1/attention/flashinfer_decode.js';
import { flashinferPrefillTask } from '../tasks/L1/attention/flashinfer_prefill.js';
import { CaptureRecorder } from './capture.js';

describe('capture options of the flash-attn / FlashInfer attention tasks', () => {
  it('record qLens / kLens and sinks as the cases give them', () => {
    const rec = new CaptureRecorder(baselineRegistry(), { recordValues: false });
    const ctx = { backend: cpuBackend(), device: 0, dtype: 'f32' as const, registry: rec.registry };
    for (const [task, caseIdx] of [[flashAttnPrefillTask, 2], [flashinferPrefillTask, 2], [flashinferDecodeTask, 2]] as const) {
      const c = task.cases.ci[caseIdx]!;
      const m = rec.registry.createIn<Module & { forward(...a: unknown[]): { dispose(): void } }>(ctx, task.id, ...c.init);
      const inputs = withContext(ctx, () => task.makeInputs(c, ctx, new Rng(1)));
      withContext(ctx, () => m.forward(...inputs, ...(task.hostArgs?.(inputs, c) ?? [])).dispose());
      const options = rec.index('m', 'w').tasks[task.id]!.forward[0]!.options ?? {};
      expect(options.sinks, task.id).toBe(c.options.sinks);
      if (c.options.qLens) {
        const sorted = (a: unknown) => [...(a as number[])].sort((x, y) => x - y);
        expect(sorted(options.qLens), task.id).toEqual(sorted(c.options.qLens));
        expect(sorted(options.kLens), task.id).toEqual(sorted(c.options.kLens));
      }
    }
  });
});
