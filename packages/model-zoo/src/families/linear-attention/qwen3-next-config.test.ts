import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { QWEN3_NEXT_80B, QWEN3_NEXT_80B_RAW, parseQwen3NextConfig, tinyQwen3NextConfig } from './qwen3-next-config.js';

const FIXTURE = join(import.meta.dirname, '../../../fixtures/tiny-qwen3-next/config.json');

describe('Qwen3-Next config', () => {
  it('Qwen3-Next-80B-A3B: 3 DeltaNet layers to 1 gated attention layer, 512 experts top 10, 64 rotary dims', () => {
    expect(QWEN3_NEXT_80B).toMatchObject({ hiddenSize: 2048, numHiddenLayers: 48, numAttentionHeads: 16, numKeyValueHeads: 2, headDim: 256, rotaryDim: 64, ropeTheta: 1e7 });
    expect(QWEN3_NEXT_80B).toMatchObject({ linearNumKeyHeads: 16, linearNumValueHeads: 32, linearKeyDim: 2048, linearValueDim: 4096, convDim: 8192, linearConvKernelDim: 4 });
    expect(QWEN3_NEXT_80B).toMatchObject({ numExperts: 512, numExpertsPerTok: 10, moeIntermediateSize: 512, sharedExpertIntermediateSize: 512, normTopkProb: true, dtype: 'bf16' });
    expect(QWEN3_NEXT_80B.layerTypes.filter((t) => t === 'full_attention')).toHaveLength(12);
    expect(QWEN3_NEXT_80B.layerTypes.slice(0, 4)).toEqual(['linear_attention', 'linear_attention', 'linear_attention', 'full_attention']);
    expect(QWEN3_NEXT_80B.sparseLayers.every(Boolean)).toBe(true);
  });

  it('layer_types and full_attention_interval give the same pattern; mlp_only_layers / decoder_sparse_step pick dense MLPs', () => {
    const { full_attention_interval: _, ...noInterval } = QWEN3_NEXT_80B_RAW;
    const listed = parseQwen3NextConfig({ ...noInterval, layer_types: QWEN3_NEXT_80B.layerTypes });
    expect(listed.layerTypes).toEqual(QWEN3_NEXT_80B.layerTypes);
    expect(parseQwen3NextConfig({ ...QWEN3_NEXT_80B_RAW, full_attention_interval: 2, num_hidden_layers: 4 }).layerTypes).toEqual(['linear_attention', 'full_attention', 'linear_attention', 'full_attention']);
    const tiny = parseQwen3NextConfig(JSON.parse(readFileSync(FIXTURE, 'utf8')));
    expect(tiny.sparseLayers).toEqual([true, true, false, true]);
    expect(tinyQwen3NextConfig({ decoder_sparse_step: 2, mlp_only_layers: [] }).sparseLayers).toEqual([false, true, false, true]);
  });

  it('bad or unsupported fields are UserErrors naming the file and the field', () => {
    const bad = (over: Record<string, unknown>) => () => parseQwen3NextConfig({ ...QWEN3_NEXT_80B_RAW, ...over }, 'x/config.json');
    expect(bad({ layer_types: ['linear_attention'] })).toThrow(/layer_types lists 1 layers, num_hidden_layers is 48 in x\/config.json/);
    expect(bad({ layer_types: Array(48).fill('sliding_attention') })).toThrow(/invalid field layer_types\.0 in x\/config.json/);
    expect(bad({ linear_num_value_heads: 20 })).toThrow(/linear_num_value_heads 20 is not a multiple of linear_num_key_heads 16/);
    expect(bad({ hidden_act: 'gelu' })).toThrow(/unsupported hidden_act "gelu" in x\/config.json/);
    expect(bad({ rope_scaling: { type: 'yarn', factor: 4 } })).toThrow(/unsupported rope_scaling/);
    expect(bad({ num_experts_per_tok: 600 })).toThrow(/num_experts_per_tok 600 exceeds the 512 experts/);
    expect(bad({ mlp_only_layers: [48] })).toThrow(/mlp_only_layers names layer 48 of 48/);
    expect(bad({ head_dim: 'big' })).toThrow(/invalid field head_dim in x\/config.json/);
  });
});
