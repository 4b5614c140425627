import { DTYPE_INFO, Module, Tensor, defineTask, hostArray, parseDType, type DType, type HostArray } from '@fastkernels/core';
import { bytesOf, fromInts, randn } from '../../../common/inputs.js';
import { DENSE_MOE_LLM } from '../../families.js';

/** Llama-3.1 RoPE scaling (HF rope_scaling {rope_type: 'llama3', ...}), as vLLM's Llama3RotaryEmbedding takes it. */
export interface Llama3RopeScaling {
  readonly ropeType: 'llama3';
  readonly factor: number;
  readonly lowFreqFactor: number;
  readonly highFreqFactor: number;
  readonly originalMaxPositionEmbeddings: number;
}

export type RopeScaling = Llama3RopeScaling;

const f32 = Math.fround;

/**
 * inv_freq[i] = 1 / base^(2i / rotaryDim), i < rotaryDim / 2, in float32 as vLLM computes it
 * (torch.arange(0, rotary_dim, 2, dtype=float) / rotary_dim, base ** that, 1 / that), then, with llama3
 * scaling, Llama3RotaryEmbedding._compute_inv_freq's wavelength-based smooth interpolation.
 */
export function computeInvFreqF32(rotaryDim: number, base: number, ropeScaling?: RopeScaling | null): Float32Array {
  const half = rotaryDim / 2;
  const inv = new Float32Array(half);
  for (let i = 0; i < half; i++) {
    const e = f32(f32(2 * i) / rotaryDim);
    inv[i] = f32(1 / f32(Math.pow(f32(base), e)));
  }
  if (!ropeScaling) return inv;
  if (ropeScaling.ropeType !== 'llama3') throw new RangeError(`RotaryEmbedding: unsupported rope scaling '${String(ropeScaling.ropeType)}'`);
  const { factor, lowFreqFactor: low, highFreqFactor: high, originalMaxPositionEmbeddings: orig } = ropeScaling;
  const lowFreqWavelen = orig / low;
  const highFreqWavelen = orig / high;
  for (let i = 0; i < half; i++) {
    const f = inv[i]!;
    const waveLen = f32((2 * Math.PI) / f);
    const smooth = low !== high ? f32((f32(orig / waveLen) - low) / (high - low)) : 0;
    let nf: number;
    if (waveLen < highFreqWavelen) nf = f;
    else if (waveLen > lowFreqWavelen) nf = f32(f / factor);
    else nf = f32(f32(f32(1 - smooth) * f32(f / factor)) + f32(smooth * f));
    inv[i] = nf;
  }
  return inv;
}

/** cos_sin_cache [maxPos, rotaryDim] = cat(cos(t * inv_freq), sin(t * inv_freq)), computed in float32 like vLLM. */
export function computeCosSinCacheF32(rotaryDim: number, maxPositionEmbeddings: number, base: number, ropeScaling?: RopeScaling | null): Float32Array {
  const inv = computeInvFreqF32(rotaryDim, base, ropeScaling);
  const half = rotaryDim / 2;
  const cache = new Float32Array(maxPositionEmbeddings * rotaryDim);
  for (let t = 0; t < maxPositionEmbeddings; t++) {
    for (let i = 0; i < half; i++) {
      const freq = f32(t * inv[i]!);
      cache[t * rotaryDim + i] = Math.cos(freq);
      cache[t * rotaryDim + half + i] = Math.sin(freq);
    }
  }
  return cache;
}

/**
 * vLLM's RotaryEmbedding (CustomOp `rotary_embedding`, forward_native semantics), with vLLM's
 * Llama3RotaryEmbedding folded in as the optional `ropeScaling` argument (get_rope() picks the class from
 * the HF rope_scaling dict the same way).
 *
 * The constructor computes cos_sin_cache [maxPositionEmbeddings, rotaryDim] in float32 and stores it in
 * `dtype` (vLLM's `cache.to(dtype)`) as the parameter 'cos_sin_cache' (a non-persistent buffer in vLLM).
 * forward(positions [T], query [T, nq*headSize], key [T, nk*headSize] | null) -> [query', key'] rotates
 * the first rotaryDim dims of every head: neox style pairs (i, i + rotaryDim/2), GPT-J style pairs (2i, 2i+1).
 */
