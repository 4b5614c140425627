/**
 * The recurrent group in float64: causal_conv1d (Dao-AILab causal_conv1d_fn), gated linear attention in its recurrent
 * and chunked forms (FLA fused_recurrent_gla / chunk_gla), and the gated delta rule (FLA fused_recurrent_gated_delta_rule) and
 * its per-channel-gated form KDA (fused_recurrent_kda).
 * FLA's layout: q, k [B, T, H, K], v [B, T, H, V] (head_first=False), states [B, H, K, V] in f32.
 */
import { DTYPE_INFO, formatShape, type Backend, type Tensor } from '@fastkernels/core';
import { silu } from '../math.js';
import { expectFloat, gather, gatherInts, output, scatter } from '../strided.js';

function expectShape(what: string, name: string, t: Tensor, shape: readonly number[]): void {
  if (t.rank !== shape.length || t.shape.some((d, i) => d !== shape[i])) throw new RangeError(`${what}: ${name} has shape ${formatShape(t.shape)}, expected ${formatShape(shape)}`);
}

export interface CausalConv1dOptions {
  readonly bias?: Tensor | null;
  /** vLLM's varlen form: [N + 1] offsets of N sequences packed along L of a B = 1 x (needs cache_indices). */
  readonly query_start_loc?: Tensor | null;
  /** vLLM: [N] row of the conv state pool (initial_states [slots, D, S >= W - 1]) of each sequence, updated in place; -1: padding. */
  readonly cache_indices?: Tensor | null;
  /** vLLM: [N] bool, false: the sequence starts from zeros (its row is still written). Absent: every live row is read. */
  readonly has_initial_state?: Tensor | null;
  /** [B, D, W - 1]: the inputs before x (a previous chunk's final_states); zeros when absent. */
  readonly initial_states?: Tensor | null;
  readonly return_final_states?: boolean;
  /** null, 'silu' or 'swish' (the same function). */
  readonly activation?: 'silu' | 'swish' | null;
}

/**
 * causal_conv1d_fn(x [B, D, L], weight [D, W], bias, initial_states, return_final_states, activation): a depthwise
 * convolution that sees only the past, out[b, d, t] = bias[d] + sum_w weight[d, w] * x'[b, d, t + w] with x' = [initial
 * states (or W - 1 zeros), x]; then silu when asked. final_states = the last W - 1 inputs of x' ([B, D, W - 1]).
 */
export function causalConv1d(backend: Backend, x: Tensor, weight: Tensor, options: CausalConv1dOptions = {}): [Tensor] | [Tensor, Tensor] {
  const what = 'causal_conv1d';
  const { bias = null, initial_states: init = null, return_final_states = false, activation = null } = options;
  expectFloat(x, what, 'x');
  expectFloat(weight, what, 'weight');
  if (x.rank !== 3) throw new RangeError(`${what}: x must be [batch, dim, seqlen], got ${formatShape(x.shape)}`);
  const [B, D, L] = x.shape as [number, number, number];
  if (weight.rank !== 2 || weight.shape[0] !== D) throw new RangeError(`${what}: weight ${formatShape(weight.shape)} must be [${D}, width] for x ${formatShape(x.shape)}`);
  const W = weight.shape[1]!;
  if (W < 1) throw new RangeError(`${what}: weight ${formatShape(weight.shape)} has width 0`);
  if (bias) expectShape(what, 'bias', bias, [D]);
  if (activation !== null && activation !== 'silu' && activation !== 'swish') throw new RangeError(`${what}: activation must be null, 'silu' or 'swish', got '${String(activation)}'`);
  if (options.cache_indices) {
    if (!init) throw new RangeError(`${what}: cache_indices needs initial_states, the conv state pool [slots, ${D}, state_len]`);
    if (return_final_states) throw new RangeError(`${what}: with cache_indices the final states are written into the pool in place: return_final_states must be false`);
    const ranges = sequenceRanges(what, 'query_start_loc', B, L, options.query_start_loc ?? null, 'x', formatShape(x.shape));
    return [convPooled(backend, what, x, weight, bias, init, ranges, options.cache_indices, 'cache_indices', options.has_initial_state ?? null, activation)];
  }
  if (options.query_start_loc || options.has_initial_state) throw new RangeError(`${what}: query_start_loc and has_initial_state are the pooled form: pass cache_indices and the conv state pool as initial_states`);
  if (init) expectShape(what, 'initial_states', init, [B, D, W - 1]);
  const X = gather(x, what);
  const Wt = gather(weight, what);
  const bv = bias ? gather(bias, what) : null;
  const I = init ? gather(init, what) : new Float64Array(B * D * (W - 1));
  const P = W - 1 + L; // length of x' per channel
  const Y = new Float64Array(B * D * L);
  const F = new Float64Array(B * D * (W - 1));
  const xp = new Float64Array(P);
  for (let b = 0; b < B; b++) {
    for (let d = 0; d < D; d++) {
      const bd = b * D + d;
      xp.set(I.subarray(bd * (W - 1), (bd + 1) * (W - 1)), 0);
      xp.set(X.subarray(bd * L, (bd + 1) * L), W - 1);
      for (let t = 0; t < L; t++) {
        let s = bv ? bv[d]! : 0;
        for (let w = 0; w < W; w++) s += Wt[d * W + w]! * xp[t + w]!;
        Y[bd * L + t] = activation ? silu(s) : s;
      }
      F.set(xp.subarray(P - (W - 1)), bd * (W - 1));
    }
  }
  const out = output(backend, [B, D, L], x.dtype, Y, what);
  return return_final_states ? [out, output(backend, [B, D, W - 1], x.dtype, F, what)] : [out];
}

