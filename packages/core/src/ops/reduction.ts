/**
 * Reductions and scans: sum, mean, amax, amin, argmax, argmin, var over dims (keepdim); softmax, log_softmax; cumsum;
 * topk; sort; topk_softmax (MoE routing: softmax, top-k, renormalise in one op). PyTorch semantics: `dim=null` reduces every dim; integer and bool sums give i64; NaN propagates through
 * amax / amin and counts as the largest value for argmax, topk and sort.
 */
import { z } from 'zod';
import { DTYPE_INFO, type DType } from '../dtype.js';
import { formatShape, type Shape } from '../shape.js';
import type { Tensor } from '../tensor.js';
import { dtypeSchema } from './elementwise.js';
import { callOp, callOp1, defineOp, meta, normDim, opError, OpScope, type MetaArg, type TensorMeta } from './registry.js';

const dimsSchema = z.union([z.number().int(), z.array(z.number().int())]).nullable().default(null);

/** The reduced dims of a call, normalised, sorted and unique (null or [] = all dims, as torch.sum(x, dim=None)). */
export function reductionDims(op: string, shape: Shape, dim: number | readonly number[] | null): number[] {
  const rank = shape.length;
  if (dim === null || (Array.isArray(dim) && dim.length === 0)) return [...Array(rank).keys()];
  const list = typeof dim === 'number' ? [dim] : dim;
  const dims = list.map((d) => normDim(op, d, rank));
  if (new Set(dims).size !== dims.length) opError(op, `dim ${JSON.stringify(dim)} names a dimension twice`);
  return dims.filter((d) => d < rank).sort((a, b) => a - b);
}

/** Output shape of a reduction over `dims`. */
export function reducedShape(shape: Shape, dims: readonly number[], keepdim: boolean): number[] {
  const out: number[] = [];
  shape.forEach((s, i) => {
    if (!dims.includes(i)) out.push(s);
    else if (keepdim) out.push(1);
  });
  return out;
}

const reduceAttrs = z.object({ dim: dimsSchema, keepdim: z.boolean().default(false), dtype: dtypeSchema.optional() }).strict();
type ReduceAttrs = z.output<typeof reduceAttrs>;

function defineReduce(name: string, doc: string, outDType: (input: DType, attrs: ReduceAttrs) => DType, opts: { needsElements?: boolean; noDType?: boolean } = {}) {
  return defineOp({
    name,
    group: 'reduction',
    doc,
    inputs: [{ name: 'input' }],
    attrs: opts.noDType ? (reduceAttrs.omit({ dtype: true }) as unknown as typeof reduceAttrs) : reduceAttrs,
    infer: ([x], a) => {
      const t = x as TensorMeta;
      const dims = reductionDims(name, t.shape, a.dim);
      if (opts.needsElements && dims.some((d) => t.shape[d] === 0)) {
        opError(name, `cannot reduce over a zero-size dimension of ${formatShape(t.shape)} (dim ${JSON.stringify(a.dim)}): the result has no identity`);
      }
      return [meta(reducedShape(t.shape, dims, a.keepdim), outDType(t.dtype, a))];
    },
  });
}

const intToI64 = (d: DType): DType => (DTYPE_INFO[d].kind === 'float' ? d : 'i64');
defineReduce('sum', 'Sum over dim (all dims when null); integer and bool inputs give i64; dtype casts the result.', (d, a) => a.dtype ?? intToI64(d));
defineReduce('mean', 'Mean over dim (all dims when null); float inputs only, as torch.mean (or pass a float dtype).', (d, a) => {
  const out = a.dtype ?? d;
  if (DTYPE_INFO[out].kind !== 'float') opError('mean', `could not infer the output dtype: input is ${d}; pass a float input or dtype`);
  return out;
});
defineReduce('amax', 'Maximum over dim (NaN propagates); the input dtype.', (d) => d, { needsElements: true, noDType: true });
defineReduce('amin', 'Minimum over dim (NaN propagates); the input dtype.', (d) => d, { needsElements: true, noDType: true });

