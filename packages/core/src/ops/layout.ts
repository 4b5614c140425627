/**
 * Layout ops: views (view, reshape, permute, transpose, squeeze, unsqueeze, flatten, expand, narrow, slice, select,
 * split, chunk), copies (contiguous, cat, stack, repeat, pad), indexing (gather, index_select, scatter, scatter_add,
 * one_hot, embedding) and resampling (interpolate, pixel_shuffle, pixel_unshuffle).
 *
 * Ops that PyTorch answers with a view return a view here too, built once in core from Tensor's view methods (their
 * `decompose`), so every backend has them. Ops that only move whole values (cat, stack, repeat, constant pad,
 * contiguous) are written once over the backend's strided copy (`Ops.copy` / `Ops.fill`, their `viaOps` route); a
 * backend may still register faster kernels. Index-driven ops need a kernel.
 */
import { z } from 'zod';
import type { DType } from '../dtype.js';
import { CHANNELS_LAST_ORDER, contiguousStrides, formatShape, numel, shapesEqual, stridesLikeChannelsLast, viewStrides, type Shape } from '../shape.js';
import { Tensor } from '../tensor.js';
import { resultType } from './promote.js';
import { callOp, callOp1, defineOp, meta, normDim, opError, OpScope, type MetaArg, type OpCall, type TensorMeta } from './registry.js';

const intList = z.array(z.number().int());
const T = (a: MetaArg) => a as TensorMeta;
const X = (call: OpCall<any>, i = 0) => call.inputs[i] as Tensor;

/** A size list with at most one -1, resolved against a number of elements (an OpError names the op otherwise). */
export function resolveSize(op: string, size: readonly number[], total: number, what = 'shape'): number[] {
  const free = size.indexOf(-1);
  if (size.some((d, i) => !Number.isInteger(d) || (d < 0 && !(d === -1 && i === free)))) {
    opError(op, `${what} ${formatShape(size)} is invalid: sizes are non-negative integers with at most one -1`);
  }
  const out = [...size];
  if (free >= 0) {
    const known = size.reduce((a, d, i) => (i === free ? a : a * d), 1);
    if (known === 0 || total % known !== 0) opError(op, `${what} ${formatShape(size)} is invalid for an input of ${total} elements`);
    out[free] = total / known;
  }
  if (numel(out) !== total) opError(op, `${what} ${formatShape(size)} is invalid for an input of ${total} elements`);
  return out;
}

function viewOf(op: string, x: Tensor, shape: Shape): Tensor | null {
  const strides = viewStrides(x.shape, x.strides, shape);
  return strides && new Tensor({ storage: x.storage, dtype: x.dtype, shape, strides, offset: x.offset });
}

/** A fresh contiguous tensor on the input's backend and device. */
function emptyLike(x: Tensor, shape: Shape, dtype: DType = x.dtype): Tensor {
  return Tensor.empty(x.backend, shape, dtype, { device: x.device });
}

/**
 * cat's output in the memory format its inputs share, as PyTorch's cat picks it (every input's suggest_memory_format
 * channels-last: channels-last; else contiguous), so a conv net's C2f / neck concats stay channels-last for the convs
 * after them.
 */
function catOutput(ts: readonly Tensor[], shape: Shape, dtype: DType): Tensor {
  const x = ts[0]!;
  const inputs = ts.filter((t) => t.numel > 0);
  if (!CHANNELS_LAST_ORDER[shape.length] || inputs.length === 0 || !inputs.every((t) => stridesLikeChannelsLast(t.shape, t.strides))) return emptyLike(x, shape, dtype);
  return emptyChannelsLast(x, shape, dtype);
}

/** A fresh 4-d / 5-d tensor on x's backend and device, laid out channels-last ([N, *spatial, C] in memory). */
function emptyChannelsLast(x: Tensor, shape: Shape, dtype: DType): Tensor {
  const cl = CHANNELS_LAST_ORDER[shape.length]!;
  const base = Tensor.empty(x.backend, cl.map((d) => shape[d]!), dtype, { device: x.device });
  const inverse = new Array<number>(cl.length);
  cl.forEach((d, i) => (inverse[d] = i));
  const out = base.permute(inverse);
  base.dispose();
  return out;
}

/**
 * A fresh tensor of `shape` in x's suggested memory format, as PyTorch allocates the results of spatial ops that keep
 * it (upsample / interpolate): channels-last when x (4-d / 5-d, the same rank) has channels-last strides, else
 * contiguous. Keeps a channels-last conv net channels-last through its neck's upsamples.
 */
export function emptyLikeMemoryFormat(x: Tensor, shape: Shape, dtype: DType = x.dtype): Tensor {
  if (x.rank === shape.length && CHANNELS_LAST_ORDER[shape.length] && stridesLikeChannelsLast(x.shape, x.strides)) return emptyChannelsLast(x, shape, dtype);
  return emptyLike(x, shape, dtype);
}

// --- views -----------------------------------------------------------------------------------

defineOp({
  name: 'view',
  group: 'layout',
  doc: 'The same storage seen with another shape (one size may be -1); fails when the strides cannot express it (use reshape).',
  inputs: [{ name: 'input' }],
  attrs: z.object({ size: intList }).strict(),
  view: true,
  infer: ([x], a) => [meta(resolveSize('view', a.size, numel(T(x).shape), 'size'), T(x).dtype)],
  decompose: (call) => {
    const x = X(call);
    const v = viewOf('view', x, call.outputs[0]!.shape);
    if (!v) opError('view', `size ${formatShape(call.attrs.size)} is not compatible with the input's strides (shape ${formatShape(x.shape)}, strides ${formatShape(x.strides)}): use reshape`);
    return [v];
  },
});

defineOp({
  name: 'reshape',
  group: 'layout',
  doc: 'A view when the strides allow it, else a contiguous copy (one size may be -1).',
  inputs: [{ name: 'input' }],
  attrs: z.object({ shape: intList }).strict(),
  view: true,
  infer: ([x], a) => [meta(resolveSize('reshape', a.shape, numel(T(x).shape)), T(x).dtype)],
  decompose: (call) => {
    const x = X(call);
    const shape = call.outputs[0]!.shape;
    const v = viewOf('reshape', x, shape);
    if (v) return [v];
    const c = callOp1('contiguous', [x]);
    const r = viewOf('reshape', c, shape)!;
    c.dispose();
    return [r];
  },
});

