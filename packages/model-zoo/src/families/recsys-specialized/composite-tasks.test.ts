import { describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../test/l1-harness.js';
import { describeCompositeContract } from '../../../test/composite-harness.js';
import { baselineRegistry } from '../../index.js';
import { recsysSpecializedTasks } from './index.js';

describe('the family registers the BGE-M3 tasks', () => {
  it('has the original task ids at their levels', () => {
    const ids = baselineRegistry().allTasks().map((t) => t.id);
    for (const id of ['L1/relu', 'L1/l2_norm', 'L2/encoder_embeddings', 'L2/encoder_attention', 'L2/encoder_mlp', 'L3/xlm_roberta_layer', 'L3/xlm_roberta_encoder', 'L3/xlm_roberta_model', 'L4/bge_m3', 'L2/colbertv2_ops', 'L3/bert_layer', 'L3/bert_encoder', 'L3/bert_model', 'L4/colbertv2']) expect(ids).toContain(id);
  });
});

for (const t of recsysSpecializedTasks) describeCompositeContract(t, cpuBackend);
