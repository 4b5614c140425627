/**
 * The recurrent group: causal_conv1d and its decode step causal_conv1d_update (Dao-AILab), gated linear attention in
 * its recurrent and chunked forms (FLA fused_recurrent_gla / chunk_gla: the same function, chunk_gla decomposes into
 * the recurrent form), and the delta rule with a per-head (Gated DeltaNet) or per-key-channel (KDA) decay: recurrent
 * ops plus chunk_* names that decompose into them. FLA layout: [B, T, H, K] (head_first=False); states [B, H, K, V] in
 * f32. The final state is a second output only when output_final_state / return_final_states is set.
 */
import { z } from 'zod';
import { formatShape, shapesEqual, type Shape } from '../shape.js';
import type { Tensor } from '../tensor.js';
import { commonFloatDType } from './matmul.js';
import { callOp, defineOp, meta, opError, type MetaArg, type TensorMeta } from './registry.js';

const shapeOf = (t: MetaArg) => (t as TensorMeta).shape;
function expectShape(op: string, name: string, t: MetaArg, shape: Shape): void {
  if (!shapesEqual(shapeOf(t), shape)) opError(op, `${name} has shape ${formatShape(shapeOf(t))}, expected ${formatShape(shape)}`);
}

/**
 * The conv ops' pooled form (vLLM's causal_conv1d_fn / causal_conv1d_update on the mamba cache): the conv states live in
 * a pool [slots, D, S] (S >= W - 1) that sequence n reads at row cache_indices[n] (conv_state_indices for the update)
 * and writes back in place with the last S columns of [state, x]; an index < 0 is padding (PAD_SLOT_ID): a zero state,
 * nothing written. The live indices of a call must be distinct (the rows are updated in place, in parallel on a device).
 */
function inferConvPool(op: string, pool: MetaArg, idx: MetaArg, N: number, D: number, W: number): void {
  const ps = shapeOf(pool);
  if (ps.length !== 3 || ps[1] !== D || ps[2]! < W - 1) opError(op, `the conv state pool ${formatShape(ps)} must be [slots, ${D}, state_len >= ${W - 1}]`);
  expectShape(op, 'cache indices', idx, [N]);
}

