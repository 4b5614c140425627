/**
 * Elementwise ops: unary math and activations, binary arithmetic and comparisons with broadcasting and type
 * promotion, `where`, `clamp`, casts (`to`), and `elementwise_chain` (a fused expression over them).
 *
 * Each op's float64 reference is in ELEMENTWISE_MATH (one definition: the CPU kernels and the chain evaluator use
 * it; a device backend implements the same formula). Semantics as PyTorch: operands are converted to the common
 * dtype (torch.result_type), computed (here in float64), and rounded once to the output dtype.
 */
import { z } from 'zod';
import { DTYPE_INFO, DTYPES, roundToDType, type DType } from '../dtype.js';
import { formatShape } from '../shape.js';
import type { Ops } from '../ops.js';
import { Tensor } from '../tensor.js';
import { broadcastArgs } from './broadcast.js';
import { DEFAULT_FLOAT, resultType, toFloatType } from './promote.js';
import { callOp1, defineOp, getOp, meta, opError, OpScope, type MetaArg, type OpArg, type OpCall, type TensorMeta } from './registry.js';
import { erf, geluErf, geluTanh, logSigmoid, quickGelu, sigmoid, silu, softplus } from './scalar-math.js';

const noAttrs = z.object({}).strict();
export const dtypeSchema = z.enum(DTYPES);

/** A float64 scalar function of an op, built once per call from its parsed attrs. */
export type ScalarFn = (...args: number[]) => number;

interface MathEntry {
  readonly arity: number;
  readonly fn: (attrs: any) => ScalarFn;
}

/** op name -> float64 reference of one element (the ops `elementwise_chain` may use). */
export const ELEMENTWISE_MATH: Record<string, MathEntry> = {};

// ---------------------------------------------------------------------------------------------
// unary

/** Every dtype but fp8: PyTorch has no arithmetic on fp8 tensors (cast with `to` first). */
export const ARITH_DTYPES: readonly DType[] = DTYPES.filter((d) => !d.startsWith('fp8'));
const NUMERIC_DTYPES: readonly DType[] = ARITH_DTYPES.filter((d) => d !== 'bool');

type UnaryKind = 'float' | 'keep'; // 'float': integer inputs give f32 (exp, sigmoid); 'keep': integers stay (neg, abs)

function defineUnary<S extends z.ZodObject>(name: string, doc: string, kind: UnaryKind, attrs: S, fn: (attrs: z.output<S>) => (x: number) => number) {
  ELEMENTWISE_MATH[name] = { arity: 1, fn: fn as MathEntry['fn'] };
  return defineOp({
    name,
    group: 'elementwise',
    doc,
    inputs: [{ name: 'input', dtypes: kind === 'keep' ? NUMERIC_DTYPES : ARITH_DTYPES }],
    attrs,
    infer: ([x]) => {
      const t = x as TensorMeta;
      return [meta(t.shape, kind === 'float' ? toFloatType(t.dtype) : t.dtype)];
    },
  });
}

const unary = (name: string, doc: string, kind: UnaryKind, f: (x: number) => number) => defineUnary(name, doc, kind, noAttrs, () => f);

unary('neg', '-input.', 'keep', (x) => -x);
unary('abs', '|input|.', 'keep', Math.abs);
unary('square', 'input * input.', 'keep', (x) => x * x);
unary('relu', 'max(input, 0) (NaN stays NaN).', 'keep', (x) => (x > 0 || Number.isNaN(x) ? x : 0));
unary('exp', 'e^input.', 'float', Math.exp);
unary('log', 'Natural logarithm (log(0) = -inf, log(-1) = NaN).', 'float', Math.log);
unary('sqrt', 'Square root.', 'float', Math.sqrt);
unary('rsqrt', '1 / sqrt(input).', 'float', (x) => 1 / Math.sqrt(x));
unary('sin', 'Sine.', 'float', Math.sin);
unary('cos', 'Cosine.', 'float', Math.cos);
unary('tanh', 'Hyperbolic tangent.', 'float', Math.tanh);
unary('sigmoid', '1 / (1 + e^-input).', 'float', sigmoid);
unary('silu', 'input * sigmoid(input) (swish).', 'float', silu);
unary('quick_gelu', 'input * sigmoid(1.702 input) (CLIP).', 'float', quickGelu);
unary('log_sigmoid', 'log(sigmoid(input)), computed stably.', 'float', logSigmoid);
unary('erf', 'The error function.', 'float', erf);
unary('reciprocal', '1 / input.', 'float', (x) => 1 / x);

