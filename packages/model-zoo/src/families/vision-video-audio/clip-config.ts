/**
 * zod over HF's CLIPTextConfig config.json fields (FLUX.1-dev's text_encoder: openai/clip-vit-large-patch14's text
 * tower, CLIPTextModel, model_type clip_text_model). A full CLIPConfig (model_type clip) is read through its
 * text_config.
 */
import type { DType } from '@fastkernels/core';
import { z } from 'zod';
import { check, configDType, parseWith } from '../../models/config-parse.js';

export interface ClipTextConfig {
  readonly vocabSize: number;
  readonly hiddenSize: number;
  readonly intermediateSize: number;
  readonly numHiddenLayers: number;
  readonly numAttentionHeads: number;
  readonly headDim: number;
  readonly maxPositionEmbeddings: number;
  readonly hiddenAct: 'quick_gelu' | 'gelu';
  readonly layerNormEps: number;
  /** 2 (the legacy value of the original checkpoints): pooled at argmax(input_ids); else at the first eos_token_id. */
  readonly eosTokenId: number;
  readonly padTokenId: number;
  readonly initializerRange: number;
  readonly dtype: DType | null;
}

const ClipTextSchema = z.looseObject({
  model_type: z.string().nullish(),
  vocab_size: z.number().int().positive().default(49408),
  hidden_size: z.number().int().positive().default(512),
  intermediate_size: z.number().int().positive().default(2048),
  num_hidden_layers: z.number().int().positive().default(12),
  num_attention_heads: z.number().int().positive().default(8),
  max_position_embeddings: z.number().int().positive().default(77),
  hidden_act: z.string().default('quick_gelu'),
  layer_norm_eps: z.number().positive().default(1e-5),
  eos_token_id: z.number().int().nonnegative().default(49407),
  pad_token_id: z.number().int().nonnegative().default(1),
  initializer_range: z.number().positive().default(0.02),
  torch_dtype: z.string().nullish(),
  dtype: z.string().nullish(),
  text_config: z.record(z.string(), z.unknown()).nullish(),
});

const ACTS: Record<string, ClipTextConfig['hiddenAct']> = { quick_gelu: 'quick_gelu', gelu: 'gelu' };

/** Parse a CLIP text config.json; a UserError naming the file and the field when one is wrong. */
export function parseClipTextConfig(raw: unknown, file = 'config.json'): ClipTextConfig {
  const outer = parseWith(ClipTextSchema, raw, file);
  // a full CLIPConfig nests the text tower's fields; its dtype stays at the top
  const c = outer.model_type === 'clip' && outer.text_config ? parseWith(ClipTextSchema, { torch_dtype: outer.torch_dtype, ...outer.text_config }, `${file} (text_config)`) : outer;
  check(!c.model_type || c.model_type === 'clip_text_model' || c.model_type === 'clip', file, 'model_type', `model_type '${c.model_type}' is not clip_text_model`);
  const act = ACTS[c.hidden_act];
  check(act !== undefined, file, 'hidden_act', `unsupported hidden_act '${c.hidden_act}' (supported: ${Object.keys(ACTS).join(', ')})`);
  check(c.hidden_size % c.num_attention_heads === 0, file, 'num_attention_heads', `hidden_size ${c.hidden_size} is not a multiple of num_attention_heads ${c.num_attention_heads}`);
  return {
    vocabSize: c.vocab_size,
    hiddenSize: c.hidden_size,
    intermediateSize: c.intermediate_size,
    numHiddenLayers: c.num_hidden_layers,
    numAttentionHeads: c.num_attention_heads,
    headDim: c.hidden_size / c.num_attention_heads,
    maxPositionEmbeddings: c.max_position_embeddings,
    hiddenAct: act!,
    layerNormEps: c.layer_norm_eps,
    eosTokenId: c.eos_token_id,
    padTokenId: c.pad_token_id,
    initializerRange: c.initializer_range,
    dtype: configDType(c, file),
  };
}

/** FLUX.1-dev's text_encoder/config.json (CLIP ViT-L/14 text tower). */
export const CLIP_L_RAW = {
  architectures: ['CLIPTextModel'],
  model_type: 'clip_text_model',
  attention_dropout: 0.0,
  bos_token_id: 0,
  eos_token_id: 2,
  hidden_act: 'quick_gelu',
  hidden_size: 768,
  initializer_range: 0.02,
  intermediate_size: 3072,
  layer_norm_eps: 1e-5,
  max_position_embeddings: 77,
  num_attention_heads: 12,
  num_hidden_layers: 12,
  pad_token_id: 1,
  projection_dim: 768,
  torch_dtype: 'bfloat16',
  vocab_size: 49408,
} as const;
export const CLIP_L: ClipTextConfig = parseClipTextConfig(CLIP_L_RAW, 'black-forest-labs/FLUX.1-dev/text_encoder/config.json');

/** A tiny CLIP text tower for CI cases and tests (legacy eos 2: pooled at the largest id). */
export function tinyClipConfig(over: Partial<ClipTextConfig> = {}): ClipTextConfig {
  const c: ClipTextConfig = {
    vocabSize: 50, hiddenSize: 32, intermediateSize: 64, numHiddenLayers: 2, numAttentionHeads: 4, headDim: 8, maxPositionEmbeddings: 16,
    hiddenAct: 'quick_gelu', layerNormEps: 1e-5, eosTokenId: 2, padTokenId: 1, initializerRange: 0.02, dtype: null, ...over,
  };
  return { ...c, headDim: c.hiddenSize / c.numAttentionHeads };
}
