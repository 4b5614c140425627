/**
 * BGE-M3's entry in the model registry: HF XLMRobertaModel (BAAI/bge-m3's config.json) or vLLM's BgeM3EmbeddingModel
 * name, model_type xlm-roberta -> parseEncoderConfig, the L4/bge_m3 tree (built through the module registry, so
 * candidates apply), bgeM3WeightRules, the encoder runner (engine/encoder-runner.ts).
 */
import type { ModelArchitecture } from '../../models/registry.js';
import { parseEncoderConfig, type EncoderConfig } from './config.js';
import { FAMILY } from './family.js';
import type { BgeM3EmbeddingModel } from './L4/bge_m3.js';
import type { ColBERTModel } from './L4/colbertv2.js';
import { bgeM3WeightRules, colbertWeightRules } from './weights.js';

export const bgeM3Architecture: ModelArchitecture<EncoderConfig> = {
  name: 'bge-m3',
  family: FAMILY,
  architectures: ['XLMRobertaModel', 'BgeM3EmbeddingModel'],
  modelTypes: ['xlm-roberta'],
  runner: 'encoder',
  parseConfig: parseEncoderConfig,
  dtype: (c) => c.dtype,
  geometry: (c) => encoderGeometry(c),
  build: (ctx, c) => ctx.registry.createIn<BgeM3EmbeddingModel>(ctx, 'L4/bge_m3', c),
  weightRules: bgeM3WeightRules,
  describe: (c) => `${c.modelType} encoder (BGE-M3 heads), ${c.numHiddenLayers} layers, hidden ${c.hiddenSize}`,
};

/**
 * ColBERTv2's entry: colbert-ir/colbertv2.0's HF_ColBERT (a BERT config; model_type bert alone is not claimed, a plain
 * BERT checkpoint has no ColBERT projection) -> L4/colbertv2 with config `dim`; the punctuation skiplist needs the
 * tokenizer and is empty here (only pads are masked), see the L4 module.
 */
export const colbertArchitecture: ModelArchitecture<EncoderConfig> = {
  name: 'colbertv2',
  family: FAMILY,
  architectures: ['HF_ColBERT'],
  modelTypes: [],
  runner: 'encoder',
  parseConfig: parseEncoderConfig,
  dtype: (c) => c.dtype,
  geometry: (c) => encoderGeometry(c),
  build: (ctx, c) => ctx.registry.createIn<ColBERTModel>(ctx, 'L4/colbertv2', c, c.colbertDim, []),
  weightRules: colbertWeightRules,
  describe: (c) => `${c.modelType} encoder (ColBERT ${c.colbertDim}-dim vectors), ${c.numHiddenLayers} layers, hidden ${c.hiddenSize}`,
};

function encoderGeometry(c: EncoderConfig) {
  return {
    vocabSize: c.vocabSize,
    // RoBERTa positions start at padding_idx + 1: the longest sequence is max_position_embeddings - pad - 1 tokens.
    maxPositionEmbeddings: c.maxPositionEmbeddings - (c.robertaPositions ? c.padTokenId + 1 : 0),
    numHiddenLayers: c.numHiddenLayers,
    numAttentionHeads: c.numAttentionHeads,
    numKeyValueHeads: c.numAttentionHeads,
    headDim: c.headDim,
    hiddenSize: c.hiddenSize,
    intermediateSize: c.intermediateSize,
  };
}