defineOp({
  name: 'flatten',
  group: 'layout',
  doc: 'Dims start_dim..end_dim merged into one (a view when possible, as reshape).',
  inputs: [{ name: 'input' }],
  attrs: z.object({ start_dim: z.number().int().default(0), end_dim: z.number().int().default(-1) }).strict(),
  view: true,
  infer: ([x], a) => {
    const s = T(x).shape;
    if (s.length === 0) return [meta([1], T(x).dtype)];
    const lo = normDim('flatten', a.start_dim, s.length, 'start_dim');
    const hi = normDim('flatten', a.end_dim, s.length, 'end_dim');
    if (lo > hi) opError('flatten', `start_dim ${a.start_dim} comes after end_dim ${a.end_dim}`);
    return [meta([...s.slice(0, lo), numel(s.slice(lo, hi + 1)), ...s.slice(hi + 1)], T(x).dtype)];
  },
  decompose: (call) => callOp('reshape', [X(call)], { shape: call.outputs[0]!.shape }),
});

defineOp({
  name: 'permute',
  group: 'layout',
  doc: 'A view with the dims reordered (dims is a permutation of the input dims).',
  inputs: [{ name: 'input' }],
  attrs: z.object({ dims: intList }).strict(),
  view: true,
  infer: ([x], a) => {
    const s = T(x).shape;
    const dims = a.dims.map((d) => normDim('permute', d, s.length, 'dims'));
    if (dims.length !== s.length || new Set(dims).size !== s.length) opError('permute', `dims ${formatShape(a.dims)} is not a permutation of the ${s.length} dims of input ${formatShape(s)}`);
    return [meta(dims.map((d) => s[d]!), T(x).dtype)];
  },
  decompose: (call) => [X(call).permute(call.attrs.dims)],
});

defineOp({
  name: 'transpose',
  group: 'layout',
  doc: 'A view with dims dim0 and dim1 swapped.',
  inputs: [{ name: 'input' }],
  attrs: z.object({ dim0: z.number().int(), dim1: z.number().int() }).strict(),
  view: true,
  infer: ([x], a) => {
    const s = [...T(x).shape];
    if (s.length === 0) return [meta([], T(x).dtype)];
    const d0 = normDim('transpose', a.dim0, s.length, 'dim0');
    const d1 = normDim('transpose', a.dim1, s.length, 'dim1');
    [s[d0], s[d1]] = [s[d1]!, s[d0]!];
    return [meta(s, T(x).dtype)];
  },
  decompose: (call) => [X(call).rank === 0 ? viewOf('transpose', X(call), [])! : X(call).transpose(call.attrs.dim0, call.attrs.dim1)],
});

defineOp({
  name: 'unsqueeze',
  group: 'layout',
  doc: 'A view with a size-1 dim inserted at dim (dim in [-rank-1, rank]).',
  inputs: [{ name: 'input' }],
  attrs: z.object({ dim: z.number().int() }).strict(),
  view: true,
  infer: ([x], a) => {
    const s = [...T(x).shape];
    s.splice(normDim('unsqueeze', a.dim, s.length + 1), 0, 1);
    return [meta(s, T(x).dtype)];
  },
  decompose: (call) => [X(call).unsqueeze(call.attrs.dim)],
});

function squeezeDims(s: Shape, dim: number | number[] | null): number[] {
  if (dim === null) return s.flatMap((v, i) => (v === 1 ? [i] : []));
  const list = (typeof dim === 'number' ? [dim] : dim).map((d) => normDim('squeeze', d, s.length));
  return list.filter((d) => s[d] === 1); // a named dim that is not 1 is left alone, as in PyTorch
}

defineOp({
  name: 'squeeze',
  group: 'layout',
  doc: 'A view without size-1 dims (all of them, or those named in dim that have size 1).',
  inputs: [{ name: 'input' }],
  attrs: z.object({ dim: z.union([z.number().int(), intList]).nullable().default(null) }).strict(),
  view: true,
  infer: ([x], a) => {
    const drop = squeezeDims(T(x).shape, a.dim);
    return [meta(T(x).shape.filter((_, i) => !drop.includes(i)), T(x).dtype)];
  },
  decompose: (call) => {
    const x = X(call);
    const drop = squeezeDims(x.shape, call.attrs.dim);
    const keep = (_: number, i: number) => !drop.includes(i);
    return [new Tensor({ storage: x.storage, dtype: x.dtype, shape: x.shape.filter(keep), strides: x.strides.filter(keep), offset: x.offset })];
  },
});

defineOp({
  name: 'expand',
  group: 'layout',
  doc: 'A view broadcasting size-1 dims to size (stride 0); -1 keeps a dim; new leading dims may be added.',
  inputs: [{ name: 'input' }],
  attrs: z.object({ size: intList }).strict(),
  view: true,
  infer: ([x], a) => {
    const s = T(x).shape;
    const lead = a.size.length - s.length;
    if (lead < 0) opError('expand', `size ${formatShape(a.size)} has fewer dims than input ${formatShape(s)}`);
    const out = a.size.map((want, i) => {
      const have = i >= lead ? s[i - lead]! : undefined;
      if (want === -1) {
        if (have === undefined) opError('expand', `size ${formatShape(a.size)}: -1 is not allowed in a new leading dim`);
        return have;
      }
      if (have !== undefined && have !== want && have !== 1) opError('expand', `input ${formatShape(s)} cannot be expanded to ${formatShape(a.size)} (dim ${i}: ${have} vs ${want})`);
      return want;
    });
    return [meta(out, T(x).dtype)];
  },
  decompose: (call) => [X(call).expand(call.outputs[0]!.shape)],
});

