import { UserError, type DType } from '@fastkernels/core';
import { configDType } from '../../models/config-parse.js';
import { z } from 'zod';
import type { Llama3RopeScaling } from '../../tasks/L1/rotary/rotary_emb.js';
import type { YarnRopeScaling } from '../../tasks/L1/rotary/yarn_rotary_emb.js';

/**
 * The HF config.json fields the Llama family uses (model_type llama, qwen2, mistral), validated with zod,
 * and the normalised config our modules take (camelCase, defaults resolved, per-layer sliding windows).
 * Both rope conventions are read: transformers 4 (rope_theta + rope_scaling) and 5 (rope_parameters).
 */

export const SUPPORTED_MODEL_TYPES = ['llama', 'qwen2', 'mistral'] as const;
export type LlamaModelType = (typeof SUPPORTED_MODEL_TYPES)[number];
export const SUPPORTED_ROPE_TYPES = ['llama3', 'linear'] as const;

/** vLLM's LinearScalingRotaryEmbedding: positions divided by `factor`. */
export interface LinearRopeScaling {
  readonly ropeType: 'linear';
  readonly factor: number;
}
/** What L2/attention takes; YaRN comes from families that read it (gpt-oss), parseLlamaConfig does not. */
export type LlamaRopeScaling = Llama3RopeScaling | LinearRopeScaling | YarnRopeScaling;

/** What the Llama modules are built from (plain data: it is the L3/L4 tasks' init argument). */
export interface LlamaConfig {
  readonly modelType: LlamaModelType;
  readonly hiddenSize: number;
  readonly intermediateSize: number;
  readonly numHiddenLayers: number;
  readonly numAttentionHeads: number;
  readonly numKeyValueHeads: number;
  readonly headDim: number;
  readonly vocabSize: number;
  readonly maxPositionEmbeddings: number;
  readonly rmsNormEps: number;
  readonly ropeTheta: number;
  readonly ropeScaling: LlamaRopeScaling | null;
  readonly tieWordEmbeddings: boolean;
  /** Bias on the q/k/v projections (qwen2 always; llama with attention_bias). */
  readonly qkvBias: boolean;
  /** Bias on o_proj (llama with attention_bias; never qwen2/mistral). */
  readonly oProjBias: boolean;
  readonly mlpBias: boolean;
  /** Sliding window per layer (0 = full attention). */
  readonly slidingWindows: readonly number[];
  /** The checkpoint's dtype (torch_dtype / dtype), when the config names one. */
  readonly dtype: DType | null;
  readonly initializerRange: number;
}

const posInt = z.number().int().positive();
const ropeDict = z.looseObject({
  rope_type: z.string().optional(),
  type: z.string().optional(),
  factor: z.number().positive().optional(),
  low_freq_factor: z.number().optional(),
  high_freq_factor: z.number().optional(),
  original_max_position_embeddings: posInt.optional(),
  rope_theta: z.number().positive().optional(),
});

/** The raw fields (HF names); others pass through untouched. */
export const HfLlamaConfigSchema = z.looseObject({
  model_type: z.string(),
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
  tie_word_embeddings: z.boolean().optional(),
  attention_bias: z.boolean().optional(),
  mlp_bias: z.boolean().optional(),
  hidden_act: z.string().optional(),
  sliding_window: z.number().int().nonnegative().nullish(),
  use_sliding_window: z.boolean().optional(),
  max_window_layers: z.number().int().nonnegative().optional(),
  layer_types: z.array(z.string()).optional(),
  torch_dtype: z.string().nullish(),
  dtype: z.string().nullish(),
  initializer_range: z.number().positive().optional(),
});
export type HfLlamaConfig = z.infer<typeof HfLlamaConfigSchema>;