export class RotaryEmbedding extends Module {
  readonly cosSinCache: Tensor;
  readonly dtype: DType;
  constructor(
    readonly headSize: number,
    readonly rotaryDim: number,
    readonly maxPositionEmbeddings: number,
    readonly base: number,
    readonly isNeoxStyle: boolean,
    dtype: DType | string,
    readonly ropeScaling: RopeScaling | null = null,
  ) {
    super();
    if (!Number.isInteger(rotaryDim) || rotaryDim <= 0 || rotaryDim % 2 !== 0 || rotaryDim > headSize) {
      throw new RangeError(`RotaryEmbedding: rotaryDim ${rotaryDim} must be even, positive and <= headSize ${headSize}`);
    }
    this.dtype = parseDType(dtype);
    const cache = computeCosSinCacheF32(rotaryDim, maxPositionEmbeddings, base, ropeScaling);
    this.cosSinCache = this.registerParameter(
      'cos_sin_cache',
      Tensor.fromArray(this.ctx.backend, cache, [maxPositionEmbeddings, rotaryDim], this.dtype, { device: this.ctx.device }),
    );
  }

  forward(positions: Tensor, query: Tensor, key?: Tensor | null): [Tensor, Tensor | null] {
    return this.ctx.backend.ops.rotaryEmbedding(positions, query, key ?? null, this.cosSinCache, this.headSize, this.isNeoxStyle);
  }
}

/** vLLM's Llama3RotaryEmbedding constructor signature over RotaryEmbedding (not a task of its own). */
export class Llama3RotaryEmbedding extends RotaryEmbedding {
  constructor(
    headSize: number,
    rotaryDim: number,
    maxPositionEmbeddings: number,
    base: number,
    isNeoxStyle: boolean,
    dtype: DType | string,
    scalingFactor: number,
    lowFreqFactor: number,
    highFreqFactor: number,
    origMaxPosition: number,
  ) {
    super(headSize, rotaryDim, maxPositionEmbeddings, base, isNeoxStyle, dtype, {
      ropeType: 'llama3',
      factor: scalingFactor,
      lowFreqFactor,
      highFreqFactor,
      originalMaxPositionEmbeddings: origMaxPosition,
    });
  }
}

/** Float64 cos_sin_cache (for checking the float32 one): same formulas, no float32 rounding. */
export function cosSinCacheReference(rotaryDim: number, maxPositionEmbeddings: number, base: number, ropeScaling?: RopeScaling | null): HostArray {
  const half = rotaryDim / 2;
  const inv: number[] = [];
  for (let i = 0; i < half; i++) {
    let f = Math.pow(base, -(2 * i) / rotaryDim);
    if (ropeScaling) {
      const { factor, lowFreqFactor: low, highFreqFactor: high, originalMaxPositionEmbeddings: orig } = ropeScaling;
      const wavelen = (2 * Math.PI) / f;
      if (wavelen > orig / low) f = f / factor;
      else if (wavelen >= orig / high) {
        const smooth = (orig / wavelen - low) / (high - low);
        f = (1 - smooth) * (f / factor) + smooth * f;
      }
    }
    inv.push(f);
  }
  const out = hostArray([maxPositionEmbeddings, rotaryDim]);
  for (let t = 0; t < maxPositionEmbeddings; t++) {
    for (let i = 0; i < half; i++) {
      out.data[t * rotaryDim + i] = Math.cos(t * inv[i]!);
      out.data[t * rotaryDim + half + i] = Math.sin(t * inv[i]!);
    }
  }
  return out;
}

