import { describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../test/l1-harness.js';
import { describeCompositeContract } from '../../../test/composite-harness.js';
import { baselineRegistry } from '../../index.js';
import { visionVideoAudioTasks } from './index.js';

describe('the family registers the FLUX / T5 / CLIP tasks', () => {
  it('has the original task ids at their levels', () => {
    const ids = baselineRegistry().allTasks().map((t) => t.id);
    for (const t of visionVideoAudioTasks) expect(ids).toContain(t.id);
    for (const id of ['L1/dense_attention', 'L1/diffusion_rope', 'L1/flux_pos_embed', 'L1/t5_layer_norm', 'L1/layer_norm', 'L1/gelu', 'L1/quickgelu', 'L1/softmax', 'L1/embedding']) expect(ids).toContain(id);
  });
});

for (const t of visionVideoAudioTasks) describeCompositeContract(t, cpuBackend);
