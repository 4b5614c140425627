/**
 * Normalisations: layer_norm, group_norm, batch_norm (inference: running statistics), rms_norm (plain, Gemma's
 * (1 + w) through weight_offset, gated as FLA / vLLM RMSNormGated), normalize (F.normalize), l2_norm (FLA's l2norm),
 * the fused residual form fused_add_rms_norm (vLLM), and layer_norm_modulate (adaLN: layer_norm then x * (1 + scale) + shift).
 *
 * Every op has a decomposition into elementwise and reduction ops computed in float32 (float64 for f64 inputs), so a
 * backend without the fused kernel still runs it; the results round once to the input's dtype. Statistics are biased
 * (divide by N), as PyTorch's normalisation layers.
 */
import { z } from 'zod';
import type { DType } from '../dtype.js';
import { formatShape, shapesEqual, type Shape } from '../shape.js';
import type { Tensor } from '../tensor.js';
import { broadcastShapesOf } from './broadcast.js';
import { callOp, callOp1, defineOp, meta, normDim, opError, OpScope, type MetaArg, type OpCall, type TensorMeta } from './registry.js';

const T = (a: MetaArg) => a as TensorMeta;
const I = (call: OpCall<any>, i: number) => call.inputs[i] as Tensor | null;

/** torch.finfo(dtype).eps: F.rms_norm's default eps. */
export function finfoEps(d: DType): number {
  switch (d) {
    case 'f64': return 2 ** -52;
    case 'f16': return 2 ** -10;
    case 'bf16': return 2 ** -7;
    default: return 2 ** -23;
  }
}

/** The dtype a decomposition computes in: f64 stays, everything else f32. */
const wide = (d: DType): DType => (d === 'f64' ? 'f64' : 'f32');

function checkParam(op: string, name: string, p: MetaArg, shape: Shape, what: string): void {
  if (p === null) return;
  if (!shapesEqual(T(p).shape, shape)) opError(op, `${name} ${formatShape(T(p).shape)} must have shape ${formatShape(shape)} (${what})`);
}

/** The trailing `k` dims, for reductions over a normalized_shape. */
const lastDims = (k: number) => Array.from({ length: k }, (_, i) => i - k);

// --- layer_norm -------------------------------------------------------------------------------

export const layerNormAttrs = z.object({ normalized_shape: z.array(z.number().int().nonnegative()), eps: z.number().default(1e-5) }).strict();

/** layer_norm's output meta: normalized_shape a non-empty suffix of the input's shape, weight / bias of that shape. */
function inferLayerNorm(op: string, x: MetaArg, w: MetaArg, b: MetaArg, ns: readonly number[]): TensorMeta[] {
  const s = T(x).shape;
  if (ns.length === 0 || ns.length > s.length || !shapesEqual(s.slice(s.length - ns.length), ns)) {
    opError(op, `normalized_shape ${formatShape(ns)} must be a non-empty suffix of the input shape ${formatShape(s)}`);
  }
  checkParam(op, 'weight', w, ns, 'normalized_shape');
  checkParam(op, 'bias', b, ns, 'normalized_shape');
  return [meta(s, T(x).dtype)];
}

defineOp({
  name: 'layer_norm',
  group: 'norm',
  doc: 'F.layer_norm: (x - mean) / sqrt(var + eps) * weight + bias over the trailing normalized_shape dims (biased variance).',
  inputs: [{ name: 'input', dtypes: 'float' }, { name: 'weight', optional: true, dtypes: 'float' }, { name: 'bias', optional: true, dtypes: 'float' }],
  attrs: layerNormAttrs,
  infer: ([x, w, b], a) => inferLayerNorm('layer_norm', x!, w!, b!, a.normalized_shape),
  decompose: (call) => {
    const x = I(call, 0)!;
    const dims = lastDims(call.attrs.normalized_shape.length);
    const s = new OpScope();
    const xf = s.op('to', [x], { dtype: wide(x.dtype) });
    const mean = s.op('mean', [xf], { dim: dims, keepdim: true });
    const d = s.op('sub', [xf, mean]);
    const v = s.op('mean', [s.op('square', [d])], { dim: dims, keepdim: true });
    let y = s.op('mul', [d, s.op('rsqrt', [s.op('add', [v, call.attrs.eps])])]);
    if (I(call, 1)) y = s.op('mul', [y, I(call, 1)]);
    if (I(call, 2)) y = s.op('add', [y, I(call, 2)]);
    return s.keep([s.op('to', [y], { dtype: x.dtype })]);
  },
});