const argAttrs = z.object({ dim: z.number().int().nullable().default(null), keepdim: z.boolean().default(false) }).strict();
for (const name of ['argmax', 'argmin'] as const) {
  defineOp({
    name,
    group: 'reduction',
    doc: `Index (i64) of the ${name === 'argmax' ? 'largest' : 'smallest'} value along dim, the first on ties; NaN counts as the ${name === 'argmax' ? 'largest' : 'smallest'}. dim=null: index into the flattened input.`,
    inputs: [{ name: 'input' }],
    attrs: argAttrs,
    infer: ([x], a) => {
      const t = x as TensorMeta;
      if (a.dim === null) {
        if (t.shape.reduce((p, s) => p * s, 1) === 0) opError(name, `cannot take ${name} of an empty tensor ${formatShape(t.shape)}`);
        return [meta(a.keepdim ? t.shape.map(() => 1) : [], 'i64')];
      }
      const d = normDim(name, a.dim, t.shape.length);
      if (t.shape[d] === 0) opError(name, `cannot reduce over the zero-size dim ${a.dim} of ${formatShape(t.shape)}`);
      return [meta(reducedShape(t.shape, t.shape.length === 0 ? [] : [d], a.keepdim), 'i64')];
    },
  });
}

const varAttrs = z.object({ dim: dimsSchema, correction: z.number().default(1), keepdim: z.boolean().default(false) }).strict();
defineOp({
  name: 'var',
  group: 'reduction',
  doc: 'Variance over dim: sum((x - mean)^2) / max(0, N - correction) (Bessel by default); float inputs.',
  inputs: [{ name: 'input', dtypes: 'float' }],
  attrs: varAttrs,
  infer: ([x], a) => {
    const t = x as TensorMeta;
    return [meta(reducedShape(t.shape, reductionDims('var', t.shape, a.dim), a.keepdim), t.dtype)];
  },
  // two passes in f32 (f64 for f64): mean, then the mean square deviation, scaled by N / max(0, N - correction)
  decompose: (call) => {
    const x = call.inputs[0] as Tensor;
    const dims = reductionDims('var', x.shape, call.attrs.dim);
    const n = dims.reduce((p, d) => p * x.shape[d]!, 1);
    const s = new OpScope();
    const xf = s.op('to', [x], { dtype: x.dtype === 'f64' ? 'f64' : 'f32' });
    const d = s.op('sub', [xf, s.op('mean', [xf], { dim: dims, keepdim: true })]);
    const ss = s.op('sum', [s.op('square', [d])], { dim: dims, keepdim: call.attrs.keepdim });
    const v = s.op('div', [ss, Math.max(0, n - call.attrs.correction)]);
    return s.keep([s.op('to', [v], { dtype: x.dtype })]);
  },
});

defineOp({
  name: 'std',
  group: 'reduction',
  doc: 'Standard deviation over dim: sqrt(var(input, dim, correction)); float inputs.',
  inputs: [{ name: 'input', dtypes: 'float' }],
  attrs: varAttrs,
  infer: ([x], a) => {
    const t = x as TensorMeta;
    return [meta(reducedShape(t.shape, reductionDims('std', t.shape, a.dim), a.keepdim), t.dtype)];
  },
  decompose: (call) => {
    const v = callOp1('var', [call.inputs[0]!], call.attrs);
    const r = callOp1('sqrt', [v]);
    v.dispose();
    return [r];
  },
});