defineOp({
  name: 'causal_conv1d',
  group: 'recurrent',
  doc:
    'causal_conv1d_fn(x [B, D, L], weight [D, W], bias [D], initial_states [B, D, W - 1], return_final_states, activation): ' +
    'out[b, d, t] = bias[d] + sum_w weight[d, w] * x\'[b, d, t + w] with x\' = [initial_states or zeros, x], then silu when activation is ' +
    "'silu' / 'swish'. final_states: the last W - 1 columns of x'. vLLM's varlen pooled form: query_start_loc [N + 1] packs N sequences " +
    'along L of a B = 1 x, cache_indices [N] names each one\'s row of the conv state pool initial_states [slots, D, S >= W - 1] (x\' = [that row, ' +
    'x], the row then updated in place to the last S columns of x\'; -1: padding, a zero state, nothing written) and has_initial_state [N] ' +
    '(bool; absent: every live row is read, the engine zeroes a new sequence\'s rows) starts a sequence from zeros where false.',
  inputs: [
    { name: 'x', dtypes: 'float' }, { name: 'weight', dtypes: 'float' }, { name: 'bias', optional: true, dtypes: 'float' }, { name: 'initial_states', optional: true, dtypes: 'float' },
    { name: 'query_start_loc', optional: true, dtypes: ['i32', 'i64'] }, { name: 'cache_indices', optional: true, dtypes: ['i32', 'i64'] }, { name: 'has_initial_state', optional: true, dtypes: ['bool', 'i32', 'i64', 'u8'] },
  ],
  attrs: z.object({ activation: z.enum(['silu', 'swish']).nullable().default(null), return_final_states: z.boolean().default(false) }).strict(),
  outputs: ['out', 'final_states'],
  infer: ([x, w, b, init, qsl, idx, his], a) => {
    const op = 'causal_conv1d';
    const xs = shapeOf(x);
    if (xs.length !== 3) opError(op, `x must be [batch, dim, seqlen], got ${formatShape(xs)}`);
    const [B, D, L] = xs as [number, number, number];
    const ws = shapeOf(w);
    if (ws.length !== 2 || ws[0] !== D || ws[1]! < 1) opError(op, `weight ${formatShape(ws)} must be [${D}, width >= 1] for x ${formatShape(xs)}`);
    if (b) expectShape(op, 'bias', b, [D]);
    const dtype = (x as TensorMeta).dtype;
    let N = B;
    if (qsl) {
      const qs = shapeOf(qsl);
      if (B !== 1) opError(op, `with query_start_loc the sequences are packed along seqlen: x must be [1, dim, total], got ${formatShape(xs)}`);
      if (qs.length !== 1 || qs[0]! < 1) opError(op, `query_start_loc must be [num_seqs + 1], got ${formatShape(qs)}`);
      N = qs[0]! - 1;
    }
    if (his) expectShape(op, 'has_initial_state', his, [N]);
    if (idx) {
      if (!init) opError(op, 'cache_indices needs initial_states: the conv state pool [slots, dim, state_len] it indexes');
      inferConvPool(op, init, idx, N, D, ws[1]!);
      if (a.return_final_states) opError(op, 'with cache_indices the final states are written into the pool in place: return_final_states must be false');
      return [meta([B, D, L], dtype)];
    }
    if (qsl || his) opError(op, 'query_start_loc and has_initial_state are the pooled form: they need cache_indices and the conv state pool');
    if (init) expectShape(op, 'initial_states', init, [B, D, ws[1]! - 1]);
    const out = [meta([B, D, L], dtype)];
    return a.return_final_states ? [...out, meta([B, D, ws[1]! - 1], dtype)] : out;
  },
});

defineOp({
  name: 'causal_conv1d_update',
  group: 'recurrent',
  doc:
    "causal_conv1d_update(x [B, D] or [B, D, L], conv_state [B, D, S >= W - 1], weight [D, W], bias, activation, conv_state_indices) for decode: x' = [conv_state, x], " +
    "out = the last L outputs of the depthwise conv over x' (then silu), new conv_state = the last S columns of x'. Returns [out, conv_state] " +
    '(Dao-AILab updates conv_state in place; here the caller stores the second output). With conv_state_indices [B] (vLLM), conv_state is the ' +
    'pool [slots, D, S]: row b reads and updates pool[conv_state_indices[b]] in place and only out is returned; -1 is padding (a zero state, nothing written).',
  inputs: [{ name: 'x', dtypes: 'float' }, { name: 'conv_state', dtypes: 'float' }, { name: 'weight', dtypes: 'float' }, { name: 'bias', optional: true, dtypes: 'float' }, { name: 'conv_state_indices', optional: true, dtypes: ['i32', 'i64'] }],
  attrs: z.object({ activation: z.enum(['silu', 'swish']).nullable().default(null) }).strict(),
  outputs: ['out', 'conv_state'],
  infer: ([x, st, w, b, idx]) => {
    const op = 'causal_conv1d_update';
    const xs = shapeOf(x);
    if (xs.length !== 2 && xs.length !== 3) opError(op, `x must be [batch, dim] or [batch, dim, seqlen], got ${formatShape(xs)}`);
    const [B, D] = xs as [number, number];
    const ws = shapeOf(w);
    if (ws.length !== 2 || ws[0] !== D || ws[1]! < 1) opError(op, `weight ${formatShape(ws)} must be [${D}, width >= 1]`);
    if (b) expectShape(op, 'bias', b, [D]);
    if (idx) {
      inferConvPool(op, st, idx, B, D, ws[1]!);
      return [meta(xs, (x as TensorMeta).dtype)];
    }
    const ss = shapeOf(st);
    if (ss.length !== 3 || ss[0] !== B || ss[1] !== D) opError(op, `conv_state ${formatShape(ss)} must be [${B}, ${D}, state_len]`);
    if (ss[2]! < ws[1]! - 1) opError(op, `conv_state length ${ss[2]} must be at least width - 1 = ${ws[1]! - 1}`);
    return [meta(xs, (x as TensorMeta).dtype), meta(ss, (st as TensorMeta).dtype)];
  },
});