export const geluAttrs = z.object({ approximate: z.enum(['none', 'tanh']).default('none') }).strict();
defineUnary('gelu', "GELU: input * Phi(input) (approximate='none', via erf) or its tanh approximation (approximate='tanh').", 'float', geluAttrs, (a) =>
  a.approximate === 'tanh' ? geluTanh : geluErf,
);

export const softplusAttrs = z.object({ beta: z.number().default(1), threshold: z.number().default(20) }).strict();
defineUnary('softplus', 'log(1 + e^(beta x)) / beta, and x itself where beta x > threshold.', 'float', softplusAttrs, (a) => (x) => softplus(x, a.beta, a.threshold));

export const UNARY_OPS = [
  'neg', 'abs', 'square', 'relu', 'exp', 'log', 'sqrt', 'rsqrt', 'sin', 'cos', 'tanh', 'sigmoid', 'silu', 'quick_gelu',
  'log_sigmoid', 'erf', 'reciprocal', 'gelu', 'softplus',
] as const;

// ---------------------------------------------------------------------------------------------
// binary

type BinaryKind = 'promote' | 'float' | 'compare';

/** Output dtype of a binary op from the common dtype. */
function binaryOut(kind: BinaryKind, common: DType): DType {
  if (kind === 'compare') return 'bool';
  if (kind === 'float') return toFloatType(common);
  return common;
}

function defineBinary<S extends z.ZodObject>(
  name: string, doc: string, kind: BinaryKind | ((attrs: z.output<S>) => BinaryKind), attrs: S, fn: (attrs: z.output<S>) => (a: number, b: number) => number,
  viaOps?: (ops: Ops, a: Tensor, b: Tensor, attrs: z.output<S>) => Tensor | undefined,
) {
  ELEMENTWISE_MATH[name] = { arity: 2, fn: fn as MathEntry['fn'] };
  return defineOp({
    name,
    group: 'elementwise',
    doc,
    inputs: [{ name: 'input', scalar: true, dtypes: ARITH_DTYPES }, { name: 'other', scalar: true, dtypes: ARITH_DTYPES }],
    attrs,
    infer: (args, a) => {
      const shape = broadcastArgs(name, args, ['input', 'other']);
      const k = typeof kind === 'function' ? kind(a) : kind;
      return [meta(shape, binaryOut(k, resultType(args, name)))];
    },
    viaOps: viaOps && ((ops, call) => {
      const [a, b] = call.inputs;
      // the Llama surface's add/mul keep a's dtype: the same result only when both are tensors of one float dtype
      if (a === null || b === null || typeof a === 'number' || typeof b === 'number') return undefined;
      if (a.dtype !== b.dtype || DTYPE_INFO[a.dtype].kind !== 'float') return undefined;
      const r = viaOps(ops, a, b, call.attrs);
      return r && [r];
    }),
  });
}

export const alphaAttrs = z.object({ alpha: z.number().default(1) }).strict();
defineBinary('add', 'input + alpha * other, broadcast, promoted.', 'promote', alphaAttrs, (a) => (x, y) => x + a.alpha * y, (ops, a, b, at) =>
  at.alpha === 1 ? ops.add(a, b) : undefined,
);
defineBinary('sub', 'input - alpha * other, broadcast, promoted.', 'promote', alphaAttrs, (a) => (x, y) => x - a.alpha * y);
defineBinary('mul', 'input * other, broadcast, promoted.', 'promote', noAttrs, () => (x, y) => x * y, (ops, a, b) => ops.mul(a, b));
export const divAttrs = z.object({ rounding_mode: z.enum(['trunc', 'floor']).nullable().default(null) }).strict();
defineBinary(
  'div',
  "input / other: true division (integers give f32) unless rounding_mode is 'trunc' or 'floor' (then the promoted type).",
  (a) => (a.rounding_mode === null ? 'float' : 'promote'),
  divAttrs,
  (a) => (a.rounding_mode === 'trunc' ? (x, y) => Math.trunc(x / y) : a.rounding_mode === 'floor' ? (x, y) => Math.floor(x / y) : (x, y) => x / y),
);
defineBinary('pow', 'input ** other.', 'promote', noAttrs, () => Math.pow);
// NaN propagates, as in torch.maximum / minimum (Math.max does too)
defineBinary('maximum', 'Elementwise maximum (NaN propagates).', 'promote', noAttrs, () => Math.max);
defineBinary('minimum', 'Elementwise minimum (NaN propagates).', 'promote', noAttrs, () => Math.min);
defineBinary('eq', 'input == other -> bool.', 'compare', noAttrs, () => (x, y) => (x === y ? 1 : 0));
defineBinary('ne', 'input != other -> bool.', 'compare', noAttrs, () => (x, y) => (x !== y ? 1 : 0));
defineBinary('lt', 'input < other -> bool.', 'compare', noAttrs, () => (x, y) => (x < y ? 1 : 0));
defineBinary('le', 'input <= other -> bool.', 'compare', noAttrs, () => (x, y) => (x <= y ? 1 : 0));
defineBinary('gt', 'input > other -> bool.', 'compare', noAttrs, () => (x, y) => (x > y ? 1 : 0));
defineBinary('ge', 'input >= other -> bool.', 'compare', noAttrs, () => (x, y) => (x >= y ? 1 : 0));

