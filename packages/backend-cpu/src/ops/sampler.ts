import { counterUniform, formatShape, type Backend, type Tensor } from '@fastkernels/core';
import { expectFloat, expectRank, gather, gatherInts, output } from '../strided.js';

/**
 * THE SAMPLING ALGORITHM (every backend must reproduce it; GPU kernels compute the same steps in
 * float32, so they may differ from this float64 reference only at exact near-ties).
 *
 * For each row b of logits [B, V], with T = temperature[b], k = topK[b], p = topP[b], seed = seeds[b]:
 *  1. T == 0: return argmax_i logits[b, i] (NaN ignored; ties -> lowest index). Done.
 *  2. s_i = logits[b, i] / T.
 *  3. top-k, when 0 < k < V: keep i iff s_i >= (the k-th largest s); ties at the threshold are all kept.
 *     k <= 0 or k >= V: keep all.
 *  4. top-p, when p < 1: probabilities q_i = softmax(s) over the kept set; order the kept tokens by q
 *     descending (ties: lower index first); keep the shortest prefix whose running sum of q reaches
 *     >= p (always at least the first token). p >= 1: keep all.
 *  5. pi_i = softmax(s) over the (final) kept set, max-subtracted.
 *  6. Exponential race (equivalent to drawing from pi): E_i = -ln(counterUniform(seed_b, 0, i)) (slot-independent),
 *     return argmax over kept i of pi_i / E_i (ties -> lowest index).
 * Output: token ids [B] as i64. A row whose kept logits are all -inf or NaN falls back to step 1.
 */
export function sample(backend: Backend, logits: Tensor, temperature: Tensor, topK: Tensor, topP: Tensor, seeds: Tensor): Tensor {
  const what = 'sample';
  expectFloat(logits, what, 'logits');
  expectRank(logits, 2, what, 'logits [B, V]');
  const [B, V] = logits.shape as [number, number];
  for (const [name, t] of [['temperature', temperature], ['topK', topK], ['topP', topP], ['seeds', seeds]] as const) {
    if (t.numel !== B) throw new RangeError(`${what}: ${name} ${formatShape(t.shape)} must have ${B} entries (one per row)`);
  }
  if (V === 0) throw new RangeError(`${what}: logits ${formatShape(logits.shape)} have an empty vocabulary`);
  const L = gather(logits, `${what} logits`);
  const temps = gather(temperature, `${what} temperature`);
  const ks = gatherInts(topK, `${what} topK`);
  const ps = gather(topP, `${what} topP`);
  const seedv = gatherInts(seeds, `${what} seeds`);
  const ids = new Float64Array(B);
  for (let b = 0; b < B; b++) {
    const row = L.subarray(b * V, (b + 1) * V);
    const T = temps[b]!;
    if (!(T >= 0)) throw new RangeError(`${what}: temperature[${b}] = ${T} must be >= 0`);
    ids[b] = T === 0 ? argmax(row) : sampleRow(row, T, ks[b]!, ps[b]!, seedv[b]!, b);
  }
  return output(backend, [B], 'i64', ids, what);
}

/** First index of the largest non-NaN value (0 when there is none). */
function argmax(row: Float64Array): number {
  let best = -1;
  for (let i = 0; i < row.length; i++) {
    const v = row[i]!;
    if (!Number.isNaN(v) && (best < 0 || v > row[best]!)) best = i;
  }
  return Math.max(best, 0);
}

function sampleRow(row: Float64Array, T: number, k: number, p: number, seed: number, b: number): number {
  const V = row.length;
  const s = row.map((v) => v / T);
  let kept: number[] = [];
  if (k > 0 && k < V) {
    const sorted = Float64Array.from(s).sort(); // ascending, NaN last
    let finite = V;
    while (finite > 0 && Number.isNaN(sorted[finite - 1]!)) finite--;
    const threshold = k < finite ? sorted[finite - k]! : -Infinity; // the k-th largest non-NaN value
    for (let i = 0; i < V; i++) if (s[i]! >= threshold) kept.push(i);
  } else {
    for (let i = 0; i < V; i++) if (!Number.isNaN(s[i]!)) kept.push(i);
  }
  let probs = softmaxOver(s, kept);
  if (!probs) return argmax(row);
  if (p < 1) {
    const order = kept.map((_, j) => j).sort((x, y) => probs![y]! - probs![x]! || kept[x]! - kept[y]!);
    const prefix: number[] = [];
    let cum = 0;
    for (const j of order) {
      prefix.push(kept[j]!);
      cum += probs[j]!;
      if (cum >= p) break;
    }
    kept = prefix.sort((x, y) => x - y);
    probs = softmaxOver(s, kept)!;
  }
  let best = -1;
  let bestScore = -Infinity;
  for (let j = 0; j < kept.length; j++) {
    const i = kept[j]!;
    const score = probs[j]! / -Math.log(counterUniform(seed, 0, i)); // row 0: the draw depends on the seed, not the batch slot
    if (best < 0 || score > bestScore) {
      best = i;
      bestScore = score;
    }
  }
  return best;
}

/** Max-subtracted softmax of s over the indices `kept`; undefined when the max is not finite. */
function softmaxOver(s: Float64Array, kept: readonly number[]): Float64Array | undefined {
  let max = -Infinity;
  for (const i of kept) if (s[i]! > max) max = s[i]!;
  if (!Number.isFinite(max)) return undefined;
  const e = new Float64Array(kept.length);
  let sum = 0;
  for (let j = 0; j < kept.length; j++) {
    e[j] = Math.exp(s[kept[j]!]! - max);
    sum += e[j]!;
  }
  for (let j = 0; j < e.length; j++) e[j]! /= sum;
  return e;
}
