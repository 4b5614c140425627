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
import { clipTextWeightRules, fluxTransformerWeightRules, t5WeightRules, vaeWeightRules } from './weights.js';
import type { FluxPipeline } from './L4/flux.js';
import { parseFluxPipelineConfig, type FluxPipelineConfig } from './pipeline/model-index.js';

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

/**
 * FluxPipeline (a diffusers folder: model_index.json + component folders) on the pipeline runner. parseConfig gets
 * model_index.json and reads the component configs beside it; the weights load per component folder
 * (FluxPipeline.components(), loadPipelineModel). weightRules covers the whole tree under the component prefixes.
 */
/** A component's pattern over the whole tree's names (`vae.` + a name the pattern matches). */
function underPrefix(prefix: string, re: RegExp): RegExp {
  const src = re.source;
  return new RegExp(src.startsWith('^') ? `^${prefix}\\.(?:${src.slice(1)})` : `^${prefix}\\..*?(?:${src})`);
}

export const fluxPipelineArchitecture: ModelArchitecture<FluxPipelineConfig> = {
  name: 'flux',
  family: FAMILY,
  architectures: ['FluxPipeline'],
  modelTypes: [],
  runner: 'pipeline',
  parseConfig: parseFluxPipelineConfig,
  dtype: (c) => c.dtype,
  geometry: (c) => ({
    vocabSize: c.textEncoder2.vocabSize,
    maxPositionEmbeddings: 512,
    numHiddenLayers: c.transformer.numLayers + c.transformer.numSingleLayers,
    numAttentionHeads: c.transformer.numAttentionHeads,
    numKeyValueHeads: c.transformer.numAttentionHeads,
    headDim: c.transformer.attentionHeadDim,
    hiddenSize: c.transformer.innerDim,
    intermediateSize: 4 * c.transformer.innerDim,
  }),
  build: (ctx, c) => ctx.registry.createIn<FluxPipeline>(ctx, 'L4/flux', c),
  weightRules: (c) => {
    const parts = { transformer: fluxTransformerWeightRules(c.transformer), vae: vaeWeightRules(c.vae), text_encoder: clipTextWeightRules(c.textEncoder), text_encoder_2: t5WeightRules(c.textEncoder2) };
    const entries = Object.entries(parts);
    return {
      label: 'the FluxPipeline folder',
      stacked: parts.transformer.stacked!,
      ignore: entries.flatMap(([k, r]) => (r.ignore ?? []).map((re) => underPrefix(k, re))),
      norms: new RegExp(entries.map(([k, r]) => underPrefix(k, r.norms!).source).join('|')),
      initStd: 0.02,
    };
  },
  describe: (c) => `flux pipeline: transformer ${c.transformer.numLayers} + ${c.transformer.numSingleLayers} blocks of ${c.transformer.innerDim}, T5 ${c.textEncoder2.numLayers} blocks, CLIP ${c.textEncoder.numHiddenLayers} layers, VAE ${c.vae.blockOutChannels.join('/')}`,
};
