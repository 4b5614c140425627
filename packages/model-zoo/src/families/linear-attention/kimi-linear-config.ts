/**
 * zod over the config.json fields of Kimi-Linear's KimiLinearConfig (configuration_kimi.py, shipped as remote code in
 * moonshotai/Kimi-Linear-48B-A3B-Instruct) that KimiLinearForCausalLM reads, with its defaults. The layer pattern is
 * linear_attn_config: layer i (0-based) is KDA when i + 1 is in kda_layers (1-based, as the remote code's is_kda_layer
 * reads it), otherwise MLA. A layer's feed-forward is the sparse MoE block when num_experts is set, i >=
 * first_k_dense_replace and i % moe_layer_freq == 0; otherwise a dense SwiGLU MLP of intermediate_size.
 *
 * What the released model fixes and the family therefore requires (a UserError naming the field otherwise): the MLA
 * layers use NoPE (mla_use_nope true: no rotary at all; the remote code asserts it), no query LoRA (q_lora_rank null;
 * asserted too), silu, sigmoid or softmax router scores.
 */
import { UserError, type DType } from '@fastkernels/core';
import { z } from 'zod';
import { check, configDType, parseWith } from '../../models/config-parse.js';

export type KimiLayerType = 'kda' | 'mla';

export interface KimiLinearConfig {
  readonly vocabSize: number;
  readonly hiddenSize: number;
  /** The dense MLP's (the first first_k_dense_replace layers, or off moe_layer_freq). */
  readonly intermediateSize: number;
  readonly numHiddenLayers: number;
  readonly layerTypes: readonly KimiLayerType[];
  /** Per layer: the sparse MoE block (true) or the dense MLP. */
  readonly sparseLayers: readonly boolean[];
  // MLA (full-attention layers)
  readonly numAttentionHeads: number;
  readonly numKeyValueHeads: number;
  readonly kvLoraRank: number;
  readonly qkNopeHeadDim: number;
  readonly qkRopeHeadDim: number;
  readonly vHeadDim: number;
  /** qk_nope_head_dim + qk_rope_head_dim: the width of a query / key head. */
  readonly qHeadDim: number;
  readonly maxPositionEmbeddings: number;
  // KDA (linear_attn_config)
  readonly kdaNumHeads: number;
  readonly kdaHeadDim: number;
  readonly kdaConvKernelSize: number;
  /** num_heads * head_dim: the width of q, k, v (each has its own short conv of that many channels) and of the gates. */
  readonly kdaProjSize: number;
  // MoE
  readonly numExperts: number;
  readonly numExpertsPerToken: number;
  readonly moeIntermediateSize: number;
  readonly numSharedExperts: number;
  readonly moeRenormalize: boolean;
  readonly moeRouterActivationFunc: 'sigmoid' | 'softmax';
  readonly routedScalingFactor: number;
  readonly numExpertGroup: number;
  readonly topkGroup: number;
  readonly firstKDenseReplace: number;
  readonly moeLayerFreq: number;
  readonly rmsNormEps: number;
  readonly tieWordEmbeddings: boolean;
  readonly initializerRange: number;
  readonly bosTokenId: number | null;
  readonly eosTokenId: number | readonly number[] | null;
  readonly dtype: DType | null;
}

