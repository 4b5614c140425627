/**
 * GLA's entry in the model registry: FLA's GLAForCausalLM (model_type gla) -> parseGlaConfig, GLACausalLM (the engine's
 * model interface over the L4/gla tree; blocks built through the module registry, so candidates apply), glaWeightRules.
 * It runs on the engine like the Llama models; every layer is recurrent (layerCaches): one [num_heads, head_k_dim,
 * head_v_dim] f32 state per sequence and layer in the engine's state pool, no KV cache (docs/recurrent-state.md).
 */
import type { ModelArchitecture } from '../../models/registry.js';
import { GLACausalLM } from './causal-lm.js';
import { parseGlaConfig, type GlaConfig } from './config.js';
import { FAMILY } from './family.js';
import { glaWeightRules } from './weights.js';

export const glaArchitecture: ModelArchitecture<GlaConfig> = {
  name: 'gla',
  family: FAMILY,
  architectures: ['GLAForCausalLM'],
  modelTypes: ['gla'],
  runner: 'decoder-llm',
  parseConfig: parseGlaConfig,
  dtype: (c) => c.dtype,
  geometry: (c) => ({
    vocabSize: c.vocabSize,
    maxPositionEmbeddings: c.maxPositionEmbeddings,
    numHiddenLayers: c.numHiddenLayers,
    numAttentionHeads: c.numHeads,
    numKeyValueHeads: c.numHeads,
    headDim: c.headKDim,
    hiddenSize: c.hiddenSize,
    intermediateSize: c.intermediateSize,
    // FLA's state per layer: [num_heads, head_k_dim, head_v_dim] in f32 whatever the model dtype
    layerCaches: Array.from({ length: c.numHiddenLayers }, () => ({ kind: 'recurrent' as const, states: [{ name: 'recurrent', shape: [c.numHeads, c.headKDim, c.headVDim], dtype: 'f32' as const }] })),
  }),
  build: (ctx, c) => GLACausalLM.create(ctx, c),
  weightRules: glaWeightRules,
  describe: (c) => `gla, ${c.numHiddenLayers} layers, hidden ${c.hiddenSize}, ${c.numHeads} heads (state ${c.headKDim} x ${c.headVDim} per head)`,
};