// --- layer_norm_modulate (adaLN) ------------------------------------------------------------------

export const layerNormModulateAttrs = z.object({ eps: z.number().default(1e-6), scale_offset: z.number().default(1) }).strict();
export type LayerNormModulateAttrs = z.output<typeof layerNormModulateAttrs>;

defineOp({
  name: 'layer_norm_modulate',
  group: 'norm',
  doc:
    "adaLN (DiT, FLUX, SD3, HunyuanVideo, Wan): layer_norm(x) over the last dim without affine, then * (scale_offset + scale) + shift. " +
    'scale and shift broadcast to the input with the last dim whole ([B, 1, D] against [B, S, D]: one modulation row a sample). ' +
    'Computed in float32 (float64 for f64) and rounded once to the input dtype.',
  inputs: [{ name: 'input', dtypes: 'float' }, { name: 'scale', dtypes: 'float' }, { name: 'shift', dtypes: 'float' }],
  attrs: layerNormModulateAttrs,
  infer: ([x, sc, sh]) => {
    const s = T(x).shape;
    if (s.length === 0) opError('layer_norm_modulate', 'input must have at least one dim');
    const D = s[s.length - 1]!;
    for (const [name, m] of [['scale', T(sc!)], ['shift', T(sh!)]] as const) {
      if (m.shape.length === 0 || m.shape[m.shape.length - 1] !== D) opError('layer_norm_modulate', `${name} ${formatShape(m.shape)} must end in the input's last dim ${D} (input ${formatShape(s)})`);
      if (!shapesEqual(broadcastShapesOf('layer_norm_modulate', [s, m.shape], ['input', name]), s)) opError('layer_norm_modulate', `${name} ${formatShape(m.shape)} must broadcast to the input ${formatShape(s)}`);
    }
    return [meta(s, T(x).dtype)];
  },
  decompose: (call) => {
    const [x, sc, sh] = call.inputs as [Tensor, Tensor, Tensor];
    const w = wide(x.dtype);
    const s = new OpScope();
    const xf = s.op('to', [x], { dtype: w });
    const mean = s.op('mean', [xf], { dim: [-1], keepdim: true });
    const d = s.op('sub', [xf, mean]);
    const v = s.op('mean', [s.op('square', [d])], { dim: [-1], keepdim: true });
    const n = s.op('mul', [d, s.op('rsqrt', [s.op('add', [v, call.attrs.eps])])]);
    const factor = s.op('add', [s.op('to', [sc], { dtype: w }), call.attrs.scale_offset]);
    const y = s.op('add', [s.op('mul', [n, factor]), s.op('to', [sh], { dtype: w })]);
    return s.keep([s.op('to', [y], { dtype: x.dtype })]);
  },
});

// --- group_norm -------------------------------------------------------------------------------

defineOp({
  name: 'group_norm',
  group: 'norm',
  doc: 'F.group_norm: input [N, C, *] normalised over each of num_groups channel groups (and all spatial positions), then per-channel weight and bias [C].',
  inputs: [{ name: 'input', dtypes: 'float' }, { name: 'weight', optional: true, dtypes: 'float' }, { name: 'bias', optional: true, dtypes: 'float' }],
  attrs: z.object({ num_groups: z.number().int().positive(), eps: z.number().default(1e-5) }).strict(),
  infer: ([x, w, b], a) => {
    const s = T(x).shape;
    if (s.length < 2) opError('group_norm', `input must be [N, C, *], got ${formatShape(s)}`);
    if (s[1]! % a.num_groups !== 0) opError('group_norm', `channels ${s[1]} of input ${formatShape(s)} are not divisible by num_groups ${a.num_groups}`);
    checkParam('group_norm', 'weight', w!, [s[1]!], 'the channels');
    checkParam('group_norm', 'bias', b!, [s[1]!], 'the channels');
    return [meta(s, T(x).dtype)];
  },
  decompose: (call) => {
    const x = I(call, 0)!;
    const [n, c] = x.shape as [number, number];
    const g = call.attrs.num_groups;
    const s = new OpScope();
    const xf = s.op('reshape', [s.op('to', [x], { dtype: wide(x.dtype) })], { shape: [n, g, -1] });
    const mean = s.op('mean', [xf], { dim: -1, keepdim: true });
    const d = s.op('sub', [xf, mean]);
    const v = s.op('mean', [s.op('square', [d])], { dim: -1, keepdim: true });
    let y = s.op('reshape', [s.op('mul', [d, s.op('rsqrt', [s.op('add', [v, call.attrs.eps])])])], { shape: x.shape });
    const perChannel = [c, ...x.shape.slice(2).map(() => 1)];
    if (I(call, 1)) y = s.op('mul', [y, s.op('reshape', [I(call, 1)], { shape: perChannel })]);
    if (I(call, 2)) y = s.op('add', [y, s.op('reshape', [I(call, 2)], { shape: perChannel })]);
    return s.keep([s.op('to', [y], { dtype: x.dtype })]);
  },
});