/** Per-model_type defaults, as transformers' config classes have them. */
const DEFAULTS: Record<LlamaModelType, { maxPos: number; eps: number; theta: number; tie: boolean }> = {
  llama: { maxPos: 2048, eps: 1e-6, theta: 10000, tie: false },
  qwen2: { maxPos: 32768, eps: 1e-6, theta: 10000, tie: false },
  mistral: { maxPos: 4096 * 32, eps: 1e-6, theta: 10000, tie: false },
};

function bad(file: string, field: string, message: string, fix?: string): UserError {
  return new UserError(`${message} in ${file}`, { field, ...(fix ? { fix } : {}) });
}

/** Parse an HF config object (from `file`, named in errors) into a LlamaConfig. */
export function parseLlamaConfig(raw: unknown, file = 'config.json'): LlamaConfig {
  if (raw && typeof raw === 'object' && 'model_type' in raw) {
    const mt = (raw as { model_type: unknown }).model_type;
    if (typeof mt === 'string' && !(SUPPORTED_MODEL_TYPES as readonly string[]).includes(mt)) {
      throw new UserError(`unsupported model_type '${mt}' in ${file}: supported: ${SUPPORTED_MODEL_TYPES.join(', ')}`, { field: 'model_type' });
    }
  }
  const parsed = HfLlamaConfigSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const field = issue.path.join('.') || '(root)';
    throw new UserError(`invalid field ${field} in ${file}: ${issue.message}`, { field });
  }
  const c = parsed.data;
  const modelType = c.model_type as LlamaModelType;
  const d = DEFAULTS[modelType];

  if (c.hidden_act !== undefined && c.hidden_act !== 'silu') {
    throw new UserError(`unsupported hidden_act '${c.hidden_act}' in ${file}: supported: silu`, { field: 'hidden_act' });
  }
  const numKv = c.num_key_value_heads ?? c.num_attention_heads;
  if (c.num_attention_heads % numKv !== 0) {
    throw bad(file, 'num_key_value_heads', `num_attention_heads ${c.num_attention_heads} is not a multiple of num_key_value_heads ${numKv}`);
  }
  let headDim = c.head_dim ?? 0;
  if (!headDim) {
    if (c.hidden_size % c.num_attention_heads !== 0) throw bad(file, 'hidden_size', `hidden_size ${c.hidden_size} is not a multiple of num_attention_heads ${c.num_attention_heads} (and no head_dim is given)`);
    headDim = c.hidden_size / c.num_attention_heads;
  }
  if (headDim % 2 !== 0) throw bad(file, 'head_dim', `head_dim ${headDim} is odd (rotary embedding needs an even head size)`);

  // rope: transformers 5 puts theta and scaling in rope_parameters; 4 has rope_theta + rope_scaling.
  const ropeField = c.rope_parameters ? 'rope_parameters' : 'rope_scaling';
  const rope = c.rope_parameters ?? c.rope_scaling ?? null;
  const ropeTheta = c.rope_parameters?.rope_theta ?? c.rope_theta ?? d.theta;
  const ropeScaling = rope ? parseRopeScaling(rope, ropeField, file) : null;

  const layers = c.num_hidden_layers;
  let slidingWindows: number[] = new Array<number>(layers).fill(0);
  if (modelType === 'mistral' && c.sliding_window) slidingWindows.fill(c.sliding_window);
  if (modelType === 'qwen2' && c.use_sliding_window && c.sliding_window) {
    const w = c.sliding_window;
    if (c.layer_types) {
      if (c.layer_types.length !== layers) throw bad(file, 'layer_types', `layer_types has ${c.layer_types.length} entries for ${layers} layers`);
      slidingWindows = c.layer_types.map((t, i) => {
        if (t === 'sliding_attention') return w;
        if (t === 'full_attention') return 0;
        throw new UserError(`unsupported layer_types[${i}] '${t}' in ${file}: supported: full_attention, sliding_attention`, { field: `layer_types.${i}` });
      });
    } else {
      const from = c.max_window_layers ?? 28;
      slidingWindows = slidingWindows.map((_, i) => (i >= from ? w : 0));
    }
  }

  const dtype = configDType(c, file);

  const attentionBias = c.attention_bias ?? false;
  return {
    modelType,
    hiddenSize: c.hidden_size,
    intermediateSize: c.intermediate_size,
    numHiddenLayers: layers,
    numAttentionHeads: c.num_attention_heads,
    numKeyValueHeads: numKv,
    headDim,
    vocabSize: c.vocab_size,
    maxPositionEmbeddings: c.max_position_embeddings ?? d.maxPos,
    rmsNormEps: c.rms_norm_eps ?? d.eps,
    ropeTheta,
    ropeScaling,
    tieWordEmbeddings: c.tie_word_embeddings ?? d.tie,
    qkvBias: modelType === 'qwen2' ? true : modelType === 'llama' ? attentionBias : false,
    oProjBias: modelType === 'llama' ? attentionBias : false,
    mlpBias: modelType === 'llama' ? (c.mlp_bias ?? false) : false,
    slidingWindows,
    dtype,
    initializerRange: c.initializer_range ?? 0.02,
  };
}

