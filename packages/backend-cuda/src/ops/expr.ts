/**
 * The elementwise expression the generated kernels compute: a list of nodes over the inputs and scalar constants,
 * each node one op of the elementwise vocabulary, the last node the result. JSON-able, so an op's attrs can carry it
 * and its canonical text keys the kernel cache. The op table gives each op's arity and its CUDA C++ in the compute
 * type (float, or double where an integer input needs exactness), written as PyTorch's CUDA kernels write it.
 */

/**
 * An operand: input i, the value of node j (earlier in the list), a scalar constant (compiled in), or runtime scalar
 * k (a kernel argument: a Python-number operand whose value changes between calls must not compile a kernel each).
 */
export type Operand = { readonly input: number } | { readonly node: number } | { readonly scalar: number } | { readonly param: number };

export interface ExprNode {
  readonly op: string;
  readonly args: readonly Operand[];
  /** Numeric attributes (softplus beta / threshold, leaky_relu slope), gelu's approximate or to's dtype. */
  readonly attrs?: Readonly<Record<string, number | string | null>>;
}

export interface Expr {
  /** Number of tensor inputs. */
  readonly inputs: number;
  /** Number of runtime scalars (kernel arguments p0, p1, ... as double). */
  readonly params?: number;
  /** The nodes in evaluation order; the last one is the result. */
  readonly nodes: readonly ExprNode[];
}

/** The compute type's spelling and its math-function suffix ('f' for float). */
export interface MathCtx {
  readonly c: 'float' | 'double';
}

type Emit = (a: readonly string[], attrs: Readonly<Record<string, number | string | null>>, m: MathCtx) => string;

interface OpDef {
  readonly arity: number;
  readonly emit: Emit;
  /** Device functions the emitted code calls (defined once in the source, before the kernel). */
  readonly helper?: (m: MathCtx) => string;
}

/** A C++ literal of the compute type (exact for every double; inf / nan spelled through the intrinsics). */
export function lit(x: number, m: MathCtx): string {
  if (Number.isNaN(x)) return `${m.c}(__int_as_float(0x7fffffff))`;
  if (x === Infinity) return `${m.c}(__int_as_float(0x7f800000))`;
  if (x === -Infinity) return `${m.c}(-__int_as_float(0x7f800000))`;
  const s = Object.is(x, -0) ? '-0.0' : String(x);
  return `${m.c}(${/[.eE]/.test(s) ? s : `${s}.0`})`;
}

/** A libdevice function of the compute type: expf for float, exp for double. */
const fn = (name: string, m: MathCtx) => (m.c === 'float' ? `${name}f` : name);
const call1 = (name: string): Emit => (a, _, m) => `${fn(name, m)}(${a[0]})`;
const num = (attrs: Readonly<Record<string, number | string | null>>, k: string, dflt: number): number => {
  const v = attrs[k];
  return typeof v === 'number' ? v : dflt;
};
const one = (m: MathCtx) => lit(1, m);
const zero = (m: MathCtx) => lit(0, m);
const bool = (cond: string, m: MathCtx) => `((${cond}) ? ${one(m)} : ${zero(m)})`;
const sigmoid = (x: string, m: MathCtx) => `(${one(m)} / (${one(m)} + ${fn('exp', m)}(-(${x}))))`;

/**
 * The op vocabulary. Formulas follow PyTorch's CUDA kernels (ATen/native/cuda/Activation*.cu, UnaryOps): gelu with
 * erf is x * 0.5 * (1 + erf(x / sqrt 2)); gelu tanh uses kBeta = sqrt(2) * (2 / sqrt(pi)) * 0.5 and kKappa = 0.044715;
 * softplus keeps x where x * beta > threshold; log_sigmoid is min(x, 0) - log1p(exp(-|x|)); maximum / minimum
 * propagate NaN. Names are the registry's (core/src/ops/elementwise.ts) where it has the op.
 */