export const BINARY_OPS = ['add', 'sub', 'mul', 'div', 'pow', 'maximum', 'minimum', 'eq', 'ne', 'lt', 'le', 'gt', 'ge'] as const;

// ---------------------------------------------------------------------------------------------
// where, clamp, to

ELEMENTWISE_MATH['where'] = { arity: 3, fn: () => (c, x, y) => (c !== 0 ? x : y) };
defineOp({
  name: 'where',
  group: 'elementwise',
  doc: 'condition ? input : other, all three broadcast; the result type promotes input and other.',
  inputs: [{ name: 'condition', dtypes: 'bool' }, { name: 'input', scalar: true, dtypes: ARITH_DTYPES }, { name: 'other', scalar: true, dtypes: ARITH_DTYPES }],
  attrs: noAttrs,
  infer: (args) => [meta(broadcastArgs('where', args, ['condition', 'input', 'other']), resultType(args.slice(1), 'where'))],
});

// min/max may be absent (null), a scalar or a tensor; the result type promotes all three as torch.clamp does
ELEMENTWISE_MATH['clamp'] = {
  arity: 3,
  fn: () => (x, lo, hi) => {
    if (Number.isNaN(x)) return x;
    let v = x;
    if (!Number.isNaN(lo) && v < lo) v = lo; // NaN bounds mean "absent" inside the chain evaluator
    if (!Number.isNaN(hi) && v > hi) v = hi;
    return v;
  },
};
defineOp({
  name: 'clamp',
  group: 'elementwise',
  doc: 'min(max(input, min), max); either bound may be null; when min > max every element is max. NaN input stays NaN.',
  inputs: [{ name: 'input', dtypes: ARITH_DTYPES }, { name: 'min', scalar: true, optional: true, dtypes: ARITH_DTYPES }, { name: 'max', scalar: true, optional: true, dtypes: ARITH_DTYPES }],
  attrs: noAttrs,
  infer: (args) => {
    if (args[1] === null && args[2] === null) opError('clamp', 'at least one of min and max must be given');
    return [meta(broadcastArgs('clamp', args, ['input', 'min', 'max']), resultType(args, 'clamp'))];
  },
});

export const toAttrs = z.object({ dtype: dtypeSchema }).strict();
ELEMENTWISE_MATH['to'] = { arity: 1, fn: (a: { dtype: DType }) => (x) => roundToDType(x, a.dtype) };
defineOp({
  name: 'to',
  group: 'elementwise',
  doc: 'A copy converted to dtype (round to nearest even for floats, truncation toward zero for integers, x != 0 for bool).',
  inputs: [{ name: 'input' }],
  attrs: toAttrs,
  infer: ([x], a) => [meta((x as TensorMeta).shape, a.dtype)],
  // every backend has a converting strided copy
  viaOps: (ops, call) => {
    const x = call.inputs[0] as Tensor;
    const out = Tensor.empty(call.backend, x.shape, call.attrs.dtype, { device: x.device });
    ops.copy(out, x);
    return [out];
  },
});

/**
 * The dtype operands are converted to before the math (PyTorch casts every operand to the common dtype; arithmetic
 * on 16-bit floats then runs in float32, the "opmath" type). Used to round scalar operands the way PyTorch does:
 * `bf16_tensor == 0.1` compares against bf16(0.1).
 */
export function operandDType(op: string, args: readonly MetaArg[]): DType | undefined {
  if (op === 'where') return resultType(args.slice(1), op);
  if (op === 'to' || UNARY_OPS.includes(op as (typeof UNARY_OPS)[number])) return undefined;
  const common = resultType(args, op);
  if (['eq', 'ne', 'lt', 'le', 'gt', 'ge', 'maximum', 'minimum', 'clamp'].includes(op)) return common;
  const d = DTYPE_INFO[common].kind === 'float' && DTYPE_INFO[common].itemsize < 4 ? 'f32' : common;
  return op === 'div' && DTYPE_INFO[d].kind !== 'float' ? DEFAULT_FLOAT : d;
}

