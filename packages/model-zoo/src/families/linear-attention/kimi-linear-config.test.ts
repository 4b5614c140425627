import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { KIMI_LINEAR_48B, KIMI_LINEAR_48B_RAW, TINY_KIMI_LINEAR_RAW, parseKimiLinearConfig, tinyKimiLinearConfig } from './kimi-linear-config.js';

const FIXTURE = join(import.meta.dirname, '../../../fixtures/tiny-kimi-linear/config.json');

describe('Kimi-Linear config', () => {
  it('Kimi-Linear-48B-A3B: 20 KDA layers and 7 NoPE MLA layers, 256 experts top 8 + 1 shared, layer 0 dense', () => {
    expect(KIMI_LINEAR_48B).toMatchObject({ hiddenSize: 2304, numHiddenLayers: 27, numAttentionHeads: 32, kvLoraRank: 512, qkNopeHeadDim: 128, qkRopeHeadDim: 64, vHeadDim: 128, qHeadDim: 192 });
    expect(KIMI_LINEAR_48B).toMatchObject({ kdaNumHeads: 32, kdaHeadDim: 128, kdaConvKernelSize: 4, kdaProjSize: 4096 });
    expect(KIMI_LINEAR_48B).toMatchObject({ numExperts: 256, numExpertsPerToken: 8, numSharedExperts: 1, moeIntermediateSize: 1024, routedScalingFactor: 2.446, moeRouterActivationFunc: 'sigmoid', numExpertGroup: 1, topkGroup: 1, dtype: 'bf16' });
    const mla = KIMI_LINEAR_48B.layerTypes.flatMap((t, i) => (t === 'mla' ? [i] : []));
    expect(mla).toEqual([3, 7, 11, 15, 19, 23, 26]);
    expect(KIMI_LINEAR_48B.sparseLayers[0]).toBe(false);
    expect(KIMI_LINEAR_48B.sparseLayers.slice(1).every(Boolean)).toBe(true);
    expect(KIMI_LINEAR_48B.maxPositionEmbeddings).toBe(1048576);
  });

  it('the fixture is the tiny config: kda_layers are 1-based; first_k_dense_replace / moe_layer_freq pick the dense MLPs', () => {
    const tiny = parseKimiLinearConfig(JSON.parse(readFileSync(FIXTURE, 'utf8')));
    expect(tiny).toEqual(tinyKimiLinearConfig());
    expect(tiny.layerTypes).toEqual(['kda', 'kda', 'mla', 'kda']);
    expect(tiny.sparseLayers).toEqual([false, true, true, true]);
    expect(tinyKimiLinearConfig({ first_k_dense_replace: 0, moe_layer_freq: 2 }).sparseLayers).toEqual([true, false, true, false]);
    expect(tinyKimiLinearConfig({ num_experts: null }).sparseLayers).toEqual([false, false, false, false]);
    expect(tinyKimiLinearConfig({ num_shared_experts: undefined }).numSharedExperts).toBe(0);
  });

  it('bad or unsupported fields are UserErrors naming the file and the field', () => {
    const bad = (over: Record<string, unknown>, base: Record<string, unknown> = KIMI_LINEAR_48B_RAW) => () => parseKimiLinearConfig({ ...base, ...over }, 'x/config.json');
    const la = KIMI_LINEAR_48B_RAW.linear_attn_config;
    expect(bad({ linear_attn_config: { ...la, kda_layers: [1, 28] } })).toThrow(/linear_attn_config\.kda_layers names layer 28 \(1-based\) of 27 in x\/config.json/);
    expect(bad({ linear_attn_config: { ...la, full_attn_layers: [1, 4] } })).toThrow(/layer 1 is in both kda_layers and full_attn_layers/);
    expect(bad({ linear_attn_config: { ...la, num_heads: 'many' } })).toThrow(/invalid field linear_attn_config\.num_heads in x\/config.json/);
    expect(bad({ linear_attn_config: null })).toThrow(/missing field linear_attn_config in x\/config.json/);
    expect(bad({ linear_attn_config: { ...la, gate_lower_bound: -5 } })).toThrow(/unsupported linear_attn_config\.gate_lower_bound -5 in x\/config.json/);
    expect(bad({ q_lora_rank: 1536 })).toThrow(/unsupported q_lora_rank 1536 in x\/config.json/);
    expect(bad({ mla_use_nope: false })).toThrow(/unsupported mla_use_nope false/);
    expect(bad({ kv_lora_rank: null })).toThrow(/missing field kv_lora_rank in x\/config.json/);
    expect(bad({ num_experts_per_token: 300 })).toThrow(/num_experts_per_token 300 exceeds the 256 experts/);
    expect(bad({ num_expert_group: 3 })).toThrow(/256 experts do not split into num_expert_group 3 groups/);
    expect(bad({ topk_group: 2 })).toThrow(/topk_group 2 exceeds num_expert_group 1/);
    expect(bad({ hidden_act: 'gelu' })).toThrow(/unsupported hidden_act "gelu"/);
    expect(bad({ moe_router_activation_func: 'relu' })).toThrow(/invalid field moe_router_activation_func/);
    // an all-KDA stack needs no MLA fields
    expect(bad({ linear_attn_config: { ...la, kda_layers: [1, 2, 3, 4], full_attn_layers: [] }, kv_lora_rank: null, mla_use_nope: null }, TINY_KIMI_LINEAR_RAW)()).toMatchObject({ layerTypes: ['kda', 'kda', 'kda', 'kda'] });
  });
});
