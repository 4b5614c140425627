import type { TaskDefinition, TaskProvider } from '@fastkernels/core';
import { FAMILY } from './family.js';
import { adaLayerNormTask } from './L2/ada_layer_norm.js';
import { adaLayerNormContinuousTask } from './L2/ada_layer_norm_continuous.js';
import { fluxAttentionTask } from './L2/flux_attention.js';
import { fluxFeedforwardTask } from './L2/flux_feedforward.js';
import { timestepEmbeddingTask } from './L2/timestep_embedding.js';
import { t5AttentionTask } from './L2/t5_attention.js';
import { t5DenseTask } from './L2/t5_dense.js';
import { clipAttentionTask } from './L2/clip_attention.js';
import { clipMlpTask } from './L2/clip_mlp.js';
import { fluxTransformerBlockTask } from './L3/flux_transformer_block.js';
import { t5BlockTask } from './L3/t5_block.js';
import { clipEncoderLayerTask } from './L3/clip_encoder_layer.js';
import { t5EncoderTask } from './L4/t5_encoder.js';
import { clipTextModelTask } from './L4/clip_text_model.js';
import { sdxlResnetTask } from './L2/sdxl_resnet.js';
import { fluxTask } from './L4/flux.js';
import { sdxlUpsampleTask } from './L2/sdxl_upsample.js';

export { FAMILY as VISION_VIDEO_AUDIO };
export * from './flux-config.js';
export * from './t5-config.js';
export * from './clip-config.js';
export { AdaLayerNormZero, AdaLayerNormZeroSingle, adaLayerNormTask } from './L2/ada_layer_norm.js';
export { AdaLayerNormContinuous, adaLayerNormContinuousTask } from './L2/ada_layer_norm_continuous.js';
export { CombinedTimestepGuidanceTextProjEmbeddings, PixArtAlphaTextProjection, TimestepEmbedding, Timesteps, timestepEmbeddingTask } from './L2/timestep_embedding.js';
export { FluxAttention, fluxAttentionTask } from './L2/flux_attention.js';
export { FeedForward, fluxFeedforwardTask } from './L2/flux_feedforward.js';
export { T5SelfAttention, t5AttentionTask, relativePositionBucket } from './L2/t5_attention.js';
export { T5DenseActDense, T5DenseGatedActDense, t5DenseTask } from './L2/t5_dense.js';
export { CLIPAttention, clipAttentionTask, clipCausalMask } from './L2/clip_attention.js';
export { CLIPMLP, CLIPTextEmbeddings, clipMlpTask } from './L2/clip_mlp.js';
export { FluxSingleTransformerBlock, FluxTransformerBlock, fluxTransformerBlockTask } from './L3/flux_transformer_block.js';
export { T5Block, t5BlockTask } from './L3/t5_block.js';
export { CLIPEncoderLayer, clipEncoderLayerTask } from './L3/clip_encoder_layer.js';
export { T5EncoderModel, t5EncoderTask } from './L4/t5_encoder.js';
export { CLIPTextModel, clipTextModelTask } from './L4/clip_text_model.js';
export { FluxTransformer2DModel } from './L4/flux_transformer.js';
export { clipTextWeightRules, fluxTransformerWeightRules, t5WeightRules, vaeWeightRules } from './weights.js';
export { ResnetBlock2D, sdxlResnetTask } from './L2/sdxl_resnet.js';
export { Upsample2D, sdxlUpsampleTask } from './L2/sdxl_upsample.js';
export { AutoencoderKL } from './vae/autoencoder_kl.js';
export * from './vae/vae-config.js';
export * from './pipeline/scheduler.js';
export * from './pipeline/latents.js';
export * from './pipeline/model-index.js';
export { fluxPipelineReference } from './pipeline/reference.js';
export { encodePadded, loadFluxTokenizers, toRgb8, type FluxTokenizers } from './pipeline/text-to-image.js';
export { FLUX1_DEV_PIPELINE, FluxPipeline, fluxTask, tinyFluxPipelineConfig, type FluxRunOptions } from './L4/flux.js';

/** The family's own tasks (L2-L4); its L1 tasks are shared (tasks/L1). */
export const visionVideoAudioTasks: readonly TaskDefinition[] = [
  adaLayerNormTask,
  adaLayerNormContinuousTask,
  timestepEmbeddingTask,
  fluxAttentionTask,
  fluxFeedforwardTask,
  t5AttentionTask,
  t5DenseTask,
  clipAttentionTask,
  clipMlpTask,
  sdxlResnetTask,
  sdxlUpsampleTask,
  fluxTransformerBlockTask,
  t5BlockTask,
  clipEncoderLayerTask,
  t5EncoderTask,
  clipTextModelTask,
  fluxTask,
];

export const visionVideoAudioProvider: TaskProvider = { family: FAMILY, tasks: () => visionVideoAudioTasks };