/**
 * causal_conv1d_update(x [B, D] or [B, D, L], conv_state [B, D, S], weight [D, W], bias, activation) for decode steps:
 * x' = [conv_state, x], out = the last L outputs of the valid depthwise conv over x' (then silu when asked), and the new
 * state = the last S columns of x'. S >= W - 1. Dao-AILab's op updates conv_state in place; here the new state is a
 * second output (the registry's ops return fresh tensors), which the caller stores.
 */
export function causalConv1dUpdate(backend: Backend, x: Tensor, convState: Tensor, weight: Tensor, options: { bias?: Tensor | null; activation?: 'silu' | 'swish' | null; conv_state_indices?: Tensor | null } = {}): [Tensor, Tensor] | [Tensor] {
  const what = 'causal_conv1d_update';
  expectFloat(x, what, 'x');
  expectFloat(convState, what, 'conv_state');
  if (x.rank !== 2 && x.rank !== 3) throw new RangeError(`${what}: x must be [batch, dim] or [batch, dim, seqlen], got ${formatShape(x.shape)}`);
  const [B, D] = x.shape as [number, number];
  const L = x.rank === 3 ? x.shape[2]! : 1;
  if (options.conv_state_indices) {
    expectFloat(weight, what, 'weight');
    if (weight.rank !== 2 || weight.shape[0] !== D || weight.shape[1]! < 1) throw new RangeError(`${what}: weight ${formatShape(weight.shape)} must be [${D}, width]`);
    if (options.bias) expectShape(what, 'bias', options.bias, [D]);
    const xs = x.rank === 3 ? x : x.unsqueeze(2);
    const ranges: [number, number, number][] = Array.from({ length: B }, (_, b) => [b, 0, L]);
    const y = convPooled(backend, what, xs, weight, options.bias ?? null, convState, ranges, options.conv_state_indices, 'conv_state_indices', null, options.activation ?? null);
    if (xs === x) return [y];
    xs.dispose();
    const out = y.reshape([B, D]);
    y.dispose();
    return [out];
  }
  if (convState.rank !== 3 || convState.shape[0] !== B || convState.shape[1] !== D) throw new RangeError(`${what}: conv_state ${formatShape(convState.shape)} must be [${B}, ${D}, state_len]`);
  const S = convState.shape[2]!;
  if (weight.rank !== 2 || weight.shape[0] !== D) throw new RangeError(`${what}: weight ${formatShape(weight.shape)} must be [${D}, width]`);
  const W = weight.shape[1]!;
  if (W < 1 || S < W - 1) throw new RangeError(`${what}: conv_state length ${S} must be at least width - 1 = ${W - 1}`);
  const st = gather(convState, what);
  const xs = x.rank === 3 ? x : x.unsqueeze(2);
  try {
    // the last W - 1 state columns are the initial states of a causal conv over x
    const init = new Float64Array(B * D * (W - 1));
    for (let r = 0; r < B * D; r++) init.set(st.subarray(r * S + S - (W - 1), (r + 1) * S), r * (W - 1));
    const initT = output(backend, [B, D, W - 1], 'f64', init, what); // exact: no rounding of the state
    const [y] = causalConv1d(backend, xs, weight, { bias: options.bias ?? null, initial_states: initT, activation: options.activation ?? null });
    initT.dispose();
    const X = gather(xs, what);
    const next = new Float64Array(B * D * S);
    for (let r = 0; r < B * D; r++) {
      // x' = [state, x]; keep its last S columns
      for (let j = 0; j < S; j++) {
        const p = L + j; // position in x' = [state (S), x (L)]
        next[r * S + j] = p < S ? st[r * S + p]! : X[r * L + (p - S)]!;
      }
    }
    const out = x.rank === 3 ? y : y.reshape([B, D]);
    if (out !== y) y.dispose();
    return [out, output(backend, [B, D, S], convState.dtype, next, what)];
  } finally {
    if (xs !== x) xs.dispose();
  }
}