const glaAttrs = z.object({ scale: z.number().nullable().default(null), output_final_state: z.boolean().default(false) }).strict();

/**
 * The gated-linear-attention ops take, after the initial state, FLA's varlen `cu_seqlens` (B = 1, the sequences packed
 * along T, one state per sequence) and vLLM's `ssm_state_indices` (initial_state is then a state pool [slots, H, K, V]:
 * sequence n starts from pool[indices[n]] and its final state is written back there in place, as vLLM's
 * inplace_final_state; an index < 0 is padding (vLLM's PAD_SLOT_ID): no read, no write). The live indices of a call
 * must be distinct: kernels update the pool in place, in parallel, so two sequences on one slot race (the engine gives
 * each running sequence its own slot; the CPU kernel rejects a repeat, a device kernel cannot check without a host read).
 */
function inferGla(op: string, [q, k, v, g, s0, cu, idx]: readonly MetaArg[], a: { output_final_state: boolean }, gName: string) {
  const dtype = commonFloatDType(op, [['q', q!], ['k', k!], ['v', v!], [gName, g!]]);
  const qs = shapeOf(q!);
  if (qs.length !== 4) opError(op, `q must be [B, T, H, K], got ${formatShape(qs)}`);
  const [B, T, H, K] = qs as [number, number, number, number];
  expectShape(op, 'k', k!, qs);
  expectShape(op, gName, g!, qs);
  const vs = shapeOf(v!);
  if (vs.length !== 4 || vs[0] !== B || vs[1] !== T || vs[2] !== H) opError(op, `v ${formatShape(vs)} must be [${B}, ${T}, ${H}, V] for q ${formatShape(qs)}`);
  const V = vs[3]!;
  let N = B;
  if (cu) {
    const cs = shapeOf(cu);
    if (B !== 1) opError(op, `with cu_seqlens the sequences are packed along T: q must be [1, T, H, K], got ${formatShape(qs)}`);
    if (cs.length !== 1 || cs[0]! < 1) opError(op, `cu_seqlens must be [num_seqs + 1], got ${formatShape(cs)}`);
    N = cs[0]! - 1;
  }
  if (idx) {
    expectShape(op, 'ssm_state_indices', idx, [N]);
    if (!s0) opError(op, 'ssm_state_indices needs initial_state: the state pool [slots, H, K, V] it indexes');
    const ps = shapeOf(s0);
    if (ps.length !== 4 || ps[1] !== H || ps[2] !== K || ps[3] !== V) opError(op, `initial_state (the state pool) ${formatShape(ps)} must be [slots, ${H}, ${K}, ${V}]`);
    if ((s0 as TensorMeta).dtype !== 'f32') opError(op, `the state pool must be f32, got ${(s0 as TensorMeta).dtype}`);
    if (a.output_final_state) opError(op, 'with ssm_state_indices the final states are written into the pool in place: output_final_state must be false');
    return [meta([B, T, H, V], dtype)];
  }
  if (s0) expectShape(op, 'initial_state', s0, [N, H, K, V]);
  const out = [meta([B, T, H, V], dtype)];
  return a.output_final_state ? [...out, meta([N, H, K, V], 'f32')] : out;
}