const posInt = z.number().int().positive();
const layerList = z.array(z.number().int().positive());
const KimiSchema = z.looseObject({
  vocab_size: posInt.default(163840),
  hidden_size: posInt.default(4096),
  intermediate_size: posInt.default(11008),
  num_hidden_layers: posInt.default(32),
  num_attention_heads: posInt.default(32),
  num_key_value_heads: posInt.nullish(),
  hidden_act: z.string().default('silu'),
  initializer_range: z.number().positive().default(0.02),
  rms_norm_eps: z.number().positive().default(1e-6),
  tie_word_embeddings: z.boolean().default(false),
  rope_theta: z.number().positive().optional(),
  rope_scaling: z.unknown().nullish(),
  max_position_embeddings: posInt.optional(),
  model_max_length: posInt.optional(),
  moe_intermediate_size: posInt.nullish(),
  moe_renormalize: z.boolean().default(true),
  moe_router_activation_func: z.enum(['sigmoid', 'softmax']).default('sigmoid'),
  num_experts: z.number().int().nonnegative().nullish(),
  num_experts_per_token: posInt.nullish(),
  num_shared_experts: z.number().int().nonnegative().nullish(),
  routed_scaling_factor: z.number().positive().default(1),
  first_k_dense_replace: z.number().int().nonnegative().default(0),
  moe_layer_freq: posInt.default(1),
  use_grouped_topk: z.boolean().default(true),
  num_expert_group: posInt.default(1),
  topk_group: posInt.default(1),
  q_lora_rank: posInt.nullish(),
  kv_lora_rank: posInt.nullish(),
  qk_nope_head_dim: posInt.nullish(),
  qk_rope_head_dim: z.number().int().nonnegative().nullish(),
  v_head_dim: posInt.nullish(),
  mla_use_nope: z.boolean().nullish(),
  num_nextn_predict_layers: z.number().int().nonnegative().default(0),
  linear_attn_config: z
    .looseObject({
      kda_layers: layerList,
      full_attn_layers: layerList,
      num_heads: posInt,
      head_dim: posInt,
      short_conv_kernel_size: posInt.default(4),
      gate_lower_bound: z.number().nullish(),
      use_full_rank_gate: z.boolean().nullish(),
    })
    .nullish(),
  bos_token_id: z.number().int().nonnegative().nullish(),
  eos_token_id: z.union([z.number().int().nonnegative(), z.array(z.number().int().nonnegative())]).nullish(),
  torch_dtype: z.string().nullish(),
  dtype: z.string().nullish(),
});

function unsupported(file: string, field: string, got: unknown, fix: string): never {
  throw new UserError(`unsupported ${field} ${JSON.stringify(got)} in ${file}: the Kimi-Linear family does not implement it`, { field, fix });
}

function required<T>(v: T | null | undefined, file: string, field: string): T {
  if (v === null || v === undefined) throw new UserError(`missing field ${field} in ${file}: Kimi-Linear's MLA / MoE layers need it`, { field, fix: `set "${field}" as the model's config.json has it` });
  return v;
}

