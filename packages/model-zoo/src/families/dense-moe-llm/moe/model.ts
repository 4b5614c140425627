/**
 * The MoE decoders' entries in the model registry: HF MixtralForCausalLM (model_type mixtral) and Qwen3MoeForCausalLM
 * (qwen3_moe) -> parseMoeConfig, the L4/mixtral or L4/qwen3_moe tree (built through the module registry, so candidates
 * apply), moeWeightRules, the decoder-LLM runner; over ranks only with expert parallelism (checkMoeParallel). The KV cache is sized by the attention geometry alone, as for Llama.
 */
import { UserError } from '@fastkernels/core';
import type { CausalLM } from '../../../engine/model-runner.js';
import type { ModelArchitecture } from '../../../models/registry.js';
import { FAMILY } from '../family.js';
import { parseMoeConfig, type MoeConfig, type MoeModelType } from './config.js';
import { moeWeightRules } from './weights.js';
import { attentionGeometry } from '../../../common/decoder-layer.js';
import { checkLlamaTensorParallel } from '../tensor-parallel.js';
import { checkExpertParallel, currentExpertParallel } from '../../../layers/parallel/expert-parallel.js';

/**
 * A MoE config over `world` ranks: only with expert parallelism (the experts are never tensor-parallel here), the
 * attention heads (and the dense layers' MLP) split as Llama's, the experts by the expert-parallel size.
 */
export function checkMoeParallel(c: MoeConfig, world: number, file = 'config.json'): void {
  if (world === 1) return;
  if (!currentExpertParallel()) throw new UserError(`${c.modelType} models run over ${world} ranks only with expert parallelism`, { field: '--tp', fix: `add --ep ${world}` });
  checkLlamaTensorParallel({ ...c, intermediateSize: c.denseLayers.length ? c.intermediateSize : world }, world, file);
  checkExpertParallel(c.numExperts, world, file, c.modelType === 'mixtral' ? 'num_local_experts' : 'num_experts');
}

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
    checkTensorParallel: checkMoeParallel,
    describe: (c) => `${c.modelType}, ${c.numHiddenLayers} layers, hidden ${c.hiddenSize}, ${c.numExperts} experts top-${c.numExpertsPerTok}`,
  };
}

export const mixtralArchitecture = moeArchitecture('mixtral', 'MixtralForCausalLM', 'L4/mixtral');
export const qwen3MoeArchitecture = moeArchitecture('qwen3_moe', 'Qwen3MoeForCausalLM', 'L4/qwen3_moe');
