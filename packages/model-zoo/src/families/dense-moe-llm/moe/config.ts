/**
 * The HF config.json fields of the MoE decoders the family runs (model_type mixtral, qwen3_moe), validated with zod,
 * and the normalised config their modules take: the Llama spine's fields (parsed by parseLlamaConfig with the model
 * type's own defaults: Mixtral's attention is Mistral's, Qwen3-MoE's is Llama's plus per-head q/k norms and no o_proj
 * bias) plus the expert fields.
 */
import { UserError } from '@fastkernels/core';
import { z } from 'zod';
import { parseLlamaConfig, type LlamaConfig } from '../config.js';

export const MOE_MODEL_TYPES = ['mixtral', 'qwen3_moe'] as const;
export type MoeModelType = (typeof MOE_MODEL_TYPES)[number];

export interface MoeConfig extends Omit<LlamaConfig, 'modelType'> {
  readonly modelType: MoeModelType;
  /** Mixtral: num_local_experts; Qwen3-MoE: num_experts. */
  readonly numExperts: number;
  readonly numExpertsPerTok: number;
  /** Each expert's intermediate size (Mixtral: intermediate_size; Qwen3-MoE: moe_intermediate_size). */
  readonly moeIntermediateSize: number;
  /** Renormalise the top-k weights (Mixtral: always; Qwen3-MoE: norm_topk_prob). */
  readonly normTopkProb: boolean;
  /** RMSNorm over each head of q and k before rotary (Qwen3). */
  readonly qkNorm: boolean;
  /** Layers with a dense MLP of intermediateSize instead of experts (Qwen3-MoE: mlp_only_layers, decoder_sparse_step). */
  readonly denseLayers: readonly number[];
}

const posInt = z.number().int().positive();
const MoeFieldsSchema = z.looseObject({
  model_type: z.string(),
  num_local_experts: posInt.optional(),
  num_experts: posInt.optional(),
  num_experts_per_tok: posInt.optional(),
  moe_intermediate_size: posInt.optional(),
  norm_topk_prob: z.boolean().optional(),
  decoder_sparse_step: posInt.optional(),
  mlp_only_layers: z.array(z.number().int().nonnegative()).optional(),
  use_sliding_window: z.boolean().optional(),
});

/** transformers' MixtralConfig / Qwen3MoeConfig defaults for the fields the Llama parser reads. */
const SPINE_DEFAULTS: Record<MoeModelType, Record<string, unknown>> = {
  mixtral: { max_position_embeddings: 4096 * 32, rms_norm_eps: 1e-5, rope_theta: 1e6 },
  qwen3_moe: { max_position_embeddings: 32768, rms_norm_eps: 1e-6, rope_theta: 10000 },
};

/** Parse an HF Mixtral / Qwen3-MoE config object (from `file`, named in errors). */
export function parseMoeConfig(raw: unknown, file = 'config.json'): MoeConfig {
  const parsed = MoeFieldsSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const field = issue.path.join('.') || '(root)';
    throw new UserError(`invalid field ${field} in ${file}: ${issue.message}`, { field });
  }
  const c = parsed.data;
  if (!(MOE_MODEL_TYPES as readonly string[]).includes(c.model_type)) {
    throw new UserError(`unsupported model_type '${c.model_type}' in ${file}: supported: ${MOE_MODEL_TYPES.join(', ')}`, { field: 'model_type' });
  }
  const modelType = c.model_type as MoeModelType;
  if (modelType === 'qwen3_moe' && c.use_sliding_window) {
    throw new UserError(`use_sliding_window true in ${file}: Qwen3-MoE sliding-window attention is not supported`, { field: 'use_sliding_window', fix: 'set "use_sliding_window": false (the released Qwen3-MoE models do not use it)' });
  }
  // Mixtral's attention is Mistral's (sliding_window over every layer when set); Qwen3-MoE's is Llama's (attention_bias
  // on q/k/v; its o_proj never has one).
  const spine = parseLlamaConfig({ ...SPINE_DEFAULTS[modelType], ...(raw as object), model_type: modelType === 'mixtral' ? 'mistral' : 'llama', use_sliding_window: false }, file);
  const layers = spine.numHiddenLayers;
  let denseLayers: number[] = [];
  if (modelType === 'qwen3_moe') {
    const step = c.decoder_sparse_step ?? 1;
    const only = new Set(c.mlp_only_layers ?? []);
    for (const l of only) if (l >= layers) throw new UserError(`mlp_only_layers names layer ${l} of ${layers} in ${file}`, { field: 'mlp_only_layers' });
    denseLayers = Array.from({ length: layers }, (_, l) => l).filter((l) => only.has(l) || (l + 1) % step !== 0);
  }
  const numExperts = modelType === 'mixtral' ? (c.num_local_experts ?? 8) : (c.num_experts ?? 128);
  const numExpertsPerTok = c.num_experts_per_tok ?? (modelType === 'mixtral' ? 2 : 8);
  if (numExpertsPerTok > numExperts) {
    throw new UserError(`num_experts_per_tok ${numExpertsPerTok} exceeds the ${numExperts} experts in ${file}`, { field: 'num_experts_per_tok' });
  }
  return {
    ...spine,
    modelType,
    oProjBias: false,
    mlpBias: false,
    numExperts,
    numExpertsPerTok,
    moeIntermediateSize: modelType === 'mixtral' ? spine.intermediateSize : (c.moe_intermediate_size ?? 768),
    normTopkProb: modelType === 'mixtral' ? true : (c.norm_topk_prob ?? false),
    qkNorm: modelType === 'qwen3_moe',
    denseLayers,
  };
}