export const ELEMENTWISE_OPS: Readonly<Record<string, OpDef>> = {
  // unary math
  neg: { arity: 1, emit: (a) => `(-${a[0]})` },
  abs: { arity: 1, emit: call1('fabs') },
  exp: { arity: 1, emit: call1('exp') },
  exp2: { arity: 1, emit: call1('exp2') },
  expm1: { arity: 1, emit: call1('expm1') },
  log: { arity: 1, emit: call1('log') },
  log2: { arity: 1, emit: call1('log2') },
  log1p: { arity: 1, emit: call1('log1p') },
  sqrt: { arity: 1, emit: call1('sqrt') },
  rsqrt: { arity: 1, emit: call1('rsqrt') },
  sin: { arity: 1, emit: call1('sin') },
  cos: { arity: 1, emit: call1('cos') },
  tan: { arity: 1, emit: call1('tan') },
  tanh: { arity: 1, emit: call1('tanh') },
  erf: { arity: 1, emit: call1('erf') },
  floor: { arity: 1, emit: call1('floor') },
  ceil: { arity: 1, emit: call1('ceil') },
  trunc: { arity: 1, emit: call1('trunc') },
  round: { arity: 1, emit: call1('rint') }, // torch.round: half to even
  sign: { arity: 1, emit: (a, _, m) => `((${a[0]} > ${zero(m)}) ? ${one(m)} : (${a[0]} < ${zero(m)}) ? -${one(m)} : ${zero(m)})` }, // NaN -> 0 (the registry's)
  reciprocal: { arity: 1, emit: (a, _, m) => `(${one(m)} / ${a[0]})` },
  square: { arity: 1, emit: (a) => `(${a[0]} * ${a[0]})` },
  // activations
  relu: { arity: 1, emit: (a, _, m) => `((${a[0]} <= ${zero(m)}) ? ${zero(m)} : ${a[0]})` },
  sigmoid: { arity: 1, emit: (a, _, m) => sigmoid(a[0]!, m) },
  silu: { arity: 1, emit: (a, _, m) => `(${a[0]} / (${one(m)} + ${fn('exp', m)}(-${a[0]})))` },
  gelu: {
    arity: 1,
    emit: (a, attrs, m) =>
      attrs.approximate === 'tanh'
        ? `(${lit(0.5, m)} * ${a[0]} * (${one(m)} + ${fn('tanh', m)}(${lit(Math.SQRT2 * (2 / Math.sqrt(Math.PI)) * 0.5, m)} * (${a[0]} + ${lit(0.044715, m)} * ${a[0]} * ${a[0]} * ${a[0]}))))`
        : `(${a[0]} * ${lit(0.5, m)} * (${one(m)} + ${fn('erf', m)}(${a[0]} * ${lit(Math.SQRT1_2, m)})))`,
  },
  quick_gelu: { arity: 1, emit: (a, _, m) => `(${a[0]} * ${sigmoid(`${lit(1.702, m)} * ${a[0]}`, m)})` },
  softplus: {
    arity: 1,
    emit: (a, attrs, m) => {
      const beta = num(attrs, 'beta', 1);
      const th = num(attrs, 'threshold', 20);
      return `((${a[0]} * ${lit(beta, m)} > ${lit(th, m)}) ? ${a[0]} : ${fn('log1p', m)}(${fn('exp', m)}(${a[0]} * ${lit(beta, m)})) / ${lit(beta, m)})`;
    },
  },
  log_sigmoid: { arity: 1, emit: (a, _, m) => `(${fn('fmin', m)}(${a[0]}, ${zero(m)}) - ${fn('log1p', m)}(${fn('exp', m)}(-${fn('fabs', m)}(${a[0]}))))` },
  leaky_relu: { arity: 1, emit: (a, attrs, m) => `((${a[0]} > ${zero(m)}) ? ${a[0]} : ${a[0]} * ${lit(num(attrs, 'negative_slope', 0.01), m)})` },
  elu: { arity: 1, emit: (a, attrs, m) => `((${a[0]} > ${zero(m)}) ? ${a[0]} : ${lit(num(attrs, 'alpha', 1), m)} * ${fn('expm1', m)}(${a[0]}))` },
  hardsigmoid: { arity: 1, emit: (a, _, m) => `(${fn('fmin', m)}(${fn('fmax', m)}(${a[0]} + ${lit(3, m)}, ${zero(m)}), ${lit(6, m)}) / ${lit(6, m)})` },
  hardswish: { arity: 1, emit: (a, _, m) => `(${a[0]} * ${fn('fmin', m)}(${fn('fmax', m)}(${a[0]} + ${lit(3, m)}, ${zero(m)}), ${lit(6, m)}) / ${lit(6, m)})` },
  mish: { arity: 1, emit: (a, _, m) => `(${a[0]} * ${fn('tanh', m)}(${fn('log1p', m)}(${fn('exp', m)}(${a[0]}))))` },
  // binary
  add: { arity: 2, emit: (a) => `(${a[0]} + ${a[1]})` },
  sub: { arity: 2, emit: (a) => `(${a[0]} - ${a[1]})` },
  mul: { arity: 2, emit: (a) => `(${a[0]} * ${a[1]})` },
  div: { arity: 2, emit: (a) => `(${a[0]} / ${a[1]})` },
  pow: { arity: 2, emit: (a, _, m) => `${fn('pow', m)}(${a[0]}, ${a[1]})` },
  maximum: { arity: 2, emit: (a) => `((${a[0]} > ${a[1]} || ${a[0]} != ${a[0]}) ? ${a[0]} : ${a[1]})` },
  minimum: { arity: 2, emit: (a) => `((${a[0]} < ${a[1]} || ${a[0]} != ${a[0]}) ? ${a[0]} : ${a[1]})` },
  eq: { arity: 2, emit: (a, _, m) => bool(`${a[0]} == ${a[1]}`, m) },
  ne: { arity: 2, emit: (a, _, m) => bool(`${a[0]} != ${a[1]}`, m) },
  lt: { arity: 2, emit: (a, _, m) => bool(`${a[0]} < ${a[1]}`, m) },
  le: { arity: 2, emit: (a, _, m) => bool(`${a[0]} <= ${a[1]}`, m) },
  gt: { arity: 2, emit: (a, _, m) => bool(`${a[0]} > ${a[1]}`, m) },
  ge: { arity: 2, emit: (a, _, m) => bool(`${a[0]} >= ${a[1]}`, m) },
  logical_not: { arity: 1, emit: (a, _, m) => bool(`${a[0]} == ${zero(m)}`, m) },
  logical_and: { arity: 2, emit: (a, _, m) => bool(`${a[0]} != ${zero(m)} && ${a[1]} != ${zero(m)}`, m) },
  logical_or: { arity: 2, emit: (a, _, m) => bool(`${a[0]} != ${zero(m)} || ${a[1]} != ${zero(m)}`, m) },
  // ternary
  where: { arity: 3, emit: (a, _, m) => `((${a[0]} != ${zero(m)}) ? ${a[1]} : ${a[2]})` },
  /** clamp's bounds (the registry's clamp is clamp_max(clamp_min(x, lo), hi)): x stays NaN; a NaN bound is absent (fmax / fmin). */
  clamp_min: { arity: 2, emit: (a, _, m) => `((${a[0]} != ${a[0]}) ? ${a[0]} : ${fn('fmax', m)}(${a[0]}, ${a[1]}))` },
  clamp_max: { arity: 2, emit: (a, _, m) => `((${a[0]} != ${a[0]}) ? ${a[0]} : ${fn('fmin', m)}(${a[0]}, ${a[1]}))` },
  /** div with rounding_mode 'trunc' / 'floor'. */
  div_trunc: { arity: 2, emit: (a, _, m) => `${fn('trunc', m)}(${a[0]} / ${a[1]})` },
  /** PyTorch's div_floor_floating: exact where floor(a / b) of the rounded quotient is one off. */
  div_floor: {
    arity: 2,
    emit: (a, _, m) => `fk_div_floor(${a[0]}, ${a[1]})`,
    helper: (m) => {
      const c = m.c;
      const f = (n: string) => fn(n, m);
      return [
        `__device__ __forceinline__ ${c} fk_div_floor(${c} a, ${c} b) {`,
        `  if (b == ${c}(0)) return a / b;`,
        `  const ${c} mod = ${f('fmod')}(a, b);`,
        `  ${c} div = (a - mod) / b;`,
        `  if (mod != ${c}(0) && ((b < ${c}(0)) != (mod < ${c}(0)))) div -= ${c}(1);`,
        `  if (div == ${c}(0)) return ${f('copysign')}(${c}(0), a / b);`,
        `  ${c} fl = ${f('floor')}(div);`,
        `  if (div - fl > ${c}(0.5)) fl += ${c}(1);`,
        `  return fl;`,
        `}`,
      ].join('\n');
    },
  },
  /** C's fmod (the sign of input) and Python's remainder (the sign of other), as PyTorch's CUDA kernels compute them. */
  fmod: { arity: 2, emit: (a, _, m) => `${fn('fmod', m)}(${a[0]}, ${a[1]})` },
  remainder: {
    arity: 2,
    emit: (a, _, m) => {
      const r = `${fn('fmod', m)}(${a[0]}, ${a[1]})`;
      return `((${r} != ${zero(m)} && ((${a[1]} < ${zero(m)}) != (${r} < ${zero(m)}))) ? ${r} + ${a[1]} : ${r})`;
    },
  },
  /** `to` inside a chain: the value rounded to attrs.dtype and back to the compute type (PyTorch's .to(dtype)). */
  to: {
    arity: 1,
    emit: (a, attrs, m) => {
      const x = a[0]!;
      switch (attrs.dtype) {
        case 'bf16': return `${m.c}(__bfloat162float(__float2bfloat16_rn(float(${x}))))`;
        case 'f16': return `${m.c}(__half2float(__float2half_rn(float(${x}))))`;
        case 'f32': return `${m.c}(float(${x}))`;
        case 'f64': return x;
        case 'bool': return bool(`${x} != ${zero(m)}`, m);
        case 'i32': case 'i64': case 'i16': case 'i8': case 'u8': return `${fn('trunc', m)}(${x})`;
        default: throw new RangeError(`to: dtype ${String(attrs.dtype)} is not supported in a generated kernel`);
      }
    },
  },
};