/**
 * Golden rotary embedding on one of query/key: x [T, n * headSize] (contiguous), positions [T],
 * cache [maxPos, rotaryDim]. Each head's pair (a, b) becomes (a cos - b sin, b cos + a sin).
 */
export function rotaryReference(positions: HostArray, x: HostArray, cache: HostArray, headSize: number, isNeoxStyle: boolean): HostArray {
  const [maxPos, rot] = cache.shape as [number, number];
  const half = rot / 2;
  const t = positions.data.length;
  const width = t === 0 ? 0 : x.data.length / t;
  if (width % headSize !== 0) throw new RangeError(`rotary: row width ${width} is not a multiple of headSize ${headSize}`);
  const heads = width / headSize;
  const out = hostArray(x.shape, x.data);
  for (let tok = 0; tok < t; tok++) {
    const pos = positions.data[tok]!;
    if (!Number.isInteger(pos) || pos < 0 || pos >= maxPos) throw new RangeError(`rotary: position ${pos} outside [0, ${maxPos})`);
    for (let h = 0; h < heads; h++) {
      const base = tok * width + h * headSize;
      for (let i = 0; i < half; i++) {
        const cos = cache.data[pos * rot + i]!;
        const sin = cache.data[pos * rot + half + i]!;
        const ia = isNeoxStyle ? base + i : base + 2 * i;
        const ib = isNeoxStyle ? base + half + i : base + 2 * i + 1;
        const a = x.data[ia]!;
        const b = x.data[ib]!;
        out.data[ia] = a * cos - b * sin;
        out.data[ib] = b * cos + a * sin;
      }
    }
  }
  return out;
}

/** Llama-3.1-8B's rope_scaling. */
export const LLAMA31_ROPE_SCALING: Llama3RopeScaling = {
  ropeType: 'llama3',
  factor: 8,
  lowFreqFactor: 1,
  highFreqFactor: 4,
  originalMaxPositionEmbeddings: 8192,
};

interface RopeCase {
  name: string;
  dtype: DType;
  T: number;
  NQ: number;
  NK: number;
  D: number;
  R: number;
  P: number;
  base: number;
  neox: boolean;
  scaling?: RopeScaling;
  noKey?: boolean;
}

function ropeCase(r: RopeCase) {
  const init: unknown[] = [r.D, r.R, r.P, r.base, r.neox, r.dtype];
  if (r.scaling) init.push(r.scaling);
  return {
    name: r.name,
    dtype: r.dtype,
    dims: { T: r.T, NQ: r.NQ, NK: r.NK, D: r.D, R: r.R, P: r.P, HQ: r.NQ * r.D, HK: r.NK * r.D },
    init,
    options: r.noKey ? { key: false } : {},
  };
}