// --- batch_norm (inference) -------------------------------------------------------------------

defineOp({
  name: 'batch_norm',
  group: 'norm',
  doc: 'F.batch_norm in eval mode: (x - running_mean[c]) / sqrt(running_var[c] + eps) * weight[c] + bias[c] for input [N, C, *]. training=True is not supported (inference only).',
  inputs: [
    { name: 'input', dtypes: 'float' }, { name: 'running_mean', dtypes: 'float' }, { name: 'running_var', dtypes: 'float' },
    { name: 'weight', optional: true, dtypes: 'float' }, { name: 'bias', optional: true, dtypes: 'float' },
  ],
  attrs: z.object({ training: z.boolean().default(false), momentum: z.number().default(0.1), eps: z.number().default(1e-5) }).strict(),
  infer: ([x, rm, rv, w, b], a) => {
    if (a.training) opError('batch_norm', 'training=True is not supported: this is the inference form (running statistics)');
    const s = T(x).shape;
    if (s.length < 2) opError('batch_norm', `input must be [N, C, *], got ${formatShape(s)}`);
    const c = [s[1]!];
    checkParam('batch_norm', 'running_mean', rm!, c, 'the channels');
    checkParam('batch_norm', 'running_var', rv!, c, 'the channels');
    checkParam('batch_norm', 'weight', w!, c, 'the channels');
    checkParam('batch_norm', 'bias', b!, c, 'the channels');
    return [meta(s, T(x).dtype)];
  },
  decompose: (call) => {
    const x = I(call, 0)!;
    const perChannel = [x.shape[1]!, ...x.shape.slice(2).map(() => 1)];
    const s = new OpScope();
    const ch = (t: Tensor) => s.op('reshape', [s.op('to', [t], { dtype: wide(x.dtype) })], { shape: perChannel });
    const xf = s.op('to', [x], { dtype: wide(x.dtype) });
    let y = s.op('mul', [s.op('sub', [xf, ch(I(call, 1)!)]), s.op('rsqrt', [s.op('add', [ch(I(call, 2)!), call.attrs.eps])])]);
    if (I(call, 3)) y = s.op('mul', [y, ch(I(call, 3)!)]);
    if (I(call, 4)) y = s.op('add', [y, ch(I(call, 4)!)]);
    return s.keep([s.op('to', [y], { dtype: x.dtype })]);
  },
});

// --- rms_norm ---------------------------------------------------------------------------------

export const rmsNormAttrs = z.object({
  /** the trailing dims normalised together; null: the last dim */
  normalized_shape: z.array(z.number().int().nonnegative()).nullable().default(null),
  /** null: torch.finfo(input.dtype).eps, as F.rms_norm */
  eps: z.number().nullable().default(null),
  /** y = norm(x) * (weight + weight_offset): 1 for Gemma's RMSNorm (weights stored as w - 1) */
  weight_offset: z.number().default(0),
  /** gated form (a `z` input): true: norm(x) * w * act(z) (FLA FusedRMSNormGated); false: norm(x * act(z)) * w (vLLM RMSNormGated's default) */
  norm_before_gate: z.boolean().default(false),
  /** normalise groups of this many channels of the last dim separately (vLLM RMSNormGated group_size); null: the whole dim */
  group_size: z.number().int().positive().nullable().default(null),
  /** the gate's activation (FLA: swish = silu, or sigmoid) */
  activation: z.enum(['silu', 'sigmoid']).default('silu'),
}).strict();
export type RmsNormAttrs = z.output<typeof rmsNormAttrs>;

/** The normalised trailing shape of an rms_norm call. */
function rmsShape(s: Shape, a: RmsNormAttrs): Shape {
  return a.normalized_shape ?? (s.length > 0 ? [s[s.length - 1]!] : []);
}