defineOp({
  name: 'narrow',
  group: 'layout',
  doc: 'A view of elements [start, start + length) of dim (start may be negative).',
  inputs: [{ name: 'input' }],
  attrs: z.object({ dim: z.number().int(), start: z.number().int(), length: z.number().int().nonnegative() }).strict(),
  view: true,
  infer: ([x], a) => {
    const s = [...T(x).shape];
    const d = normDim('narrow', a.dim, s.length);
    const st = a.start < 0 ? a.start + s[d]! : a.start;
    if (st < 0 || st + a.length > s[d]!) opError('narrow', `start ${a.start} + length ${a.length} exceeds dim ${a.dim} of size ${s[d]} (input ${formatShape(s)})`);
    s[d] = a.length;
    return [meta(s, T(x).dtype)];
  },
  decompose: (call) => [X(call).narrow(call.attrs.dim, call.attrs.start, call.attrs.length)],
});

const sliceAttrs = z.object({
  dim: z.number().int().default(0),
  start: z.number().int().nullable().default(null),
  end: z.number().int().nullable().default(null),
  step: z.number().int().positive().default(1),
}).strict();
defineOp({
  name: 'slice',
  group: 'layout',
  doc: 'A view of input[..., start:end:step, ...] along dim, with Python slicing rules (negative and out-of-range bounds clamp).',
  inputs: [{ name: 'input' }],
  attrs: sliceAttrs,
  view: true,
  infer: ([x], a) => {
    const s = [...T(x).shape];
    const d = normDim('slice', a.dim, s.length);
    const size = s[d]!;
    const clamp = (v: number) => Math.min(Math.max(v < 0 ? v + size : v, 0), size);
    const st = clamp(a.start ?? 0);
    const en = clamp(a.end ?? size);
    s[d] = Math.max(0, Math.ceil((en - st) / a.step));
    return [meta(s, T(x).dtype)];
  },
  decompose: (call) => [X(call).slice(call.attrs.dim, call.attrs.start ?? 0, call.attrs.end ?? undefined, call.attrs.step)],
});

defineOp({
  name: 'select',
  group: 'layout',
  doc: 'A view of one index of dim (the dim is removed); index may be negative.',
  inputs: [{ name: 'input' }],
  attrs: z.object({ dim: z.number().int(), index: z.number().int() }).strict(),
  view: true,
  infer: ([x], a) => {
    const s = T(x).shape;
    if (s.length === 0) opError('select', 'cannot select on a 0-d tensor');
    const d = normDim('select', a.dim, s.length);
    if (a.index < -s[d]! || a.index >= s[d]!) opError('select', `index ${a.index} is out of range for dim ${a.dim} of size ${s[d]} (input ${formatShape(s)})`);
    return [meta(s.filter((_, i) => i !== d), T(x).dtype)];
  },
  decompose: (call) => [X(call).select(call.attrs.dim, call.attrs.index)],
});

/** The [start, length) pieces of split / chunk along a dim of size `size`. */
function pieces(op: string, size: number, sizes: number | readonly number[], chunks?: number): [number, number][] {
  const out: [number, number][] = [];
  if (chunks !== undefined) {
    if (chunks <= 0) opError(op, `chunks must be positive, got ${chunks}`);
    const step = Math.ceil(size / chunks);
    if (step === 0) return Array.from({ length: chunks }, () => [0, 0] as [number, number]);
    for (let s = 0; s < size; s += step) out.push([s, Math.min(step, size - s)]);
    return out;
  }
  if (typeof sizes === 'number') {
    if (sizes <= 0 && !(sizes === 0 && size === 0)) opError(op, `split_size must be positive, got ${sizes}`);
    if (size === 0) return [[0, 0]];
    for (let s = 0; s < size; s += sizes) out.push([s, Math.min(sizes, size - s)]);
    return out;
  }
  const total = sizes.reduce((a, b) => a + b, 0);
  if (total !== size || sizes.some((v) => v < 0)) opError(op, `split sizes ${formatShape(sizes)} must be non-negative and sum to the dim size ${size}`);
  let s = 0;
  for (const len of sizes) {
    out.push([s, len]);
    s += len;
  }
  return out;
}

defineOp({
  name: 'split',
  group: 'layout',
  doc: 'Views of consecutive pieces along dim: pieces of split_size (the last may be smaller) or the given section sizes.',
  inputs: [{ name: 'input' }],
  outputs: ['pieces...'],
  attrs: z.object({ split_size_or_sections: z.union([z.number().int(), intList]), dim: z.number().int().default(0) }).strict(),
  view: true,
  infer: ([x], a) => {
    const s = T(x).shape;
    const d = normDim('split', a.dim, s.length);
    return pieces('split', s[d]!, a.split_size_or_sections).map(([, len]) => meta(s.map((v, i) => (i === d ? len : v)), T(x).dtype));
  },
  decompose: (call) => {
    const x = X(call);
    const d = normDim('split', call.attrs.dim, x.rank);
    return pieces('split', x.shape[d]!, call.attrs.split_size_or_sections).map(([st, len]) => x.narrow(d, st, len));
  },
});

defineOp({
  name: 'chunk',
  group: 'layout',
  doc: 'Views of ceil(size / chunks)-sized pieces along dim (fewer than chunks when the size does not allow more, as in PyTorch).',
  inputs: [{ name: 'input' }],
  outputs: ['pieces...'],
  attrs: z.object({ chunks: z.number().int(), dim: z.number().int().default(0) }).strict(),
  view: true,
  infer: ([x], a) => {
    const s = T(x).shape;
    const d = normDim('chunk', a.dim, s.length);
    return pieces('chunk', s[d]!, 0, a.chunks).map(([, len]) => meta(s.map((v, i) => (i === d ? len : v)), T(x).dtype));
  },
  decompose: (call) => {
    const x = X(call);
    const d = normDim('chunk', call.attrs.dim, x.rank);
    return pieces('chunk', x.shape[d]!, 0, call.attrs.chunks).map(([st, len]) => x.narrow(d, st, len));
  },
});

// --- copies ----------------------------------------------------------------------------------