defineOp({
  name: 'logsumexp',
  group: 'reduction',
  doc: 'log(sum(exp(x))) over dim, computed stably (max-subtracted); integer inputs give f32.',
  inputs: [{ name: 'input' }],
  attrs: z.object({ dim: dimsSchema, keepdim: z.boolean().default(false) }).strict(),
  infer: ([x], a) => {
    const t = x as TensorMeta;
    const out = DTYPE_INFO[t.dtype].kind === 'float' ? t.dtype : 'f32';
    return [meta(reducedShape(t.shape, reductionDims('logsumexp', t.shape, a.dim), a.keepdim), out)];
  },
  // max-subtracted in f32 (f64 for f64); an infinite max is replaced by 0 so -inf / +inf slices stay -inf / +inf
  decompose: (call) => {
    const x = call.inputs[0] as Tensor;
    const dims = reductionDims('logsumexp', x.shape, call.attrs.dim);
    const s = new OpScope();
    const xf = s.op('to', [x], { dtype: x.dtype === 'f64' ? 'f64' : 'f32' });
    const m = s.op('amax', [xf], { dim: dims, keepdim: true });
    const mf = s.op('where', [s.op('eq', [s.op('abs', [m]), Infinity]), 0, m]);
    const lse = s.op('add', [s.op('log', [s.op('sum', [s.op('exp', [s.op('sub', [xf, mf])])], { dim: dims, keepdim: true })]), mf]);
    const shaped = call.attrs.keepdim ? lse : s.op('reshape', [lse], { shape: call.outputs[0]!.shape });
    return s.keep([s.op('to', [shaped], { dtype: call.outputs[0]!.dtype })]);
  },
});

for (const name of ['max', 'min'] as const) {
  defineOp({
    name,
    group: 'reduction',
    doc: `torch.${name}(input, dim, keepdim): the ${name === 'max' ? 'largest' : 'smallest'} values along dim and their i64 indices (the first on ties; NaN wins).`,
    inputs: [{ name: 'input' }],
    outputs: ['values', 'indices'],
    attrs: z.object({ dim: z.number().int(), keepdim: z.boolean().default(false) }).strict(),
    infer: ([x], a) => {
      const t = x as TensorMeta;
      const d = normDim(name, a.dim, t.shape.length);
      if (t.shape[d] === 0) opError(name, `cannot reduce over the zero-size dim ${a.dim} of ${formatShape(t.shape)}`);
      const shape = reducedShape(t.shape, t.shape.length === 0 ? [] : [d], a.keepdim);
      return [meta(shape, t.dtype), meta(shape, 'i64')];
    },
    // the index, then the value at it
    decompose: (call) => {
      const x = call.inputs[0] as Tensor;
      const idx = callOp1(name === 'max' ? 'argmax' : 'argmin', [x], { dim: call.attrs.dim, keepdim: true });
      const g = callOp1('gather', [x, idx], { dim: call.attrs.dim });
      if (call.attrs.keepdim || x.rank === 0) return [g, idx];
      const v = callOp1('squeeze', [g], { dim: call.attrs.dim });
      const i = callOp1('squeeze', [idx], { dim: call.attrs.dim });
      g.dispose();
      idx.dispose();
      return [v, i];
    },
  });
}

// --- along one dim ---------------------------------------------------------------------------

const softmaxAttrs = z.object({ dim: z.number().int(), dtype: dtypeSchema.optional() }).strict();
type SoftmaxAttrs = z.output<typeof softmaxAttrs>;

function softmaxInfer(name: string) {
  return ([x]: readonly MetaArg[], a: SoftmaxAttrs) => {
    const t = x as TensorMeta;
    normDim(name, a.dim, t.shape.length);
    const out = a.dtype ?? t.dtype;
    if (DTYPE_INFO[out].kind !== 'float') opError(name, `needs a float input or a float dtype, got ${t.dtype}`);
    return [meta(t.shape, out)];
  };
}

defineOp({
  name: 'softmax',
  group: 'reduction',
  doc: 'exp(x - max) / sum(exp(x - max)) along dim, accumulated in float32 or wider; dtype casts the input first.',
  inputs: [{ name: 'input' }],
  attrs: softmaxAttrs,
  infer: softmaxInfer('softmax'),
  // the Llama surface's softmax (result in x's dtype)
  viaOps: (ops, call) => {
    const x = call.inputs[0] as Tensor;
    if (call.attrs.dtype !== undefined && call.attrs.dtype !== x.dtype) return undefined;
    return [ops.softmax(x, call.attrs.dim)];
  },
});