function parseRopeScaling(r: z.infer<typeof ropeDict>, field: string, file: string): LlamaRopeScaling | null {
  const type = r.rope_type ?? r.type ?? 'default';
  if (type === 'default') return null;
  const need = (name: keyof typeof r): number => {
    const v = r[name];
    if (typeof v !== 'number') throw new UserError(`${field}.${String(name)} is required for rope_type '${type}' in ${file}`, { field: `${field}.${String(name)}` });
    return v;
  };
  if (type === 'llama3') {
    return {
      ropeType: 'llama3',
      factor: need('factor'),
      lowFreqFactor: need('low_freq_factor'),
      highFreqFactor: need('high_freq_factor'),
      originalMaxPositionEmbeddings: need('original_max_position_embeddings'),
    };
  }
  if (type === 'linear') return { ropeType: 'linear', factor: need('factor') };
  throw new UserError(`unsupported ${field}.rope_type '${type}' in ${file}: supported: ${SUPPORTED_ROPE_TYPES.join(', ')}`, { field: `${field}.rope_type` });
}

/** vLLM's attention scale. */
export const attentionScale = (cfg: Pick<LlamaConfig, 'headDim'>): number => 1 / Math.sqrt(cfg.headDim);

/** Llama-3-8B (production task cases). */
export const LLAMA3_8B: LlamaConfig = {
  modelType: 'llama',
  hiddenSize: 4096,
  intermediateSize: 14336,
  numHiddenLayers: 32,
  numAttentionHeads: 32,
  numKeyValueHeads: 8,
  headDim: 128,
  vocabSize: 128256,
  maxPositionEmbeddings: 8192,
  rmsNormEps: 1e-5,
  ropeTheta: 500000,
  ropeScaling: null,
  tieWordEmbeddings: false,
  qkvBias: false,
  oProjBias: false,
  mlpBias: false,
  slidingWindows: new Array<number>(32).fill(0),
  dtype: 'bf16',
  initializerRange: 0.02,
};

/** A tiny Llama for CI cases: 2 layers, hidden 64, 4 heads of 16, 2 kv heads, MLP 128, vocab 256. */
export function tinyLlamaConfig(over: Partial<LlamaConfig> = {}): LlamaConfig {
  const layers = over.numHiddenLayers ?? 2;
  return {
    modelType: 'llama',
    hiddenSize: 64,
    intermediateSize: 128,
    numHiddenLayers: layers,
    numAttentionHeads: 4,
    numKeyValueHeads: 2,
    headDim: 16,
    vocabSize: 256,
    maxPositionEmbeddings: 256,
    rmsNormEps: 1e-5,
    ropeTheta: 10000,
    ropeScaling: null,
    tieWordEmbeddings: false,
    qkvBias: false,
    oProjBias: false,
    mlpBias: false,
    slidingWindows: new Array<number>(layers).fill(0),
    dtype: null,
    initializerRange: 0.1,
    ...over,
  };
}