defineOp({
  name: 'contiguous',
  group: 'layout',
  doc: 'The input itself (a view) when already contiguous, else a contiguous copy.',
  inputs: [{ name: 'input' }],
  attrs: z.object({}).strict(),
  view: true,
  infer: ([x]) => [meta(T(x).shape, T(x).dtype)],
  viaOps: (ops, call) => {
    const x = X(call);
    if (x.isContiguous()) return [viewOf('contiguous', x, x.shape)!];
    const out = emptyLike(x, x.shape);
    ops.copy(out, x);
    return [out];
  },
});

/** cat's rule: 1-D empty tensors are skipped (legacy PyTorch behaviour); the rest must agree off dim. */
function catInfer(op: string, inputs: readonly MetaArg[], dim: number): { shape: number[]; dtype: DType; d: number } {
  if (inputs.length === 0) opError(op, 'expects a non-empty list of tensors');
  const ts = inputs.map(T);
  const real = ts.filter((t) => !(t.shape.length === 1 && t.shape[0] === 0));
  const ref = real[0] ?? ts[0]!;
  if (ref.shape.length === 0) opError(op, 'zero-dimensional tensors cannot be concatenated');
  const d = normDim(op, dim, ref.shape.length);
  const shape = [...ref.shape];
  shape[d] = 0;
  for (const t of real) {
    if (t.shape.length !== ref.shape.length || t.shape.some((v, i) => i !== d && v !== ref.shape[i])) {
      opError(op, `sizes of tensors must match except in dim ${dim}: ${ts.map((x) => formatShape(x.shape)).join(', ')}`);
    }
    shape[d]! += t.shape[d]!;
  }
  return { shape, dtype: resultType(ts, op), d };
}

defineOp({
  name: 'cat',
  group: 'layout',
  doc: 'Tensors joined along an existing dim; the result type promotes all inputs; 1-D empty tensors are skipped.',
  inputs: [{ name: 'tensors', variadic: true }],
  attrs: z.object({ dim: z.number().int().default(0) }).strict(),
  infer: (inputs, a) => {
    const { shape, dtype } = catInfer('cat', inputs, a.dim);
    return [meta(shape, dtype)];
  },
  viaOps: (ops, call) => {
    const ts = call.inputs as Tensor[];
    const { shape, dtype, d } = catInfer('cat', ts, call.attrs.dim);
    const out = catOutput(ts, shape, dtype);
    let off = 0;
    for (const t of ts) {
      if (t.numel === 0) continue; // nothing to copy (and the legacy 1-D empty tensors)
      const dst = out.narrow(d, off, t.shape[d]!);
      ops.copy(dst, t);
      dst.dispose();
      off += t.shape[d]!;
    }
    return [out];
  },
});

defineOp({
  name: 'stack',
  group: 'layout',
  doc: 'Tensors of one shape joined along a new dim.',
  inputs: [{ name: 'tensors', variadic: true }],
  attrs: z.object({ dim: z.number().int().default(0) }).strict(),
  infer: (inputs, a) => {
    if (inputs.length === 0) opError('stack', 'expects a non-empty list of tensors');
    const ts = inputs.map(T);
    if (ts.some((t) => !shapesEqual(t.shape, ts[0]!.shape))) opError('stack', `expects each tensor to be equal size, got ${ts.map((t) => formatShape(t.shape)).join(', ')}`);
    const s = [...ts[0]!.shape];
    s.splice(normDim('stack', a.dim, s.length + 1), 0, ts.length);
    return [meta(s, resultType(ts, 'stack'))];
  },
  decompose: (call) => {
    const views = (call.inputs as Tensor[]).map((t) => t.unsqueeze(call.attrs.dim));
    try {
      return callOp('cat', views, { dim: call.attrs.dim });
    } finally {
      for (const v of views) v.dispose();
    }
  },
});

defineOp({
  name: 'repeat',
  group: 'layout',
  doc: 'The input tiled repeats[i] times along each dim (Tensor.repeat; extra leading repeats add dims); a copy.',
  inputs: [{ name: 'input' }],
  attrs: z.object({ repeats: intList }).strict(),
  infer: ([x], a) => {
    const s = T(x).shape;
    if (a.repeats.length < s.length) opError('repeat', `repeats ${formatShape(a.repeats)} has fewer dims than input ${formatShape(s)}`);
    if (a.repeats.some((r) => r < 0)) opError('repeat', `repeats ${formatShape(a.repeats)} must be non-negative`);
    const padded = [...Array(a.repeats.length - s.length).fill(1), ...s];
    return [meta(padded.map((v, i) => v * a.repeats[i]!), T(x).dtype)];
  },
  // out viewed as [r0, s0, r1, s1, ...] is the input viewed as [1, s0, 1, s1, ...] expanded: one strided copy
  viaOps: (ops, call) => {
    const x = X(call);
    const r = call.attrs.repeats;
    const padded = [...Array(r.length - x.rank).fill(1), ...x.shape];
    const out = emptyLike(x, call.outputs[0]!.shape);
    if (out.numel === 0) return [out];
    const inter = padded.flatMap((s, i) => [r[i]!, s]);
    const src = x.reshape(padded);
    const srcStrides = src.strides.flatMap((st) => [0, st]);
    const dst = out.view(inter);
    const exp = new Tensor({ storage: src.storage, dtype: src.dtype, shape: inter, strides: srcStrides, offset: src.offset });
    ops.copy(dst, exp);
    for (const t of [src, dst, exp]) t.dispose();
    return [out];
  },
});

export const PAD_MODES = ['constant', 'reflect', 'replicate', 'circular'] as const;
const padAttrs = z.object({ pad: intList, mode: z.enum(PAD_MODES).default('constant'), value: z.number().nullable().default(null) }).strict();

