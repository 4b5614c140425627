/**
 * GLA's entry in the model registry: FLA's GLAForCausalLM (model_type gla) -> parseGlaConfig, the L4/gla tree (built
 * through the module registry, so candidates apply), glaWeightRules. Its runner is 'recurrent-llm': forward carries the
 * per-sequence recurrent state (engine/recurrent-generate.ts); the paged engine has no state cache yet (issue 32).
 */
import type { ModelArchitecture } from '../../models/registry.js';
import { parseGlaConfig, type GlaConfig } from './config.js';
import { FAMILY } from './family.js';
import type { GLAForCausalLM } from './L4/gla.js';
import { glaWeightRules } from './weights.js';

export const glaArchitecture: ModelArchitecture<GlaConfig> = {
  name: 'gla',
  family: FAMILY,
  architectures: ['GLAForCausalLM'],
  modelTypes: ['gla'],
  runner: 'recurrent-llm',
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
  }),
  build: (ctx, c) => ctx.registry.createIn<GLAForCausalLM>(ctx, 'L4/gla', c),
  weightRules: glaWeightRules,
  describe: (c) => `gla, ${c.numHiddenLayers} layers, hidden ${c.hiddenSize}, ${c.numHeads} heads (state ${c.headKDim} x ${c.headVDim} per head)`,
};
