/**
 * The HF config.json fields of gpt-oss (transformers' GptOssConfig, model_type gpt_oss: openai/gpt-oss-20b and -120b),
 * validated with zod, and the normalised config the gpt-oss modules take. Read: the attention geometry (head_dim is its
 * own field: 64 heads of 64 on a hidden size of 2880), q/k/v/o biases (attention_bias), learned per-head sinks (always),
 * layer_types (sliding_attention / full_attention; HF's default alternates from a sliding layer 0) with sliding_window,
 * YaRN rotary (rope_scaling, or transformers 5's rope_parameters), the experts (num_local_experts, num_experts_per_tok
 * or the original's experts_per_token, intermediate_size per expert, swiglu_limit, transformers 5's swiglu_alpha) and the
 * MXFP4 quantization_config of the released checkpoints. Without rope_scaling / rope_parameters (or with null) the
 * rotary is transformers 5's default: YaRN factor 32 over 4096 original positions, truncate false; rope_type 'default'
 * asks for plain RoPE. Errors name the file and the field.
 */
import { UserError, type DType } from '@fastkernels/core';
import { z } from 'zod';
import { check, configDType, parseWith } from '../../../models/config-parse.js';
import type { YarnRopeScaling } from '../../../tasks/L1/rotary/yarn_rotary_emb.js';

export type { YarnRopeScaling };

export interface GptOssConfig {
  readonly modelType: 'gpt_oss';
  readonly hiddenSize: number;
  /** Each expert's intermediate size (the experts' gate_up_proj is [H, 2 * intermediateSize]). */
  readonly intermediateSize: number;
  readonly numHiddenLayers: number;
  readonly numAttentionHeads: number;
  readonly numKeyValueHeads: number;
  readonly headDim: number;
  readonly vocabSize: number;
  readonly maxPositionEmbeddings: number;
  readonly rmsNormEps: number;
  readonly ropeTheta: number;
  /** YaRN (the released models), or null for plain RoPE. */
  readonly ropeScaling: YarnRopeScaling | null;
  readonly tieWordEmbeddings: boolean;
  /** Bias on q/k/v and o_proj (attention_bias). */
  readonly attentionBias: boolean;
  /** Sliding window per layer (0 = full attention), from layer_types and sliding_window. */
  readonly slidingWindows: readonly number[];
  readonly numLocalExperts: number;
  readonly numExpertsPerTok: number;
  /** The clamp of the experts' SwiGLU (gate <= limit, -limit <= up <= limit). */
  readonly swigluLimit: number;
  /** The SwiGLU's sigmoid gain: glu = gate * sigmoid(alpha * gate) (1.702). */
  readonly swigluAlpha: number;
  /** The experts' weights in the checkpoint: MXFP4 blocks / scales (quantization_config mxfp4) or plain tensors. */
  readonly expertsFormat: 'mxfp4' | 'dense';
  readonly dtype: DType | null;
  readonly initializerRange: number;
}

/** gpt-oss's SwiGLU slope: glu = gate * sigmoid(1.702 gate) (transformers 5's swiglu_alpha default). */
export const GPT_OSS_SWIGLU_ALPHA = 1.702;

const posInt = z.number().int().positive();
const ropeDict = z.looseObject({
  rope_type: z.string().optional(),
  type: z.string().optional(),
  factor: z.number().positive().optional(),
  beta_fast: z.number().positive().nullish(),
  beta_slow: z.number().positive().nullish(),
  original_max_position_embeddings: posInt.nullish(),
  truncate: z.boolean().optional(),
  attention_factor: z.number().positive().nullish(),
  mscale: z.number().nullish(),
  mscale_all_dim: z.number().nullish(),
  rope_theta: z.number().positive().optional(),
});

/** The raw fields (HF names); others pass through untouched. */
export const HfGptOssConfigSchema = z.looseObject({
  model_type: z.literal('gpt_oss'),
  architectures: z.array(z.string()).optional(),
  hidden_size: posInt,
  intermediate_size: posInt,
  num_hidden_layers: posInt,
  num_attention_heads: posInt,
  num_key_value_heads: posInt.nullish(),
  head_dim: posInt.nullish(),
  vocab_size: posInt,
  max_position_embeddings: posInt.optional(),
  rms_norm_eps: z.number().positive().optional(),
  rope_theta: z.number().positive().optional(),
  rope_scaling: ropeDict.nullish(),
  rope_parameters: ropeDict.nullish(),
  sliding_window: z.number().int().nonnegative().nullish(),
  layer_types: z.array(z.string()).nullish(),
  num_local_experts: posInt.optional(),
  num_experts_per_tok: posInt.optional(),
  experts_per_token: posInt.optional(),
  swiglu_limit: z.number().positive().optional(),
  swiglu_alpha: z.number().positive().optional(),
  attention_bias: z.boolean().optional(),
  tie_word_embeddings: z.boolean().optional(),
  hidden_act: z.string().optional(),
  quantization_config: z.looseObject({ quant_method: z.string() }).nullish(),
  torch_dtype: z.string().nullish(),
  dtype: z.string().nullish(),
  initializer_range: z.number().positive().optional(),
});