/** Throws naming the node when the expression is malformed (unknown op, wrong arity, a forward reference). */
export function validateExpr(e: Expr): void {
  if (!Number.isInteger(e.inputs) || e.inputs < 1) throw new RangeError(`elementwise expression: needs at least one input, got ${e.inputs}`);
  if (e.nodes.length === 0) throw new RangeError('elementwise expression: no nodes');
  e.nodes.forEach((n, j) => {
    const def = ELEMENTWISE_OPS[n.op];
    if (!def) throw new RangeError(`elementwise expression: node ${j}: unknown op '${n.op}' (known: ${Object.keys(ELEMENTWISE_OPS).join(', ')})`);
    if (n.args.length !== def.arity) throw new RangeError(`elementwise expression: node ${j} (${n.op}) takes ${def.arity} operands, got ${n.args.length}`);
    for (const a of n.args) {
      if ('input' in a && !(Number.isInteger(a.input) && a.input >= 0 && a.input < e.inputs)) throw new RangeError(`elementwise expression: node ${j} (${n.op}) reads input ${a.input} of ${e.inputs}`);
      if ('node' in a && !(Number.isInteger(a.node) && a.node >= 0 && a.node < j)) throw new RangeError(`elementwise expression: node ${j} (${n.op}) reads node ${a.node}, which is not before it`);
      if ('param' in a && !(Number.isInteger(a.param) && a.param >= 0 && a.param < (e.params ?? 0))) throw new RangeError(`elementwise expression: node ${j} (${n.op}) reads param ${a.param} of ${e.params ?? 0}`);
      if ('scalar' in a && typeof a.scalar !== 'number') throw new RangeError(`elementwise expression: node ${j} (${n.op}) has a non-numeric scalar`);
    }
  });
}

