import { DTYPE_INFO, Tensor, defineTask, hostArray, parseDType, type DType, type HostArray } from '@fastkernels/core';
import { bytesOf, fromInts, randn } from '../../../common/inputs.js';
import { DENSE_MOE_LLM } from '../../families.js';
import { RotaryEmbedding, rotaryReference } from './rotary_emb.js';

/**
 * YaRN rotary scaling (HF rope_scaling {rope_type: 'yarn', factor, beta_fast, beta_slow, original_max_position_embeddings,
 * truncate, attention_factor}), normalised: HF's defaults filled in (beta_fast 32, beta_slow 1, truncate true, the
 * original length max_position_embeddings when absent; attentionFactor null = 0.1 ln(factor) + 1).
 */
export interface YarnRopeScaling {
  readonly ropeType: 'yarn';
  readonly factor: number;
  readonly betaFast: number;
  readonly betaSlow: number;
  readonly originalMaxPositionEmbeddings: number;
  /** Round the correction range outwards to whole dims (HF's default; gpt-oss says false). */
  readonly truncate: boolean;
  readonly attentionFactor: number | null;
}

/** The cos / sin magnitude YaRN applies (HF's attention_factor, vLLM's mscale): 0.1 ln(factor) + 1 unless given. */
export function yarnAttentionFactor(s: Pick<YarnRopeScaling, 'factor' | 'attentionFactor'>): number {
  if (s.attentionFactor !== null) return s.attentionFactor;
  return s.factor <= 1 ? 1 : 0.1 * Math.log(s.factor) + 1;
}

/** The dims [low, high] over which YaRN ramps from extrapolated to interpolated frequencies (HF find_correction_range). */
export function yarnCorrectionRange(dim: number, base: number, s: YarnRopeScaling): [number, number] {
  const corrDim = (rotations: number) => (dim * Math.log(s.originalMaxPositionEmbeddings / (rotations * 2 * Math.PI))) / (2 * Math.log(base));
  let low = corrDim(s.betaFast);
  let high = corrDim(s.betaSlow);
  if (s.truncate) [low, high] = [Math.floor(low), Math.ceil(high)];
  return [Math.max(low, 0), Math.min(high, dim - 1)];
}

/**
 * YaRN inverse frequencies: per pair i < dim / 2, extrapolated 1 / base^(2i/dim) and interpolated that / factor, blended by
 * ramp r_i = clamp((i - low) / (high - low), 0, 1) as inv = interp * r + extrap * (1 - r) (HF _compute_yarn_parameters).
 * `round` rounds each step as the production code's float32 tensors do (identity: float64).
 */
export function yarnInvFreq(dim: number, base: number, s: YarnRopeScaling, round: (x: number) => number = (x) => x): Float64Array {
  const [low, high0] = yarnCorrectionRange(dim, base, s);
  const high = low === high0 ? high0 + 0.001 : high0;
  const half = dim / 2;
  const inv = new Float64Array(half);
  for (let i = 0; i < half; i++) {
    const pos = round(Math.pow(round(base), round(round(2 * i) / dim)));
    const extrap = round(1 / pos);
    const interp = round(1 / round(s.factor * pos));
    const ramp = round(Math.min(1, Math.max(0, round(round(i - low) / round(high - low)))));
    const extrapFactor = round(1 - ramp);
    inv[i] = round(round(interp * round(1 - extrapFactor)) + round(extrap * extrapFactor));
  }
  return inv;
}

/** The YaRN cos_sin_cache [positions, dim]: cat(cos(t inv) * m, sin(t inv) * m), m = the attention factor; float32 steps when `round` is Math.fround. */
export function yarnCosSinCache(dim: number, positions: number, base: number, s: YarnRopeScaling, round: (x: number) => number = (x) => x): Float64Array {
  const inv = yarnInvFreq(dim, base, s, round);
  const m = round(yarnAttentionFactor(s));
  const half = dim / 2;
  const cache = new Float64Array(positions * dim);
  for (let t = 0; t < positions; t++) {
    for (let i = 0; i < half; i++) {
      const f = round(t * inv[i]!);
      cache[t * dim + i] = round(round(Math.cos(f)) * m);
      cache[t * dim + half + i] = round(round(Math.sin(f)) * m);
    }
  }
  return cache;
}