/** Output shape of F.pad; pad = [last_left, last_right, prev_left, prev_right, ...]. */
export function padShape(s: Shape, pad: readonly number[], mode: (typeof PAD_MODES)[number]): number[] {
  if (pad.length % 2 !== 0) opError('pad', `pad ${formatShape(pad)} must have an even length`);
  if (pad.length / 2 > s.length) opError('pad', `pad ${formatShape(pad)} pads ${pad.length / 2} dims of a ${s.length}-d input ${formatShape(s)}`);
  const out = [...s];
  for (let k = 0; k < pad.length / 2; k++) {
    const d = s.length - 1 - k;
    const [l, r] = [pad[2 * k]!, pad[2 * k + 1]!];
    const size = s[d]!;
    if (mode === 'reflect' && (l >= size || r >= size || l < 0 || r < 0)) opError('pad', `reflect padding (${l}, ${r}) must be non-negative and less than the size ${size} of dim ${d} of input ${formatShape(s)}`);
    if (mode === 'circular' && (l > size || r > size || l < 0 || r < 0)) opError('pad', `circular padding (${l}, ${r}) must be non-negative and at most the size ${size} of dim ${d} of input ${formatShape(s)}`);
    if (mode === 'replicate' && size === 0 && l + r > 0) opError('pad', `replicate padding of an empty dim ${d} of input ${formatShape(s)}`);
    out[d] = size + l + r;
    if (out[d]! < 0) opError('pad', `pad ${formatShape(pad)} makes dim ${d} of input ${formatShape(s)} negative`);
  }
  return out;
}

defineOp({
  name: 'pad',
  group: 'layout',
  doc: "F.pad: pad = [last_left, last_right, prev_left, ...]; mode 'constant' (value, default 0; negative pads crop), 'reflect', 'replicate' or 'circular'.",
  inputs: [{ name: 'input' }],
  attrs: padAttrs,
  infer: ([x], a) => [meta(padShape(T(x).shape, a.pad, a.mode), T(x).dtype)],
  // constant mode as fill + one strided copy of the kept window
  viaOps: (ops, call) => {
    if (call.attrs.mode !== 'constant') return undefined;
    const x = X(call);
    const out = emptyLike(x, call.outputs[0]!.shape);
    ops.fill(out, call.attrs.value ?? 0);
    let src = x;
    let dst = out;
    const owned: Tensor[] = [];
    for (let k = 0; k < call.attrs.pad.length / 2; k++) {
      const d = x.rank - 1 - k;
      const [l, r] = [call.attrs.pad[2 * k]!, call.attrs.pad[2 * k + 1]!];
      const keep = x.shape[d]! - Math.max(0, -l) - Math.max(0, -r);
      if (keep <= 0) {
        for (const t of owned) t.dispose();
        return [out];
      }
      src = src.narrow(d, Math.max(0, -l), keep);
      dst = dst.narrow(d, Math.max(0, l), keep);
      owned.push(src, dst);
    }
    if (src.numel > 0) ops.copy(dst, src);
    for (const t of owned) t.dispose();
    return [out];
  },
});

// --- indexing --------------------------------------------------------------------------------

defineOp({
  name: 'gather',
  group: 'layout',
  doc: 'out[i][j][k] = input[index[i][j][k]][j][k] (for dim 0); index has the rank of input and sizes no larger off dim; the output has index\'s shape.',
  inputs: [{ name: 'input' }, { name: 'index', dtypes: ['i64', 'i32'] }],
  attrs: z.object({ dim: z.number().int() }).strict(),
  infer: ([x, i], a) => {
    const s = T(x).shape;
    const is = T(i).shape;
    const d = normDim('gather', a.dim, s.length);
    if (is.length !== s.length && !(s.length === 0 && is.length <= 1)) opError('gather', `index ${formatShape(is)} must have the same number of dims as input ${formatShape(s)}`);
    is.forEach((v, k) => {
      if (k !== d && v > s[k]!) opError('gather', `index ${formatShape(is)} is larger than input ${formatShape(s)} in dim ${k}`);
    });
    return [meta(is, T(x).dtype)];
  },
});

defineOp({
  name: 'index_select',
  group: 'layout',
  doc: 'The entries of input at the 1-D (or 0-d) integer index along dim.',
  inputs: [{ name: 'input' }, { name: 'index', dtypes: ['i64', 'i32'] }],
  attrs: z.object({ dim: z.number().int() }).strict(),
  infer: ([x, i], a) => {
    const s = [...T(x).shape];
    const is = T(i).shape;
    if (is.length > 1) opError('index_select', `index must be 1-D or 0-d, got ${formatShape(is)}`);
    if (s.length === 0) return [meta([], T(x).dtype)];
    const d = normDim('index_select', a.dim, s.length);
    s[d] = numel(is);
    return [meta(s, T(x).dtype)];
  },
});

function scatterInfer(op: string, inputs: readonly MetaArg[], dim: number): TensorMeta[] {
  const x = T(inputs[0]!);
  const i = T(inputs[1]!);
  const src = inputs[2]!;
  const d = normDim(op, dim, x.shape.length);
  if (i.shape.length !== x.shape.length) opError(op, `index ${formatShape(i.shape)} must have the same number of dims as input ${formatShape(x.shape)}`);
  i.shape.forEach((v, k) => {
    if (k !== d && v > x.shape[k]!) opError(op, `index ${formatShape(i.shape)} is larger than input ${formatShape(x.shape)} in dim ${k}`);
    if (typeof src !== 'number' && v > T(src).shape[k]!) opError(op, `index ${formatShape(i.shape)} is larger than src ${formatShape(T(src).shape)} in dim ${k}`);
  });
  if (typeof src !== 'number' && T(src).shape.length !== x.shape.length) opError(op, `src ${formatShape(T(src).shape)} must have the same number of dims as input ${formatShape(x.shape)}`);
  return [meta(x.shape, x.dtype)];
}

defineOp({
  name: 'scatter',
  group: 'layout',
  doc: 'A copy of input with out[index[i][j]][j] = src[i][j] (dim 0); src may be a scalar value; reduce "add" or "multiply" combines instead. Duplicate indices: the last write wins (PyTorch leaves it unspecified).',
  inputs: [{ name: 'input' }, { name: 'index', dtypes: ['i64', 'i32'] }, { name: 'src', scalar: true }],
  attrs: z.object({ dim: z.number().int(), reduce: z.enum(['add', 'multiply']).nullable().default(null) }).strict(),
  infer: (inputs, a) => scatterInfer('scatter', inputs, a.dim),
});

