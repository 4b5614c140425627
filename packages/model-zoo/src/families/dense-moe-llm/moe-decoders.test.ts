/**
 * The MoE decoder tasks (L3 mixtral_decoder / qwen3_moe_decoder, L4 mixtral / qwen3_moe) against their float64
 * references over a mixed prefill + decode step on the paged cache (the composite contract), plus the parameter names
 * the checkpoint rules rely on.
 */
import { type Module } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../test/l1-harness.js';
import { describeCompositeContract } from '../../../test/composite-harness.js';
import { baselineRegistry } from '../../index.js';
import { mixtralDecoderTask } from './L3/mixtral_decoder.js';
import { qwen3MoeDecoderTask } from './L3/qwen3_moe_decoder.js';
import { mixtralTask } from './L4/mixtral.js';
import { qwen3MoeModelTask } from './L4/qwen3_moe.js';
import { tinyMixtralConfig, tinyQwen3MoeConfig } from './moe/config.js';

for (const t of [mixtralDecoderTask, qwen3MoeDecoderTask, mixtralTask, qwen3MoeModelTask]) describeCompositeContract(t, cpuBackend);

describe('MoE decoder trees', () => {
  const names = (task: string, cfg: unknown) => {
    const registry = baselineRegistry();
    const m = registry.createIn<Module>({ backend: cpuBackend(), device: 0, dtype: 'f32', registry }, task, cfg);
    const out = m.namedParameters().map(([k]) => k).filter((k) => k.startsWith('model.layers.0.') && !k.endsWith('cos_sin_cache'));
    m.dispose();
    return out.sort();
  };

  it("Mixtral's layer: Llama attention, block_sparse_moe.gate and the stacked experts", () => {
    expect(names('L4/mixtral', tinyMixtralConfig())).toEqual([
      'model.layers.0.block_sparse_moe.experts.w13_weight',
      'model.layers.0.block_sparse_moe.experts.w2_weight',
      'model.layers.0.block_sparse_moe.gate.weight',
      'model.layers.0.input_layernorm.weight',
      'model.layers.0.post_attention_layernorm.weight',
      'model.layers.0.self_attn.o_proj.weight',
      'model.layers.0.self_attn.qkv_proj.weight',
    ]);
  });

  it("Qwen3-MoE's layer: q_norm / k_norm in the attention, mlp.gate and the experts; a dense layer's mlp.gate_up_proj", () => {
    expect(names('L4/qwen3_moe', tinyQwen3MoeConfig())).toEqual([
      'model.layers.0.input_layernorm.weight',
      'model.layers.0.mlp.experts.w13_weight',
      'model.layers.0.mlp.experts.w2_weight',
      'model.layers.0.mlp.gate.weight',
      'model.layers.0.post_attention_layernorm.weight',
      'model.layers.0.self_attn.k_norm.weight',
      'model.layers.0.self_attn.o_proj.weight',
      'model.layers.0.self_attn.q_norm.weight',
      'model.layers.0.self_attn.qkv_proj.weight',
    ]);
    expect(names('L4/qwen3_moe', tinyQwen3MoeConfig({ denseLayers: [0] })).filter((n) => n.includes('.mlp.'))).toEqual([
      'model.layers.0.mlp.down_proj.weight',
      'model.layers.0.mlp.gate_up_proj.weight',
    ]);
  });
});