/** The sequences of a call: FLA's cu_seqlens / vLLM's query_start_loc packing N along the token axis of batch row 0, else the B rows. */
function sequenceRanges(what: string, cuName: string, B: number, T: number, cu: Tensor | null, xName: string, xShape: string): [number, number, number][] {
  const ranges: [number, number, number][] = [];
  if (!cu) {
    for (let b = 0; b < B; b++) ranges.push([b, 0, T]);
    return ranges;
  }
  if (B !== 1) throw new RangeError(`${what}: with ${cuName} the sequences are packed in batch row 0: ${xName} ${xShape} must have batch 1`);
  const c = gatherInts(cu, what);
  if (c.length < 1 || c[0] !== 0 || c[c.length - 1] !== T) throw new RangeError(`${what}: ${cuName} must run from 0 to T = ${T}, got [${[...c].join(', ')}]`);
  for (let n = 0; n + 1 < c.length; n++) {
    if (c[n + 1]! < c[n]!) throw new RangeError(`${what}: ${cuName} must not decrease, got [${[...c].join(', ')}]`);
    ranges.push([0, c[n]!, c[n + 1]!]);
  }
  return ranges;
}

/**
 * The pool rows a call names, checked: one per sequence, inside the pool, live ones distinct (the kernels update the pool
 * in place and in parallel on a device, so two live sequences on one row would race there). < 0: padding.
 */
function poolSlots(what: string, name: string, idx: Tensor, N: number, slots: number): Float64Array {
  const s = gatherInts(idx, what);
  if (s.length !== N || idx.rank !== 1) throw new RangeError(`${what}: ${name} ${formatShape(idx.shape)} must be [${N}], one per sequence`);
  const taken = new Map<number, number>();
  for (let n = 0; n < N; n++) {
    const v = s[n]!;
    if (v >= slots) throw new RangeError(`${what}: ${name}[${n}] = ${v} is outside the pool of ${slots} slots`);
    if (v < 0) continue;
    if (taken.has(v)) throw new RangeError(`${what}: ${name}[${n}] = ${v} repeats ${name}[${taken.get(v)}]: each live sequence needs its own pool slot`);
    taken.set(v, n);
  }
  return s;
}

/**
 * The conv over a pool of states (vLLM causal_conv1d_fn with cache_indices, causal_conv1d_update with
 * conv_state_indices): per sequence, x' = [pool row (S columns; zeros for padding or has_initial_state false), its
 * tokens], out = the conv over the last W - 1 + L columns of x', the row then set to the last S columns of x' (not for
 * padding). x [B, D, L] (B = 1 when packed); the pool [slots, D, S >= W - 1], updated in place.
 */