// ---------------------------------------------------------------------------------------------
// elementwise_chain: a fused expression

/** An argument of a chain step: one of the chain's inputs, an earlier step's value, or a constant. */
export const chainArgSchema = z.union([
  z.object({ input: z.number().int().nonnegative() }).strict(),
  z.object({ step: z.number().int().nonnegative() }).strict(),
  z.object({ value: z.number() }).strict(),
  z.null(), // an absent optional operand (clamp's min or max)
]);
export type ChainArg = z.output<typeof chainArgSchema>;

export const chainStepSchema = z.object({
  /** an op of ELEMENTWISE_MATH: the UNARY_OPS, BINARY_OPS, 'where', 'clamp', 'to' */
  op: z.string(),
  args: z.array(chainArgSchema),
  /** the op's own attrs (gelu's approximate, add's alpha, to's dtype), validated by that op's schema */
  attrs: z.record(z.string(), z.unknown()).default({}),
}).strict();
export type ChainStep = z.output<typeof chainStepSchema>;

export const chainAttrs = z.object({
  steps: z.array(chainStepSchema).min(1),
  /** which step's value is the output (default the last) */
  output: z.number().int().nonnegative().optional(),
}).strict();
export type ElementwiseChainAttrs = z.output<typeof chainAttrs>;

/** One chain step after validation: its op, parsed attrs, and the metas its operands have. */
export interface ResolvedStep {
  readonly op: string;
  readonly args: readonly ChainArg[];
  readonly attrs: Record<string, unknown>;
  readonly fn: ScalarFn;
  readonly out: TensorMeta;
  /** dtype scalar constants round to before the math (see operandDType) */
  readonly operandDType: DType | undefined;
}

/** Validate a chain against its inputs' metas: each step is inferred with its own op's rules. */
export function resolveChain(inputs: readonly MetaArg[], attrs: ElementwiseChainAttrs): { steps: ResolvedStep[]; output: number } {
  const metas: TensorMeta[] = [];
  const steps: ResolvedStep[] = [];
  attrs.steps.forEach((s, i) => {
    const where = `elementwise_chain step ${i} (${s.op})`;
    const math = ELEMENTWISE_MATH[s.op];
    if (!math) opError('elementwise_chain', `step ${i}: '${s.op}' is not a chainable elementwise op (${Object.keys(ELEMENTWISE_MATH).join(', ')})`);
    const spec = getOp(s.op);
    const args: MetaArg[] = s.args.map((a) => {
      if (a === null) return null;
      if ('value' in a) return a.value;
      if ('input' in a) {
        const m = inputs[a.input];
        if (m === undefined || m === null || typeof m === 'number') opError('elementwise_chain', `step ${i}: input ${a.input} is not a tensor input of the chain`);
        return m;
      }
      if (a.step >= i) opError('elementwise_chain', `step ${i}: refers to step ${a.step}, which is not earlier`);
      return metas[a.step]!;
    });
    if (args.length !== spec.inputs.length) opError('elementwise_chain', `${where}: takes ${spec.inputs.length} operands, got ${args.length}`);
    if (!args.some((a) => a !== null && typeof a === 'object')) opError('elementwise_chain', `${where}: needs at least one tensor operand`);
    const r = spec.attrs.safeParse(s.attrs);
    if (!r.success) opError('elementwise_chain', `${where}: bad attrs: ${r.error.issues.map((x) => `${x.path.join('.')}: ${x.message}`).join('; ')}`);
    const out = spec.infer(args, r.data)[0]!;
    metas.push(out);
    steps.push({ op: s.op, args: s.args, attrs: r.data as Record<string, unknown>, fn: math.fn(r.data), out, operandDType: operandDType(s.op, args) });
  });
  const output = attrs.output ?? steps.length - 1;
  if (output >= steps.length) opError('elementwise_chain', `output=${output} but there are ${steps.length} steps`);
  return { steps, output };
}

/**
 * Evaluate a resolved chain at one element: `vals` holds the chain inputs' values there (float64). Intermediates are
 * not rounded (a fused kernel keeps them in registers) except by explicit `to` steps; the caller rounds the result.
 */