const glaInputs = (g: string) => [
  { name: 'q', dtypes: 'float' as const },
  { name: 'k', dtypes: 'float' as const },
  { name: 'v', dtypes: 'float' as const },
  { name: g, dtypes: 'float' as const },
  { name: 'initial_state', optional: true, dtypes: 'float' as const },
  { name: 'cu_seqlens', optional: true, dtypes: ['i32', 'i64'] as const },
  { name: 'ssm_state_indices', optional: true, dtypes: ['i32', 'i64'] as const },
];

defineOp({
  name: 'fused_recurrent_gla',
  group: 'recurrent',
  doc: 'FLA fused_recurrent_gla(q, k, v, gk, scale, initial_state, output_final_state, cu_seqlens) + vLLM ssm_state_indices: per head S_t = diag(exp(gk_t)) S_{t-1} + k_t^T v_t, o_t = scale * q_t S_t (scale defaults to K^-0.5). Returns o [B, T, H, V] and optionally the final state [N, H, K, V] f32 (N = B, or the varlen sequences); with ssm_state_indices the states live in the pool initial_state, updated in place.',
  inputs: glaInputs('gk'),
  attrs: glaAttrs,
  outputs: ['out', 'final_state'],
  infer: (ins, a) => inferGla('fused_recurrent_gla', ins, a, 'gk'),
});

defineOp({
  name: 'chunk_gla',
  group: 'recurrent',
  doc: 'FLA chunk_gla(q, k, v, g, scale, initial_state, output_final_state): the same function as fused_recurrent_gla, computed in chunks of chunk_size (inter-chunk through the state, intra-chunk as masked attention).',
  inputs: glaInputs('g'),
  attrs: glaAttrs.extend({ chunk_size: z.number().int().min(1).default(64) }),
  outputs: ['out', 'final_state'],
  infer: (ins, a) => inferGla('chunk_gla', ins, a, 'g'),
  decompose: (call) => callOp('fused_recurrent_gla', call.inputs, { scale: call.attrs.scale, output_final_state: call.attrs.output_final_state }),
});

const deltaAttrs = glaAttrs.extend({ use_qk_l2norm_in_kernel: z.boolean().default(false) });
const deltaInputs = [
  { name: 'q', dtypes: 'float' as const },
  { name: 'k', dtypes: 'float' as const },
  { name: 'v', dtypes: 'float' as const },
  { name: 'g', dtypes: 'float' as const },
  { name: 'beta', dtypes: 'float' as const },
  { name: 'initial_state', optional: true, dtypes: 'float' as const },
  { name: 'cu_seqlens', optional: true, dtypes: ['i32', 'i64'] as const },
  { name: 'ssm_state_indices', optional: true, dtypes: ['i32', 'i64'] as const },
];