/** transformers' GptOssConfig defaults (the -120b shape). */
const D = { maxPos: 131072, eps: 1e-5, theta: 150000, window: 128, experts: 128, topK: 4, limit: 7, headDim: 64 };

/** Parse an HF gpt-oss config object (from `file`, named in errors). */
export function parseGptOssConfig(raw: unknown, file = 'config.json'): GptOssConfig {
  if (raw && typeof raw === 'object' && 'model_type' in raw && (raw as { model_type: unknown }).model_type !== 'gpt_oss') {
    throw new UserError(`unsupported model_type '${String((raw as { model_type: unknown }).model_type)}' in ${file}: supported: gpt_oss`, { field: 'model_type' });
  }
  const c = parseWith(HfGptOssConfigSchema, raw, file);
  if (c.hidden_act !== undefined && c.hidden_act !== 'silu') {
    throw new UserError(`unsupported hidden_act '${c.hidden_act}' in ${file}: gpt-oss experts use their clamped SwiGLU (hidden_act silu)`, { field: 'hidden_act', fix: 'set "hidden_act": "silu"' });
  }
  const numKv = c.num_key_value_heads ?? c.num_attention_heads;
  check(c.num_attention_heads % numKv === 0, file, 'num_key_value_heads', `num_attention_heads ${c.num_attention_heads} is not a multiple of num_key_value_heads ${numKv}`);
  const headDim = c.head_dim ?? D.headDim;
  check(headDim % 2 === 0, file, 'head_dim', `head_dim ${headDim} is odd (rotary embedding needs an even head size)`);

  const numExperts = c.num_local_experts ?? D.experts;
  if (c.num_experts_per_tok !== undefined && c.experts_per_token !== undefined && c.num_experts_per_tok !== c.experts_per_token) {
    throw new UserError(`num_experts_per_tok ${c.num_experts_per_tok} and experts_per_token ${c.experts_per_token} disagree in ${file}`, { field: 'num_experts_per_tok', fix: 'give them the same value (or keep only num_experts_per_tok)' });
  }
  const topK = c.num_experts_per_tok ?? c.experts_per_token ?? D.topK;
  check(topK <= numExperts, file, 'num_experts_per_tok', `num_experts_per_tok ${topK} exceeds the ${numExperts} experts (num_local_experts)`);

  const layers = c.num_hidden_layers;
  const window = c.sliding_window ?? D.window;
  const types = c.layer_types ?? Array.from({ length: layers }, (_, i) => (i % 2 === 0 ? 'sliding_attention' : 'full_attention'));
  check(types.length === layers, file, 'layer_types', `layer_types has ${types.length} entries for num_hidden_layers ${layers}`);
  const slidingWindows = types.map((t, i) => {
    if (t === 'full_attention') return 0;
    if (t === 'sliding_attention') {
      if (!window) throw new UserError(`layer_types[${i}] is sliding_attention but sliding_window is ${String(c.sliding_window)} in ${file}`, { field: 'sliding_window', fix: 'set "sliding_window": 128 (the released models)' });
      return window;
    }
    throw new UserError(`unsupported layer_types[${i}] '${t}' in ${file}: supported: sliding_attention, full_attention`, { field: `layer_types.${i}` });
  });

  const maxPos = c.max_position_embeddings ?? D.maxPos;
  const ropeField = c.rope_parameters ? 'rope_parameters' : 'rope_scaling';
  const rope = c.rope_parameters ?? c.rope_scaling ?? null;
  const ropeTheta = c.rope_parameters?.rope_theta ?? c.rope_theta ?? D.theta;
  // transformers 5's GptOssConfig: no rope_parameters means its YaRN (the released models' values)
  const ropeScaling = rope ? parseYarn(rope, ropeField, file, maxPos) : GPT_OSS_YARN;

  let expertsFormat: GptOssConfig['expertsFormat'] = 'dense';
  if (c.quantization_config) {
    const m = c.quantization_config.quant_method;
    if (m !== 'mxfp4') throw new UserError(`unsupported quantization_config.quant_method '${m}' in ${file}: supported: mxfp4`, { field: 'quantization_config.quant_method', fix: 'use the released MXFP4 checkpoint, or a dequantized (bf16) one without quantization_config' });
    expertsFormat = 'mxfp4';
  }
  return {
    modelType: 'gpt_oss',
    hiddenSize: c.hidden_size,
    intermediateSize: c.intermediate_size,
    numHiddenLayers: layers,
    numAttentionHeads: c.num_attention_heads,
    numKeyValueHeads: numKv,
    headDim,
    vocabSize: c.vocab_size,
    maxPositionEmbeddings: maxPos,
    rmsNormEps: c.rms_norm_eps ?? D.eps,
    ropeTheta,
    ropeScaling,
    tieWordEmbeddings: c.tie_word_embeddings ?? false,
    attentionBias: c.attention_bias ?? true,
    slidingWindows,
    numLocalExperts: numExperts,
    numExpertsPerTok: topK,
    swigluLimit: c.swiglu_limit ?? D.limit,
    swigluAlpha: c.swiglu_alpha ?? GPT_OSS_SWIGLU_ALPHA,
    expertsFormat,
    dtype: configDType(c, file),
    initializerRange: c.initializer_range ?? 0.02,
  };
}