export const rotaryEmbTask = defineTask(
  {
    id: 'L1/rotary_emb',
    level: 1,
    className: 'RotaryEmbedding',
    family: [DENSE_MOE_LLM],
    architectures: ['llama', 'qwen2', 'mistral', 'mixtral', 'deepseek', 'glm', 'gemma4', 'gpt_oss', 'qwen3_next', 'llama_eagle3', 'bitnet', 'llada', 'qwen2_vl', 'qwen2_5_omni', 'qwen3_vl'],
    mirrors: 'vllm.model_executor.layers.rotary_embedding.RotaryEmbedding',
    description:
      'Rotary position embedding of query and key from a float32-computed cos/sin cache: neox or GPT-J pairing, partial rotary, Llama-3.1 frequency scaling.',
    init: [
      { name: 'headSize', type: 'int' },
      { name: 'rotaryDim', type: 'int', doc: '<= headSize; the rest of each head passes through' },
      { name: 'maxPositionEmbeddings', type: 'int' },
      { name: 'base', type: 'float' },
      { name: 'isNeoxStyle', type: 'bool' },
      { name: 'dtype', type: 'dtype', doc: 'dtype of cos_sin_cache (computed in float32)' },
      {
        name: 'ropeScaling',
        type: 'object',
        optional: true,
        default: null,
        doc: "{ropeType: 'llama3', factor, lowFreqFactor, highFreqFactor, originalMaxPositionEmbeddings} (vLLM Llama3RotaryEmbedding)",
      },
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
        ropeCase({ name: 'small-neox', dtype: 'f32', T: 7, NQ: 4, NK: 2, D: 16, R: 16, P: 64, base: 10000, neox: true }),
        ropeCase({ name: 'small-gptj-partial-bf16', dtype: 'bf16', T: 5, NQ: 3, NK: 1, D: 32, R: 16, P: 128, base: 10000, neox: false }),
        ropeCase({ name: 'small-llama3-scaled', dtype: 'f32', T: 9, NQ: 4, NK: 1, D: 32, R: 32, P: 2048, base: 500000, neox: true, scaling: LLAMA31_ROPE_SCALING }),
        ropeCase({ name: 'small-query-only-partial', dtype: 'f32', T: 4, NQ: 2, NK: 2, D: 24, R: 8, P: 32, base: 10000, neox: true, noKey: true }),
      ],
      production: [
        ropeCase({ name: 'llama3.1-8b-decode', dtype: 'bf16', T: 32, NQ: 32, NK: 8, D: 128, R: 128, P: 131072, base: 500000, neox: true, scaling: LLAMA31_ROPE_SCALING }),
        ropeCase({ name: 'llama3.1-8b-prefill', dtype: 'bf16', T: 4096, NQ: 32, NK: 8, D: 128, R: 128, P: 131072, base: 500000, neox: true, scaling: LLAMA31_ROPE_SCALING }),
        ropeCase({ name: 'llama3-8b-decode', dtype: 'bf16', T: 32, NQ: 32, NK: 8, D: 128, R: 128, P: 8192, base: 500000, neox: true }),
      ],
    },
  },
  {
    baseline: RotaryEmbedding,
    makeInputs: (c, ctx, rng) => {
      const { T, P, HQ, HK } = c.dims as { T: number; P: number; HQ: number; HK: number };
      const pos = Array.from({ length: T }, () => rng.int(0, P));
      if (T > 1) pos[1] = P - 1; // the end of the cache
      if (T > 2) pos[2] = 0;
      const positions = fromInts(ctx, pos, [T], 'i64');
      const query = randn(ctx, rng, [T, HQ], c.dtype);
      const key = c.options.key === false ? null : randn(ctx, rng, [T, HK], c.dtype);
      return [positions, query, key];
    },
    // cos_sin_cache is a function of the init args, not a weight: keep what the constructor computed.
    initParameters: () => {},
    collectOutputs: (_args, result) => (result as [Tensor, Tensor | null]).filter((t): t is Tensor => t !== null),
    reference: ([positions, query, key], params, c) => {
      const cache = params.get('cos_sin_cache')!;
      const headSize = c.init[0] as number;
      const neox = c.init[4] as boolean;
      const out = [rotaryReference(positions!, query!, cache, headSize, neox)];
      if (key) out.push(rotaryReference(positions!, key, cache, headSize, neox));
      return out;
    },
    work: (c) => {
      const { T, NQ, NK, D, R } = c.dims as { T: number; NQ: number; NK: number; D: number; R: number };
      const it = DTYPE_INFO[c.dtype].itemsize;
      const cacheIt = DTYPE_INFO[parseDType(c.init[5] as string)].itemsize;
      const heads = NQ + (c.options.key === false ? 0 : NK);
      // read positions (i64), one cache row [R] per token, q/k; write q/k. Per rotated pair: 4 mul + 2 add.
      return {
        bytes: bytesOf([T], 8) + bytesOf([T, R], cacheIt) + 2 * bytesOf([T, heads * D], it),
        flops: 3 * T * heads * R,
      };
    },
  },
);