export function evalChain(steps: readonly ResolvedStep[], output: number, vals: ArrayLike<number>, scratch: Float64Array): number {
  for (let i = 0; i <= output; i++) {
    const s = steps[i]!;
    const a = s.args;
    const v = (k: number): number => {
      const x = a[k];
      if (x === null || x === undefined) return NaN; // clamp's absent bound
      if ('input' in x) return vals[x.input]!;
      if ('step' in x) return scratch[x.step]!;
      return s.operandDType ? roundToDType(x.value, s.operandDType) : x.value;
    };
    scratch[i] = a.length === 1 ? s.fn(v(0)) : a.length === 2 ? s.fn(v(0), v(1)) : s.fn(v(0), v(1), v(2));
  }
  return scratch[output]!;
}

defineOp({
  name: 'elementwise_chain',
  group: 'elementwise',
  doc:
    'A fused expression: steps of elementwise ops over the inputs, earlier steps and constants; the output is one step. ' +
    'Broadcasting and dtypes follow each step\'s op; intermediates stay in float (float32 or wider) and only `to` steps ' +
    'round; the result rounds once to the output step\'s dtype. Decomposes into the ops it names.',
  inputs: [{ name: 'inputs', variadic: true }],
  attrs: chainAttrs,
  infer: (inputs, attrs) => {
    const { steps, output } = resolveChain(inputs, attrs);
    return [steps[output]!.out];
  },
  decompose: (call) => decomposeChain(call),
});

/** The chain as separate ops; 16-bit float operands are widened to f32 first so intermediates are not rounded to 16 bits. */
function decomposeChain(call: OpCall<ElementwiseChainAttrs>): Tensor[] {
  const { steps, output } = resolveChain(call.inputs, call.attrs);
  const owned: Tensor[] = [];
  const widened = call.inputs.map((t) => {
    if (t === null || typeof t === 'number') return t;
    if (DTYPE_INFO[t.dtype].kind === 'float' && t.dtype !== 'f32' && t.dtype !== 'f64') {
      const w = callOp1('to', [t], { dtype: 'f32' });
      owned.push(w);
      return w;
    }
    return t;
  });
  const vals: Tensor[] = [];
  let res: Tensor | undefined;
  try {
    for (let i = 0; i <= output; i++) {
      const s = steps[i]!;
      const args: OpArg[] = s.args.map((a) => (a === null ? null : 'value' in a ? a.value : 'input' in a ? widened[a.input]! : vals[a.step]!));
      const r = callOp1(s.op, args, s.attrs);
      vals.push(r);
      owned.push(r);
    }
    const last = vals[output]!;
    const want = call.outputs[0]!.dtype;
    res = last.dtype === want ? last : callOp1('to', [last], { dtype: want });
    return [res];
  } finally {
    for (const t of owned) if (t !== res) t.dispose();
  }
}

// ---------------------------------------------------------------------------------------------
// more activations and math: float64 references (also in ELEMENTWISE_MATH, so elementwise_chain takes them; the CUDA
// backend generates them) and a decomposition into the ops above, so a backend without their kernels runs them too.

/** op name -> float64 reference of the ops below (the cpu kernels use it). */
export const ELEMENTWISE_EXTRA_MATH: Record<string, MathEntry> = {};

type ExtraKind = UnaryKind | 'bool';
const extraOut = (kind: ExtraKind, d: DType): DType => (kind === 'bool' ? 'bool' : kind === 'float' ? toFloatType(d) : d);

function defineExtra<S extends z.ZodObject>(
  name: string, doc: string, arity: 1 | 2, kind: ExtraKind, attrs: S, fn: (attrs: z.output<S>) => ScalarFn,
  decompose: (s: OpScope, args: OpArg[], attrs: z.output<S>) => Tensor,
) {
  ELEMENTWISE_EXTRA_MATH[name] = ELEMENTWISE_MATH[name] = { arity, fn: fn as MathEntry['fn'] };
  const dtypes = kind === 'keep' ? NUMERIC_DTYPES : ARITH_DTYPES;
  return defineOp({
    name,
    group: 'elementwise',
    doc,
    inputs: arity === 1 ? [{ name: 'input', dtypes }] : [{ name: 'input', scalar: true, dtypes }, { name: 'other', scalar: true, dtypes }],
    attrs,
    infer: (args, _a) => {
      if (arity === 1) return [meta((args[0] as TensorMeta).shape, extraOut(kind, (args[0] as TensorMeta).dtype))];
      return [meta(broadcastArgs(name, args, ['input', 'other']), extraOut(kind, resultType(args, name)))];
    },
    // 16-bit float operands are widened to f32 first, so intermediates do not round to 16 bits
    decompose: (call) => {
      const s = new OpScope();
      const wide = call.inputs.map((a) => (a !== null && typeof a === 'object' && (a.dtype === 'f16' || a.dtype === 'bf16') ? s.op('to', [a], { dtype: 'f32' }) : a));
      const r = decompose(s, wide, call.attrs);
      const want = call.outputs[0]!.dtype;
      return s.keep([r.dtype === want ? r : s.op('to', [r], { dtype: want })]);
    },
  });
}

