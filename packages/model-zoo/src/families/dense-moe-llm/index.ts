import type { TaskDefinition, TaskProvider } from '@fastkernels/core';
import { FAMILY } from './family.js';
import { embeddingTask } from './L1/embedding.js';
import { geluAndMulTask } from './L1/gelu_and_mul.js';
import { linearTask } from './L1/linear.js';
import { pagedDecodeAttentionTask } from './L1/paged_decode_attention.js';
import { rmsNormTask } from './L1/rms_norm.js';
import { rotaryEmbTask } from './L1/rotary_emb.js';
import { samplerTask } from './L1/sampler.js';
import { siluAndMulTask } from './L1/silu_and_mul.js';
import { softmaxTask } from './L1/softmax.js';
import { storeKvcacheTask } from './L1/store_kvcache.js';
import { varlenPrefillAttentionTask } from './L1/varlen_prefill_attention.js';
import { attentionTask } from './L2/attention.js';
import { llamaMlpTask } from './L2/llama_mlp.js';
import { parallelEmbeddingTask } from './L2/parallel_embedding.js';
import { llamaDecoderTask } from './L3/llama_decoder.js';
import { llamaTask } from './L4/llama.js';

export { FAMILY as DENSE_MOE_LLM };
export * from './config.js';
export { LlamaAttention, attentionTask } from './L2/attention.js';
export { LlamaMLP, llamaMlpTask } from './L2/llama_mlp.js';
export { ParallelLMHead, parallelEmbeddingTask } from './L2/parallel_embedding.js';
export { LlamaDecoderLayer, llamaDecoderTask } from './L3/llama_decoder.js';
export { LlamaForCausalLM, LlamaModel, llamaTask } from './L4/llama.js';
export { VocabParallelEmbedding, embeddingTask } from './L1/embedding.js';
export { KV_BLOCK_SIZE } from './L1/store_kvcache.js';
export { cosSinCacheReference } from './L1/rotary_emb.js';
export { llamaArchitecture } from './model.js';
export { llamaWeightRules } from './weights.js';
export { checkLlamaTensorParallel, llamaTensorParallelPlan, type LlamaTensorParallelPlan } from './tensor-parallel.js';

/** The decoder-LLM spine (Llama, Qwen2, Mistral ...), lowest level first. */
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
  llamaMlpTask,
  parallelEmbeddingTask,
  llamaDecoderTask,
  llamaTask,
];

export const denseMoeLlmProvider: TaskProvider = { family: FAMILY, tasks: () => denseMoeLlmTasks };
