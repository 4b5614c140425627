import type { TaskDefinition, TaskProvider } from '@fastkernels/core';
import { FAMILY } from './family.js';
import { glaAttentionTask } from './L2/gla_attention.js';
import { glaMlpTask } from './L2/gla_mlp.js';
import { glaDecoderTask } from './L3/gla_decoder.js';
import { glaTask } from './L4/gla.js';
import { qwen3NextAttentionTask } from './L2/qwen3_next_attention.js';
import { qwen3NextGdnAttentionTask } from './L2/qwen3_next_gdn_attention.js';
import { sharedExpertMoeTask } from './L2/shared_expert_moe.js';
import { qwen3NextDecoderTask } from './L3/qwen3_next_decoder.js';
import { qwen3NextTask } from './L4/qwen3_next.js';
import { kimiDeltaAttentionTask } from './L2/kimi_delta_attention.js';
import { kimiMlaAttentionTask } from './L2/kimi_mla_attention.js';
import { kimiMoeTask } from './L2/kimi_moe.js';
import { kimiLinearDecoderTask } from './L3/kimi_linear_decoder.js';

export { FAMILY as LINEAR_ATTENTION };
export * from './config.js';
export { GatedLinearAttention, glaAttentionTask } from './L2/gla_attention.js';
export { GLAMLP, glaMlpTask } from './L2/gla_mlp.js';
export { GLADecoderLayer, glaDecoderTask } from './L3/gla_decoder.js';
export { GLAForCausalLM, GLAModel, glaStateShape, glaTask } from './L4/gla.js';
export { refGlaAttention, refGlaBlock, refGlaMlp, refGlaModel } from './reference.js';

/** The family's own tasks (L2-L4); its L1 tasks (chunk_gla, fused_recurrent_gla, gla_recurrence, log_sigmoid, rms_norm_gated, ...) are shared. */
export const linearAttentionTasks: readonly TaskDefinition[] = [glaAttentionTask, glaMlpTask, glaDecoderTask, glaTask, qwen3NextGdnAttentionTask, qwen3NextAttentionTask, sharedExpertMoeTask, qwen3NextDecoderTask, qwen3NextTask, kimiDeltaAttentionTask, kimiMlaAttentionTask, kimiMoeTask, kimiLinearDecoderTask];

export const linearAttentionProvider: TaskProvider = { family: FAMILY, tasks: () => linearAttentionTasks };
export { glaArchitecture } from './model.js';
export { GLACausalLM } from './causal-lm.js';
export { glaWeightRules } from './weights.js';
export * from './qwen3-next-config.js';
export { Qwen3NextGDNAttention, qwen3NextGdnAttentionTask } from './L2/qwen3_next_gdn_attention.js';
export { Qwen3NextAttention, qwen3NextAttentionTask } from './L2/qwen3_next_attention.js';
export { SharedExpertMoE, sharedExpertMoeTask } from './L2/shared_expert_moe.js';
export { Qwen3NextDecoderLayer, qwen3NextDecoderTask } from './L3/qwen3_next_decoder.js';
export { Qwen3NextForCausalLM, Qwen3NextModel, qwen3NextTask } from './L4/qwen3_next.js';
export { refGatedAttention, refGatedDeltaNet, refQwen3NextDecoderLayer, refQwen3NextGreedy, refQwen3NextModel, refSharedExpertMoe } from './qwen3-next-reference.js';
export { qwen3NextArchitecture, qwen3NextLayerCaches } from './qwen3-next-model.js';
export { qwen3NextWeightRules } from './qwen3-next-weights.js';
export * from './kimi-linear-config.js';
export { KimiDeltaAttention, kimiDeltaAttentionTask } from './L2/kimi_delta_attention.js';
export { KimiMLAAttention, kimiMlaAttentionTask } from './L2/kimi_mla_attention.js';
export { KimiFusedMoE, KimiMoE, kimiMoeTask } from './L2/kimi_moe.js';
export { KimiLinearDecoderLayer, kimiLinearDecoderTask } from './L3/kimi_linear_decoder.js';
export { refKda, refKimiDecoderLayer, refKimiLinearGreedy, refKimiLinearModel, refKimiMoe, refKimiRouting, refMla } from './kimi-linear-reference.js';