const extra1 = (name: string, doc: string, kind: ExtraKind, f: (x: number) => number, d: (s: OpScope, x: OpArg) => Tensor) =>
  defineExtra(name, doc, 1, kind, noAttrs, () => f, (s, [x]) => d(s, x!));

export const leakyReluAttrs = z.object({ negative_slope: z.number().default(0.01) }).strict();
defineExtra('leaky_relu', 'x where x > 0, else negative_slope * x.', 1, 'float', leakyReluAttrs, (a) => (x) => (x > 0 ? x : a.negative_slope * x),
  (s, [x], a) => s.op('where', [s.op('gt', [x!, 0]), x!, s.op('mul', [x!, a.negative_slope])]));
export const eluAttrs = z.object({ alpha: z.number().default(1) }).strict();
defineExtra('elu', 'x where x > 0, else alpha * (e^x - 1).', 1, 'float', eluAttrs, (a) => (x) => (x > 0 ? x : a.alpha * Math.expm1(x)),
  (s, [x], a) => s.op('where', [s.op('gt', [x!, 0]), x!, s.op('mul', [s.op('sub', [s.op('exp', [x!]), 1]), a.alpha])]));
const relu6of3 = (s: OpScope, x: OpArg) => s.op('div', [s.op('clamp', [s.op('add', [x, 3]), 0, 6]), 6]);
extra1('hardsigmoid', 'clamp(x + 3, 0, 6) / 6.', 'float', (x) => Math.min(Math.max(x + 3, 0), 6) / 6, relu6of3);
extra1('hardswish', 'x * clamp(x + 3, 0, 6) / 6 (MobileNetV3).', 'float', (x) => (x * Math.min(Math.max(x + 3, 0), 6)) / 6, (s, x) => s.op('mul', [x, relu6of3(s, x)]));
extra1('mish', 'x * tanh(softplus(x)).', 'float', (x) => x * Math.tanh(x > 20 ? x : Math.log1p(Math.exp(x))), (s, x) => s.op('mul', [x, s.op('tanh', [s.op('softplus', [x])])]));
extra1('log1p', 'log(1 + x), accurate for small x (the decomposition is not).', 'float', Math.log1p, (s, x) => s.op('log', [s.op('add', [x, 1])]));
extra1('expm1', 'e^x - 1, accurate for small x (the decomposition is not).', 'float', Math.expm1, (s, x) => s.op('sub', [s.op('exp', [x]), 1]));
extra1('floor', 'Largest integer <= x (integers unchanged).', 'keep', Math.floor, (s, x) => s.op('div', [x, 1], { rounding_mode: 'floor' }));
extra1('trunc', 'x rounded toward zero (integers unchanged).', 'keep', Math.trunc, (s, x) => s.op('div', [x, 1], { rounding_mode: 'trunc' }));
extra1('ceil', 'Smallest integer >= x (integers unchanged).', 'keep', Math.ceil, (s, x) => s.op('neg', [s.op('div', [s.op('neg', [x]), 1], { rounding_mode: 'floor' })]));
extra1('sign', '1, -1 or 0 by the sign of x (NaN gives 0, as torch.sign).', 'keep', (x) => (x > 0 ? 1 : x < 0 ? -1 : 0),
  (s, x) => s.op('where', [s.op('gt', [x, 0]), 1, s.op('where', [s.op('lt', [x, 0]), -1, 0])]));
extra1('logical_not', 'x == 0 -> bool.', 'bool', (x) => (x === 0 ? 1 : 0), (s, x) => s.op('eq', [x, 0]));
defineExtra('logical_and', '(input != 0) and (other != 0) -> bool.', 2, 'bool', noAttrs, () => (a, b) => (a !== 0 && b !== 0 ? 1 : 0),
  (s, [a, b]) => s.op('mul', [s.op('ne', [a!, 0]), s.op('ne', [b!, 0])]));
defineExtra('logical_or', '(input != 0) or (other != 0) -> bool.', 2, 'bool', noAttrs, () => (a, b) => (a !== 0 || b !== 0 ? 1 : 0),
  (s, [a, b]) => s.op('maximum', [s.op('ne', [a!, 0]), s.op('ne', [b!, 0])]));
