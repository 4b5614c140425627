/**
 * zod over the config.json fields of HF's Qwen3NextConfig (transformers/models/qwen3_next/configuration_qwen3_next.py)
 * that Qwen3NextForCausalLM reads, with HF's defaults. The layer pattern is layer_types, or (older files)
 * full_attention_interval: layer i is full attention when (i + 1) % interval == 0. A layer's MLP is the sparse MoE block
 * unless it is in mlp_only_layers or off decoder_sparse_step (then a dense MLP of intermediate_size). Options the family
 * does not implement (another hidden_act, rope scaling, attention bias) are a UserError naming the field.
 */
import { UserError, type DType } from '@fastkernels/core';
import { z } from 'zod';
import { check, configDType, parseWith } from '../../models/config-parse.js';

export type Qwen3NextLayerType = 'linear_attention' | 'full_attention';

export interface Qwen3NextConfig {
  readonly vocabSize: number;
  readonly hiddenSize: number;
  /** The dense MLP's (mlp_only_layers, or off decoder_sparse_step). */
  readonly intermediateSize: number;
  readonly numHiddenLayers: number;
  readonly layerTypes: readonly Qwen3NextLayerType[];
  /** Per layer: the sparse MoE block (true) or the dense MLP. */
  readonly sparseLayers: readonly boolean[];
  // gated attention (full_attention layers)
  readonly numAttentionHeads: number;
  readonly numKeyValueHeads: number;
  readonly headDim: number;
  readonly partialRotaryFactor: number;
  /** head_dim * partial_rotary_factor: the leading dims of each q/k head that rotate (neox style). */
  readonly rotaryDim: number;
  readonly ropeTheta: number;
  readonly maxPositionEmbeddings: number;
  // gated DeltaNet (linear_attention layers)
  readonly linearNumKeyHeads: number;
  readonly linearNumValueHeads: number;
  readonly linearKeyHeadDim: number;
  readonly linearValueHeadDim: number;
  readonly linearConvKernelDim: number;
  /** linear_num_key_heads * linear_key_head_dim, linear_num_value_heads * linear_value_head_dim. */
  readonly linearKeyDim: number;
  readonly linearValueDim: number;
  /** The short convolution's channels: q, k and v together (2 * key dim + value dim). */
  readonly convDim: number;
  // MoE
  readonly numExperts: number;
  readonly numExpertsPerTok: number;
  readonly moeIntermediateSize: number;
  readonly sharedExpertIntermediateSize: number;
  readonly normTopkProb: boolean;
  readonly decoderSparseStep: number;
  readonly mlpOnlyLayers: readonly number[];
  readonly rmsNormEps: number;
  readonly tieWordEmbeddings: boolean;
  readonly initializerRange: number;
  readonly bosTokenId: number | null;
  readonly eosTokenId: number | readonly number[] | null;
  readonly dtype: DType | null;
}

const posInt = z.number().int().positive();
const Qwen3NextSchema = z.looseObject({
  vocab_size: posInt.default(151936),
  hidden_size: posInt.default(2048),
  intermediate_size: posInt.default(5632),
  num_hidden_layers: posInt.default(48),
  num_attention_heads: posInt.default(16),
  num_key_value_heads: posInt.default(2),
  hidden_act: z.string().default('silu'),
  max_position_embeddings: posInt.default(32768),
  initializer_range: z.number().positive().default(0.02),
  rms_norm_eps: z.number().positive().default(1e-6),
  tie_word_embeddings: z.boolean().default(false),
  rope_theta: z.number().positive().optional(),
  rope_scaling: z.unknown().nullish(),
  rope_parameters: z.looseObject({ rope_theta: z.number().positive().optional(), rope_type: z.string().optional(), partial_rotary_factor: z.number().optional() }).nullish(),
  partial_rotary_factor: z.number().gt(0).lte(1).optional(),
  attention_bias: z.boolean().default(false),
  head_dim: posInt.default(256),
  linear_conv_kernel_dim: posInt.default(4),
  linear_key_head_dim: posInt.default(128),
  linear_value_head_dim: posInt.default(128),
  linear_num_key_heads: posInt.default(16),
  linear_num_value_heads: posInt.default(32),
  decoder_sparse_step: posInt.default(1),
  moe_intermediate_size: posInt.default(512),
  shared_expert_intermediate_size: posInt.default(512),
  num_experts_per_tok: posInt.default(10),
  num_experts: z.number().int().nonnegative().default(512),
  norm_topk_prob: z.boolean().default(true),
  mlp_only_layers: z.array(z.number().int().nonnegative()).nullish(),
  layer_types: z.array(z.enum(['linear_attention', 'full_attention'])).nullish(),
  full_attention_interval: posInt.optional(),
  bos_token_id: z.number().int().nonnegative().nullish(),
  eos_token_id: z.union([z.number().int().nonnegative(), z.array(z.number().int().nonnegative())]).nullish(),
  torch_dtype: z.string().nullish(),
  dtype: z.string().nullish(),
});

