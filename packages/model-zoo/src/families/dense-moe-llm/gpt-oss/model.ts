/**
 * gpt-oss's entry in the model registry: HF GptOssForCausalLM (model_type gpt_oss) -> parseGptOssConfig, the
 * L4/gpt_oss tree (built through the module registry, so candidates apply), gptOssWeightRules, the decoder-LLM runner;
 * over ranks only with expert parallelism (checkGptOssParallel).
 * The KV cache is sized by the attention geometry; sliding layers keep every position for now (the window is applied
 * by the kernels, not by freeing blocks).
 */
import type { CausalLM } from '../../../engine/model-runner.js';
import type { ModelArchitecture } from '../../../models/registry.js';
import { FAMILY } from '../family.js';
import { parseGptOssConfig, type GptOssConfig } from './config.js';
import { gptOssWeightRules } from './weights.js';
import { attentionGeometry } from '../../../common/decoder-layer.js';
import { UserError } from '@fastkernels/core';
import { checkLlamaTensorParallel } from '../tensor-parallel.js';
import { checkExpertParallel, currentExpertParallel } from '../../../layers/parallel/expert-parallel.js';

/** gpt-oss over `world` ranks: only with expert parallelism; the attention heads split as Llama's, the experts by rank. */
export function checkGptOssParallel(c: GptOssConfig, world: number, file = 'config.json'): void {
  if (world === 1) return;
  if (!currentExpertParallel()) throw new UserError(`gpt_oss models run over ${world} ranks only with expert parallelism`, { field: '--tp', fix: `add --ep ${world}` });
  checkLlamaTensorParallel({ ...c, intermediateSize: world }, world, file); // no dense MLP: only the heads
  checkExpertParallel(c.numLocalExperts, world, file, 'num_local_experts');
}

export const gptOssArchitecture: ModelArchitecture<GptOssConfig> = {
  name: 'gpt_oss',
  family: FAMILY,
  architectures: ['GptOssForCausalLM'],
  modelTypes: ['gpt_oss'],
  runner: 'decoder-llm',
  parseConfig: (raw, file) => parseGptOssConfig(raw, file),
  dtype: (c) => c.dtype,
  geometry: (c) => ({
    ...attentionGeometry(c),
    // the widest feed-forward activation a token has: its top-k experts' gate_up
    intermediateSize: 2 * c.intermediateSize * c.numExpertsPerTok,
  }),
  build: (ctx, c) => ctx.registry.createIn<CausalLM>(ctx, 'L4/gpt_oss', c),
  weightRules: gptOssWeightRules,
  checkTensorParallel: checkGptOssParallel,
  describe: (c) => `gpt_oss, ${c.numHiddenLayers} layers (sliding ${Math.max(...c.slidingWindows)} / full), hidden ${c.hiddenSize}, ${c.numLocalExperts} experts top-${c.numExpertsPerTok}, ${c.expertsFormat} experts`,
};
