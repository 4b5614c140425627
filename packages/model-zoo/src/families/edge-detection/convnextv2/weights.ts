/**
 * ConvNeXt-V2 checkpoints in HF's names: the module tree is named as ConvNextV2ForImageClassification's state_dict
 * (convnextv2.embeddings.*, convnextv2.encoder.stages.<i>.{downsampling_layer.<0|1>, layers.<j>.*},
 * convnextv2.layernorm.*, classifier.*), so loading needs no renames. Random weights are per fan-in (a conv net:
 * weights/init-scale.ts), the LayerNorms at weight 1 / bias 0.
 */
import { layerWeightRules } from '../../../layers/weight-rules.js';
import type { WeightRules } from '../../../weights/weight-plan.js';
import type { ConvNextV2Config } from './config.js';

/** Every LayerNorm / LayerNorm2d weight, by checkpoint name. */
export const CONVNEXTV2_NORMS = /(^|\.)(layernorm|downsampling_layer\.0)\.weight$/;

export function convnextv2WeightRules(config: ConvNextV2Config): WeightRules {
  return layerWeightRules('the convnextv2 config', undefined, { initStd: 0, init: { mode: 'fan-in', gain: config.initializerGain }, norms: CONVNEXTV2_NORMS });
}
