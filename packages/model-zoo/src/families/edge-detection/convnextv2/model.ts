/**
 * ConvNeXt-V2's entry in the model registry: a config.json naming ConvNextV2ForImageClassification (or model_type
 * convnextv2) -> parseConvNextV2Config, the L4/convnextv2 tree (built through the module registry, so candidates
 * apply), HF's checkpoint names, the vision runner. No token geometry: the engine fields are zero.
 */
import type { ModelArchitecture } from '../../../models/registry.js';
import { FAMILY } from '../family.js';
import type { ConvNextV2ForImageClassification } from '../L4/convnextv2.js';
import { parseConvNextV2Config, type ConvNextV2Config } from './config.js';
import { convnextv2WeightRules } from './weights.js';

export const convnextv2Architecture: ModelArchitecture<ConvNextV2Config> = {
  name: 'convnextv2',
  family: FAMILY,
  architectures: ['ConvNextV2ForImageClassification'],
  modelTypes: ['convnextv2'],
  runner: 'vision',
  parseConfig: parseConvNextV2Config,
  dtype: (c) => c.dtype,
  geometry: () => ({ vocabSize: 0, maxPositionEmbeddings: 0, numHiddenLayers: 0, numAttentionHeads: 0, numKeyValueHeads: 0, headDim: 0, hiddenSize: 0, intermediateSize: 0 }),
  build: (ctx, c) => ctx.registry.createIn<ConvNextV2ForImageClassification>(ctx, 'L4/convnextv2', c),
  weightRules: convnextv2WeightRules,
  describe: (c) => `convnextv2 classifier (widths ${c.hiddenSizes.join('/')}, depths ${c.depths.join('/')}), ${c.numLabels} labels at ${c.imageSize} x ${c.imageSize}`,
};