defineOp({
  name: 'scatter_add',
  group: 'layout',
  doc: 'A copy of input with src added at index along dim (out[index[i][j]][j] += src[i][j] for dim 0); duplicates accumulate.',
  inputs: [{ name: 'input' }, { name: 'index', dtypes: ['i64', 'i32'] }, { name: 'src' }],
  attrs: z.object({ dim: z.number().int() }).strict(),
  infer: (inputs, a) => scatterInfer('scatter_add', inputs, a.dim),
});

defineOp({
  name: 'one_hot',
  group: 'layout',
  doc: 'i64 [..., num_classes] with a 1 at each index of the integer input (num_classes -1 is resolved by F.oneHot from the data).',
  inputs: [{ name: 'input', dtypes: 'int' }],
  attrs: z.object({ num_classes: z.number().int().nonnegative() }).strict(),
  infer: ([x], a) => [meta([...T(x).shape, a.num_classes], 'i64')],
});

defineOp({
  name: 'embedding',
  group: 'layout',
  doc: 'F.embedding: rows of weight [V, H] at the integer ids input [...] -> [..., H] (padding_idx only matters for training).',
  inputs: [{ name: 'input', dtypes: 'int' }, { name: 'weight' }],
  attrs: z.object({ padding_idx: z.number().int().nullable().default(null) }).strict(),
  infer: ([i, w]) => {
    if (T(w).shape.length !== 2) opError('embedding', `weight must be 2-D [num_embeddings, embedding_dim], got ${formatShape(T(w).shape)}`);
    return [meta([...T(i).shape, T(w).shape[1]!], T(w).dtype)];
  },
  viaOps: (ops, call) => [ops.embedding(X(call, 0), X(call, 1))],
  decompose: (call) => {
    const ids = X(call, 0);
    const flat = callOp1('reshape', [ids], { shape: [-1] });
    const rows = callOp1('index_select', [X(call, 1), flat], { dim: 0 });
    const out = callOp1('reshape', [rows], { shape: call.outputs[0]!.shape });
    flat.dispose();
    rows.dispose();
    return [out];
  },
});

defineOp({
  name: 'embedding_masked',
  group: 'layout',
  doc:
    "A vocabulary shard's lookup (vLLM VocabParallelEmbedding before its all-reduce): weight [V_local, H] holds rows " +
    '[start, start + V_local) of the full table; ids in that range get weight[id - start], every other id a zero row.',
  inputs: [{ name: 'input', dtypes: 'int' }, { name: 'weight' }],
  attrs: z.object({ start: z.number().int().nonnegative() }).strict(),
  infer: ([i, w]) => {
    if (T(w).shape.length !== 2) opError('embedding_masked', `weight must be 2-D [num_embeddings, embedding_dim], got ${formatShape(T(w).shape)}`);
    return [meta([...T(i).shape, T(w).shape[1]!], T(w).dtype)];
  },
  viaOps: (ops, call) => [ops.embeddingMasked(X(call, 0), X(call, 1), call.attrs.start)],
  decompose: (call) => {
    const [ids, w] = [X(call, 0), X(call, 1)];
    const s = new OpScope();
    const local = s.op('sub', [ids, call.attrs.start]);
    const valid = s.op('mul', [s.op('ge', [local, 0]), s.op('lt', [local, w.shape[0]!])]);
    const rows = s.op('embedding', [s.op('where', [valid, local, 0]), w]);
    return s.keep([s.op('where', [s.op('unsqueeze', [valid], { dim: -1 }), rows, 0])]);
  },
});

defineOp({
  name: 'flip',
  group: 'layout',
  doc: 'A copy with the order of elements reversed along each of dims.',
  inputs: [{ name: 'input' }],
  attrs: z.object({ dims: intList }).strict(),
  infer: ([x], a) => {
    const s = T(x).shape;
    const dims = a.dims.map((d) => normDim('flip', d, s.length, 'dims'));
    if (new Set(dims).size !== dims.length) opError('flip', `dims ${formatShape(a.dims)} names a dim twice`);
    return [meta(s, T(x).dtype)];
  },
});

const intOrList = z.union([z.number().int(), intList]);
defineOp({
  name: 'roll',
  group: 'layout',
  doc: 'torch.roll: elements shifted by shifts along dims (cyclic); dims null rolls the flattened tensor and restores the shape.',
  inputs: [{ name: 'input' }],
  attrs: z.object({ shifts: intOrList, dims: intOrList.nullable().default(null) }).strict(),
  infer: ([x], a) => {
    const s = T(x).shape;
    const shifts = typeof a.shifts === 'number' ? [a.shifts] : a.shifts;
    if (a.dims === null) {
      if (shifts.length !== 1) opError('roll', `shifts ${JSON.stringify(a.shifts)} must be one number when dims is null`);
    } else {
      const dims = typeof a.dims === 'number' ? [a.dims] : a.dims;
      if (dims.length !== shifts.length) opError('roll', `shifts ${JSON.stringify(a.shifts)} and dims ${JSON.stringify(a.dims)} must have the same length`);
      dims.forEach((d) => normDim('roll', d, s.length, 'dims'));
    }
    return [meta(s, T(x).dtype)];
  },
  // a roll is two narrowed pieces swapped: narrow + cat per dim, the same on every backend
  decompose: (call) => {
    const x = X(call);
    const s = new OpScope();
    const shifts = typeof call.attrs.shifts === 'number' ? [call.attrs.shifts] : call.attrs.shifts;
    let cur = call.attrs.dims === null ? s.op('reshape', [x], { shape: [-1] }) : x;
    const dims = call.attrs.dims === null ? [0] : typeof call.attrs.dims === 'number' ? [call.attrs.dims] : call.attrs.dims;
    dims.forEach((dim, k) => {
      const d = normDim('roll', dim, cur.rank);
      const size = cur.shape[d]!;
      const sh = size === 0 ? 0 : ((shifts[k]! % size) + size) % size;
      if (sh === 0) return;
      const tail = s.own(cur.narrow(d, size - sh, sh));
      const head = s.own(cur.narrow(d, 0, size - sh));
      cur = s.op('cat', [tail, head], { dim: d });
    });
    if (call.attrs.dims === null) cur = s.op('reshape', [cur], { shape: x.shape });
    if (cur === x || cur.storage === x.storage) cur = s.op('to', [cur], { dtype: x.dtype }); // never alias the input
    return s.keep([cur]);
  },
});

