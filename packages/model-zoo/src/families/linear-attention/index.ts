import type { TaskDefinition, TaskProvider } from '@fastkernels/core';
import { FAMILY } from './family.js';
import { glaAttentionTask } from './L2/gla_attention.js';
import { glaMlpTask } from './L2/gla_mlp.js';
import { glaDecoderTask } from './L3/gla_decoder.js';
import { glaTask } from './L4/gla.js';

export { FAMILY as LINEAR_ATTENTION };
export * from './config.js';
export { GatedLinearAttention, glaAttentionTask } from './L2/gla_attention.js';
export { GLAMLP, glaMlpTask } from './L2/gla_mlp.js';
export { GLADecoderLayer, glaDecoderTask } from './L3/gla_decoder.js';
export { GLAForCausalLM, GLAModel, glaStateShape, glaTask } from './L4/gla.js';
export { refGlaAttention, refGlaBlock, refGlaMlp, refGlaModel } from './reference.js';

/** The family's own tasks (L2-L4); its L1 tasks (chunk_gla, fused_recurrent_gla, gla_recurrence, log_sigmoid, rms_norm_gated, ...) are shared. */
export const linearAttentionTasks: readonly TaskDefinition[] = [glaAttentionTask, glaMlpTask, glaDecoderTask, glaTask];

export const linearAttentionProvider: TaskProvider = { family: FAMILY, tasks: () => linearAttentionTasks };
export { glaArchitecture } from './model.js';
export { GLACausalLM } from './causal-lm.js';
export { glaWeightRules } from './weights.js';
