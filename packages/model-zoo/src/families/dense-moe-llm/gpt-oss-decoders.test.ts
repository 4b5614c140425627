/** gpt-oss's L3 / L4 tasks on the CPU backend against their float64 references (composite contract on the CI cases). */
import { describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../test/l1-harness.js';
import { describeCompositeContract } from '../../../test/composite-harness.js';
import { baselineRegistry } from '../../index.js';
import { gptOssDecoderTask } from './L3/gpt_oss_decoder.js';
import { gptOssTask } from './L4/gpt_oss.js';
import { tinyGptOssConfig } from './gpt-oss/config.js';

describe('the family registers gpt-oss', () => {
  it('has the original task ids, and the layer names the checkpoint uses', () => {
    const r = baselineRegistry();
    const ids = r.allTasks().map((t) => t.id);
    for (const id of ['L1/yarn_rotary_emb', 'L2/gpt_oss_moe', 'L3/gpt_oss_decoder', 'L4/gpt_oss']) expect(ids).toContain(id);
    const m = r.createIn({ backend: cpuBackend(), device: 0, dtype: 'f32', registry: r }, 'L4/gpt_oss', tinyGptOssConfig({ expertsFormat: 'mxfp4' }));
    const names = m.namedParameters().map(([n]) => n);
    for (const n of [
      'model.layers.0.self_attn.sinks', 'model.layers.0.self_attn.qkv_proj.bias', 'model.layers.0.self_attn.o_proj.bias', 'model.layers.1.mlp.router.bias',
      'model.layers.1.mlp.experts.gate_up_proj_blocks', 'model.layers.1.mlp.experts.gate_up_proj_scales', 'model.layers.1.mlp.experts.down_proj_bias', 'model.norm.weight',
    ]) expect(names).toContain(n);
    m.dispose();
  });
});

for (const t of [gptOssDecoderTask, gptOssTask]) describeCompositeContract(t, cpuBackend);