function unsupported(file: string, field: string, got: unknown, fix: string): never {
  throw new UserError(`unsupported ${field} ${JSON.stringify(got)} in ${file}: the Qwen3-Next family does not implement it yet`, { field, fix });
}

/** Parse a Qwen3-Next config.json; a UserError naming the file and the field when one is wrong or not supported. */
export function parseQwen3NextConfig(raw: unknown, file = 'config.json'): Qwen3NextConfig {
  const c = parseWith(Qwen3NextSchema, raw, file);
  const L = c.num_hidden_layers;
  if (c.hidden_act !== 'silu') unsupported(file, 'hidden_act', c.hidden_act, 'use "silu"');
  if (c.attention_bias) unsupported(file, 'attention_bias', true, 'set "attention_bias": false (the released models have none)');
  const ropeType = c.rope_parameters?.rope_type;
  if (c.rope_scaling || (ropeType && ropeType !== 'default')) unsupported(file, c.rope_scaling ? 'rope_scaling' : 'rope_parameters.rope_type', c.rope_scaling ?? ropeType, 'drop the rope scaling (the released models use plain rotary)');
  let layerTypes: Qwen3NextLayerType[];
  if (c.layer_types) {
    check(c.layer_types.length === L, file, 'layer_types', `layer_types lists ${c.layer_types.length} layers, num_hidden_layers is ${L}`);
    layerTypes = [...c.layer_types];
  } else {
    const every = c.full_attention_interval ?? 4;
    layerTypes = Array.from({ length: L }, (_, i) => ((i + 1) % every === 0 ? 'full_attention' : 'linear_attention'));
  }
  check(c.num_attention_heads % c.num_key_value_heads === 0, file, 'num_key_value_heads', `num_attention_heads ${c.num_attention_heads} is not a multiple of num_key_value_heads ${c.num_key_value_heads}`);
  check(c.linear_num_value_heads % c.linear_num_key_heads === 0, file, 'linear_num_value_heads', `linear_num_value_heads ${c.linear_num_value_heads} is not a multiple of linear_num_key_heads ${c.linear_num_key_heads}`);
  const partialRotaryFactor = c.partial_rotary_factor ?? c.rope_parameters?.partial_rotary_factor ?? 0.25;
  const rotaryDim = Math.trunc(c.head_dim * partialRotaryFactor);
  check(rotaryDim > 0 && rotaryDim % 2 === 0, file, 'partial_rotary_factor', `head_dim ${c.head_dim} * partial_rotary_factor ${partialRotaryFactor} = ${rotaryDim} rotary dims: must be even and positive`);
  check(c.num_experts === 0 || c.num_experts_per_tok <= c.num_experts, file, 'num_experts_per_tok', `num_experts_per_tok ${c.num_experts_per_tok} exceeds the ${c.num_experts} experts`);
  const mlpOnly = c.mlp_only_layers ?? [];
  for (const l of mlpOnly) check(l < L, file, 'mlp_only_layers', `mlp_only_layers names layer ${l} of ${L}`);
  const sparseLayers = Array.from({ length: L }, (_, l) => !mlpOnly.includes(l) && c.num_experts > 0 && (l + 1) % c.decoder_sparse_step === 0);
  const linearKeyDim = c.linear_num_key_heads * c.linear_key_head_dim;
  const linearValueDim = c.linear_num_value_heads * c.linear_value_head_dim;
  return {
    vocabSize: c.vocab_size,
    hiddenSize: c.hidden_size,
    intermediateSize: c.intermediate_size,
    numHiddenLayers: L,
    layerTypes,
    sparseLayers,
    numAttentionHeads: c.num_attention_heads,
    numKeyValueHeads: c.num_key_value_heads,
    headDim: c.head_dim,
    partialRotaryFactor,
    rotaryDim,
    ropeTheta: c.rope_theta ?? c.rope_parameters?.rope_theta ?? 10000,
    maxPositionEmbeddings: c.max_position_embeddings,
    linearNumKeyHeads: c.linear_num_key_heads,
    linearNumValueHeads: c.linear_num_value_heads,
    linearKeyHeadDim: c.linear_key_head_dim,
    linearValueHeadDim: c.linear_value_head_dim,
    linearConvKernelDim: c.linear_conv_kernel_dim,
    linearKeyDim,
    linearValueDim,
    convDim: 2 * linearKeyDim + linearValueDim,
    numExperts: c.num_experts,
    numExpertsPerTok: c.num_experts_per_tok,
    moeIntermediateSize: c.moe_intermediate_size,
    sharedExpertIntermediateSize: c.shared_expert_intermediate_size,
    normTopkProb: c.norm_topk_prob,
    decoderSparseStep: c.decoder_sparse_step,
    mlpOnlyLayers: mlpOnly,
    rmsNormEps: c.rms_norm_eps,
    tieWordEmbeddings: c.tie_word_embeddings,
    initializerRange: c.initializer_range,
    bosTokenId: c.bos_token_id ?? null,
    eosTokenId: c.eos_token_id ?? null,
    dtype: configDType(c, file),
  };
}