defineOp({
  name: 'rms_norm',
  group: 'norm',
  doc:
    'x / sqrt(mean(x^2) + eps) * (weight + weight_offset) over the trailing normalized_shape (default: the last dim). ' +
    'With a gate z (same shape as input): norm_before_gate ? norm(x) * w * act(z) : norm(x * act(z)) * w; group_size ' +
    'normalises groups of the last dim separately. Computed in float32 or wider, rounded once to the input dtype.',
  inputs: [{ name: 'input', dtypes: 'float' }, { name: 'weight', optional: true, dtypes: 'float' }, { name: 'z', optional: true, dtypes: 'float' }],
  attrs: rmsNormAttrs,
  infer: ([x, w, g], a) => {
    const s = T(x).shape;
    const ns = rmsShape(s, a);
    if (s.length === 0 || ns.length === 0 || ns.length > s.length || !shapesEqual(s.slice(s.length - ns.length), ns)) {
      opError('rms_norm', `normalized_shape ${formatShape(ns)} must be a non-empty suffix of the input shape ${formatShape(s)}`);
    }
    checkParam('rms_norm', 'weight', w!, ns, 'normalized_shape');
    if (g !== null) {
      if (!shapesEqual(T(g).shape, s)) opError('rms_norm', `gate z ${formatShape(T(g).shape)} must have the input's shape ${formatShape(s)}`);
    }
    if (a.group_size !== null) {
      if (ns.length !== 1) opError('rms_norm', `group_size needs a 1-dim normalized_shape, got ${formatShape(ns)}`);
      if (ns[0]! % a.group_size !== 0) opError('rms_norm', `group_size ${a.group_size} does not divide the last dim ${ns[0]} of input ${formatShape(s)}`);
    }
    return [meta(s, T(x).dtype)];
  },
  // the Llama surface's rmsNorm: plain form over the last dim with a weight and an explicit eps
  viaOps: (ops, call) => {
    const [x, w, g] = call.inputs as [Tensor, Tensor | null, Tensor | null];
    const a = call.attrs;
    if (!w || g || a.weight_offset !== 0 || a.group_size !== null || a.eps === null) return undefined;
    if (a.normalized_shape !== null && a.normalized_shape.length !== 1) return undefined;
    return [ops.rmsNorm(x, w, a.eps)];
  },
  decompose: (call) => decomposeRms(call.inputs[0] as Tensor, I(call, 1), I(call, 2), call.attrs),
});

function decomposeRms(x: Tensor, w: Tensor | null, g: Tensor | null, a: RmsNormAttrs): Tensor[] {
  const ns = rmsShape(x.shape, a);
  const eps = a.eps ?? finfoEps(x.dtype);
  const s = new OpScope();
  let xf = s.op('to', [x], { dtype: wide(x.dtype) });
  const gate = g && s.op(a.activation, [s.op('to', [g], { dtype: wide(x.dtype) })]);
  if (gate && !a.norm_before_gate) xf = s.op('mul', [xf, gate]);
  let dims = lastDims(ns.length);
  let grouped = xf;
  if (a.group_size !== null) {
    grouped = s.op('reshape', [xf], { shape: [...x.shape.slice(0, -1), ns[0]! / a.group_size, a.group_size] });
    dims = [-1];
  }
  const ms = s.op('mean', [s.op('square', [grouped])], { dim: dims, keepdim: true });
  let y = s.op('mul', [grouped, s.op('rsqrt', [s.op('add', [ms, eps])])]);
  if (a.group_size !== null) y = s.op('reshape', [y], { shape: x.shape });
  if (w) y = s.op('mul', [y, a.weight_offset === 0 ? w : s.op('add', [s.op('to', [w], { dtype: wide(x.dtype) }), a.weight_offset])]);
  if (gate && a.norm_before_gate) y = s.op('mul', [y, gate]);
  return s.keep([s.op('to', [y], { dtype: x.dtype })]);
}

// --- fused residual form ----------------------------------------------------------------------

