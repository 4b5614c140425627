/**
 * Dense float64 references of the Llama spine (L2 attention / llama_mlp / parallel_embedding, L3 decoder
 * layer, L4 model) on host arrays. Written straight from the math, independent of the module code and of
 * the paged path: every sequence's keys are the dense concatenation of its cached prefix and its new
 * tokens, and each query attends causally over them (within the sliding window).
 */
import type { HostArray } from '@fastkernels/core';
import { yarnAttentionFactor, yarnInvFreq } from '../../tasks/L1/rotary/yarn_rotary_emb.js';
import type { LlamaConfig, LlamaRopeScaling } from './config.js';

/** A sequence of a step: its new tokens [start, start + n) sit at positions ctx .. ctx + n - 1. */
export interface DenseSeq {
  readonly start: number;
  readonly n: number;
  /** Tokens already in the cache (0 for a prefill). */
  readonly ctx: number;
  /** Per layer: the cached keys / values of positions [0, ctx), dense [ctx, nKv, D]. */
  readonly prefixK: readonly Float64Array[];
  readonly prefixV: readonly Float64Array[];
}

export interface AttnGeometry {
  readonly hiddenSize: number;
  readonly numHeads: number;
  readonly numKvHeads: number;
  readonly headDim: number;
  readonly ropeTheta: number;
  readonly ropeScaling: LlamaRopeScaling | null;
  readonly slidingWindow: number;
}

type Params = ReadonlyMap<string, HostArray>;

function param(params: Params, name: string): HostArray {
  const p = params.get(name);
  if (!p) throw new Error(`reference: parameter '${name}' missing (have ${[...params.keys()].join(', ')})`);
  return p;
}

/** y[r, :] = x[r, :] W^T + b for x [rows, K], W [N, K]. */
export function denseLinear(x: Float64Array, rows: number, w: HostArray, b: HostArray | null | undefined): Float64Array {
  const [N, K] = w.shape as [number, number];
  const y = new Float64Array(rows * N);
  for (let r = 0; r < rows; r++) {
    for (let j = 0; j < N; j++) {
      let acc = b ? b.data[j]! : 0;
      const xo = r * K;
      const wo = j * K;
      for (let k = 0; k < K; k++) acc += x[xo + k]! * w.data[wo + k]!;
      y[r * N + j] = acc;
    }
  }
  return y;
}

export function denseRmsNorm(x: Float64Array, rows: number, w: HostArray, eps: number): Float64Array {
  const H = w.data.length;
  const y = new Float64Array(rows * H);
  for (let r = 0; r < rows; r++) {
    let ss = 0;
    for (let j = 0; j < H; j++) ss += x[r * H + j]! ** 2;
    const inv = 1 / Math.sqrt(ss / H + eps);
    for (let j = 0; j < H; j++) y[r * H + j] = x[r * H + j]! * inv * w.data[j]!;
  }
  return y;
}

/** Rotation angle of frequency pair i at position p (neox pairs (i, i + D/2)), with llama3 / linear / YaRN scaling. */
export function ropeAngles(headDim: number, theta: number, scaling: LlamaRopeScaling | null): (pos: number, i: number) => number {
  const half = headDim / 2;
  if (scaling?.ropeType === 'yarn') {
    const yarn = yarnInvFreq(headDim, theta, scaling);
    return (pos, i) => pos * yarn[i]!;
  }
  const inv = new Float64Array(half);
  for (let i = 0; i < half; i++) {
    let f = 1 / Math.pow(theta, (2 * i) / headDim);
    if (scaling?.ropeType === 'llama3') {
      const { factor, lowFreqFactor: lo, highFreqFactor: hi, originalMaxPositionEmbeddings: orig } = scaling;
      const wl = (2 * Math.PI) / f;
      if (wl > orig / lo) f /= factor;
      else if (wl >= orig / hi) {
        const s = (orig / wl - lo) / (hi - lo);
        f = (1 - s) * (f / factor) + s * f;
      }
    }
    inv[i] = f;
  }
  const posScale = scaling?.ropeType === 'linear' ? 1 / scaling.factor : 1;
  return (pos, i) => pos * posScale * inv[i]!;
}

/** The factor rotary scales q and k by (YaRN's attention factor; 1 otherwise): q.k carries its square. */
export const ropeMagnitude = (scaling: LlamaRopeScaling | null): number => (scaling?.ropeType === 'yarn' ? yarnAttentionFactor(scaling) : 1);

/** Rotate every head of x [T, nHeads * D] in place (neox style) at positions[t]. */
export function denseRope(x: Float64Array, positions: ArrayLike<number>, nHeads: number, D: number, angle: (pos: number, i: number) => number): void {
  const half = D / 2;
  for (let t = 0; t < positions.length; t++) {
    for (let h = 0; h < nHeads; h++) {
      const base = (t * nHeads + h) * D;
      for (let i = 0; i < half; i++) {
        const a = angle(positions[t]!, i);
        const c = Math.cos(a);
        const s = Math.sin(a);
        const x1 = x[base + i]!;
        const x2 = x[base + half + i]!;
        x[base + i] = x1 * c - x2 * s;
        x[base + half + i] = x2 * c + x1 * s;
      }
    }
  }
}

