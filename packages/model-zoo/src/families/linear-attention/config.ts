/**
 * zod over the config.json fields of FLA's GLAConfig (fla/models/gla/configuration_gla.py) that GLAForCausalLM reads,
 * with FLA's defaults. Options FLA has and this family does not implement yet (short convolutions, feature maps,
 * grouped key/value heads, hybrid attention layers, the unfused norm, value gates, attention residuals) are a
 * UserError naming the field, not a silently different model.
 */
import { UserError, type DType } from '@fastkernels/core';
import { configDType } from '../../models/config-parse.js';
import { z } from 'zod';

export interface GlaConfig {
  readonly vocabSize: number;
  readonly hiddenSize: number;
  readonly numHiddenLayers: number;
  readonly numHeads: number;
  readonly expandK: number;
  readonly expandV: number;
  /** int(hidden_size * expand_k) / int(hidden_size * expand_v): all heads together. */
  readonly keyDim: number;
  readonly valueDim: number;
  /** Per head: the recurrent state of a layer is [num_heads, headKDim, headVDim] per sequence. */
  readonly headKDim: number;
  readonly headVDim: number;
  /** GatedMLP's: intermediate_size, else 2/3 * hidden * hidden_ratio rounded up to a multiple of 256. */
  readonly intermediateSize: number;
  readonly hiddenRatio: number;
  readonly normEps: number;
  /** FLA's kernel choice for T > 64 ('chunk', 'fused_chunk': the same function); T <= 64 runs the recurrent kernel. */
  readonly attnMode: 'chunk' | 'fused_recurrent' | 'fused_chunk';
  readonly clampMin: number | null;
  /** GatedLinearAttention's constructor defaults (GLAConfig does not pass them): gk = logsigmoid(gk_proj(x)) / 16. */
  readonly gateLogitNormalizer: number;
  readonly gateLowRankDim: number;
  readonly tieWordEmbeddings: boolean;
  readonly maxPositionEmbeddings: number;
  readonly initializerRange: number;
  readonly bosTokenId: number | null;
  readonly eosTokenId: number | readonly number[] | null;
  readonly dtype: DType | null;
}

const GlaSchema = z.looseObject({
  vocab_size: z.number().int().positive().default(32000),
  hidden_size: z.number().int().positive().default(2048),
  num_hidden_layers: z.number().int().positive().default(24),
  num_heads: z.number().int().positive().default(4),
  num_kv_heads: z.number().int().positive().nullish(),
  expand_k: z.number().positive().default(0.5),
  expand_v: z.number().positive().default(1),
  hidden_ratio: z.number().int().positive().nullish(),
  intermediate_size: z.number().int().positive().nullish(),
  hidden_act: z.string().default('swish'),
  norm_eps: z.number().positive().default(1e-6),
  attn_mode: z.enum(['chunk', 'fused_recurrent', 'fused_chunk']).default('chunk'),
  clamp_min: z.number().nullish(),
  gate_logit_normalizer: z.number().positive().default(16),
  gate_low_rank_dim: z.number().int().positive().default(16),
  use_short_conv: z.boolean().default(false),
  feature_map: z.string().nullish(),
  use_output_gate: z.boolean().default(true),
  use_gv: z.boolean().default(false),
  fuse_norm: z.boolean().default(true),
  elementwise_affine: z.boolean().nullish(),
  attn: z.unknown().nullish(),
  attnres_block_size: z.number().nullish(),
  tie_word_embeddings: z.boolean().default(false),
  max_position_embeddings: z.number().int().positive().default(2048),
  initializer_range: z.number().positive().default(0.02),
  bos_token_id: z.number().int().nonnegative().nullish(),
  eos_token_id: z.union([z.number().int().nonnegative(), z.array(z.number().int().nonnegative())]).nullish(),
  torch_dtype: z.string().nullish(),
  dtype: z.string().nullish(),
});

function unsupported(file: string, field: string, got: unknown, fix: string): never {
  throw new UserError(`unsupported ${field} ${JSON.stringify(got)} in ${file}: the GLA family does not implement it yet`, { field, fix });
}