defineOp({
  name: 'fused_add_rms_norm',
  group: 'norm',
  doc:
    "vLLM's fused_add_rms_norm: residual_out = input + residual (stored in the input dtype), out = rms_norm(residual_out) * " +
    '(weight + weight_offset) over the last dim. Returns [out, residual_out].',
  inputs: [{ name: 'input', dtypes: 'float' }, { name: 'residual', dtypes: 'float' }, { name: 'weight', dtypes: 'float' }],
  outputs: ['out', 'residual_out'],
  attrs: z.object({ eps: z.number().default(1e-6), weight_offset: z.number().default(0) }).strict(),
  infer: ([x, r, w]) => {
    const s = T(x).shape;
    if (s.length === 0) opError('fused_add_rms_norm', 'input must have at least one dim');
    if (!shapesEqual(T(r).shape, s)) opError('fused_add_rms_norm', `residual ${formatShape(T(r).shape)} must have the input's shape ${formatShape(s)}`);
    if (T(r).dtype !== T(x).dtype) opError('fused_add_rms_norm', `residual dtype ${T(r).dtype} must equal the input dtype ${T(x).dtype}`);
    checkParam('fused_add_rms_norm', 'weight', w!, [s[s.length - 1]!], 'the last dim of input');
    return [meta(s, T(x).dtype), meta(s, T(x).dtype)];
  },
  viaOps: (ops, call) => {
    if (call.attrs.weight_offset !== 0) return undefined;
    const [x, r, w] = call.inputs as [Tensor, Tensor, Tensor];
    return ops.fusedAddRmsNorm(x, r, w, call.attrs.eps);
  },
  decompose: (call) => {
    const [x, r, w] = call.inputs as [Tensor, Tensor, Tensor];
    const sum = callOp1('add', [x, r]);
    try {
      const [y] = decomposeRms(sum, w, null, { ...rmsNormAttrs.parse({}), eps: call.attrs.eps, weight_offset: call.attrs.weight_offset });
      return [y!, sum];
    } catch (e) {
      sum.dispose();
      throw e;
    }
  },
});

// The post-LayerNorm residual of BERT / XLM-R / T5-style encoders (HF's LayerNorm(dense(h) + input)): one pass reads
// both operands where the backend has the kernel, instead of an add writing the sum and a layer_norm reading it back.
defineOp({
  name: 'add_layer_norm',
  group: 'norm',
  doc:
    'layer_norm(input + residual) over the trailing normalized_shape (post-LN residual: BERT, XLM-R). The sum is rounded ' +
    'to the input dtype first, as the unfused add stores it, and is not returned; the norm then as layer_norm.',
  inputs: [{ name: 'input', dtypes: 'float' }, { name: 'residual', dtypes: 'float' }, { name: 'weight', optional: true, dtypes: 'float' }, { name: 'bias', optional: true, dtypes: 'float' }],
  attrs: layerNormAttrs,
  infer: ([x, r, w, b], a) => {
    const s = T(x).shape;
    if (!shapesEqual(T(r).shape, s)) opError('add_layer_norm', `residual ${formatShape(T(r).shape)} must have the input's shape ${formatShape(s)}`);
    if (T(r).dtype !== T(x).dtype) opError('add_layer_norm', `residual dtype ${T(r).dtype} must equal the input dtype ${T(x).dtype}`);
    return inferLayerNorm('add_layer_norm', x!, w!, b!, a.normalized_shape);
  },
  decompose: (call) => {
    const [x, r, w, b] = call.inputs as [Tensor, Tensor, Tensor | null, Tensor | null];
    const sum = callOp1('add', [x, r]);
    try {
      return [callOp1('layer_norm', [sum, w ?? null, b ?? null], call.attrs)];
    } finally {
      sum.dispose();
    }
  },
});

// --- L2 norms ---------------------------------------------------------------------------------

defineOp({
  name: 'normalize',
  group: 'norm',
  doc: 'F.normalize: x / max(||x||_p, eps) along dim (p = 2, dim = 1, eps = 1e-12 by default).',
  inputs: [{ name: 'input', dtypes: 'float' }],
  attrs: z.object({ p: z.number().positive().default(2), dim: z.number().int().default(1), eps: z.number().default(1e-12) }).strict(),
  infer: ([x], a) => {
    normDim('normalize', a.dim, T(x).shape.length);
    return [meta(T(x).shape, T(x).dtype)];
  },
  decompose: (call) => {
    const x = call.inputs[0] as Tensor;
    const { p, dim, eps } = call.attrs;
    const s = new OpScope();
    const xf = s.op('to', [x], { dtype: wide(x.dtype) });
    const powered = p === 2 ? s.op('square', [xf]) : s.op('pow', [s.op('abs', [xf]), p]);
    const summed = s.op('sum', [powered], { dim, keepdim: true });
    const norm = p === 2 ? s.op('sqrt', [summed]) : s.op('pow', [summed, 1 / p]);
    const y = s.op('div', [xf, s.op('clamp', [norm, eps, null])]);
    return s.keep([s.op('to', [y], { dtype: x.dtype })]);
  },
});