/** Shapes of the delta-rule ops: g is [B, T, HV] (one decay per head) or, for KDA, [B, T, HV, K] (per key channel). */
function inferDelta(op: string, [q, k, v, g, beta, s0, cu, idx]: readonly MetaArg[], a: { output_final_state: boolean }, channelGate: boolean) {
  const dtype = commonFloatDType(op, [['q', q!], ['k', k!], ['v', v!]]);
  const qs = shapeOf(q!);
  if (qs.length !== 4) opError(op, `q must be [B, T, H, K], got ${formatShape(qs)}`);
  const [B, T, H, K] = qs as [number, number, number, number];
  expectShape(op, 'k', k!, qs);
  const vs = shapeOf(v!);
  if (vs.length !== 4 || vs[0] !== B || vs[1] !== T) opError(op, `v ${formatShape(vs)} must be [${B}, ${T}, HV, V] for q ${formatShape(qs)}`);
  const [HV, V] = [vs[2]!, vs[3]!];
  if (HV === 0 || H === 0 || HV % H !== 0) opError(op, `value heads ${HV} (v ${formatShape(vs)}) must be a multiple of q/k heads ${H}`);
  expectShape(op, 'g', g!, channelGate ? [B, T, HV, K] : [B, T, HV]);
  expectShape(op, 'beta', beta!, [B, T, HV]);
  // the pooled form: as the GLA ops' (inferGla), with HV value heads
  let N = B;
  if (cu) {
    const cs = shapeOf(cu);
    if (B !== 1) opError(op, `with cu_seqlens the sequences are packed along T: q must be [1, T, H, K], got ${formatShape(qs)}`);
    if (cs.length !== 1 || cs[0]! < 1) opError(op, `cu_seqlens must be [num_seqs + 1], got ${formatShape(cs)}`);
    N = cs[0]! - 1;
  }
  const out = [meta([B, T, HV, V], dtype)];
  if (idx) {
    expectShape(op, 'ssm_state_indices', idx, [N]);
    if (!s0) opError(op, `ssm_state_indices needs initial_state: the state pool [slots, ${HV}, ${K}, ${V}] it indexes`);
    const ps = shapeOf(s0);
    if (ps.length !== 4 || ps[1] !== HV || ps[2] !== K || ps[3] !== V) opError(op, `initial_state (the state pool) ${formatShape(ps)} must be [slots, ${HV}, ${K}, ${V}]`);
    if ((s0 as TensorMeta).dtype !== 'f32') opError(op, `the state pool must be f32, got ${(s0 as TensorMeta).dtype}`);
    if (a.output_final_state) opError(op, 'with ssm_state_indices the final states are written into the pool in place: output_final_state must be false');
    return out;
  }
  if (s0) expectShape(op, 'initial_state', s0, [N, HV, K, V]);
  return a.output_final_state ? [...out, meta([N, HV, K, V], 'f32')] : out;
}

const DELTA_DOC =
  'per value head S = D_t S; u = beta_t (v_t - k_t^T S); S += k_t u^T; o_t = scale * q_t S, with q, k [B, T, H, K], v [B, T, HV, V], ' +
  'beta [B, T, HV] and HV = r * H (value head hv reads q/k head floor(hv / r)); use_qk_l2norm_in_kernel l2-normalises q and k (eps 1e-6). ' +
  "Pooled form (as fused_recurrent_gla's): cu_seqlens packs N sequences along T of a B = 1 input, ssm_state_indices [N] names each " +
  "one's row of the f32 state pool initial_state [slots, HV, K, V], read and updated in place (-1: padding, a zero state, nothing written).";

for (const [recurrent, chunk, channelGate, gate] of [
  ['fused_recurrent_gated_delta_rule', 'chunk_gated_delta_rule', false, 'D_t = exp(g_t), g [B, T, HV] (Gated DeltaNet)'],
  ['fused_recurrent_kda', 'chunk_kda', true, 'D_t = diag(exp(g_t)), g [B, T, HV, K] (Kimi Delta Attention, g after fused_kda_gate)'],
] as const) {
  defineOp({
    name: recurrent,
    group: 'recurrent',
    doc: `FLA ${recurrent}: ${gate}; ${DELTA_DOC}`,
    inputs: deltaInputs,
    attrs: deltaAttrs,
    outputs: ['out', 'final_state'],
    infer: (ins, a) => inferDelta(recurrent, ins, a, channelGate),
  });
  // the chunked form computes the same function; without a chunked kernel a backend runs the recurrent one
  defineOp({
    name: chunk,
    group: 'recurrent',
    doc: `FLA ${chunk}: the same function as ${recurrent} computed chunkwise on devices; decomposes into ${recurrent}.`,
    inputs: deltaInputs,
    attrs: deltaAttrs,
    outputs: ['out', 'final_state'],
    infer: (ins, a) => inferDelta(chunk, ins, a, channelGate),
    decompose: (call) => callOp(recurrent, call.inputs, call.attrs),
  });
}