function parseYarn(r: z.infer<typeof ropeDict>, field: string, file: string, maxPos: number): YarnRopeScaling | null {
  const type = r.rope_type ?? r.type ?? 'default';
  if (type === 'default') return null;
  if (type !== 'yarn') throw new UserError(`unsupported ${field}.rope_type '${type}' in ${file}: supported for gpt_oss: yarn, default`, { field: `${field}.rope_type` });
  if (r.factor === undefined) throw new UserError(`${field}.factor is required for rope_type 'yarn' in ${file}`, { field: `${field}.factor` });
  if (r.mscale || r.mscale_all_dim) throw new UserError(`${field}.mscale / mscale_all_dim are not supported for gpt_oss in ${file}`, { field: `${field}.mscale`, fix: 'drop them (gpt-oss uses 0.1 ln(factor) + 1)' });
  return {
    ropeType: 'yarn',
    factor: r.factor,
    // HF: `beta_fast or 32`, `beta_slow or 1`, original_max_position_embeddings or max_position_embeddings, truncate default true
    betaFast: r.beta_fast ?? 32,
    betaSlow: r.beta_slow ?? 1,
    originalMaxPositionEmbeddings: r.original_max_position_embeddings ?? maxPos,
    truncate: r.truncate ?? true,
    attentionFactor: r.attention_factor ?? null,
  };
}

const GPT_OSS_YARN: YarnRopeScaling = { ropeType: 'yarn', factor: 32, betaFast: 32, betaSlow: 1, originalMaxPositionEmbeddings: 4096, truncate: false, attentionFactor: null };
const alternating = (layers: number, w: number) => Array.from({ length: layers }, (_, i) => (i % 2 === 0 ? w : 0));

/** openai/gpt-oss-20b (its published config.json): 24 layers, 32 experts top-4, MXFP4 experts. */
export const GPT_OSS_20B_CONFIG: GptOssConfig = {
  modelType: 'gpt_oss',
  hiddenSize: 2880,
  intermediateSize: 2880,
  numHiddenLayers: 24,
  numAttentionHeads: 64,
  numKeyValueHeads: 8,
  headDim: 64,
  vocabSize: 201088,
  maxPositionEmbeddings: 131072,
  rmsNormEps: 1e-5,
  ropeTheta: 150000,
  ropeScaling: GPT_OSS_YARN,
  tieWordEmbeddings: false,
  attentionBias: true,
  slidingWindows: alternating(24, 128),
  numLocalExperts: 32,
  numExpertsPerTok: 4,
  swigluLimit: 7,
  swigluAlpha: GPT_OSS_SWIGLU_ALPHA,
  expertsFormat: 'mxfp4',
  dtype: 'bf16',
  initializerRange: 0.02,
};

/** openai/gpt-oss-120b: the -20b widths with 36 layers and 128 experts. */
export const GPT_OSS_120B_CONFIG: GptOssConfig = { ...GPT_OSS_20B_CONFIG, numHiddenLayers: 36, slidingWindows: alternating(36, 128), numLocalExperts: 128 };

/**
 * A tiny gpt-oss for CI cases: 2 layers (sliding 8, full), hidden 64, 4 heads of 16 over 2 kv heads (q width 64 != 
 * hidden is exercised by headDim), 8 experts top-2 of intermediate 32, YaRN factor 4 over 64 original positions.
 */
export function tinyGptOssConfig(over: Partial<GptOssConfig> = {}): GptOssConfig {
  const layers = over.numHiddenLayers ?? 2;
  return {
    ...GPT_OSS_20B_CONFIG,
    hiddenSize: 64,
    intermediateSize: 32,
    numHiddenLayers: layers,
    numAttentionHeads: 4,
    numKeyValueHeads: 2,
    headDim: 16,
    vocabSize: 256,
    maxPositionEmbeddings: 256,
    ropeTheta: 10000,
    ropeScaling: { ...GPT_OSS_YARN, factor: 4, originalMaxPositionEmbeddings: 64 },
    slidingWindows: alternating(layers, 8),
    numLocalExperts: 8,
    numExpertsPerTok: 2,
    expertsFormat: 'dense',
    dtype: null,
    initializerRange: 0.1,
    ...over,
  };
}