function convPooled(backend: Backend, what: string, x: Tensor, weight: Tensor, bias: Tensor | null, pool: Tensor, ranges: readonly [number, number, number][], idx: Tensor, idxName: string, his: Tensor | null, activation: 'silu' | 'swish' | null): Tensor {
  const [B, D, L] = x.shape as [number, number, number];
  const W = weight.shape[1]!;
  expectFloat(pool, what, 'the conv state pool');
  if (pool.rank !== 3 || pool.shape[1] !== D || pool.shape[2]! < W - 1) throw new RangeError(`${what}: the conv state pool ${formatShape(pool.shape)} must be [slots, ${D}, state_len >= ${W - 1}]`);
  const S = pool.shape[2]!;
  const N = ranges.length;
  const slots = poolSlots(what, idxName, idx, N, pool.shape[0]!);
  let init: Float64Array | null = null;
  if (his) {
    if (his.rank !== 1 || his.shape[0] !== N) throw new RangeError(`${what}: has_initial_state ${formatShape(his.shape)} must be [${N}]`);
    if (his.dtype !== 'bool' && DTYPE_INFO[his.dtype].kind !== 'int') throw new TypeError(`${what}: has_initial_state must be bool (or an integer 0 / 1), got ${his.dtype}`);
    init = gather(his, what);
  }
  const X = gather(x, what);
  const Wt = gather(weight, what);
  const bv = bias ? gather(bias, what) : null;
  const Y = new Float64Array(B * D * L);
  ranges.forEach(([b, t0, t1], n) => {
    const slot = slots[n]!;
    const n_t = t1 - t0;
    const row = slot >= 0 ? pool.select(0, slot) : null;
    const st = row && (!init || init[n]) ? gather(row, what) : new Float64Array(D * S);
    const xp = new Float64Array(S + n_t);
    const next = new Float64Array(D * S);
    for (let d = 0; d < D; d++) {
      xp.set(st.subarray(d * S, (d + 1) * S), 0);
      for (let t = 0; t < n_t; t++) xp[S + t] = X[(b * D + d) * L + t0 + t]!;
      for (let t = 0; t < n_t; t++) {
        let a = bv ? bv[d]! : 0;
        for (let w = 0; w < W; w++) a += Wt[d * W + w]! * xp[S - (W - 1) + t + w]!;
        Y[(b * D + d) * L + t0 + t] = activation ? silu(a) : a;
      }
      next.set(xp.subarray(n_t), d * S);
    }
    if (row) {
      scatter(row, next, what);
      row.dispose();
    }
  });
  return output(backend, [B, D, L], x.dtype, Y, what);
}

// ---------------------------------------------------------------------------------------------
// gated linear attention

export interface GlaOptions {
  /** Default K^-0.5. */
  readonly scale?: number | null;
  /** [N, H, K, V] (one per sequence); zeros when absent. With ssm_state_indices: the state pool [slots, H, K, V] f32. */
  readonly initial_state?: Tensor | null;
  readonly output_final_state?: boolean;
  /** FLA varlen: [N + 1] offsets of N sequences packed along T of a B = 1 input. */
  readonly cu_seqlens?: Tensor | null;
  /** vLLM: [N] pool slot of each sequence; the final states are written back into the pool (index < 0: padding). */
  readonly ssm_state_indices?: Tensor | null;
}

/** One sequence of a call: its batch row, its token range and where its state comes from / goes to. */
interface GlaSeq {
  readonly b: number;
  readonly t0: number;
  readonly t1: number;
  /** Pool slot (ssm_state_indices), -1 for padding, null without a pool. */
  readonly slot: number | null;
}

interface GlaInputs {
  readonly B: number;
  readonly T: number;
  readonly H: number;
  readonly K: number;
  readonly V: number;
  readonly Q: Float64Array;
  readonly Kt: Float64Array;
  readonly Vt: Float64Array;
  readonly G: Float64Array;
  /** Initial states of the sequences, [N, H, K, V]: updated in place to the final states. */
  readonly S: Float64Array;
  readonly seqs: readonly GlaSeq[];
  readonly scale: number;
}

