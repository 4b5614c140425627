/**
 * zod over HF's T5Config config.json fields the encoder reads (FLUX.1-dev's text_encoder_2: google/t5-v1_1-xxl's
 * encoder, T5EncoderModel). feed_forward_proj 'gated-gelu' (v1.1) -> T5DenseGatedActDense with gelu_new (tanh);
 * 'relu' (original T5) -> T5DenseActDense.
 */
import type { DType } from '@fastkernels/core';
import { z } from 'zod';
import { check, configDType, parseWith } from '../../models/config-parse.js';

export interface T5Config {
  readonly vocabSize: number;
  readonly dModel: number;
  readonly dKv: number;
  readonly dFf: number;
  readonly numLayers: number;
  readonly numHeads: number;
  readonly relativeAttentionNumBuckets: number;
  readonly relativeAttentionMaxDistance: number;
  readonly layerNormEpsilon: number;
  readonly isGatedAct: boolean;
  /** The dense activation: gelu_new (tanh GELU), gelu (erf) or relu. */
  readonly denseActFn: 'gelu_tanh' | 'gelu' | 'relu';
  readonly padTokenId: number;
  readonly initializerFactor: number;
  readonly dtype: DType | null;
}

const T5Schema = z.looseObject({
  model_type: z.string().nullish(),
  vocab_size: z.number().int().positive().default(32128),
  d_model: z.number().int().positive().default(512),
  d_kv: z.number().int().positive().default(64),
  d_ff: z.number().int().positive().default(2048),
  num_layers: z.number().int().positive().default(6),
  num_heads: z.number().int().positive().default(8),
  relative_attention_num_buckets: z.number().int().positive().default(32),
  relative_attention_max_distance: z.number().int().positive().default(128),
  layer_norm_epsilon: z.number().positive().default(1e-6),
  feed_forward_proj: z.string().default('relu'),
  pad_token_id: z.number().int().nonnegative().default(0),
  initializer_factor: z.number().positive().default(1),
  torch_dtype: z.string().nullish(),
  dtype: z.string().nullish(),
});

const ACTS: Record<string, T5Config['denseActFn']> = { relu: 'relu', gelu: 'gelu', gelu_new: 'gelu_tanh', gelu_pytorch_tanh: 'gelu_tanh' };

/** Parse a T5 config.json; a UserError naming the file and the field when one is wrong. */
export function parseT5Config(raw: unknown, file = 'config.json'): T5Config {
  const c = parseWith(T5Schema, raw, file);
  check(!c.model_type || c.model_type === 't5', file, 'model_type', `model_type '${c.model_type}' is not t5`);
  // HF: 'gated-gelu' means gated + gelu_new; otherwise '[gated-]{act}'
  const parts = c.feed_forward_proj.split('-');
  const gated = parts[0] === 'gated';
  check(parts.length === (gated ? 2 : 1), file, 'feed_forward_proj', `feed_forward_proj '${c.feed_forward_proj}' is not '{act}' or 'gated-{act}'`);
  const actName = c.feed_forward_proj === 'gated-gelu' ? 'gelu_new' : parts[parts.length - 1]!;
  const act = ACTS[actName];
  check(act !== undefined, file, 'feed_forward_proj', `unsupported activation '${actName}' of feed_forward_proj (supported: ${Object.keys(ACTS).join(', ')})`);
  return {
    vocabSize: c.vocab_size,
    dModel: c.d_model,
    dKv: c.d_kv,
    dFf: c.d_ff,
    numLayers: c.num_layers,
    numHeads: c.num_heads,
    relativeAttentionNumBuckets: c.relative_attention_num_buckets,
    relativeAttentionMaxDistance: c.relative_attention_max_distance,
    layerNormEpsilon: c.layer_norm_epsilon,
    isGatedAct: gated,
    denseActFn: act!,
    padTokenId: c.pad_token_id,
    initializerFactor: c.initializer_factor,
    dtype: configDType(c, file),
  };
}

/** FLUX.1-dev's text_encoder_2/config.json (T5 v1.1 XXL encoder). */
export const T5_XXL_RAW = {
  architectures: ['T5EncoderModel'],
  model_type: 't5',
  d_ff: 10240,
  d_kv: 64,
  d_model: 4096,
  dense_act_fn: 'gelu_new',
  feed_forward_proj: 'gated-gelu',
  is_gated_act: true,
  layer_norm_epsilon: 1e-6,
  num_heads: 64,
  num_layers: 24,
  pad_token_id: 0,
  relative_attention_max_distance: 128,
  relative_attention_num_buckets: 32,
  tie_word_embeddings: false,
  torch_dtype: 'bfloat16',
  vocab_size: 32128,
} as const;
export const T5_XXL: T5Config = parseT5Config(T5_XXL_RAW, 'black-forest-labs/FLUX.1-dev/text_encoder_2/config.json');

/** A tiny gated T5 for CI cases and tests. */
export function tinyT5Config(over: Partial<T5Config> = {}): T5Config {
  return {
    vocabSize: 40, dModel: 32, dKv: 8, dFf: 48, numLayers: 2, numHeads: 4, relativeAttentionNumBuckets: 8, relativeAttentionMaxDistance: 16,
    layerNormEpsilon: 1e-6, isGatedAct: true, denseActFn: 'gelu_tanh', padTokenId: 0, initializerFactor: 1, dtype: null, ...over,
  };
}
