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

defineOp({
  name: 'causal_conv1d',
  group: 'recurrent',
  doc:
    'causal_conv1d_fn(x [B, D, L], weight [D, W], bias [D], initial_states [B, D, W - 1], return_final_states, activation): ' +
    'out[b, d, t] = bias[d] + sum_w weight[d, w] * x\'[b, d, t + w] with x\' = [initial_states or zeros, x], then silu when activation is ' +
    "'silu' / 'swish'. final_states: the last W - 1 columns of x'.",
  inputs: [{ name: 'x', dtypes: 'float' }, { name: 'weight', dtypes: 'float' }, { name: 'bias', optional: true, dtypes: 'float' }, { name: 'initial_states', optional: true, dtypes: 'float' }],
  attrs: z.object({ activation: z.enum(['silu', 'swish']).nullable().default(null), return_final_states: z.boolean().default(false) }).strict(),
  outputs: ['out', 'final_states'],
  infer: ([x, w, b, init], a) => {
    const op = 'causal_conv1d';
    const xs = shapeOf(x);
    if (xs.length !== 3) opError(op, `x must be [batch, dim, seqlen], got ${formatShape(xs)}`);
    const [B, D, L] = xs as [number, number, number];
    const ws = shapeOf(w);
    if (ws.length !== 2 || ws[0] !== D || ws[1]! < 1) opError(op, `weight ${formatShape(ws)} must be [${D}, width >= 1] for x ${formatShape(xs)}`);
    if (b) expectShape(op, 'bias', b, [D]);
    if (init) expectShape(op, 'initial_states', init, [B, D, ws[1]! - 1]);
    const dtype = (x as TensorMeta).dtype;
    const out = [meta([B, D, L], dtype)];
    return a.return_final_states ? [...out, meta([B, D, ws[1]! - 1], dtype)] : out;
  },
});

defineOp({
  name: 'causal_conv1d_update',
  group: 'recurrent',
  doc:
    "causal_conv1d_update(x [B, D] or [B, D, L], conv_state [B, D, S >= W - 1], weight [D, W], bias, activation) for decode: x' = [conv_state, x], " +
    "out = the last L outputs of the depthwise conv over x' (then silu), new conv_state = the last S columns of x'. Returns [out, conv_state] " +
    '(Dao-AILab updates conv_state in place; here the caller stores the second output).',
  inputs: [{ name: 'x', dtypes: 'float' }, { name: 'conv_state', dtypes: 'float' }, { name: 'weight', dtypes: 'float' }, { name: 'bias', optional: true, dtypes: 'float' }],
  attrs: z.object({ activation: z.enum(['silu', 'swish']).nullable().default(null) }).strict(),
  outputs: ['out', 'conv_state'],
  infer: ([x, st, w, b]) => {
    const op = 'causal_conv1d_update';
    const xs = shapeOf(x);
    if (xs.length !== 2 && xs.length !== 3) opError(op, `x must be [batch, dim] or [batch, dim, seqlen], got ${formatShape(xs)}`);
    const [B, D] = xs as [number, number];
    const ss = shapeOf(st);
    if (ss.length !== 3 || ss[0] !== B || ss[1] !== D) opError(op, `conv_state ${formatShape(ss)} must be [${B}, ${D}, state_len]`);
    const ws = shapeOf(w);
    if (ws.length !== 2 || ws[0] !== D || ws[1]! < 1) opError(op, `weight ${formatShape(ws)} must be [${D}, width >= 1]`);
    if (ss[2]! < ws[1]! - 1) opError(op, `conv_state length ${ss[2]} must be at least width - 1 = ${ws[1]! - 1}`);
    if (b) expectShape(op, 'bias', b, [D]);
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
];

/** Shapes of the delta-rule ops: g is [B, T, HV] (one decay per head) or, for KDA, [B, T, HV, K] (per key channel). */
function inferDelta(op: string, [q, k, v, g, beta, s0]: readonly MetaArg[], a: { output_final_state: boolean }, channelGate: boolean) {
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
  if (s0) expectShape(op, 'initial_state', s0, [B, HV, K, V]);
  const out = [meta([B, T, HV, V], dtype)];
  return a.output_final_state ? [...out, meta([B, HV, K, V], 'f32')] : out;
}

const DELTA_DOC =
  'per value head S = D_t S; u = beta_t (v_t - k_t^T S); S += k_t u^T; o_t = scale * q_t S, with q, k [B, T, H, K], v [B, T, HV, V], ' +
  'beta [B, T, HV] and HV = r * H (value head hv reads q/k head floor(hv / r)); use_qk_l2norm_in_kernel l2-normalises q and k (eps 1e-6).';

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

type GlaOpts = { scale?: number | null; initial_state?: Tensor | null; output_final_state?: boolean };
/** FLA's varlen cu_seqlens and vLLM's ssm_state_indices (see inferGla). */
type GlaVarlen = { cu_seqlens?: Tensor | null; ssm_state_indices?: Tensor | null };
type DeltaOpts = GlaOpts & { use_qk_l2norm_in_kernel?: boolean };
const delta = (name: string, ins: Tensor[], opts: DeltaOpts): Tensor[] =>
  callOp(name, [...ins, opts.initial_state ?? null], {
    scale: opts.scale ?? null,
    output_final_state: opts.output_final_state ?? false,
    use_qk_l2norm_in_kernel: opts.use_qk_l2norm_in_kernel ?? false,
  });

export const recurrentFunctions = {
  causalConv1d: (x: Tensor, weight: Tensor, opts: { bias?: Tensor | null; initial_states?: Tensor | null; return_final_states?: boolean; activation?: 'silu' | 'swish' | null } = {}): Tensor[] =>
    callOp('causal_conv1d', [x, weight, opts.bias ?? null, opts.initial_states ?? null], { activation: opts.activation ?? null, return_final_states: opts.return_final_states ?? false }),
  causalConv1dUpdate: (x: Tensor, conv_state: Tensor, weight: Tensor, opts: { bias?: Tensor | null; activation?: 'silu' | 'swish' | null } = {}): [Tensor, Tensor] =>
    callOp('causal_conv1d_update', [x, conv_state, weight, opts.bias ?? null], { activation: opts.activation ?? null }) as [Tensor, Tensor],
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
