import type { TaskDefinition, TaskProvider } from '@fastkernels/core';
import { FAMILY } from './family.js';
import { adaLayerNormTask } from './L2/ada_layer_norm.js';
import { adaLayerNormContinuousTask } from './L2/ada_layer_norm_continuous.js';
import { fluxAttentionTask } from './L2/flux_attention.js';
import { fluxFeedforwardTask } from './L2/flux_feedforward.js';
import { timestepEmbeddingTask } from './L2/timestep_embedding.js';

export { FAMILY as VISION_VIDEO_AUDIO };
export * from './flux-config.js';
export * from './t5-config.js';
export * from './clip-config.js';
export { AdaLayerNormZero, AdaLayerNormZeroSingle, adaLayerNormTask } from './L2/ada_layer_norm.js';
export { AdaLayerNormContinuous, adaLayerNormContinuousTask } from './L2/ada_layer_norm_continuous.js';
export { CombinedTimestepGuidanceTextProjEmbeddings, PixArtAlphaTextProjection, TimestepEmbedding, Timesteps, timestepEmbeddingTask } from './L2/timestep_embedding.js';
export { FluxAttention, fluxAttentionTask } from './L2/flux_attention.js';
export { FeedForward, fluxFeedforwardTask } from './L2/flux_feedforward.js';

/** The family's own tasks (L2-L4); its L1 tasks are shared (tasks/L1). */
export const visionVideoAudioTasks: readonly TaskDefinition[] = [adaLayerNormTask, adaLayerNormContinuousTask, timestepEmbeddingTask, fluxAttentionTask, fluxFeedforwardTask];

export const visionVideoAudioProvider: TaskProvider = { family: FAMILY, tasks: () => visionVideoAudioTasks };