/** Parse a Kimi-Linear config.json; a UserError naming the file and the field when one is wrong or not supported. */
export function parseKimiLinearConfig(raw: unknown, file = 'config.json'): KimiLinearConfig {
  const c = parseWith(KimiSchema, raw, file);
  const L = c.num_hidden_layers;
  if (c.hidden_act !== 'silu') unsupported(file, 'hidden_act', c.hidden_act, 'use "silu" (the released model)');
  const la = c.linear_attn_config;
  if (!la) throw new UserError(`missing field linear_attn_config in ${file}: Kimi-Linear's layer pattern and KDA heads come from it`, { field: 'linear_attn_config', fix: 'set linear_attn_config {kda_layers, full_attn_layers, num_heads, head_dim, short_conv_kernel_size}' });
  if (la.gate_lower_bound !== null && la.gate_lower_bound !== undefined) unsupported(file, 'linear_attn_config.gate_lower_bound', la.gate_lower_bound, 'drop it (Kimi-Linear has no lower-bounded gate; that is a later model)');
  if (la.use_full_rank_gate) unsupported(file, 'linear_attn_config.use_full_rank_gate', true, 'drop it (Kimi-Linear\'s decay gate is low rank: f_a_proj / f_b_proj)');
  for (const [field, list] of [['kda_layers', la.kda_layers], ['full_attn_layers', la.full_attn_layers]] as const) {
    for (const l of list) check(l <= L, file, `linear_attn_config.${field}`, `linear_attn_config.${field} names layer ${l} (1-based) of ${L}`);
  }
  const kda = new Set(la.kda_layers);
  for (const l of la.full_attn_layers) check(!kda.has(l), file, 'linear_attn_config.full_attn_layers', `layer ${l} is in both kda_layers and full_attn_layers`);
  const layerTypes: KimiLayerType[] = Array.from({ length: L }, (_, i) => (kda.has(i + 1) ? 'kda' : 'mla'));
  const hasMla = layerTypes.includes('mla');
  if (c.q_lora_rank !== null && c.q_lora_rank !== undefined) unsupported(file, 'q_lora_rank', c.q_lora_rank, 'set "q_lora_rank": null (Kimi-Linear projects queries with q_proj; the remote code asserts it)');
  if (hasMla && c.mla_use_nope !== true) unsupported(file, 'mla_use_nope', c.mla_use_nope ?? false, 'set "mla_use_nope": true (Kimi-Linear\'s MLA layers are NoPE; the remote code asserts it)');
  const kvLoraRank = hasMla ? required(c.kv_lora_rank, file, 'kv_lora_rank') : (c.kv_lora_rank ?? 1);
  const qkNope = hasMla ? required(c.qk_nope_head_dim, file, 'qk_nope_head_dim') : (c.qk_nope_head_dim ?? 1);
  const qkRope = hasMla ? required(c.qk_rope_head_dim, file, 'qk_rope_head_dim') : (c.qk_rope_head_dim ?? 0);
  const vHead = hasMla ? required(c.v_head_dim, file, 'v_head_dim') : (c.v_head_dim ?? 1);
  const E = c.num_experts ?? 0;
  const K = E > 0 ? required(c.num_experts_per_token, file, 'num_experts_per_token') : 1;
  const moeI = E > 0 ? required(c.moe_intermediate_size, file, 'moe_intermediate_size') : 1;
  check(E === 0 || K <= E, file, 'num_experts_per_token', `num_experts_per_token ${K} exceeds the ${E} experts`);
  check(E === 0 || E % c.num_expert_group === 0, file, 'num_expert_group', `${E} experts do not split into num_expert_group ${c.num_expert_group} groups`);
  check(c.topk_group <= c.num_expert_group, file, 'topk_group', `topk_group ${c.topk_group} exceeds num_expert_group ${c.num_expert_group}`);
  check(E === 0 || c.num_expert_group === 1 || E / c.num_expert_group >= 2, file, 'num_expert_group', 'each expert group needs at least two experts (groups are scored by their two best)');
  if (E > 0 && !c.use_grouped_topk) unsupported(file, 'use_grouped_topk', false, 'set "use_grouped_topk": true (the remote code always routes grouped)');
  const sparseLayers = Array.from({ length: L }, (_, l) => E > 0 && l >= c.first_k_dense_replace && l % c.moe_layer_freq === 0);
  return {
    vocabSize: c.vocab_size,
    hiddenSize: c.hidden_size,
    intermediateSize: c.intermediate_size,
    numHiddenLayers: L,
    layerTypes,
    sparseLayers,
    numAttentionHeads: c.num_attention_heads,
    numKeyValueHeads: c.num_key_value_heads ?? c.num_attention_heads,
    kvLoraRank,
    qkNopeHeadDim: qkNope,
    qkRopeHeadDim: qkRope,
    vHeadDim: vHead,
    qHeadDim: qkNope + qkRope,
    maxPositionEmbeddings: c.max_position_embeddings ?? c.model_max_length ?? 8192,
    kdaNumHeads: la.num_heads,
    kdaHeadDim: la.head_dim,
    kdaConvKernelSize: la.short_conv_kernel_size,
    kdaProjSize: la.num_heads * la.head_dim,
    numExperts: E,
    numExpertsPerToken: K,
    moeIntermediateSize: moeI,
    numSharedExperts: c.num_shared_experts ?? 0,
    moeRenormalize: c.moe_renormalize,
    moeRouterActivationFunc: c.moe_router_activation_func,
    routedScalingFactor: c.routed_scaling_factor,
    numExpertGroup: c.num_expert_group,
    topkGroup: c.topk_group,
    firstKDenseReplace: c.first_k_dense_replace,
    moeLayerFreq: c.moe_layer_freq,
    rmsNormEps: c.rms_norm_eps,
    tieWordEmbeddings: c.tie_word_embeddings,
    initializerRange: c.initializer_range,
    bosTokenId: c.bos_token_id ?? null,
    eosTokenId: c.eos_token_id ?? null,
    dtype: configDType(c, file),
  };
}

const KDA_48B = [1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14, 15, 17, 18, 19, 21, 22, 23, 25, 26];

/**
 * moonshotai/Kimi-Linear-48B-A3B-Instruct's config.json (the fields the family reads). The file itself was not reachable
 * from here; these values were checked against several public copies of it in other projects' tests and notes (found
 * with the code search: model_type kimi_linear, hidden 2304, 27 layers, 32 heads, intermediate 9216, vocab 163840; MLA
 * kv_lora_rank 512, qk_nope 128, qk_rope 64, v 128, q_lora_rank null, mla_use_nope true; KDA 32 heads of 128, conv 4,
 * full_attn_layers [4, 8, 12, 16, 20, 24, 27], the other 20 KDA; 256 experts top 8, one shared, moe_intermediate 1024,
 * first_k_dense_replace 1, routed_scaling_factor 2.446, sigmoid router, one expert group) and against the remote
 * code's KimiLinearConfig for the field names. Where the copies disagreed: num_key_value_heads (32 in most, 1 in one;
 * MLA does not read it) and rms_norm_eps (1e-5 in two, 1e-6 in one): 32 and 1e-5 here. Token ids not checked.
 */