defineOp({
  name: 'l2_norm',
  group: 'norm',
  doc: "FLA's l2norm: x / sqrt(sum(x^2) + eps) over the last dim (eps = 1e-6), as used on q / k in gated linear attention.",
  inputs: [{ name: 'input', dtypes: 'float' }],
  attrs: z.object({ eps: z.number().default(1e-6) }).strict(),
  infer: ([x]) => {
    if (T(x).shape.length === 0) opError('l2_norm', 'input must have at least one dim');
    return [meta(T(x).shape, T(x).dtype)];
  },
  decompose: (call) => {
    const x = call.inputs[0] as Tensor;
    const s = new OpScope();
    const xf = s.op('to', [x], { dtype: wide(x.dtype) });
    const ss = s.op('sum', [s.op('square', [xf])], { dim: -1, keepdim: true });
    const y = s.op('mul', [xf, s.op('rsqrt', [s.op('add', [ss, call.attrs.eps])])]);
    return s.keep([s.op('to', [y], { dtype: x.dtype })]);
  },
});

// --- front ends -------------------------------------------------------------------------------

export const normFunctions = {
  layerNorm: (input: Tensor, normalizedShape: readonly number[], weight: Tensor | null = null, bias: Tensor | null = null, eps = 1e-5): Tensor =>
    callOp1('layer_norm', [input, weight, bias], { normalized_shape: normalizedShape, eps }),
  /** adaLN: layer_norm(input) (no affine) * (scaleOffset + scale) + shift, scale / shift broadcast over the tokens. */
  layerNormModulate: (input: Tensor, scale: Tensor, shift: Tensor, eps = 1e-6, scaleOffset = 1): Tensor =>
    callOp1('layer_norm_modulate', [input, scale, shift], { eps, scale_offset: scaleOffset }),
  groupNorm: (input: Tensor, numGroups: number, weight: Tensor | null = null, bias: Tensor | null = null, eps = 1e-5): Tensor =>
    callOp1('group_norm', [input, weight, bias], { num_groups: numGroups, eps }),
  batchNorm: (input: Tensor, runningMean: Tensor, runningVar: Tensor, weight: Tensor | null = null, bias: Tensor | null = null, training = false, momentum = 0.1, eps = 1e-5): Tensor =>
    callOp1('batch_norm', [input, runningMean, runningVar, weight, bias], { training, momentum, eps }),
  /** F.rms_norm(input, normalized_shape, weight, eps) with the extensions as options. */
  rmsNorm: (input: Tensor, normalizedShape: readonly number[] | null = null, weight: Tensor | null = null, eps: number | null = null,
    opts: { z?: Tensor | null; weight_offset?: number; norm_before_gate?: boolean; group_size?: number | null; activation?: 'silu' | 'sigmoid' } = {}): Tensor => {
    const { z: gate = null, ...rest } = opts;
    return callOp1('rms_norm', [input, weight, gate], { normalized_shape: normalizedShape, eps, ...rest });
  },
  fusedAddRmsNorm: (input: Tensor, residual: Tensor, weight: Tensor, eps = 1e-6, weightOffset = 0): [Tensor, Tensor] =>
    callOp('fused_add_rms_norm', [input, residual, weight], { eps, weight_offset: weightOffset }) as [Tensor, Tensor],
  /** layer_norm(input + residual): the post-LN residual (BERT, XLM-R) in one op, the sum rounded to the input dtype. */
  addLayerNorm: (input: Tensor, residual: Tensor, normalizedShape: readonly number[], weight: Tensor | null = null, bias: Tensor | null = null, eps = 1e-5): Tensor =>
    callOp1('add_layer_norm', [input, residual, weight, bias], { normalized_shape: normalizedShape, eps }),
  normalize: (input: Tensor, opts: { p?: number; dim?: number; eps?: number } = {}): Tensor => callOp1('normalize', [input], opts),
  l2Norm: (input: Tensor, eps = 1e-6): Tensor => callOp1('l2_norm', [input], { eps }),
};