function glaInputs(what: string, q: Tensor, k: Tensor, v: Tensor, gk: Tensor, o: GlaOptions): GlaInputs {
  for (const [n, t] of [['q', q], ['k', k], ['v', v], ['gk', gk]] as const) expectFloat(t, what, n);
  if (q.rank !== 4) throw new RangeError(`${what}: q must be [B, T, H, K], got ${formatShape(q.shape)}`);
  const [B, T, H, K] = q.shape as [number, number, number, number];
  expectShape(what, 'k', k, [B, T, H, K]);
  expectShape(what, 'gk', gk, [B, T, H, K]);
  if (v.rank !== 4 || v.shape[0] !== B || v.shape[1] !== T || v.shape[2] !== H) throw new RangeError(`${what}: v ${formatShape(v.shape)} must be [${B}, ${T}, ${H}, V] for q ${formatShape(q.shape)}`);
  const V = v.shape[3]!;
  const ranges: [number, number, number][] = [];
  if (o.cu_seqlens) {
    if (B !== 1) throw new RangeError(`${what}: with cu_seqlens q must be [1, T, H, K], got ${formatShape(q.shape)}`);
    const cu = gatherInts(o.cu_seqlens, what);
    if (cu[0] !== 0 || cu[cu.length - 1] !== T) throw new RangeError(`${what}: cu_seqlens must run from 0 to T = ${T}, got [${[...cu].join(', ')}]`);
    for (let n = 0; n + 1 < cu.length; n++) {
      if (cu[n + 1]! < cu[n]!) throw new RangeError(`${what}: cu_seqlens must not decrease, got [${[...cu].join(', ')}]`);
      ranges.push([0, cu[n]!, cu[n + 1]!]);
    }
  } else for (let b = 0; b < B; b++) ranges.push([b, 0, T]);
  const N = ranges.length;
  const per = H * K * V;
  const init = o.initial_state ?? null;
  const S = new Float64Array(N * per);
  let slots: Float64Array | null = null;
  if (o.ssm_state_indices) {
    slots = gatherInts(o.ssm_state_indices, what);
    if (!init) throw new RangeError(`${what}: ssm_state_indices needs initial_state, the state pool [slots, ${H}, ${K}, ${V}]`);
    if (init.rank !== 4 || init.shape[1] !== H || init.shape[2] !== K || init.shape[3] !== V) throw new RangeError(`${what}: the state pool ${formatShape(init.shape)} must be [slots, ${H}, ${K}, ${V}]`);
    if (slots.length !== N) throw new RangeError(`${what}: ${slots.length} ssm_state_indices for ${N} sequences`);
    const taken = new Map<number, number>();
    for (let n = 0; n < N; n++) {
      const s = slots[n]!;
      if (s >= init.shape[0]!) throw new RangeError(`${what}: ssm_state_indices[${n}] = ${s} is outside the pool of ${init.shape[0]} slots`);
      if (s < 0) continue; // padding: a zero state, nothing written back
      // in place and in parallel on a device: two live sequences on one slot would race there
      if (taken.has(s)) throw new RangeError(`${what}: ssm_state_indices[${n}] = ${s} repeats ssm_state_indices[${taken.get(s)}]: each live sequence needs its own pool slot`);
      taken.set(s, n);
      const row = init.select(0, s);
      S.set(gather(row, what), n * per);
      row.dispose();
    }
  } else if (init) {
    expectShape(what, 'initial_state', init, [N, H, K, V]);
    S.set(gather(init, what));
  }
  return {
    B, T, H, K, V,
    Q: gather(q, what), Kt: gather(k, what), Vt: gather(v, what), G: gather(gk, what), S,
    seqs: ranges.map(([b, t0, t1], n) => ({ b, t0, t1, slot: slots ? slots[n]! : null })),
    scale: o.scale ?? 1 / Math.sqrt(K),
  };
}

/** o in q's dtype; the final states as a second output, or (a pool) written back into their slots in place. */
function glaOutputs(backend: Backend, what: string, q: Tensor, inp: GlaInputs, O: Float64Array, o: GlaOptions): [Tensor] | [Tensor, Tensor] {
  const out = output(backend, [inp.B, inp.T, inp.H, inp.V], q.dtype, O, what);
  const per = inp.H * inp.K * inp.V;
  if (o.ssm_state_indices) {
    inp.seqs.forEach((s, n) => {
      if (s.slot === null || s.slot < 0) return;
      const row = o.initial_state!.select(0, s.slot);
      scatter(row, inp.S.subarray(n * per, (n + 1) * per), what);
      row.dispose();
    });
    return [out];
  }
  return o.output_final_state ? [out, output(backend, [inp.seqs.length, inp.H, inp.K, inp.V], 'f32', inp.S, what)] : [out];
}

/**
 * fused_recurrent_gla(q, k, v, gk, scale, initial_state, output_final_state, cu_seqlens, ssm_state_indices): per
 * sequence and head, token by token, S = diag(exp(gk_t)) S + k_t^T v_t and o_t = scale * q_t S. gk is the log forget
 * gate. Returns o [B, T, H, V] in q's dtype and, when asked, the final states [N, H, K, V] in f32 (with a state pool:
 * written into it instead).
 */
export function fusedRecurrentGla(backend: Backend, q: Tensor, k: Tensor, v: Tensor, gk: Tensor, options: GlaOptions = {}): [Tensor] | [Tensor, Tensor] {
  const what = 'fused_recurrent_gla';
  const inp = glaInputs(what, q, k, v, gk, options);
  const { T, H, K, V, Q, Kt, Vt, G, S, scale } = inp;
  const O = new Float64Array(inp.B * T * H * V);
  const acc = new Float64Array(V);
  inp.seqs.forEach(({ b, t0, t1 }, n) => {
    for (let h = 0; h < H; h++) {
      const s0 = (n * H + h) * K * V;
      for (let t = t0; t < t1; t++) {
        const qk = ((b * T + t) * H + h) * K;
        const vo = ((b * T + t) * H + h) * V;
        for (let i = 0; i < K; i++) {
          const decay = Math.exp(G[qk + i]!);
          const ki = Kt[qk + i]!;
          for (let j = 0; j < V; j++) S[s0 + i * V + j] = decay * S[s0 + i * V + j]! + ki * Vt[vo + j]!;
        }
        // o = q S row by row (each o[j] still sums over i in order; rows are contiguous, columns were V apart)
        acc.fill(0);
        for (let i = 0; i < K; i++) {
          const qi = Q[qk + i]!;
          const si = s0 + i * V;
          for (let j = 0; j < V; j++) acc[j]! += qi * S[si + j]!;
        }
        for (let j = 0; j < V; j++) O[vo + j] = scale * acc[j]!;
      }
    }
  });
  return glaOutputs(backend, what, q, inp, O, options);
}

