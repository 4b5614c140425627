import type { TaskDefinition, TaskProvider } from '@fastkernels/core';
import { FAMILY } from './family.js';
import { embeddingTask } from '../../tasks/L1/embedding/embedding.js';
import { geluAndMulTask } from '../../tasks/L1/activation/gelu_and_mul.js';
import { linearTask } from '../../tasks/L1/linear/linear.js';
import { pagedDecodeAttentionTask } from '../../tasks/L1/attention/paged_decode_attention.js';
import { rmsNormTask } from '../../tasks/L1/norm/rms_norm.js';
import { rotaryEmbTask } from '../../tasks/L1/rotary/rotary_emb.js';
import { samplerTask } from '../../tasks/L1/sampling/sampler.js';
import { siluAndMulTask } from '../../tasks/L1/activation/silu_and_mul.js';
import { softmaxTask } from '../../tasks/L1/reduction/softmax.js';
import { storeKvcacheTask } from '../../tasks/L1/kvcache/store_kvcache.js';
import { varlenPrefillAttentionTask } from '../../tasks/L1/attention/varlen_prefill_attention.js';
import { attentionTask } from './L2/attention.js';
import { attentionImplTask } from './L2/attention_impl.js';
import { llamaMlpTask } from './L2/llama_mlp.js';
import { parallelEmbeddingTask } from './L2/parallel_embedding.js';
import { fusedExpertsTask } from './L2/fused_experts.js';
import { mixtralMoeTask } from './L2/mixtral_moe.js';
import { gptOssMoeTask } from './L2/gpt_oss_moe.js';
import { mxfp4MoeTask } from './L2/mxfp4_moe.js';
import { trtllmBf16MoeTask } from './L2/trtllm_bf16_moe.js';
import { trtllmMxfp4MoeTask } from './L2/trtllm_mxfp4_moe.js';
import { qwen3MoeTask } from './L2/qwen3_moe.js';
import { llamaDecoderTask } from './L3/llama_decoder.js';
import { llamaTask } from './L4/llama.js';
import { mixtralDecoderTask } from './L3/mixtral_decoder.js';
import { qwen3MoeDecoderTask } from './L3/qwen3_moe_decoder.js';
import { gptOssDecoderTask } from './L3/gpt_oss_decoder.js';
import { mixtralTask } from './L4/mixtral.js';
import { qwen3MoeModelTask } from './L4/qwen3_moe.js';
import { gptOssTask } from './L4/gpt_oss.js';

export { FAMILY as DENSE_MOE_LLM };
export * from './config.js';
export { LlamaAttention, attentionTask } from './L2/attention.js';
export { Attention, attentionImplTask, attentionImplReference } from './L2/attention_impl.js';
export { LlamaMLP, llamaMlpTask } from './L2/llama_mlp.js';
export { ParallelLMHead, parallelEmbeddingTask } from './L2/parallel_embedding.js';
export { LlamaDecoderLayer, llamaDecoderTask } from './L3/llama_decoder.js';
export { LlamaForCausalLM, LlamaModel, llamaTask } from './L4/llama.js';
export { llamaArchitecture } from './model.js';
export { FusedExperts, fusedExpertsTask } from './L2/fused_experts.js';
export { MixtralMoE, mixtralMoeTask } from './L2/mixtral_moe.js';
export { GptOssExperts, GptOssMoE, gptOssMoeTask } from './L2/gpt_oss_moe.js';
export { Mxfp4MoE, mxfp4MoeTask } from './L2/mxfp4_moe.js';
export { TrtLlmBf16MoE, trtllmBf16MoeTask } from './L2/trtllm_bf16_moe.js';
export { TrtLlmMxfp4MoE, trtllmMxfp4MoeTask } from './L2/trtllm_mxfp4_moe.js';
export { Qwen3MoE, qwen3MoeTask } from './L2/qwen3_moe.js';
export { FusedMoE } from './moe/fused-moe.js';
export { MixtralDecoderLayer, mixtralDecoderTask } from './L3/mixtral_decoder.js';
export { Qwen3MoEDecoderLayer, qwen3MoeDecoderTask } from './L3/qwen3_moe_decoder.js';
export { MixtralForCausalLM, mixtralTask } from './L4/mixtral.js';
export { Qwen3MoeForCausalLM, qwen3MoeModelTask } from './L4/qwen3_moe.js';
export { mixtralArchitecture, qwen3MoeArchitecture } from './moe/model.js';
export { GptOssDecoderLayer, gptOssDecoderTask } from './L3/gpt_oss_decoder.js';
export { GptOssForCausalLM, gptOssTask } from './L4/gpt_oss.js';
export { gptOssArchitecture } from './gpt-oss/model.js';
export { GPT_OSS_20B_CONFIG, GPT_OSS_120B_CONFIG, parseGptOssConfig, tinyGptOssConfig, type GptOssConfig } from './gpt-oss/config.js';
export { gptOssWeightRules } from './gpt-oss/weights.js';
export { parseMoeConfig, type MoeConfig } from './moe/config.js';
export { moeWeightRules } from './moe/weights.js';
export { llamaWeightRules } from './weights.js';
export { checkLlamaTensorParallel, llamaTensorParallelPlan, type LlamaTensorParallelPlan } from './tensor-parallel.js';

/**
 * Every task the decoder-LLM spine (Llama, Qwen2, Mistral ...) runs, lowest level first: the shared L1 tasks it
 * uses (they live in tasks/L1 and are registered there) and its own L2-L4 modules.
 */
export const denseMoeLlmTasks: readonly TaskDefinition[] = [
  embeddingTask,
  geluAndMulTask,
  linearTask,
  pagedDecodeAttentionTask,
  rmsNormTask,
  rotaryEmbTask,
  samplerTask,
  siluAndMulTask,
  softmaxTask,
  storeKvcacheTask,
  varlenPrefillAttentionTask,
  attentionTask,
  attentionImplTask,
  llamaMlpTask,
  parallelEmbeddingTask,
  fusedExpertsTask,
  mixtralMoeTask,
  mxfp4MoeTask,
  trtllmBf16MoeTask,
  trtllmMxfp4MoeTask,
  gptOssMoeTask,
  qwen3MoeTask,
  llamaDecoderTask,
  mixtralDecoderTask,
  qwen3MoeDecoderTask,
  gptOssDecoderTask,
  llamaTask,
  mixtralTask,
  qwen3MoeModelTask,
  gptOssTask,
];

/** The family's own tasks (L2-L4); its L1 tasks are registered once by the shared provider (tasks/index.ts). */
export const denseMoeLlmProvider: TaskProvider = { family: FAMILY, tasks: () => denseMoeLlmTasks.filter((t) => t.level > 1) };