/**
 * vLLM's YaRNScalingRotaryEmbedding (vllm/model_executor/layers/rotary_embedding): RotaryEmbedding whose cos_sin_cache
 * covers maxPositionEmbeddings * scalingFactor positions with YaRN's blended frequencies and both cos and sin scaled
 * by the attention factor (so q.k carries its square). Constructor: vLLM's (head_size, rotary_dim,
 * max_position_embeddings (the original context), base, is_neox_style, scaling_factor, dtype, beta_fast, beta_slow)
 * plus HF's truncate and attention_factor (null: 0.1 ln(scaling_factor) + 1). forward is RotaryEmbedding's.
 */
export class YaRNRotaryEmbedding extends RotaryEmbedding {
  readonly scaling: YarnRopeScaling;
  constructor(
    headSize: number,
    rotaryDim: number,
    maxPositionEmbeddings: number,
    base: number,
    isNeoxStyle: boolean,
    readonly scalingFactor: number,
    dtype: DType | string,
    readonly betaFast = 32,
    readonly betaSlow = 1,
    readonly truncate = true,
    readonly attentionFactor: number | null = null,
  ) {
    // the base class builds a one-row plain cache; the YaRN cache replaces it (built, not copied: the meta backend that
    // plans weights holds no values to copy into)
    super(headSize, rotaryDim, 1, base, isNeoxStyle, dtype);
    const positions = Math.floor(maxPositionEmbeddings * scalingFactor);
    this.scaling = { ropeType: 'yarn', factor: scalingFactor, betaFast, betaSlow, originalMaxPositionEmbeddings: maxPositionEmbeddings, truncate, attentionFactor };
    const cache = yarnCosSinCache(rotaryDim, positions, base, this.scaling, Math.fround);
    const own = this as unknown as { cosSinCache: Tensor; maxPositionEmbeddings: number };
    own.cosSinCache.dispose();
    own.cosSinCache = this.registerParameter('cos_sin_cache', Tensor.fromArray(this.ctx.backend, cache, [positions, rotaryDim], this.dtype, { device: this.ctx.device }));
    own.maxPositionEmbeddings = positions;
  }
}

/** YaRNRotaryEmbedding's init args from a normalised scaling: [headSize, rotaryDim, original, base, neox, factor, dtype, betaFast, betaSlow, truncate, attentionFactor]. */
export function yarnRotaryArgs(headSize: number, base: number, s: YarnRopeScaling, dtype: DType | string): unknown[] {
  return [headSize, headSize, s.originalMaxPositionEmbeddings, base, true, s.factor, dtype, s.betaFast, s.betaSlow, s.truncate, s.attentionFactor];
}

/** gpt-oss's rope_scaling (openai/gpt-oss-20b and -120b config.json). */
export const GPT_OSS_YARN_SCALING: YarnRopeScaling = { ropeType: 'yarn', factor: 32, betaFast: 32, betaSlow: 1, originalMaxPositionEmbeddings: 4096, truncate: false, attentionFactor: null };

interface YarnCase {
  name: string;
  dtype: DType;
  T: number;
  NQ: number;
  NK: number;
  D: number;
  base: number;
  scaling: YarnRopeScaling;
}

function yarnCase(r: YarnCase) {
  const P = Math.floor(r.scaling.originalMaxPositionEmbeddings * r.scaling.factor);
  return {
    name: r.name,
    dtype: r.dtype,
    dims: { T: r.T, NQ: r.NQ, NK: r.NK, D: r.D, R: r.D, P, HQ: r.NQ * r.D, HK: r.NK * r.D },
    init: yarnRotaryArgs(r.D, r.base, r.scaling, r.dtype),
  };
}

const initScaling = (init: readonly unknown[]): YarnRopeScaling => ({
  ropeType: 'yarn',
  factor: init[5] as number,
  betaFast: (init[7] as number | undefined) ?? 32,
  betaSlow: (init[8] as number | undefined) ?? 1,
  originalMaxPositionEmbeddings: init[2] as number,
  truncate: (init[9] as boolean | undefined) ?? true,
  attentionFactor: (init[10] as number | null | undefined) ?? null,
});