for (const name of ['tril', 'triu'] as const) {
  defineOp({
    name,
    group: 'layout',
    doc: `torch.${name}: the ${name === 'tril' ? 'lower' : 'upper'} triangle (j ${name === 'tril' ? '<=' : '>='} i + diagonal) of the last two dims kept, the rest zero.`,
    inputs: [{ name: 'input' }],
    attrs: z.object({ diagonal: z.number().int().default(0) }).strict(),
    infer: ([x]) => {
      if (T(x).shape.length < 2) opError(name, `input must have at least 2 dims, got ${formatShape(T(x).shape)}`);
      return [meta(T(x).shape, T(x).dtype)];
    },
  });
}

// --- resampling ------------------------------------------------------------------------------

export const INTERPOLATE_MODES = ['nearest', 'nearest-exact', 'linear', 'bilinear', 'bicubic', 'trilinear'] as const;
export const interpolateAttrs = z.object({
  size: z.union([z.number().int().nonnegative(), intList]).nullable().default(null),
  scale_factor: z.union([z.number().positive(), z.array(z.number().positive())]).nullable().default(null),
  mode: z.enum(INTERPOLATE_MODES).default('nearest'),
  align_corners: z.boolean().nullable().default(null),
  /** true: the coordinate mapping uses in / out sizes instead of the given scale_factor */
  recompute_scale_factor: z.boolean().nullable().default(null),
}).strict();
export type InterpolateAttrs = z.output<typeof interpolateAttrs>;

/** Output spatial sizes and the per-dim scale_factor (null when size was given) of an interpolate call. */
export function interpolatePlan(s: Shape, a: InterpolateAttrs): { out: number[]; scales: (number | null)[] } {
  const nsp = s.length - 2;
  if (nsp < 1 || nsp > 3) opError('interpolate', `input must be 3-D, 4-D or 5-D [N, C, *spatial], got ${formatShape(s)}`);
  const want = { linear: 1, bilinear: 2, bicubic: 2, trilinear: 3 }[a.mode as 'linear'];
  if (want !== undefined && want !== nsp) opError('interpolate', `mode '${a.mode}' needs ${want + 2}-D input, got ${formatShape(s)}`);
  if (a.align_corners !== null && (a.mode === 'nearest' || a.mode === 'nearest-exact')) opError('interpolate', `align_corners only applies to the linear modes, not '${a.mode}'`);
  if ((a.size === null) === (a.scale_factor === null)) opError('interpolate', 'give exactly one of size and scale_factor');
  const spatial = s.slice(2);
  const list = <V>(v: V | readonly V[], what: string): V[] => {
    if (!Array.isArray(v)) return spatial.map(() => v as V);
    if (v.length !== nsp) opError('interpolate', `${what} ${JSON.stringify(v)} must have ${nsp} entries for input ${formatShape(s)}`);
    return [...(v as V[])];
  };
  if (a.size !== null) return { out: list(a.size, 'size'), scales: spatial.map(() => null) };
  const sf = list(a.scale_factor!, 'scale_factor');
  const out = spatial.map((v, i) => Math.floor(v * sf[i]!));
  return { out, scales: a.recompute_scale_factor ? spatial.map(() => null) : sf };
}

defineOp({
  name: 'interpolate',
  group: 'layout',
  doc: "F.interpolate over the spatial dims of [N, C, *spatial]: 'nearest' (floor(dst * in/out), as PyTorch in float32), 'nearest-exact', 'linear' / 'bilinear' / 'trilinear' or 'bicubic' (A = -0.75, border replicated) with align_corners.",
  inputs: [{ name: 'input', dtypes: 'float' }],
  attrs: interpolateAttrs,
  infer: ([x], a) => {
    const s = T(x).shape;
    const { out } = interpolatePlan(s, a);
    return [meta([s[0]!, s[1]!, ...out], T(x).dtype)];
  },
});

function shuffleInfer(op: 'pixel_shuffle' | 'pixel_unshuffle', s: Shape, r: number): number[] {
  if (s.length < 3) opError(op, `input must be at least 3-D [*, C, H, W], got ${formatShape(s)}`);
  if (r <= 0) opError(op, `factor must be positive, got ${r}`);
  const [c, h, w] = s.slice(-3) as [number, number, number];
  const lead = s.slice(0, -3);
  if (op === 'pixel_shuffle') {
    if (c % (r * r) !== 0) opError(op, `channels ${c} of input ${formatShape(s)} must be divisible by upscale_factor^2 = ${r * r}`);
    return [...lead, c / (r * r), h * r, w * r];
  }
  if (h % r !== 0 || w % r !== 0) opError(op, `height ${h} and width ${w} of input ${formatShape(s)} must be divisible by downscale_factor ${r}`);
  return [...lead, c * r * r, h / r, w / r];
}

/**
 * pixel_shuffle / pixel_unshuffle as a reshape to `split` (the factor r made its own dims), a permute by `perm` over
 * those dims and a reshape to the output: the same on every backend. The result never aliases the input.
 */
function shuffleViaPermute(call: OpCall<any>, split: (c: number, h: number, w: number, r: number) => number[], perm: readonly number[], r: number): Tensor[] {
  const x = X(call);
  const lead = x.shape.slice(0, -3);
  const [c, h, w] = x.shape.slice(-3) as [number, number, number];
  const n = lead.length;
  const v = callOp1('reshape', [x], { shape: [...lead, ...split(c, h, w, r)] });
  const p = v.permute([...lead.keys(), ...perm.map((d) => n + d)]);
  const out = callOp1('reshape', [p], { shape: call.outputs[0]!.shape });
  const owned = out.storage === x.storage ? callOp1('to', [out], { dtype: out.dtype }) : out;
  v.dispose();
  p.dispose();
  if (owned !== out) out.dispose();
  return [owned];
}