defineExtra('remainder', 'Python\'s modulus: input - floor(input / other) * other (the sign of other).', 2, 'keep', noAttrs, () => (a, b) => a - Math.floor(a / b) * b,
  (s, [a, b]) => s.op('sub', [a!, s.op('mul', [s.op('div', [a!, b!], { rounding_mode: 'floor' }), b!])]));
defineExtra('fmod', 'C\'s fmod: input - trunc(input / other) * other (the sign of input).', 2, 'keep', noAttrs, () => (a, b) => a % b,
  (s, [a, b]) => s.op('sub', [a!, s.op('mul', [s.op('div', [a!, b!], { rounding_mode: 'trunc' }), b!])]));

export const EXTRA_ELEMENTWISE_OPS = Object.keys(ELEMENTWISE_EXTRA_MATH);

// ---------------------------------------------------------------------------------------------
// gated activations (vLLM's SiluAndMul / GeluAndMul; the Llama surface's siluAndMul / geluAndMul)

function gatedInfer(name: string) {
  return ([x]: readonly MetaArg[]) => {
    const t = x as TensorMeta;
    const two = t.shape[t.shape.length - 1];
    if (two === undefined || two % 2 !== 0) opError(name, `input ${formatShape(t.shape)} needs an even last dim [..., 2d]`);
    return [meta([...t.shape.slice(0, -1), two / 2], t.dtype)];
  };
}

/** act(x[..., :d]) * x[..., d:] as one elementwise_chain over the two halves (views). */
function gatedDecompose(x: Tensor, act: ChainStep): Tensor[] {
  const d = x.shape[x.rank - 1]! / 2;
  const a = x.narrow(-1, 0, d);
  const b = x.narrow(-1, d, d);
  try {
    return [callOp1('elementwise_chain', [a, b], { steps: [act, { op: 'mul', args: [{ step: 0 }, { input: 1 }], attrs: {} }] })];
  } finally {
    a.dispose();
    b.dispose();
  }
}

defineOp({
  name: 'silu_and_mul',
  group: 'elementwise',
  doc: "vLLM's silu_and_mul: input [..., 2d] -> silu(input[..., :d]) * input[..., d:].",
  inputs: [{ name: 'input', dtypes: 'float' }],
  attrs: noAttrs,
  infer: gatedInfer('silu_and_mul'),
  viaOps: (ops, call) => [ops.siluAndMul(call.inputs[0] as Tensor)],
  decompose: (call) => gatedDecompose(call.inputs[0] as Tensor, { op: 'silu', args: [{ input: 0 }], attrs: {} }),
});

defineOp({
  name: 'gelu_and_mul',
  group: 'elementwise',
  doc: "vLLM's gelu_and_mul: input [..., 2d] -> gelu(input[..., :d], approximate) * input[..., d:].",
  inputs: [{ name: 'input', dtypes: 'float' }],
  attrs: geluAttrs,
  infer: gatedInfer('gelu_and_mul'),
  viaOps: (ops, call) => [ops.geluAndMul(call.inputs[0] as Tensor, call.attrs.approximate)],
  decompose: (call) => gatedDecompose(call.inputs[0] as Tensor, { op: 'gelu', args: [{ input: 0 }], attrs: { approximate: call.attrs.approximate } }),
});

defineOp({
  name: 'masked_fill',
  group: 'elementwise',
  doc: 'Tensor.masked_fill: value where mask (bool, broadcastable to input) is true, else input; keeps the input dtype.',
  inputs: [{ name: 'input', dtypes: ARITH_DTYPES }, { name: 'mask', dtypes: 'bool' }, { name: 'value', scalar: true, dtypes: ARITH_DTYPES }],
  attrs: noAttrs,
  infer: ([x, m, v]) => {
    const t = x as TensorMeta;
    const shape = broadcastArgs('masked_fill', [x, m], ['input', 'mask']);
    if (shape.length !== t.shape.length || shape.some((d, i) => d !== t.shape[i])) {
      opError('masked_fill', `mask ${formatShape((m as TensorMeta).shape)} must broadcast to the input's shape ${formatShape(t.shape)}`);
    }
    if (v !== null && typeof v === 'object' && (v as TensorMeta).shape.length !== 0) opError('masked_fill', `value must be a number or a 0-d tensor, got ${formatShape((v as TensorMeta).shape)}`);
    return [meta(t.shape, t.dtype)];
  },
  // where(mask, value, input) then back to input's dtype (where promotes; masked_fill does not)
  decompose: (call) => {
    const [x, m, v] = call.inputs as [Tensor, Tensor, Tensor | number];
    const w = callOp1('where', [m, v, x]);
    if (w.dtype === x.dtype) return [w];
    const r = callOp1('to', [w], { dtype: x.dtype });
    w.dispose();
    return [r];
  },
});

