/**
 * zod over the HF config.json fields a BERT-style encoder reads (BertConfig / XLMRobertaConfig): BGE-M3 is
 * XLMRobertaModel (model_type xlm-roberta), ColBERTv2 is BertModel (model_type bert). Defaults are HF's; the
 * model_type decides BERT's (pad 0, eps 1e-12, arange positions) or RoBERTa's (pad 1, positions from padding_idx + 1).
 */
import { UserError, type DType } from '@fastkernels/core';
import { configDType } from '../../models/config-parse.js';
import { z } from 'zod';

export const ENCODER_MODEL_TYPES = ['xlm-roberta', 'roberta', 'bert'] as const;
export type EncoderModelType = (typeof ENCODER_MODEL_TYPES)[number];

export interface EncoderConfig {
  readonly modelType: EncoderModelType;
  readonly vocabSize: number;
  readonly hiddenSize: number;
  readonly numHiddenLayers: number;
  readonly numAttentionHeads: number;
  readonly headDim: number;
  readonly intermediateSize: number;
  /** 'gelu' (erf) or 'gelu_new' / 'gelu_pytorch_tanh' (tanh approximation). */
  readonly hiddenAct: 'gelu' | 'gelu_tanh';
  readonly maxPositionEmbeddings: number;
  readonly typeVocabSize: number;
  readonly layerNormEps: number;
  readonly padTokenId: number;
  /** RoBERTa numbers positions from padding_idx + 1 over non-pad tokens (HF create_position_ids_from_input_ids). */
  readonly robertaPositions: boolean;
  readonly initializerRange: number;
  readonly dtype: DType | null;
  /** ColBERT's projection size (HF_ColBERT config `dim`, default 128); unused by other encoders. */
  readonly colbertDim: number;
}

const HfEncoderSchema = z.looseObject({
  model_type: z.string().nullish(),
  vocab_size: z.number().int().positive(),
  hidden_size: z.number().int().positive().default(768),
  num_hidden_layers: z.number().int().positive().default(12),
  num_attention_heads: z.number().int().positive().default(12),
  intermediate_size: z.number().int().positive().default(3072),
  hidden_act: z.string().default('gelu'),
  max_position_embeddings: z.number().int().positive().default(512),
  type_vocab_size: z.number().int().positive().default(2),
  layer_norm_eps: z.number().positive().nullish(),
  pad_token_id: z.number().int().nonnegative().nullish(),
  position_embedding_type: z.string().nullish(),
  initializer_range: z.number().positive().default(0.02),
  dim: z.number().int().positive().default(128),
  torch_dtype: z.string().nullish(),
  dtype: z.string().nullish(),
});

const ACTS: Record<string, EncoderConfig['hiddenAct']> = { gelu: 'gelu', gelu_new: 'gelu_tanh', gelu_pytorch_tanh: 'gelu_tanh' };