defineOp({
  name: 'pixel_shuffle',
  group: 'layout',
  doc: '[*, C r^2, H, W] -> [*, C, H r, W r] with out[c, h r + i, w r + j] = in[c r^2 + i r + j, h, w].',
  inputs: [{ name: 'input' }],
  attrs: z.object({ upscale_factor: z.number().int() }).strict(),
  infer: ([x], a) => [meta(shuffleInfer('pixel_shuffle', T(x).shape, a.upscale_factor), T(x).dtype)],
  // [c, r, r, h, w] -> [c, h, r, w, r]
  decompose: (call) => shuffleViaPermute(call, (c, h, w, r) => [c / (r * r), r, r, h, w], [0, 3, 1, 4, 2], call.attrs.upscale_factor),
});

defineOp({
  name: 'pixel_unshuffle',
  group: 'layout',
  doc: 'The inverse of pixel_shuffle: [*, C, H r, W r] -> [*, C r^2, H, W].',
  inputs: [{ name: 'input' }],
  attrs: z.object({ downscale_factor: z.number().int() }).strict(),
  infer: ([x], a) => [meta(shuffleInfer('pixel_unshuffle', T(x).shape, a.downscale_factor), T(x).dtype)],
  // [c, h, r, w, r] -> [c, r, r, h, w]
  decompose: (call) => shuffleViaPermute(call, (c, h, w, r) => [c, h / r, r, w / r, r], [0, 2, 4, 1, 3], call.attrs.downscale_factor),
});

// --- front ends ------------------------------------------------------------------------------

export const layoutFunctions = {
  view: (input: Tensor, size: readonly number[]): Tensor => callOp1('view', [input], { size }),
  reshape: (input: Tensor, shape: readonly number[]): Tensor => callOp1('reshape', [input], { shape }),
  flatten: (input: Tensor, startDim = 0, endDim = -1): Tensor => callOp1('flatten', [input], { start_dim: startDim, end_dim: endDim }),
  permute: (input: Tensor, dims: readonly number[]): Tensor => callOp1('permute', [input], { dims }),
  transpose: (input: Tensor, dim0: number, dim1: number): Tensor => callOp1('transpose', [input], { dim0, dim1 }),
  unsqueeze: (input: Tensor, dim: number): Tensor => callOp1('unsqueeze', [input], { dim }),
  squeeze: (input: Tensor, dim: number | readonly number[] | null = null): Tensor => callOp1('squeeze', [input], { dim }),
  expand: (input: Tensor, size: readonly number[]): Tensor => callOp1('expand', [input], { size }),
  narrow: (input: Tensor, dim: number, start: number, length: number): Tensor => callOp1('narrow', [input], { dim, start, length }),
  slice: (input: Tensor, dim = 0, start: number | null = null, end: number | null = null, step = 1): Tensor => callOp1('slice', [input], { dim, start, end, step }),
  select: (input: Tensor, dim: number, index: number): Tensor => callOp1('select', [input], { dim, index }),
  split: (input: Tensor, splitSizeOrSections: number | readonly number[], dim = 0): Tensor[] => callOp('split', [input], { split_size_or_sections: splitSizeOrSections, dim }),
  chunk: (input: Tensor, chunks: number, dim = 0): Tensor[] => callOp('chunk', [input], { chunks, dim }),
  contiguous: (input: Tensor): Tensor => callOp1('contiguous', [input]),
  cat: (tensors: readonly Tensor[], dim = 0): Tensor => callOp1('cat', tensors, { dim }),
  stack: (tensors: readonly Tensor[], dim = 0): Tensor => callOp1('stack', tensors, { dim }),
  repeat: (input: Tensor, repeats: readonly number[]): Tensor => callOp1('repeat', [input], { repeats }),
  pad: (input: Tensor, pad: readonly number[], mode: (typeof PAD_MODES)[number] = 'constant', value: number | null = null): Tensor => callOp1('pad', [input], { pad, mode, value }),
  gather: (input: Tensor, dim: number, index: Tensor): Tensor => callOp1('gather', [input, index], { dim }),
  indexSelect: (input: Tensor, dim: number, index: Tensor): Tensor => callOp1('index_select', [input, index], { dim }),
  scatter: (input: Tensor, dim: number, index: Tensor, src: Tensor | number, opts: { reduce?: 'add' | 'multiply' | null } = {}): Tensor =>
    callOp1('scatter', [input, index, src], { dim, ...opts }),
  scatterAdd: (input: Tensor, dim: number, index: Tensor, src: Tensor): Tensor => callOp1('scatter_add', [input, index, src], { dim }),
  /** num_classes -1 (PyTorch's default) reads max(input) + 1 from the data (a host sync). */
  oneHot: (input: Tensor, numClasses = -1): Tensor => {
    let n = numClasses;
    if (n === -1) {
      if (input.numel === 0) throw new RangeError('one_hot: cannot infer num_classes from an empty tensor');
      const m = callOp1('amax', [input]);
      n = m.toFloat64Array()[0]! + 1;
      m.dispose();
    }
    return callOp1('one_hot', [input], { num_classes: n });
  },
  embedding: (input: Tensor, weight: Tensor, paddingIdx: number | null = null): Tensor => callOp1('embedding', [input, weight], { padding_idx: paddingIdx }),
  flip: (input: Tensor, dims: readonly number[]): Tensor => callOp1('flip', [input], { dims }),
  roll: (input: Tensor, shifts: number | readonly number[], dims: number | readonly number[] | null = null): Tensor => callOp1('roll', [input], { shifts, dims }),
  tril: (input: Tensor, diagonal = 0): Tensor => callOp1('tril', [input], { diagonal }),
  triu: (input: Tensor, diagonal = 0): Tensor => callOp1('triu', [input], { diagonal }),
  embeddingMasked: (input: Tensor, weight: Tensor, start: number): Tensor => callOp1('embedding_masked', [input, weight], { start }),
  interpolate: (input: Tensor, opts: z.input<typeof interpolateAttrs>): Tensor => callOp1('interpolate', [input], opts),
  pixelShuffle: (input: Tensor, upscaleFactor: number): Tensor => callOp1('pixel_shuffle', [input], { upscale_factor: upscaleFactor }),
  pixelUnshuffle: (input: Tensor, downscaleFactor: number): Tensor => callOp1('pixel_unshuffle', [input], { downscale_factor: downscaleFactor }),
};