defineOp({
  name: 'log_softmax',
  group: 'reduction',
  doc: 'x - max - log(sum(exp(x - max))) along dim; dtype casts the input first.',
  inputs: [{ name: 'input' }],
  attrs: softmaxAttrs,
  infer: softmaxInfer('log_softmax'),
  // log(softmax) in f32 or wider: fine for testing a backend without the fused kernel, less accurate in the far tail
  decompose: (call) => {
    const x = call.inputs[0] as Tensor;
    const wide = call.outputs[0]!.dtype === 'f64' ? 'f64' : 'f32';
    const s = callOp1('softmax', [x], { dim: call.attrs.dim, dtype: wide });
    const l = callOp1('log', [s]);
    s.dispose();
    if (l.dtype === call.outputs[0]!.dtype) return [l];
    const r = callOp1('to', [l], { dtype: call.outputs[0]!.dtype });
    l.dispose();
    return [r];
  },
});

defineOp({
  name: 'cumsum',
  group: 'reduction',
  doc: 'Inclusive prefix sum along dim; integer and bool inputs give i64; dtype casts the input first.',
  inputs: [{ name: 'input' }],
  attrs: z.object({ dim: z.number().int(), dtype: dtypeSchema.optional() }).strict(),
  infer: ([x], a) => {
    const t = x as TensorMeta;
    normDim('cumsum', a.dim, t.shape.length);
    return [meta(t.shape, a.dtype ?? intToI64(t.dtype))];
  },
});

export const topkAttrs = z.object({
  k: z.number().int().nonnegative(),
  dim: z.number().int().default(-1),
  largest: z.boolean().default(true),
  sorted: z.boolean().default(true),
}).strict();
defineOp({
  name: 'topk',
  group: 'reduction',
  doc: 'The k largest (or smallest) values along dim and their i64 indices; ties keep the lower index first; NaN is the largest. sorted=false still returns them sorted (allowed by PyTorch).',
  inputs: [{ name: 'input' }],
  outputs: ['values', 'indices'],
  attrs: topkAttrs,
  infer: ([x], a) => {
    const t = x as TensorMeta;
    const d = normDim('topk', a.dim, t.shape.length);
    const size = t.shape.length === 0 ? 1 : t.shape[d]!;
    if (a.k > size) opError('topk', `k=${a.k} is larger than the size ${size} of dim ${a.dim} of input ${formatShape(t.shape)}`);
    const shape = [...t.shape];
    if (shape.length > 0) shape[d] = a.k;
    return [meta(shape, t.dtype), meta(shape, 'i64')];
  },
});

export const sortAttrs = z.object({ dim: z.number().int().default(-1), descending: z.boolean().default(false), stable: z.boolean().default(false) }).strict();
defineOp({
  name: 'sort',
  group: 'reduction',
  doc: 'Values sorted along dim and their i64 source indices; always stable (equal values keep their order); NaN sorts as the largest.',
  inputs: [{ name: 'input' }],
  outputs: ['values', 'indices'],
  attrs: sortAttrs,
  infer: ([x], a) => {
    const t = x as TensorMeta;
    normDim('sort', a.dim, t.shape.length);
    return [meta(t.shape, t.dtype), meta(t.shape, 'i64')];
  },
});

// --- MoE routing ------------------------------------------------------------------------------

export const topkSoftmaxAttrs = z.object({ k: z.number().int().min(1), renormalize: z.boolean().default(false) }).strict();
export type TopkSoftmaxAttrs = z.output<typeof topkSoftmaxAttrs>;