/** Parse an encoder config.json; a UserError naming the file and the field when one is wrong. */
export function parseEncoderConfig(raw: unknown, file = 'config.json'): EncoderConfig {
  const parsed = HfEncoderSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const field = issue.path.join('.') || '(root)';
    throw new UserError(`invalid field ${field} in ${file}: ${issue.message}`, { field });
  }
  const c = parsed.data;
  const mt = (c.model_type ?? 'bert') as EncoderModelType;
  if (!ENCODER_MODEL_TYPES.includes(mt)) throw new UserError(`unsupported model_type '${mt}' in ${file}: supported: ${ENCODER_MODEL_TYPES.join(', ')}`, { field: 'model_type' });
  const act = ACTS[c.hidden_act];
  if (!act) throw new UserError(`unsupported hidden_act '${c.hidden_act}' in ${file}: supported: ${Object.keys(ACTS).join(', ')}`, { field: 'hidden_act' });
  if (c.position_embedding_type && c.position_embedding_type !== 'absolute') {
    throw new UserError(`unsupported position_embedding_type '${c.position_embedding_type}' in ${file}: supported: absolute`, { field: 'position_embedding_type' });
  }
  if (c.hidden_size % c.num_attention_heads !== 0) {
    throw new UserError(`hidden_size ${c.hidden_size} is not a multiple of num_attention_heads ${c.num_attention_heads} in ${file}`, { field: 'num_attention_heads' });
  }
  const roberta = mt !== 'bert';
  const padTokenId = c.pad_token_id ?? (roberta ? 1 : 0);
  if (roberta && padTokenId + 1 >= c.max_position_embeddings) {
    throw new UserError(`max_position_embeddings ${c.max_position_embeddings} leaves no position after padding_idx ${padTokenId} in ${file}`, { field: 'max_position_embeddings' });
  }
  const dtype = configDType(c, file);
  return {
    modelType: mt,
    vocabSize: c.vocab_size,
    hiddenSize: c.hidden_size,
    numHiddenLayers: c.num_hidden_layers,
    numAttentionHeads: c.num_attention_heads,
    headDim: c.hidden_size / c.num_attention_heads,
    intermediateSize: c.intermediate_size,
    hiddenAct: act,
    maxPositionEmbeddings: c.max_position_embeddings,
    typeVocabSize: c.type_vocab_size,
    layerNormEps: c.layer_norm_eps ?? (roberta ? 1e-5 : 1e-12),
    padTokenId,
    robertaPositions: roberta,
    initializerRange: c.initializer_range,
    dtype,
    colbertDim: c.dim,
  };
}

/** BAAI/bge-m3's config.json (XLM-RoBERTa large, 8192-token context). */
export const BGE_M3_RAW = {
  architectures: ['XLMRobertaModel'],
  model_type: 'xlm-roberta',
  vocab_size: 250002,
  hidden_size: 1024,
  num_hidden_layers: 24,
  num_attention_heads: 16,
  intermediate_size: 4096,
  hidden_act: 'gelu',
  max_position_embeddings: 8194,
  type_vocab_size: 1,
  layer_norm_eps: 1e-5,
  pad_token_id: 1,
  bos_token_id: 0,
  eos_token_id: 2,
  position_embedding_type: 'absolute',
  torch_dtype: 'float32',
} as const;
export const BGE_M3: EncoderConfig = parseEncoderConfig(BGE_M3_RAW, 'BAAI/bge-m3/config.json');

/** colbert-ir/colbertv2.0's config.json (BERT base, 128-dim ColBERT projection). */
export const COLBERTV2_RAW = {
  architectures: ['HF_ColBERT'],
  model_type: 'bert',
  vocab_size: 30522,
  hidden_size: 768,
  num_hidden_layers: 12,
  num_attention_heads: 12,
  intermediate_size: 3072,
  hidden_act: 'gelu',
  max_position_embeddings: 512,
  type_vocab_size: 2,
  layer_norm_eps: 1e-12,
  pad_token_id: 0,
  torch_dtype: 'float32',
} as const;
export const COLBERTV2: EncoderConfig = parseEncoderConfig(COLBERTV2_RAW, 'colbert-ir/colbertv2.0/config.json');

/** A tiny encoder for CI cases and tests (xlm-roberta by default). */
export function tinyEncoderConfig(over: Partial<EncoderConfig> = {}): EncoderConfig {
  const base: EncoderConfig = {
    modelType: 'xlm-roberta', vocabSize: 50, hiddenSize: 32, numHiddenLayers: 2, numAttentionHeads: 4, headDim: 8,
    intermediateSize: 64, hiddenAct: 'gelu', maxPositionEmbeddings: 40, typeVocabSize: 1, layerNormEps: 1e-5, padTokenId: 1,
    robertaPositions: true, initializerRange: 0.02, dtype: null, colbertDim: 16,
  };
  const c = { ...base, ...over };
  return { ...c, headDim: c.hiddenSize / c.numAttentionHeads };
}