type ConvOpts = { bias?: Tensor | null; activation?: 'silu' | 'swish' | null };
type GlaOpts = { scale?: number | null; initial_state?: Tensor | null; output_final_state?: boolean };
/** FLA's varlen cu_seqlens and vLLM's ssm_state_indices (see inferGla). */
type GlaVarlen = { cu_seqlens?: Tensor | null; ssm_state_indices?: Tensor | null };
type DeltaOpts = GlaOpts & GlaVarlen & { use_qk_l2norm_in_kernel?: boolean };
const delta = (name: string, ins: Tensor[], opts: DeltaOpts): Tensor[] =>
  callOp(name, [...ins, opts.initial_state ?? null, opts.cu_seqlens ?? null, opts.ssm_state_indices ?? null], {
    scale: opts.scale ?? null,
    output_final_state: opts.output_final_state ?? false,
    use_qk_l2norm_in_kernel: opts.use_qk_l2norm_in_kernel ?? false,
  });

/** [out, new conv_state]; with conv_state_indices (conv_state is then the pool, updated in place) [out] only. */
function causalConv1dUpdate(x: Tensor, conv_state: Tensor, weight: Tensor, opts?: ConvOpts & { conv_state_indices?: null }): [Tensor, Tensor];
function causalConv1dUpdate(x: Tensor, conv_state: Tensor, weight: Tensor, opts: ConvOpts & { conv_state_indices: Tensor | null }): Tensor[];
function causalConv1dUpdate(x: Tensor, conv_state: Tensor, weight: Tensor, opts: ConvOpts & { conv_state_indices?: Tensor | null } = {}): Tensor[] {
  return callOp('causal_conv1d_update', [x, conv_state, weight, opts.bias ?? null, opts.conv_state_indices ?? null], { activation: opts.activation ?? null });
}

export const recurrentFunctions = {
  /** With cache_indices (vLLM's pooled form) initial_states is the conv state pool, updated in place: only out returns. */
  causalConv1d: (x: Tensor, weight: Tensor, opts: ConvOpts & { initial_states?: Tensor | null; return_final_states?: boolean; query_start_loc?: Tensor | null; cache_indices?: Tensor | null; has_initial_state?: Tensor | null } = {}): Tensor[] =>
    callOp('causal_conv1d', [x, weight, opts.bias ?? null, opts.initial_states ?? null, opts.query_start_loc ?? null, opts.cache_indices ?? null, opts.has_initial_state ?? null], { activation: opts.activation ?? null, return_final_states: opts.return_final_states ?? false }),
  causalConv1dUpdate,
  fusedRecurrentGla: (q: Tensor, k: Tensor, v: Tensor, gk: Tensor, opts: GlaOpts & GlaVarlen = {}): Tensor[] =>
    callOp('fused_recurrent_gla', [q, k, v, gk, opts.initial_state ?? null, opts.cu_seqlens ?? null, opts.ssm_state_indices ?? null], { scale: opts.scale ?? null, output_final_state: opts.output_final_state ?? false }),
  chunkGla: (q: Tensor, k: Tensor, v: Tensor, g: Tensor, opts: GlaOpts & GlaVarlen & { chunk_size?: number } = {}): Tensor[] =>
    callOp('chunk_gla', [q, k, v, g, opts.initial_state ?? null, opts.cu_seqlens ?? null, opts.ssm_state_indices ?? null], { scale: opts.scale ?? null, output_final_state: opts.output_final_state ?? false, chunk_size: opts.chunk_size ?? 64 }),
  fusedRecurrentGatedDeltaRule: (q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, opts: DeltaOpts = {}): Tensor[] =>
    delta('fused_recurrent_gated_delta_rule', [q, k, v, g, beta], opts),
  chunkGatedDeltaRule: (q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, opts: DeltaOpts = {}): Tensor[] => delta('chunk_gated_delta_rule', [q, k, v, g, beta], opts),
  fusedRecurrentKda: (q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, opts: DeltaOpts = {}): Tensor[] => delta('fused_recurrent_kda', [q, k, v, g, beta], opts),
  chunkKda: (q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, opts: DeltaOpts = {}): Tensor[] => delta('chunk_kda', [q, k, v, g, beta], opts),
};
