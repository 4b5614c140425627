/**
 * The float64 references' hybrid glue (Qwen3-Next, Kimi-Linear), in plain loops over host arrays: a decoder layer in
 * vLLM's residual form with the layer type's mixer (the recurrent one run sequence by sequence from each one's state,
 * or attention over the step), the model (embed, the layers, the final norm) and greedy decoding by full forwards.
 * Each model's file gives its norm, mixers and feed-forward.
 */
import type { HostArray } from '@fastkernels/core';
import type { DenseSeq } from '../dense-moe-llm/reference.js';
import { refLinear } from './reference.js';

/** One layer's pieces, each over the step's tokens [T, D] (token-major) unless said. */
export interface HybridRefLayer<S> {
  /** The RMSNorm with this weight (the parameter name under the layer: 'input_layernorm.weight'). */
  norm(x: Float64Array, weight: string): Float64Array;
  /** A recurrent layer's mixer on one sequence's tokens [n, D] from its state (null: zeros); null on attention layers. */
  readonly recurrent: ((x: Float64Array, n: number, state: S | null) => { out: Float64Array; state: S }) | null;
  attention(x: Float64Array): Float64Array;
  feedForward(y: Float64Array, T: number): Float64Array;
}

/**
 * A decoder layer on the step's tokens (sequences `seqs`): r = h + residual; x = input_layernorm(r); the mixer; r' = r +
 * mixer; the feed-forward of post_attention_layernorm(r'). Returns [its output, r'] and, for a recurrent layer, each
 * sequence's final state.
 */
export function refHybridDecoderLayer<S>(hidden: Float64Array, residual: Float64Array | null, D: number, layer: HybridRefLayer<S>, seqs: readonly DenseSeq[], states: readonly (S | null)[]): { out: Float64Array; residual: Float64Array; states: S[] } {
  const T = hidden.length / D;
  const r1 = residual ? hidden.map((x, i) => x + residual[i]!) : Float64Array.from(hidden);
  const x = layer.norm(r1, 'input_layernorm.weight');
  let mixed: Float64Array;
  const finals: S[] = [];
  if (layer.recurrent) {
    const recurrent = layer.recurrent;
    mixed = new Float64Array(T * D);
    seqs.forEach((s, i) => {
      const r = recurrent(x.subarray(s.start * D, (s.start + s.n) * D), s.n, states[i] ?? null);
      mixed.set(r.out, s.start * D);
      finals.push(r.state);
    });
  } else mixed = layer.attention(x);
  const r2 = r1.map((v, i) => v + mixed[i]!);
  const y = layer.norm(r2, 'post_attention_layernorm.weight');
  return { out: layer.feedForward(y, T), residual: r2, states: finals };
}

/**
 * The model on the step's tokens: embed (the table [vocab, D]), the layers (layer(h, residual, l)), the final norm of
 * h + residual; hidden states [T, D].
 */
export function refHybridModel(ids: ArrayLike<number>, embedding: HostArray, D: number, numLayers: number, layer: (h: Float64Array, residual: Float64Array | null, l: number) => { out: Float64Array; residual: Float64Array }, finalNorm: (x: Float64Array) => Float64Array): Float64Array {
  const T = ids.length;
  let h: Float64Array = new Float64Array(T * D);
  for (let t = 0; t < T; t++) h.set(embedding.data.subarray(ids[t]! * D, (ids[t]! + 1) * D), t * D);
  let res: Float64Array | null = null;
  for (let l = 0; l < numLayers; l++) {
    const r = layer(h, res, l);
    h = r.out;
    res = r.residual;
  }
  return finalNorm(h.map((v, i) => v + res![i]!));
}

/**
 * Greedy continuation of `prompt` by full forwards of the whole sequence (no cache, no state carried): the tokens the
 * model picks. model(seq, positions, seqs) -> hidden [T, D]; head: the LM head's weight [vocab, D].
 */
export function refHybridGreedy(prompt: readonly number[], steps: number, head: HostArray, D: number, numLayers: number, model: (seq: readonly number[], positions: number[], seqs: DenseSeq[]) => Float64Array): number[] {
  const seq = [...prompt];
  const out: number[] = [];
  for (let s = 0; s < steps; s++) {
    const T = seq.length;
    const empty = Array.from({ length: numLayers }, () => new Float64Array(0));
    const h = model(seq, seq.map((_, i) => i), [{ start: 0, n: T, ctx: 0, prefixK: empty, prefixV: empty }]);
    const logits = refLinear(h.subarray((T - 1) * D), 1, head);
    const tok = logits.reduce((b, v, j) => (v > logits[b]! ? j : b), 0);
    out.push(tok);
    seq.push(tok);
  }
  return out;
}
