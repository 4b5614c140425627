/**
 * The MoE decoders' entries in the model registry: HF MixtralForCausalLM (model_type mixtral) and Qwen3MoeForCausalLM
 * (qwen3_moe) -> parseMoeConfig, the L4/mixtral or L4/qwen3_moe tree (built through the module registry, so candidates
 * apply), moeWeightRules, the decoder-LLM runner. The KV cache is sized by the attention geometry alone, as for Llama.
 */
import type { CausalLM } from '../../../engine/model-runner.js';
import type { ModelArchitecture } from '../../../models/registry.js';
import { FAMILY } from '../family.js';
import { parseMoeConfig, type MoeConfig, type MoeModelType } from './config.js';
import { moeWeightRules } from './weights.js';
import { attentionGeometry } from '../../../common/decoder-layer.js';

function moeArchitecture(modelType: MoeModelType, architecture: string, task: string): ModelArchitecture<MoeConfig> {
  return {
    name: modelType,
    family: FAMILY,
    architectures: [architecture],
    modelTypes: [modelType],
    runner: 'decoder-llm',
    parseConfig: (raw, file) => {
      const c = parseMoeConfig(raw, file);
      if (c.modelType !== modelType) throw new Error(`${architecture}: config of model_type ${c.modelType}`);
      return c;
    },
    dtype: (c) => c.dtype,
    geometry: (c) => ({
      ...attentionGeometry(c),
      // the widest feed-forward activation a token has: its top-k experts'
      intermediateSize: Math.max(c.moeIntermediateSize * c.numExpertsPerTok, c.denseLayers.length ? c.intermediateSize : 0),
    }),
    build: (ctx, c) => ctx.registry.createIn<CausalLM>(ctx, task, c),
    weightRules: moeWeightRules,
    describe: (c) => `${c.modelType}, ${c.numHiddenLayers} layers, hidden ${c.hiddenSize}, ${c.numExperts} experts top-${c.numExpertsPerTok}`,
  };
}

export const mixtralArchitecture = moeArchitecture('mixtral', 'MixtralForCausalLM', 'L4/mixtral');
export const qwen3MoeArchitecture = moeArchitecture('qwen3_moe', 'Qwen3MoeForCausalLM', 'L4/qwen3_moe');
