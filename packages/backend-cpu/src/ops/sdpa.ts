/**
 * Dense attention in float64: F.scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale,
 * enable_gqa) with PyTorch's semantics (its math reference), for inference (dropout_p = 0).
 */
import { formatShape, type Backend, type Tensor } from '@fastkernels/core';
import { broadcastShapes, expectFloat, gatherBroadcast, output } from '../strided.js';

export interface SdpaOptions {
  /** bool (true = may attend) or float (added to the scores), broadcastable to [..., L, S]. */
  readonly attn_mask?: Tensor | null;
  readonly dropout_p?: number;
  /** A lower-triangular mask aligned to the top-left corner: query i sees keys 0..i (torch's tril(diagonal=0)). */
  readonly is_causal?: boolean;
  /** Default 1 / sqrt(E). */
  readonly scale?: number | null;
  /** key / value with Hkv heads serve Hq = g * Hkv query heads: query head h reads kv head floor(h / g) (repeat_interleave). */
  readonly enable_gqa?: boolean;
}

/**
 * query [..., Hq, L, E], key [..., Hkv, S, E], value [..., Hkv, S, Ev] -> [..., Hq, L, Ev] in query's dtype. Leading
 * dims broadcast (as the math reference's matmuls do). A row whose every key is masked out gives zeros, as torch's math
 * path (_safe_softmax) does since 2.5, rather than NaN.
 */
export function scaledDotProductAttention(backend: Backend, query: Tensor, key: Tensor, value: Tensor, options: SdpaOptions = {}): Tensor {
  const what = 'scaled_dot_product_attention';
  const { attn_mask: mask = null, dropout_p = 0, is_causal = false, scale = null, enable_gqa = false } = options;
  for (const [n, t] of [['query', query], ['key', key], ['value', value]] as const) {
    expectFloat(t, what, n);
    if (t.rank < 2) throw new RangeError(`${what}: ${n} needs at least 2 dims [..., seq, head_dim], got ${formatShape(t.shape)}`);
  }
  if (key.dtype !== query.dtype || value.dtype !== query.dtype) throw new TypeError(`${what}: query (${query.dtype}), key (${key.dtype}) and value (${value.dtype}) must have one dtype`);
  if (dropout_p !== 0) throw new RangeError(`${what}: dropout_p must be 0 here (an inference reference), got ${dropout_p}`);
  if (is_causal && mask) throw new RangeError(`${what}: attn_mask must not be given when is_causal is true (as in torch)`);
  const L = query.shape[query.rank - 2]!;
  const E = query.shape[query.rank - 1]!;
  const S = key.shape[key.rank - 2]!;
  const Ev = value.shape[value.rank - 1]!;
  if (key.shape[key.rank - 1] !== E) throw new RangeError(`${what}: key ${formatShape(key.shape)} head dim must equal query's ${E} (query ${formatShape(query.shape)})`);
  if (value.shape[value.rank - 2] !== S) throw new RangeError(`${what}: value ${formatShape(value.shape)} must have the ${S} keys of key ${formatShape(key.shape)}`);
  const qLead = query.shape.slice(0, -2);
  let kLead = key.shape.slice(0, -2);
  const vLead = value.shape.slice(0, -2);
  if (kLead.length !== vLead.length || kLead.some((d, i) => d !== vLead[i])) throw new RangeError(`${what}: key ${formatShape(key.shape)} and value ${formatShape(value.shape)} must share their leading dims`);
  // GQA: repeat key/value heads (dim -3) g times so they broadcast like plain attention
  let group = 1;
  if (enable_gqa && query.rank >= 3 && key.rank >= 3) {
    const Hq = query.shape[query.rank - 3]!;
    const Hkv = key.shape[key.rank - 3]!;
    if (Hkv === 0 || Hq % Hkv !== 0) throw new RangeError(`${what}: enable_gqa needs query heads (${Hq}) to be a multiple of key/value heads (${Hkv}); query ${formatShape(query.shape)}, key ${formatShape(key.shape)}`);
    group = Hq / Hkv;
    kLead = [...kLead.slice(0, -1), Hq];
  }
  let lead: number[];
  try {
    lead = broadcastShapes(qLead, kLead, what);
  } catch {
    throw new RangeError(`${what}: batch/head dims of query ${formatShape(query.shape)} and key ${formatShape(key.shape)} do not broadcast${enable_gqa ? '' : ' (different head counts need enable_gqa=true)'}`);
  }
  const nb = lead.reduce((p, d) => p * d, 1);
  const Q = gatherBroadcast(query, [...lead, L, E], what);
  // key / value: broadcast over their own (un-repeated) head count, then index head h / group
  const kvLead = group === 1 ? lead : [...lead.slice(0, -1), lead[lead.length - 1]! / group];
  const K = gatherBroadcast(key, [...kvLead, S, E], what);
  const V = gatherBroadcast(value, [...kvLead, S, Ev], what);
  let M: Float64Array | null = null;
  let maskBool = false;
  if (mask) {
    maskBool = mask.dtype === 'bool';
    if (!maskBool) expectFloat(mask, what, 'attn_mask');
    try {
      M = gatherBroadcast(mask, [...lead, L, S], what);
    } catch {
      throw new RangeError(`${what}: attn_mask ${formatShape(mask.shape)} does not broadcast to [${[...lead, L, S].join(', ')}]`);
    }
  }
  const sc = scale ?? 1 / Math.sqrt(E);
  const Y = new Float64Array(nb * L * Ev);
  const scores = new Float64Array(S);
  const innerHeads = lead.length > 0 ? lead[lead.length - 1]! : 1;
  for (let b = 0; b < nb; b++) {
    // the kv batch index: the same outer index, head divided by the group
    const kb = group === 1 ? b : Math.floor(b / innerHeads) * (innerHeads / group) + Math.floor((b % innerHeads) / group);
    for (let i = 0; i < L; i++) {
      const q0 = (b * L + i) * E;
      let max = -Infinity;
      for (let j = 0; j < S; j++) {
        let s: number;
        const allowed = !(is_causal && j > i) && !(maskBool && M![(b * L + i) * S + j] === 0);
        if (!allowed) {
          s = -Infinity;
        } else {
          s = 0;
          const k0 = (kb * S + j) * E;
          for (let d = 0; d < E; d++) s += Q[q0 + d]! * K[k0 + d]!;
          s *= sc;
          if (M && !maskBool) s += M[(b * L + i) * S + j]!;
        }
        scores[j] = s;
        if (s > max) max = s;
      }
      const y0 = (b * L + i) * Ev;
      if (max === -Infinity) continue; // every key masked: zeros
      let sum = 0;
      for (let j = 0; j < S; j++) {
        scores[j] = Math.exp(scores[j]! - max);
        sum += scores[j]!;
      }
      for (let j = 0; j < S; j++) {
        const p = scores[j]! / sum;
        const v0 = (kb * S + j) * Ev;
        for (let d = 0; d < Ev; d++) Y[y0 + d]! += p * V[v0 + d]!;
      }
    }
  }
  return output(backend, [...lead, L, Ev], query.dtype, Y, what);
}