defineOp({
  name: 'topk_softmax',
  group: 'reduction',
  doc:
    "vLLM's topk_softmax (the MoE router's fused_topk): softmax over each row of gating_output [T, E] in float32 or wider, " +
    'the k largest probabilities as weights f32 [T, k] and their expert ids i32 [T, k], descending, ties to the lower id; ' +
    'renormalize divides the k weights by their sum. Softmax over the k largest logits (gpt-oss) is the renormalized form. ' +
    'Decomposes to softmax, topk, sum, div and a cast.',
  inputs: [{ name: 'gating_output', dtypes: 'float' }],
  outputs: ['topk_weights', 'topk_ids'],
  attrs: topkSoftmaxAttrs,
  infer: ([x], a) => {
    const t = x as TensorMeta;
    if (t.shape.length !== 2) opError('topk_softmax', `gating_output must be [T, E], got ${formatShape(t.shape)}`);
    const [T, E] = t.shape as [number, number];
    if (a.k > E) opError('topk_softmax', `k=${a.k} is larger than the ${E} experts of gating_output ${formatShape(t.shape)}`);
    return [meta([T, a.k], 'f32'), meta([T, a.k], 'i32')];
  },
  // the five ops the L1 task ran before the op existed: every backend with softmax and topk runs it
  decompose: (call) => {
    const x = call.inputs[0] as Tensor;
    const { k, renormalize } = call.attrs as TopkSoftmaxAttrs;
    const s = new OpScope();
    try {
      const probs = s.op('softmax', [x], { dim: -1, dtype: 'f32' });
      const [values, indices] = callOp('topk', [probs], { k, dim: -1 }) as [Tensor, Tensor];
      let weights = s.own(values);
      s.own(indices);
      if (renormalize) weights = s.op('div', [weights, s.op('sum', [weights], { dim: -1, keepdim: true })]);
      return s.keep([weights, s.op('to', [indices], { dtype: 'i32' })]);
    } catch (e) {
      s.dispose();
      throw e;
    }
  },
});

// --- front ends ------------------------------------------------------------------------------

export type Dims = number | readonly number[] | null;
export interface ReduceOpts { dim?: Dims; keepdim?: boolean }

export const reductionFunctions = {
  sum: (input: Tensor, opts: ReduceOpts & { dtype?: DType } = {}): Tensor => callOp1('sum', [input], opts),
  mean: (input: Tensor, opts: ReduceOpts & { dtype?: DType } = {}): Tensor => callOp1('mean', [input], opts),
  amax: (input: Tensor, opts: ReduceOpts = {}): Tensor => callOp1('amax', [input], opts),
  amin: (input: Tensor, opts: ReduceOpts = {}): Tensor => callOp1('amin', [input], opts),
  argmax: (input: Tensor, opts: { dim?: number | null; keepdim?: boolean } = {}): Tensor => callOp1('argmax', [input], opts),
  argmin: (input: Tensor, opts: { dim?: number | null; keepdim?: boolean } = {}): Tensor => callOp1('argmin', [input], opts),
  var: (input: Tensor, opts: ReduceOpts & { correction?: number } = {}): Tensor => callOp1('var', [input], opts),
  std: (input: Tensor, opts: ReduceOpts & { correction?: number } = {}): Tensor => callOp1('std', [input], opts),
  logsumexp: (input: Tensor, opts: ReduceOpts = {}): Tensor => callOp1('logsumexp', [input], opts),
  max: (input: Tensor, dim: number, keepdim = false): [Tensor, Tensor] => callOp('max', [input], { dim, keepdim }) as [Tensor, Tensor],
  min: (input: Tensor, dim: number, keepdim = false): [Tensor, Tensor] => callOp('min', [input], { dim, keepdim }) as [Tensor, Tensor],
  softmax: (input: Tensor, opts: { dim: number; dtype?: DType }): Tensor => callOp1('softmax', [input], opts),
  logSoftmax: (input: Tensor, opts: { dim: number; dtype?: DType }): Tensor => callOp1('log_softmax', [input], opts),
  cumsum: (input: Tensor, opts: { dim: number; dtype?: DType }): Tensor => callOp1('cumsum', [input], opts),
  topk: (input: Tensor, k: number, opts: { dim?: number; largest?: boolean; sorted?: boolean } = {}): [Tensor, Tensor] =>
    callOp('topk', [input], { k, ...opts }) as [Tensor, Tensor],
  sort: (input: Tensor, opts: { dim?: number; descending?: boolean; stable?: boolean } = {}): [Tensor, Tensor] =>
    callOp('sort', [input], opts) as [Tensor, Tensor],
  /** MoE routing: [topk_weights f32 [T, k], topk_ids i32 [T, k]] of gating_output [T, E]. */
  topkSoftmax: (gatingOutput: Tensor, k: number, opts: { renormalize?: boolean } = {}): [Tensor, Tensor] =>
    callOp('topk_softmax', [gatingOutput], { k, ...opts }) as [Tensor, Tensor],
};