/**
 * Causal GQA attention per sequence over [cached prefix ; new keys]: q [T, nq*D], k/v [T, nk*D] of the
 * step's tokens (k already rotated). sinks [nq] (gpt-oss): a per-head logit added to each softmax's denominator.
 * Returns [T, nq*D].
 */
export function denseCausalAttention(q: Float64Array, k: Float64Array, v: Float64Array, seqs: readonly DenseSeq[], layer: number, g: AttnGeometry, scale: number, sinks: ArrayLike<number> | null = null): Float64Array {
  const { numHeads: nq, numKvHeads: nk, headDim: D, slidingWindow: w } = g;
  const T = q.length / (nq * D);
  const out = new Float64Array(T * nq * D);
  for (const s of seqs) {
    const L = s.ctx + s.n;
    // dense keys / values of the whole sequence
    const K = new Float64Array(L * nk * D);
    const V = new Float64Array(L * nk * D);
    if (s.ctx > 0) {
      K.set(s.prefixK[layer]!.subarray(0, s.ctx * nk * D));
      V.set(s.prefixV[layer]!.subarray(0, s.ctx * nk * D));
    }
    K.set(k.subarray(s.start * nk * D, (s.start + s.n) * nk * D), s.ctx * nk * D);
    V.set(v.subarray(s.start * nk * D, (s.start + s.n) * nk * D), s.ctx * nk * D);
    for (let i = 0; i < s.n; i++) {
      const pos = s.ctx + i;
      const lo = w > 0 ? Math.max(0, pos - w + 1) : 0;
      for (let h = 0; h < nq; h++) {
        const kh = Math.floor(h / (nq / nk));
        const qo = ((s.start + i) * nq + h) * D;
        const sc = new Float64Array(pos + 1 - lo);
        let m = -Infinity;
        for (let j = lo; j <= pos; j++) {
          let dot = 0;
          for (let d = 0; d < D; d++) dot += q[qo + d]! * K[(j * nk + kh) * D + d]!;
          sc[j - lo] = dot * scale;
          m = Math.max(m, dot * scale);
        }
        const sink = sinks ? sinks[h]! : -Infinity;
        m = Math.max(m, sink);
        let sum = Math.exp(sink - m);
        for (let j = 0; j < sc.length; j++) sum += sc[j] = Math.exp(sc[j]! - m);
        for (let j = lo; j <= pos; j++) {
          const p = sc[j - lo]! / sum;
          for (let d = 0; d < D; d++) out[qo + d]! += p * V[(j * nk + kh) * D + d]!;
        }
      }
    }
  }
  return out;
}

/**
 * LlamaAttention: qkv projection, rotary, causal attention over prefix + new tokens, o projection. YaRN's magnitude
 * scales the rotated q and k; the layer's `sinks` parameter, when it has one, joins each softmax.
 */
export function denseAttentionLayer(hidden: Float64Array, positions: ArrayLike<number>, params: Params, prefix: string, g: AttnGeometry, seqs: readonly DenseSeq[], layer: number): Float64Array {
  const T = positions.length;
  const { numHeads: nq, numKvHeads: nk, headDim: D } = g;
  const qkv = denseLinear(hidden, T, param(params, `${prefix}qkv_proj.weight`), params.get(`${prefix}qkv_proj.bias`));
  const width = (nq + 2 * nk) * D;
  const q = new Float64Array(T * nq * D);
  const k = new Float64Array(T * nk * D);
  const v = new Float64Array(T * nk * D);
  for (let t = 0; t < T; t++) {
    q.set(qkv.subarray(t * width, t * width + nq * D), t * nq * D);
    k.set(qkv.subarray(t * width + nq * D, t * width + (nq + nk) * D), t * nk * D);
    v.set(qkv.subarray(t * width + (nq + nk) * D, (t + 1) * width), t * nk * D);
  }
  const angle = ropeAngles(D, g.ropeTheta, g.ropeScaling);
  denseRope(q, positions, nq, D, angle);
  denseRope(k, positions, nk, D, angle);
  // YaRN's cache scales the rotated q and k (the step's keys as they enter the cache; a cached prefix is as stored)
  const mag = ropeMagnitude(g.ropeScaling);
  if (mag !== 1) for (const x of [q, k]) for (let i = 0; i < x.length; i++) x[i]! *= mag;
  const attn = denseCausalAttention(q, k, v, seqs, layer, g, 1 / Math.sqrt(D), params.get(`${prefix}sinks`)?.data ?? null);
  return denseLinear(attn, T, param(params, `${prefix}o_proj.weight`), params.get(`${prefix}o_proj.bias`));
}