/**
 * chunk_gla(q, k, v, g, scale, initial_state, output_final_state, chunk_size=64, cu_seqlens, ssm_state_indices): the
 * same function as fused_recurrent_gla computed chunk by chunk (each sequence's chunks start at its first token). With
 * b_t the running sum of g inside a chunk, o_t = scale * (q_t * exp(b_t)) S_0 + scale * sum_{s <= t} (q_t . (k_s *
 * exp(b_t - b_s))) v_s and S_end = exp(b_last) * S_0 + sum_s (k_s * exp(b_last - b_s))^T v_s: inter-chunk through the
 * state, intra-chunk as a masked attention (b_t - b_s <= 0 for s <= t when g <= 0, so every exponent is bounded).
 */
export function chunkGla(backend: Backend, q: Tensor, k: Tensor, v: Tensor, g: Tensor, options: GlaOptions & { chunk_size?: number } = {}): [Tensor] | [Tensor, Tensor] {
  const what = 'chunk_gla';
  const C = options.chunk_size ?? 64;
  if (!Number.isInteger(C) || C < 1) throw new RangeError(`${what}: chunk_size must be a positive int, got ${C}`);
  const inp = glaInputs(what, q, k, v, g, options);
  const { T, H, K, V, Q, Kt, Vt, G, S, scale } = inp;
  const O = new Float64Array(inp.B * T * H * V);
  const cum = new Float64Array(C * K);
  const A = new Float64Array(C);
  const acc = new Float64Array(V);
  inp.seqs.forEach(({ b, t0, t1 }, seq) => {
    for (let h = 0; h < H; h++) {
      const s0 = (seq * H + h) * K * V;
      const row = (t: number) => ((b * T + t) * H + h);
      for (let c0 = t0; c0 < t1; c0 += C) {
        const n = Math.min(C, t1 - c0);
        for (let t = 0; t < n; t++) for (let i = 0; i < K; i++) cum[t * K + i] = (t > 0 ? cum[(t - 1) * K + i]! : 0) + G[row(c0 + t) * K + i]!;
        for (let t = 0; t < n; t++) {
          const qk = row(c0 + t) * K;
          const vo = row(c0 + t) * V;
          // intra-chunk scores A[s] = q_t . (k_s * exp(b_t - b_s)), s <= t
          for (let s = 0; s <= t; s++) {
            let a = 0;
            const ks = row(c0 + s) * K;
            for (let i = 0; i < K; i++) a += Q[qk + i]! * Kt[ks + i]! * Math.exp(cum[t * K + i]! - cum[s * K + i]!);
            A[s] = a;
          }
          // row-major: o[j] sums over i, then over s, in the same order as a column loop (q_i e^(b_t,i) once a row)
          acc.fill(0);
          for (let i = 0; i < K; i++) {
            const qe = Q[qk + i]! * Math.exp(cum[t * K + i]!);
            const si = s0 + i * V;
            for (let j = 0; j < V; j++) acc[j]! += qe * S[si + j]!;
          }
          for (let s = 0; s <= t; s++) {
            const as = A[s]!;
            const vs = row(c0 + s) * V;
            for (let j = 0; j < V; j++) acc[j]! += as * Vt[vs + j]!;
          }
          for (let j = 0; j < V; j++) O[vo + j] = scale * acc[j]!;
        }
        // carry the state over the chunk
        const last = (n - 1) * K;
        for (let i = 0; i < K; i++) {
          const decay = Math.exp(cum[last + i]!);
          const si = s0 + i * V;
          for (let j = 0; j < V; j++) S[si + j] = decay * S[si + j]!;
          // each S[i][j] adds its s terms in order, as (k e^(b_last - b_s)) v: the factor once a (s, i)
          for (let s = 0; s < n; s++) {
            const f = Kt[row(c0 + s) * K + i]! * Math.exp(cum[last + i]! - cum[s * K + i]!);
            const vs = row(c0 + s) * V;
            for (let j = 0; j < V; j++) S[si + j]! += f * Vt[vs + j]!;
          }
        }
      }
    }
  });
  return glaOutputs(backend, what, q, inp, O, options);
}