/**
 * Qwen/Qwen3-Next-80B-A3B-Instruct's config.json (the fields the family reads, as published): 48 layers in the pattern
 * 3 x gated DeltaNet then 1 x gated attention (full_attention_interval 4), hidden 2048; gated attention 16 query / 2 kv
 * heads of 256 with a quarter of each head rotating (theta 1e7); gated DeltaNet 16 key heads and 32 value heads of 128,
 * conv kernel 4; 512 experts, top 10, expert MLP 512, one shared expert of 512, every layer sparse; 262144 positions.
 * The file itself was not reachable from here. Checked against transformers' Qwen3NextConfig defaults (documented as
 * this checkpoint's: the head counts and dims, 512 experts top 10, moe / shared 512), the Qwen team's FP8 release notes
 * (48 layers in 12 blocks of 3 DeltaNet + 1 attention, hidden 2048, 16 Q / 2 KV heads of 256, 16 QK / 32 V linear heads
 * of 128, 262144 positions) and published derivatives of the file (Qwen3-Coder-Next configs: intermediate_size 5120,
 * the same fields otherwise but the expert count and rope_theta). rope_theta 1e7 is the published file's value as
 * recalled, not re-checked here.
 */
export const QWEN3_NEXT_80B_RAW = {
  architectures: ['Qwen3NextForCausalLM'],
  model_type: 'qwen3_next',
  attention_bias: false,
  attention_dropout: 0.0,
  bos_token_id: 151643,
  decoder_sparse_step: 1,
  eos_token_id: 151645,
  full_attention_interval: 4,
  head_dim: 256,
  hidden_act: 'silu',
  hidden_size: 2048,
  initializer_range: 0.02,
  intermediate_size: 5120,
  linear_conv_kernel_dim: 4,
  linear_key_head_dim: 128,
  linear_num_key_heads: 16,
  linear_num_value_heads: 32,
  linear_value_head_dim: 128,
  max_position_embeddings: 262144,
  mlp_only_layers: [],
  moe_intermediate_size: 512,
  norm_topk_prob: true,
  num_attention_heads: 16,
  num_experts: 512,
  num_experts_per_tok: 10,
  num_hidden_layers: 48,
  num_key_value_heads: 2,
  output_router_logits: false,
  partial_rotary_factor: 0.25,
  rms_norm_eps: 1e-6,
  rope_scaling: null,
  rope_theta: 10000000,
  router_aux_loss_coef: 0.001,
  shared_expert_intermediate_size: 512,
  tie_word_embeddings: false,
  torch_dtype: 'bfloat16',
  use_cache: true,
  use_sliding_window: false,
  vocab_size: 151936,
} as const;
export const QWEN3_NEXT_80B: Qwen3NextConfig = parseQwen3NextConfig(QWEN3_NEXT_80B_RAW, 'Qwen/Qwen3-Next-80B-A3B-Instruct/config.json');

/**
 * A tiny Qwen3-Next for CI cases and tests: hidden 32, 4 layers (3 gated DeltaNet, then gated attention), DeltaNet 2 key
 * heads / 4 value heads of 8, conv 4; attention 4 / 2 heads of 8, half of each rotating; 8 experts top 2 (16 wide) and
 * a shared expert of 24; layer 2's MLP dense (48); vocab 64.
 */
export const TINY_QWEN3_NEXT_RAW = {
  architectures: ['Qwen3NextForCausalLM'],
  model_type: 'qwen3_next',
  vocab_size: 64,
  hidden_size: 32,
  intermediate_size: 48,
  num_hidden_layers: 4,
  layer_types: ['linear_attention', 'linear_attention', 'linear_attention', 'full_attention'],
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 8,
  partial_rotary_factor: 0.5,
  rope_theta: 10000,
  linear_num_key_heads: 2,
  linear_num_value_heads: 4,
  linear_key_head_dim: 8,
  linear_value_head_dim: 8,
  linear_conv_kernel_dim: 4,
  num_experts: 8,
  num_experts_per_tok: 2,
  moe_intermediate_size: 16,
  shared_expert_intermediate_size: 24,
  norm_topk_prob: true,
  decoder_sparse_step: 1,
  mlp_only_layers: [2],
  rms_norm_eps: 1e-6,
  max_position_embeddings: 512,
  tie_word_embeddings: false,
  hidden_act: 'silu',
  initializer_range: 0.02,
  torch_dtype: 'float32',
} as const;

export function tinyQwen3NextConfig(over: Record<string, unknown> = {}): Qwen3NextConfig {
  return parseQwen3NextConfig({ ...TINY_QWEN3_NEXT_RAW, ...over }, 'tinyQwen3NextConfig');
}