/** LlamaMLP: down(silu(gate) * up) with gate | up merged in gate_up_proj. */
export function denseMlp(x: Float64Array, rows: number, params: Params, prefix: string): Float64Array {
  const gu = denseLinear(x, rows, param(params, `${prefix}gate_up_proj.weight`), params.get(`${prefix}gate_up_proj.bias`));
  const I = gu.length / rows / 2;
  const a = new Float64Array(rows * I);
  for (let r = 0; r < rows; r++) {
    for (let j = 0; j < I; j++) {
      const g = gu[r * 2 * I + j]!;
      a[r * I + j] = (g / (1 + Math.exp(-g))) * gu[r * 2 * I + I + j]!;
    }
  }
  return denseLinear(a, rows, param(params, `${prefix}down_proj.weight`), params.get(`${prefix}down_proj.bias`));
}

/** The config fields the attention geometry and the decoder stack read: Llama's, the MoE models' and gpt-oss's have them. */
export type DecoderStackConfig = Pick<
  LlamaConfig,
  'hiddenSize' | 'numAttentionHeads' | 'numKeyValueHeads' | 'headDim' | 'ropeTheta' | 'ropeScaling' | 'slidingWindows' | 'rmsNormEps' | 'numHiddenLayers'
>;

/** A layer's attention geometry (its sliding window, or 0 for full attention). */
export function attnGeometry(cfg: DecoderStackConfig, layer: number): AttnGeometry {
  return {
    hiddenSize: cfg.hiddenSize,
    numHeads: cfg.numAttentionHeads,
    numKvHeads: cfg.numKeyValueHeads,
    headDim: cfg.headDim,
    ropeTheta: cfg.ropeTheta,
    ropeScaling: cfg.ropeScaling,
    slidingWindow: cfg.slidingWindows[layer] ?? 0,
  };
}

/**
 * A pre-norm decoder layer over the module tree's parameters (prefix `model.layers.N.` or ''), unfused, as vLLM's
 * decoder layers run: residual' = hidden (+ residual); residual'' = residual' + attn(norm(residual'));
 * returns [ffn(norm(residual'')), residual'']. attn and ffn take [T, H] rows (T = positions.length).
 */
export function preNormDecoderLayer(
  hidden: Float64Array,
  residual: Float64Array | null,
  positions: ArrayLike<number>,
  params: Params,
  prefix: string,
  rmsNormEps: number,
  attn: (x: Float64Array) => Float64Array,
  ffn: (y: Float64Array) => Float64Array,
): [Float64Array, Float64Array] {
  const T = positions.length;
  const r1 = residual ? hidden.map((x, i) => x + residual[i]!) : Float64Array.from(hidden);
  const a = attn(denseRmsNorm(r1, T, param(params, `${prefix}input_layernorm.weight`), rmsNormEps));
  const r2 = r1.map((v, i) => v + a[i]!);
  return [ffn(denseRmsNorm(r2, T, param(params, `${prefix}post_attention_layernorm.weight`), rmsNormEps)), r2];
}

/** LlamaDecoderLayer, unfused: preNormDecoderLayer with Llama's attention and MLP. */
export function denseDecoderLayer(hidden: Float64Array, residual: Float64Array | null, positions: ArrayLike<number>, params: Params, prefix: string, cfg: LlamaConfig, layer: number, seqs: readonly DenseSeq[]): [Float64Array, Float64Array] {
  return preNormDecoderLayer(
    hidden, residual, positions, params, prefix, cfg.rmsNormEps,
    (x) => denseAttentionLayer(x, positions, params, `${prefix}self_attn.`, attnGeometry(cfg, layer), seqs, layer),
    (y) => denseMlp(y, positions.length, params, `${prefix}mlp.`),
  );
}

/**
 * A decoder-only model's forward over its parameters: embed the ids, run `decoderLayer` for each layer (prefix
 * `model.layers.N.`), final norm of hidden + residual. Returns the final hidden states [T, H].
 */
export function decoderStackReference(
  ids: ArrayLike<number>,
  params: Params,
  cfg: Pick<DecoderStackConfig, 'hiddenSize' | 'numHiddenLayers' | 'rmsNormEps'>,
  decoderLayer: (hidden: Float64Array, residual: Float64Array | null, prefix: string, layer: number) => [Float64Array, Float64Array],
): Float64Array {
  const T = ids.length;
  const H = cfg.hiddenSize;
  const emb = param(params, 'model.embed_tokens.weight');
  let h: Float64Array = new Float64Array(T * H);
  for (let t = 0; t < T; t++) h.set(emb.data.subarray(ids[t]! * H, (ids[t]! + 1) * H), t * H);
  let res: Float64Array | null = null;
  for (let l = 0; l < cfg.numHiddenLayers; l++) [h, res] = decoderLayer(h, res, `model.layers.${l}.`, l);
  return denseRmsNorm(h.map((v, i) => v + res![i]!), T, param(params, 'model.norm.weight'), cfg.rmsNormEps);
}

/** LlamaForCausalLM.forward: embed, layers, final norm (of hidden + residual). Returns [T, H]. */
export function denseModel(ids: ArrayLike<number>, positions: ArrayLike<number>, params: Params, cfg: LlamaConfig, seqs: readonly DenseSeq[]): Float64Array {
  return decoderStackReference(ids, params, cfg, (h, res, prefix, l) => denseDecoderLayer(h, res, positions, params, prefix, cfg, l, seqs));
}