/** Parse a GLA config.json; a UserError naming the file and the field when one is wrong or not supported. */
export function parseGlaConfig(raw: unknown, file = 'config.json'): GlaConfig {
  const parsed = GlaSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const field = issue.path.join('.') || '(root)';
    throw new UserError(`invalid field ${field} in ${file}: ${issue.message}`, { field });
  }
  const c = parsed.data;
  if (c.use_short_conv) unsupported(file, 'use_short_conv', true, 'set "use_short_conv": false (fla-hub/gla-2.7B-100B has none)');
  if (c.feature_map) unsupported(file, 'feature_map', c.feature_map, 'set "feature_map": null');
  if (!c.use_output_gate) unsupported(file, 'use_output_gate', false, 'set "use_output_gate": true');
  if (c.use_gv) unsupported(file, 'use_gv', true, 'set "use_gv": false');
  if (!c.fuse_norm) unsupported(file, 'fuse_norm', false, 'set "fuse_norm": true (the same math, g_norm_swish_gate names)');
  if (c.elementwise_affine === false) unsupported(file, 'elementwise_affine', false, 'set "elementwise_affine": true');
  if (c.attn) unsupported(file, 'attn', c.attn, 'drop "attn" (hybrid softmax-attention layers)');
  if (c.attnres_block_size != null) unsupported(file, 'attnres_block_size', c.attnres_block_size, 'drop "attnres_block_size"');
  if (c.hidden_act !== 'swish') unsupported(file, 'hidden_act', c.hidden_act, 'use "swish"');
  if (c.num_kv_heads != null && c.num_kv_heads !== c.num_heads) unsupported(file, 'num_kv_heads', c.num_kv_heads, `drop it or set it to num_heads (${c.num_heads})`);
  const keyDim = Math.trunc(c.hidden_size * c.expand_k);
  const valueDim = Math.trunc(c.hidden_size * c.expand_v);
  for (const [name, dim] of [['expand_k', keyDim], ['expand_v', valueDim]] as const) {
    if (dim === 0 || dim % c.num_heads !== 0) throw new UserError(`hidden_size * ${name} = ${dim} is not a positive multiple of num_heads ${c.num_heads} in ${file}`, { field: name });
  }
  const hiddenRatio = c.hidden_ratio ?? 4;
  const intermediateSize = c.intermediate_size ?? 256 * Math.ceil(Math.trunc((c.hidden_size * hiddenRatio * 2) / 3) / 256);
  const dtype = configDType(c, file);
  return {
    vocabSize: c.vocab_size,
    hiddenSize: c.hidden_size,
    numHiddenLayers: c.num_hidden_layers,
    numHeads: c.num_heads,
    expandK: c.expand_k,
    expandV: c.expand_v,
    keyDim,
    valueDim,
    headKDim: keyDim / c.num_heads,
    headVDim: valueDim / c.num_heads,
    intermediateSize,
    hiddenRatio,
    normEps: c.norm_eps,
    attnMode: c.attn_mode,
    clampMin: c.clamp_min ?? null,
    gateLogitNormalizer: c.gate_logit_normalizer,
    gateLowRankDim: c.gate_low_rank_dim,
    tieWordEmbeddings: c.tie_word_embeddings,
    maxPositionEmbeddings: c.max_position_embeddings,
    initializerRange: c.initializer_range,
    bosTokenId: c.bos_token_id ?? null,
    eosTokenId: c.eos_token_id ?? null,
    dtype,
  };
}

/**
 * fla-hub/gla-2.7B-100B's config.json as GLAConfig reads it. The file itself was not reachable from here: these are the
 * values of the original benchmark's GLAConfig for this checkpoint (hidden 2560, 5 heads, 32 layers, vocab 32000,
 * expand_k 0.5, expand_v 1, hidden_ratio 4, norm_eps 1e-6, untied head), which its captured shapes confirm (decode
 * hidden [M, 1, 2560]; per-head q/k 256 and v 512 in the chunk_gla captures); the rest are FLA's GLAConfig defaults.
 */
export const GLA_2_7B_RAW = {
  architectures: ['GLAForCausalLM'],
  model_type: 'gla',
  vocab_size: 32000,
  hidden_size: 2560,
  num_hidden_layers: 32,
  num_heads: 5,
  expand_k: 0.5,
  expand_v: 1,
  hidden_ratio: 4,
  intermediate_size: null,
  hidden_act: 'swish',
  norm_eps: 1e-6,
  attn_mode: 'chunk',
  use_short_conv: false,
  use_output_gate: true,
  feature_map: null,
  clamp_min: null,
  fuse_norm: true,
  use_gk: true,
  use_gv: false,
  tie_word_embeddings: false,
  max_position_embeddings: 2048,
  initializer_range: 0.02,
  bos_token_id: 1,
  eos_token_id: 2,
  torch_dtype: 'bfloat16',
} as const;
export const GLA_2_7B: GlaConfig = parseGlaConfig(GLA_2_7B_RAW, 'fla-hub/gla-2.7B-100B/config.json');

/** A tiny GLA for CI cases and tests: hidden 32, 2 heads (K 8, V 16), MLP 48, 2 layers, vocab 64. */
export function tinyGlaConfig(over: Record<string, unknown> = {}): GlaConfig {
  return parseGlaConfig({ vocab_size: 64, hidden_size: 32, num_hidden_layers: 2, num_heads: 2, expand_k: 0.5, expand_v: 1, intermediate_size: 48, norm_eps: 1e-6, gate_logit_normalizer: 4, ...over }, 'tinyGlaConfig');
}