export const yarnRotaryEmbTask = defineTask(
  {
    id: 'L1/yarn_rotary_emb',
    level: 1,
    className: 'YaRNRotaryEmbedding',
    family: [DENSE_MOE_LLM],
    architectures: ['deepseek', 'glm', 'gpt_oss'],
    mirrors: 'vllm.model_executor.layers.rotary_embedding.YaRNScalingRotaryEmbedding',
    description:
      "YaRN rotary embedding of query and key (neox pairs): the cos/sin cache over original * factor positions from HF's blend of extrapolated and interpolated frequencies, scaled by the attention factor 0.1 ln(factor) + 1.",
    init: [
      { name: 'headSize', type: 'int' },
      { name: 'rotaryDim', type: 'int' },
      { name: 'maxPositionEmbeddings', type: 'int', doc: 'the original context (rope_scaling.original_max_position_embeddings); the cache holds it * scalingFactor positions' },
      { name: 'base', type: 'float' },
      { name: 'isNeoxStyle', type: 'bool' },
      { name: 'scalingFactor', type: 'float' },
      { name: 'dtype', type: 'dtype', doc: 'dtype of cos_sin_cache (computed in float32)' },
      { name: 'betaFast', type: 'float', optional: true, default: 32 },
      { name: 'betaSlow', type: 'float', optional: true, default: 1 },
      { name: 'truncate', type: 'bool', optional: true, default: true, doc: 'round the correction range to whole dims (gpt-oss: false)' },
      { name: 'attentionFactor', type: 'float', optional: true, default: null, doc: 'null: 0.1 ln(scalingFactor) + 1' },
    ],
    inputs: [
      { name: 'positions', dtype: 'i64', shape: ['T'], doc: 'in [0, P)' },
      { name: 'query', dtype: 'act', shape: ['T', 'HQ'], doc: 'HQ = NQ * D' },
      { name: 'key', dtype: 'act', shape: ['T', 'HK'], optional: true, doc: 'HK = NK * D' },
    ],
    outputs: [
      { name: 'query', dtype: 'act', shape: ['T', 'HQ'] },
      { name: 'key', dtype: 'act', shape: ['T', 'HK'], optional: true },
    ],
    cases: {
      ci: [
        yarnCase({ name: 'gpt-oss-yarn-small-f32', dtype: 'f32', T: 9, NQ: 4, NK: 2, D: 16, base: 10000, scaling: { ...GPT_OSS_YARN_SCALING, factor: 4, originalMaxPositionEmbeddings: 64 } }),
        yarnCase({ name: 'truncated-yarn-head64-f32', dtype: 'f32', T: 6, NQ: 2, NK: 1, D: 64, base: 150000, scaling: { ...GPT_OSS_YARN_SCALING, factor: 8, originalMaxPositionEmbeddings: 128, truncate: true } }),
        yarnCase({ name: 'gpt-oss-yarn-small-bf16', dtype: 'bf16', T: 7, NQ: 4, NK: 1, D: 32, base: 150000, scaling: { ...GPT_OSS_YARN_SCALING, factor: 2, originalMaxPositionEmbeddings: 256 } }),
      ],
      production: [
        yarnCase({ name: 'gpt-oss-decode-b32', dtype: 'bf16', T: 32, NQ: 64, NK: 8, D: 64, base: 150000, scaling: GPT_OSS_YARN_SCALING }),
        yarnCase({ name: 'gpt-oss-prefill-4096', dtype: 'bf16', T: 4096, NQ: 64, NK: 8, D: 64, base: 150000, scaling: GPT_OSS_YARN_SCALING }),
      ],
    },
  },
  {
    baseline: YaRNRotaryEmbedding,
    makeInputs: (c, ctx, rng) => {
      const { T, P, HQ, HK } = c.dims as { T: number; P: number; HQ: number; HK: number };
      const pos = Array.from({ length: T }, () => rng.int(0, P));
      if (T > 1) pos[1] = P - 1;
      if (T > 2) pos[2] = 0;
      return [fromInts(ctx, pos, [T], 'i64'), randn(ctx, rng, [T, HQ], c.dtype), randn(ctx, rng, [T, HK], c.dtype)];
    },
    // cos_sin_cache is a function of the init args: the reference rebuilds it in float64 from them
    initParameters: () => {},
    collectOutputs: (_args, result) => (result as [Tensor, Tensor | null]).filter((t): t is Tensor => t !== null),
    reference: ([positions, query, key], _params, c) => {
      const D = c.init[0] as number;
      const P = c.dims.P!;
      const cache: HostArray = hostArray([P, D], yarnCosSinCache(D, P, c.init[3] as number, initScaling(c.init)));
      const out = [rotaryReference(positions!, query!, cache, D, true)];
      if (key) out.push(rotaryReference(positions!, key, cache, D, true));
      return out;
    },
    work: (c) => {
      const { T, NQ, NK, D } = c.dims as { T: number; NQ: number; NK: number; D: number };
      const it = DTYPE_INFO[c.dtype].itemsize;
      const cacheIt = DTYPE_INFO[parseDType(c.init[6] as string)].itemsize;
      return { bytes: bytesOf([T], 8) + bytesOf([T, D], cacheIt) + 2 * bytesOf([T, (NQ + NK) * D], it), flops: 3 * T * (NQ + NK) * D };
    },
  },
);