// ---------------------------------------------------------------------------------------------
// gated delta rule

export interface GatedDeltaRuleOptions extends GlaOptions {
  /** l2-normalise q and k per head inside (x / sqrt(sum x^2 + 1e-6), FLA's l2norm), as Qwen3-Next calls it. */
  readonly use_qk_l2norm_in_kernel?: boolean;
}

/**
 * fused_recurrent_gated_delta_rule(q, k [B, T, H, K], v [B, T, HV, V], g [B, T, HV], beta [B, T, HV], ...): per value
 * head, S = exp(g_t) S; u = beta_t (v_t - k_t^T S); S = S + k_t u^T; o_t = scale * q_t S. With HV = r * H value heads
 * (grouped value attention), value head hv reads q/k head floor(hv / r). Returns o [B, T, HV, V] (q's dtype) and the
 * final state [B, HV, K, V] (f32) when asked.
 */
export function fusedRecurrentGatedDeltaRule(backend: Backend, q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, options: GatedDeltaRuleOptions = {}): [Tensor] | [Tensor, Tensor] {
  return deltaRule(backend, 'fused_recurrent_gated_delta_rule', q, k, v, g, beta, options, false);
}

/**
 * fused_recurrent_kda(q, k, v [B, T, H, V], g [B, T, H, K], beta [B, T, H], ...): Kimi Delta Attention, the gated delta
 * rule with a per-key-channel decay: S = diag(exp(g_t)) S; u = beta_t (v_t - k_t^T S); S = S + k_t u^T;
 * o_t = scale * q_t S. g is the log decay (after FLA's fused_kda_gate).
 */
export function fusedRecurrentKda(backend: Backend, q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, options: GatedDeltaRuleOptions = {}): [Tensor] | [Tensor, Tensor] {
  return deltaRule(backend, 'fused_recurrent_kda', q, k, v, g, beta, options, true);
}

/**
 * The delta rule with a scalar (per head) or per-key-channel (KDA) log decay, over the B rows or the cu_seqlens
 * sequences; states from initial_state [N, HV, K, V], or the pool rows ssm_state_indices names (written back in place,
 * -1 padding: a zero state, nothing written).
 */
