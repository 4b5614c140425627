/**
 * The Llama family's entry in the model registry: HF LlamaForCausalLM / Qwen2ForCausalLM / MistralForCausalLM (or
 * model_type llama / qwen2 / mistral) -> parseLlamaConfig, the L4/llama module tree (built through the module
 * registry, so candidates apply), llamaWeightRules, the decoder-LLM runner.
 */
import type { CausalLM } from '../../engine/model-runner.js';
import type { ModelArchitecture } from '../../models/registry.js';
import { SUPPORTED_MODEL_TYPES, parseLlamaConfig, type LlamaConfig } from './config.js';
import { FAMILY } from './family.js';
import { checkLlamaTensorParallel } from './tensor-parallel.js';
import { llamaWeightRules } from './weights.js';
import { attentionGeometry } from '../../common/decoder-layer.js';

export const llamaArchitecture: ModelArchitecture<LlamaConfig> = {
  name: 'llama',
  family: FAMILY,
  architectures: ['LlamaForCausalLM', 'Qwen2ForCausalLM', 'MistralForCausalLM'],
  modelTypes: SUPPORTED_MODEL_TYPES,
  runner: 'decoder-llm',
  parseConfig: parseLlamaConfig,
  dtype: (c) => c.dtype,
  geometry: (c) => ({
    ...attentionGeometry(c),
    intermediateSize: c.intermediateSize,
  }),
  build: (ctx, c) => ctx.registry.createIn<CausalLM>(ctx, 'L4/llama', c),
  weightRules: llamaWeightRules,
  checkTensorParallel: checkLlamaTensorParallel,
  describe: (c) => `${c.modelType}, ${c.numHiddenLayers} layers, hidden ${c.hiddenSize}`,
};
