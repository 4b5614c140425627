import { describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../test/l1-harness.js';
import { describeCompositeContract } from '../../../test/composite-harness.js';
import { baselineRegistry } from '../../index.js';
import { linearAttentionTasks } from './index.js';

describe('the family registers the GLA tasks', () => {
  it('has the original task ids at their levels', () => {
    const ids = baselineRegistry().allTasks().map((t) => t.id);
    for (const id of ['L1/chunk_gla', 'L1/fused_recurrent_gla', 'L1/gla_recurrence', 'L1/log_sigmoid', 'L1/rms_norm_gated', 'L2/gla_attention', 'L2/gla_mlp', 'L3/gla_decoder', 'L4/gla']) expect(ids).toContain(id);
  });
});

for (const t of linearAttentionTasks) describeCompositeContract(t, cpuBackend);