export const KIMI_LINEAR_48B_RAW = {
  architectures: ['KimiLinearForCausalLM'],
  model_type: 'kimi_linear',
  vocab_size: 163840,
  hidden_size: 2304,
  head_dim: 72,
  intermediate_size: 9216,
  num_hidden_layers: 27,
  num_attention_heads: 32,
  num_key_value_heads: 32,
  hidden_act: 'silu',
  rms_norm_eps: 1e-5,
  rope_theta: 10000,
  rope_scaling: null,
  tie_word_embeddings: false,
  model_max_length: 1048576,
  first_k_dense_replace: 1,
  moe_intermediate_size: 1024,
  moe_layer_freq: 1,
  moe_renormalize: true,
  moe_router_activation_func: 'sigmoid',
  num_experts: 256,
  num_experts_per_token: 8,
  num_shared_experts: 1,
  routed_scaling_factor: 2.446,
  use_grouped_topk: true,
  num_expert_group: 1,
  topk_group: 1,
  q_lora_rank: null,
  kv_lora_rank: 512,
  qk_nope_head_dim: 128,
  qk_rope_head_dim: 64,
  v_head_dim: 128,
  mla_use_nope: true,
  num_nextn_predict_layers: 0,
  linear_attn_config: { full_attn_layers: [4, 8, 12, 16, 20, 24, 27], kda_layers: KDA_48B, num_heads: 32, head_dim: 128, short_conv_kernel_size: 4 },
  torch_dtype: 'bfloat16',
  use_cache: true,
} as const;
export const KIMI_LINEAR_48B: KimiLinearConfig = parseKimiLinearConfig(KIMI_LINEAR_48B_RAW, 'moonshotai/Kimi-Linear-48B-A3B-Instruct/config.json');

/**
 * A tiny Kimi-Linear for CI cases and tests (fixtures/tiny-kimi-linear/config.json is the same): hidden 32, 4 layers
 * (KDA, KDA, MLA, KDA: 1-based kda_layers [1, 2, 4]); KDA 2 heads of 8, conv 4; MLA 4 heads, kv_lora_rank 16, qk_nope 8,
 * qk_rope 4, v 8; 8 experts in 2 groups of which the best one is kept (topk_group 1), top 2 of it, routed scaling 2.5,
 * one shared expert (16 wide); layer 0 dense (48); vocab 64.
 */
export const TINY_KIMI_LINEAR_RAW = {
  architectures: ['KimiLinearForCausalLM'],
  model_type: 'kimi_linear',
  vocab_size: 64,
  hidden_size: 32,
  intermediate_size: 48,
  num_hidden_layers: 4,
  num_attention_heads: 4,
  num_key_value_heads: 4,
  hidden_act: 'silu',
  rms_norm_eps: 1e-5,
  tie_word_embeddings: false,
  model_max_length: 512,
  first_k_dense_replace: 1,
  moe_intermediate_size: 16,
  moe_layer_freq: 1,
  moe_renormalize: true,
  moe_router_activation_func: 'sigmoid',
  num_experts: 8,
  num_experts_per_token: 2,
  num_shared_experts: 1,
  routed_scaling_factor: 2.5,
  use_grouped_topk: true,
  num_expert_group: 2,
  topk_group: 1,
  q_lora_rank: null,
  kv_lora_rank: 16,
  qk_nope_head_dim: 8,
  qk_rope_head_dim: 4,
  v_head_dim: 8,
  mla_use_nope: true,
  linear_attn_config: { kda_layers: [1, 2, 4], full_attn_layers: [3], num_heads: 2, head_dim: 8, short_conv_kernel_size: 4 },
  initializer_range: 0.02,
  torch_dtype: 'float32',
} as const;

export function tinyKimiLinearConfig(over: Record<string, unknown> = {}): KimiLinearConfig {
  return parseKimiLinearConfig({ ...TINY_KIMI_LINEAR_RAW, ...over }, 'tinyKimiLinearConfig');
}