// ---------------------------------------------------------------------------------------------
// typed front ends (torch / torch.nn.functional names)

type Operand = Tensor | number;
const u = (name: string) => (input: Tensor): Tensor => callOp1(name, [input]);

export const elementwiseFunctions = {
  neg: u('neg'), abs: u('abs'), square: u('square'), relu: u('relu'), exp: u('exp'), log: u('log'), sqrt: u('sqrt'),
  rsqrt: u('rsqrt'), sin: u('sin'), cos: u('cos'), tanh: u('tanh'), sigmoid: u('sigmoid'), silu: u('silu'),
  quickGelu: u('quick_gelu'), logSigmoid: u('log_sigmoid'), erf: u('erf'), reciprocal: u('reciprocal'),
  gelu: (input: Tensor, opts: { approximate?: 'none' | 'tanh' } = {}): Tensor => callOp1('gelu', [input], opts),
  softplus: (input: Tensor, opts: { beta?: number; threshold?: number } = {}): Tensor => callOp1('softplus', [input], opts),
  add: (input: Operand, other: Operand, opts: { alpha?: number } = {}): Tensor => callOp1('add', [input, other], opts),
  sub: (input: Operand, other: Operand, opts: { alpha?: number } = {}): Tensor => callOp1('sub', [input, other], opts),
  mul: (input: Operand, other: Operand): Tensor => callOp1('mul', [input, other]),
  div: (input: Operand, other: Operand, opts: { rounding_mode?: 'trunc' | 'floor' | null } = {}): Tensor => callOp1('div', [input, other], opts),
  pow: (input: Operand, exponent: Operand): Tensor => callOp1('pow', [input, exponent]),
  maximum: (input: Operand, other: Operand): Tensor => callOp1('maximum', [input, other]),
  minimum: (input: Operand, other: Operand): Tensor => callOp1('minimum', [input, other]),
  eq: (input: Operand, other: Operand): Tensor => callOp1('eq', [input, other]),
  ne: (input: Operand, other: Operand): Tensor => callOp1('ne', [input, other]),
  lt: (input: Operand, other: Operand): Tensor => callOp1('lt', [input, other]),
  le: (input: Operand, other: Operand): Tensor => callOp1('le', [input, other]),
  gt: (input: Operand, other: Operand): Tensor => callOp1('gt', [input, other]),
  ge: (input: Operand, other: Operand): Tensor => callOp1('ge', [input, other]),
  where: (condition: Tensor, input: Operand, other: Operand): Tensor => callOp1('where', [condition, input, other]),
  clamp: (input: Tensor, min: Operand | null = null, max: Operand | null = null): Tensor => callOp1('clamp', [input, min, max]),
  to: (input: Tensor, dtype: DType): Tensor => callOp1('to', [input], { dtype }),
  elementwiseChain: (inputs: readonly Tensor[], attrs: z.input<typeof chainAttrs>): Tensor => callOp1('elementwise_chain', inputs, attrs),
  siluAndMul: (input: Tensor): Tensor => callOp1('silu_and_mul', [input]),
  maskedFill: (input: Tensor, mask: Tensor, value: Tensor | number): Tensor => callOp1('masked_fill', [input, mask, value]),
  leakyRelu: (input: Tensor, negativeSlope = 0.01): Tensor => callOp1('leaky_relu', [input], { negative_slope: negativeSlope }),
  elu: (input: Tensor, alpha = 1): Tensor => callOp1('elu', [input], { alpha }),
  hardsigmoid: u('hardsigmoid'), hardswish: u('hardswish'), mish: u('mish'), log1p: u('log1p'), expm1: u('expm1'),
  floor: u('floor'), ceil: u('ceil'), trunc: u('trunc'), sign: u('sign'), logicalNot: u('logical_not'),
  logicalAnd: (input: Operand, other: Operand): Tensor => callOp1('logical_and', [input, other]),
  logicalOr: (input: Operand, other: Operand): Tensor => callOp1('logical_or', [input, other]),
  remainder: (input: Operand, other: Operand): Tensor => callOp1('remainder', [input, other]),
  fmod: (input: Operand, other: Operand): Tensor => callOp1('fmod', [input, other]),
  geluAndMul: (input: Tensor, opts: { approximate?: 'none' | 'tanh' } = {}): Tensor => callOp1('gelu_and_mul', [input], opts),
};