function deltaRule(backend: Backend, what: string, q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, options: GatedDeltaRuleOptions, channelGate: boolean): [Tensor] | [Tensor, Tensor] {
  for (const [n, t] of [['q', q], ['k', k], ['v', v], ['g', g], ['beta', beta]] as const) expectFloat(t, what, n);
  if (q.rank !== 4) throw new RangeError(`${what}: q must be [B, T, H, K], got ${formatShape(q.shape)}`);
  const [B, T, H, K] = q.shape as [number, number, number, number];
  expectShape(what, 'k', k, [B, T, H, K]);
  if (v.rank !== 4 || v.shape[0] !== B || v.shape[1] !== T) throw new RangeError(`${what}: v ${formatShape(v.shape)} must be [${B}, ${T}, HV, V] for q ${formatShape(q.shape)}`);
  const HV = v.shape[2]!;
  const V = v.shape[3]!;
  if (HV === 0 || H === 0 || HV % H !== 0) throw new RangeError(`${what}: value heads ${HV} (v ${formatShape(v.shape)}) must be a multiple of q/k heads ${H}`);
  expectShape(what, 'g', g, channelGate ? [B, T, HV, K] : [B, T, HV]);
  expectShape(what, 'beta', beta, [B, T, HV]);
  const ranges = sequenceRanges(what, 'cu_seqlens', B, T, options.cu_seqlens ?? null, 'q', formatShape(q.shape));
  const N = ranges.length;
  const per = HV * K * V;
  const init = options.initial_state ?? null;
  const S = new Float64Array(N * per);
  let slots: Float64Array | null = null;
  if (options.ssm_state_indices) {
    if (!init) throw new RangeError(`${what}: ssm_state_indices needs initial_state, the state pool [slots, ${HV}, ${K}, ${V}]`);
    if (init.rank !== 4 || init.shape[1] !== HV || init.shape[2] !== K || init.shape[3] !== V) throw new RangeError(`${what}: the state pool ${formatShape(init.shape)} must be [slots, ${HV}, ${K}, ${V}]`);
    if (options.output_final_state) throw new RangeError(`${what}: with ssm_state_indices the final states are written into the pool in place: output_final_state must be false`);
    slots = poolSlots(what, 'ssm_state_indices', options.ssm_state_indices, N, init.shape[0]!);
    slots.forEach((sl, n) => {
      if (sl < 0) return; // padding: a zero state
      const row = init.select(0, sl);
      S.set(gather(row, what), n * per);
      row.dispose();
    });
  } else if (init) {
    expectShape(what, 'initial_state', init, [N, HV, K, V]);
    S.set(gather(init, what));
  }
  const scale = options.scale ?? 1 / Math.sqrt(K);
  const Q = gather(q, what);
  const Kt = gather(k, what);
  if (options.use_qk_l2norm_in_kernel) {
    for (const X of [Q, Kt]) {
      for (let r = 0; r < B * T * H; r++) {
        let ss = 0;
        for (let i = 0; i < K; i++) ss += X[r * K + i]! ** 2;
        const inv = 1 / Math.sqrt(ss + 1e-6);
        for (let i = 0; i < K; i++) X[r * K + i]! *= inv;
      }
    }
  }
  const Vt = gather(v, what);
  const Gt = gather(g, what);
  const Bt = gather(beta, what);
  const O = new Float64Array(B * T * HV * V);
  const u = new Float64Array(V);
  const acc = new Float64Array(V);
  const r = HV / H;
  ranges.forEach(([b, t0, t1], n) => {
    for (let hv = 0; hv < HV; hv++) deltaHead(S, (n * HV + hv) * K * V, Q, Kt, Vt, Gt, Bt, O, u, acc, b, t0, t1, hv, Math.floor(hv / r), T, H, HV, K, V, scale, channelGate);
  });
  const o = output(backend, [B, T, HV, V], q.dtype, O, what);
  if (slots) {
    slots.forEach((sl, n) => {
      if (sl < 0) return;
      const row = init!.select(0, sl);
      scatter(row, S.subarray(n * per, (n + 1) * per), what);
      row.dispose();
    });
    return [o];
  }
  return options.output_final_state ? [o, output(backend, [N, HV, K, V], 'f32', S, what)] : [o];
}

/**
 * One value head of one sequence through the delta rule, tokens t0 .. t1 of batch row b (the state at S[s0 ..], updated
 * in place). A top-level function of typed arrays: inside the per-sequence closure V8 ran the same loops 1.6x slower.
 */
function deltaHead(
  S: Float64Array, s0: number, Q: Float64Array, Kt: Float64Array, Vt: Float64Array, Gt: Float64Array, Bt: Float64Array, O: Float64Array,
  u: Float64Array, acc: Float64Array, b: number, t0: number, t1: number, hv: number, h: number, T: number, H: number, HV: number,
  K: number, V: number, scale: number, channelGate: boolean,
): void {
  for (let t = t0; t < t1; t++) {
    const qk = ((b * T + t) * H + h) * K;
    const vr = (b * T + t) * HV + hv;
    // pass 1, a state row at a time: the decay, then k^T S (each sum over i in order, as a column loop adds them)
    acc.fill(0);
    const headDecay = channelGate ? 0 : Math.exp(Gt[vr]!);
    for (let i = 0; i < K; i++) {
      const decay = channelGate ? Math.exp(Gt[vr * K + i]!) : headDecay;
      const ki = Kt[qk + i]!;
      const si = s0 + i * V;
      for (let j = 0; j < V; j++) {
        const x = S[si + j]! * decay;
        S[si + j] = x;
        acc[j]! += ki * x;
      }
    }
    const be = Bt[vr]!;
    for (let j = 0; j < V; j++) u[j] = be * (Vt[vr * V + j]! - acc[j]!);
    // pass 2: S += k u^T, then q S with the row just updated (rows are independent, so the same values)
    acc.fill(0);
    for (let i = 0; i < K; i++) {
      const ki = Kt[qk + i]!;
      const qi = Q[qk + i]!;
      const si = s0 + i * V;
      for (let j = 0; j < V; j++) {
        const x = S[si + j]! + ki * u[j]!;
        S[si + j] = x;
        acc[j]! += qi * x;
      }
    }
    for (let j = 0; j < V; j++) O[vr * V + j] = scale * acc[j]!;
  }
}
