import { Rng, compareTensors, toHostArray, toleranceFor, withContext, type ExecutionContext, type Module, type Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../test/l1-harness.js';
import { describeCompositeContract } from '../../../test/composite-harness.js';
import { baselineRegistry } from '../../index.js';
import { getForwardContext, hasForwardContext } from '../../engine/forward-context.js';
import { linearAttentionTasks } from './index.js';

describe('the family registers the GLA tasks', () => {
  it('has the original task ids at their levels', () => {
    const ids = baselineRegistry().allTasks().map((t) => t.id);
    for (const id of ['L1/chunk_gla', 'L1/fused_recurrent_gla', 'L1/gla_recurrence', 'L1/log_sigmoid', 'L1/rms_norm_gated', 'L2/gla_attention', 'L2/gla_mlp', 'L3/gla_decoder', 'L4/gla']) expect(ids).toContain(id);
  });
});

for (const t of linearAttentionTasks) describeCompositeContract(t, cpuBackend);

describe('a standalone recurrent case after an engine-step case', () => {
  it("takes none of the step case's state pools (each standalone makeInputs drops the forward context it left)", () => {
    const registry = baselineRegistry();
    const task = (id: string) => linearAttentionTasks.find((t) => t.id === id)!;
    // an L4/qwen3_next engine-step case: its makeInputs leaves a forward context with state pools set
    const leaveStepContext = () => {
      const step = task('L4/qwen3_next');
      for (const c of step.cases.ci) {
        const ctx: ExecutionContext = { backend: cpuBackend(), device: 0, dtype: c.dtype, registry };
        withContext(ctx, () => step.makeInputs(c, ctx, new Rng(1)));
        if (hasForwardContext() && getForwardContext().stateCaches?.some(Boolean)) return;
      }
      throw new Error('no L4/qwen3_next CI case leaves an engine-step context (this test needs one)');
    };
    for (const id of ['L2/gla_attention', 'L3/gla_decoder', 'L4/gla', 'L2/qwen3_next_gdn_attention', 'L2/kimi_delta_attention']) {
      const t = task(id);
      const c = t.cases.ci.find((x) => !x.options.initial_state)!;
      leaveStepContext();
      const ctx: ExecutionContext = { backend: cpuBackend(), device: 0, dtype: c.dtype, registry };
      const module = registry.createIn<Module>(ctx, t.id, ...c.init);
      const rng = new Rng(3);
      t.initParameters!(module, c, rng);
      const inputs = withContext(ctx, () => t.makeInputs(c, ctx, rng));
      const host = inputs.map((x) => (x ? toHostArray(x) : null));
      const params = new Map(module.namedParameters().map(([k, x]) => [k, toHostArray(x)] as const));
      const outs = withContext(ctx, () => (module as unknown as { forward(...a: unknown[]): Tensor[] }).forward(...inputs));
      const ref = t.reference(host, params, c);
      outs.forEach((o, i) => expect(compareTensors(o, ref[i]!, toleranceFor(t, o.dtype)).status, `${id} ${c.name} output ${i}`).toBe('PASSED'));
      module.dispose();
    }
  });
});
