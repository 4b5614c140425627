/**
 * The text encoders' entries in the model registry (FLUX.1-dev's text_encoder_2 and text_encoder folders): HF
 * T5EncoderModel (model_type t5) and CLIPTextModel (model_type clip_text_model), both on the encoder runner
 * (last_hidden_state; the runner's cls / mean poolings). CLIP's pooled end-of-text vector, which FLUX consumes, is
 * CLIPTextModel.forward's second output (the pipeline calls it directly).
 */
import type { ModelArchitecture } from '../../models/registry.js';
import { parseClipTextConfig, type ClipTextConfig } from './clip-config.js';
import { FAMILY } from './family.js';
import type { CLIPTextModel } from './L4/clip_text_model.js';
import type { T5EncoderModel } from './L4/t5_encoder.js';
import { parseT5Config, type T5Config } from './t5-config.js';
import { clipTextWeightRules, t5WeightRules } from './weights.js';

export const t5EncoderArchitecture: ModelArchitecture<T5Config> = {
  name: 't5-encoder',
  family: FAMILY,
  architectures: ['T5EncoderModel'],
  modelTypes: ['t5'],
  runner: 'encoder',
  parseConfig: parseT5Config,
  dtype: (c) => c.dtype,
  geometry: (c) => ({
    vocabSize: c.vocabSize,
    // relative positions: no table bounds the length; FLUX pads prompts to 512
    maxPositionEmbeddings: 512,
    numHiddenLayers: c.numLayers,
    numAttentionHeads: c.numHeads,
    numKeyValueHeads: c.numHeads,
    headDim: c.dKv,
    hiddenSize: c.dModel,
    intermediateSize: c.dFf,
  }),
  build: (ctx, c) => ctx.registry.createIn<T5EncoderModel>(ctx, 'L4/t5_encoder', c),
  weightRules: t5WeightRules,
  describe: (c) => `t5 encoder, ${c.numLayers} blocks, d_model ${c.dModel}, ${c.numHeads} heads`,
};

export const clipTextArchitecture: ModelArchitecture<ClipTextConfig> = {
  name: 'clip-text',
  family: FAMILY,
  architectures: ['CLIPTextModel'],
  modelTypes: ['clip_text_model'],
  runner: 'encoder',
  parseConfig: parseClipTextConfig,
  dtype: (c) => c.dtype,
  geometry: (c) => ({
    vocabSize: c.vocabSize,
    maxPositionEmbeddings: c.maxPositionEmbeddings,
    numHiddenLayers: c.numHiddenLayers,
    numAttentionHeads: c.numAttentionHeads,
    numKeyValueHeads: c.numAttentionHeads,
    headDim: c.headDim,
    hiddenSize: c.hiddenSize,
    intermediateSize: c.intermediateSize,
  }),
  build: (ctx, c) => ctx.registry.createIn<CLIPTextModel>(ctx, 'L4/clip_text_model', c),
  weightRules: clipTextWeightRules,
  describe: (c) => `clip text tower, ${c.numHiddenLayers} layers, hidden ${c.hiddenSize}`,
};