/** Mixtral-8x7B (v0.1): production task cases. */
export const MIXTRAL_8X7B_CONFIG: MoeConfig = {
  modelType: 'mixtral',
  hiddenSize: 4096,
  intermediateSize: 14336,
  numHiddenLayers: 32,
  numAttentionHeads: 32,
  numKeyValueHeads: 8,
  headDim: 128,
  vocabSize: 32000,
  maxPositionEmbeddings: 32768,
  rmsNormEps: 1e-5,
  ropeTheta: 1e6,
  ropeScaling: null,
  tieWordEmbeddings: false,
  qkvBias: false,
  oProjBias: false,
  mlpBias: false,
  slidingWindows: new Array<number>(32).fill(0),
  dtype: 'bf16',
  initializerRange: 0.02,
  numExperts: 8,
  numExpertsPerTok: 2,
  moeIntermediateSize: 14336,
  normTopkProb: true,
  qkNorm: false,
  denseLayers: [],
};

/** Qwen3-30B-A3B: production task cases. */
export const QWEN3_30B_A3B_CONFIG: MoeConfig = {
  ...MIXTRAL_8X7B_CONFIG,
  modelType: 'qwen3_moe',
  hiddenSize: 2048,
  intermediateSize: 6144,
  numHiddenLayers: 48,
  numAttentionHeads: 32,
  numKeyValueHeads: 4,
  headDim: 128,
  vocabSize: 151936,
  maxPositionEmbeddings: 40960,
  rmsNormEps: 1e-6,
  ropeTheta: 1e6,
  slidingWindows: new Array<number>(48).fill(0),
  numExperts: 128,
  numExpertsPerTok: 8,
  moeIntermediateSize: 768,
  normTopkProb: true,
  qkNorm: true,
};

/** Tiny configs for CI cases: 2 layers, hidden 64, 4 heads of 16, 2 kv heads, vocab 256. */
export function tinyMixtralConfig(over: Partial<MoeConfig> = {}): MoeConfig {
  const layers = over.numHiddenLayers ?? 2;
  return {
    ...MIXTRAL_8X7B_CONFIG,
    hiddenSize: 64,
    intermediateSize: 96,
    numHiddenLayers: layers,
    numAttentionHeads: 4,
    numKeyValueHeads: 2,
    headDim: 16,
    vocabSize: 256,
    maxPositionEmbeddings: 256,
    slidingWindows: new Array<number>(layers).fill(0),
    dtype: null,
    initializerRange: 0.1,
    numExperts: 8,
    numExpertsPerTok: 2,
    moeIntermediateSize: 96,
    ...over,
  };
}

export function tinyQwen3MoeConfig(over: Partial<MoeConfig> = {}): MoeConfig {
  return tinyMixtralConfig({ modelType: 'qwen3_moe', numExperts: 16, numExpertsPerTok: 4, moeIntermediateSize: 32, intermediateSize: 128, normTopkProb: true, qkNorm: true, rmsNormEps: 1e-6, ...over });
}