/** Canonical text of an expression (the kernel-cache key's expression part). */
export function exprKey(e: Expr): string {
  const operand = (a: Operand) => ('input' in a ? `i${a.input}` : 'node' in a ? `n${a.node}` : 'param' in a ? `p${a.param}` : `s${Object.is(a.scalar, -0) ? '-0' : a.scalar}`);
  const attrs = (n: ExprNode) => (n.attrs ? Object.keys(n.attrs).sort().map((k) => `${k}=${n.attrs![k]}`).join(',') : '');
  return `${e.inputs}:${e.params ?? 0}:${e.nodes.map((n) => `${n.op}(${n.args.map(operand).join(',')})[${attrs(n)}]`).join(';')}`;
}

/** An expression of one op over fresh inputs: op(x0, x1, ...) with numeric attrs. */
export function singleOp(op: string, arity: number, attrs?: ExprNode['attrs']): Expr {
  return { inputs: arity, nodes: [{ op, args: Array.from({ length: arity }, (_, i) => ({ input: i })), ...(attrs ? { attrs } : {}) }] };
}

/** The device functions the expression's ops call, each once. */
export function exprHelpers(e: Expr, m: MathCtx): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const n of e.nodes) {
    const h = ELEMENTWISE_OPS[n.op]?.helper;
    if (h && !seen.has(n.op)) {
      seen.add(n.op);
      out.push(h(m));
    }
  }
  return out;
}

/**
 * The body of the per-element computation: `const C t<j> = ...;` for every node, inputs named x0, x1, ...; returns the
 * lines and the result variable. Inputs no node reads are never loaded by the kernels (their names are unused).
 */
export function emitBody(e: Expr, m: MathCtx, indent = '  '): { lines: string[]; result: string } {
  const name = (a: Operand) => ('input' in a ? `x${a.input}` : 'node' in a ? `t${a.node}` : 'param' in a ? `${m.c}(p${a.param})` : lit(a.scalar, m));
  const lines = e.nodes.map((n, j) => `${indent}const ${m.c} t${j} = ${ELEMENTWISE_OPS[n.op]!.emit(n.args.map(name), n.attrs ?? {}, m)};`);
  return { lines, result: `t${e.nodes.length - 1}` };
}
