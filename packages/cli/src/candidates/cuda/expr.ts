/**
 * The small expression language of CUDA candidate manifests: launch geometry, scalar kernel arguments, output
 * shapes and conditions are written over the case's dims and the constructor's parameters, e.g.
 * `cdiv(T * H, 256)`, `H % 8 == 0 && dtype == 'bf16'`, `dim(x, -1) / 2`.
 *
 *   numbers, 'strings' (dtype names), names (dims such as T and H bound from the inputs' shapes, constructor
 *   parameters such as eps, `let` names, `dtype`), + - * / (exact) // (floor) %, == != < <= > >=, && || !,
 *   parentheses, and the functions cdiv(a, b), min(a, ...), max(a, ...), dim(t, i) (negative i counts from the
 *   end), numel(t), rank(t), has(t) (an optional input was given), dtypeof(t), itemsize(t).
 *
 * Parsed once when the candidate loads (syntax errors and unknown names fail the load, naming the field); evaluated
 * per forward call on plain numbers.
 */

export type Value = number | string;

export type Expr =
  | { readonly k: 'num'; readonly v: number }
  | { readonly k: 'str'; readonly v: string }
  | { readonly k: 'name'; readonly name: string; readonly at: number }
  | { readonly k: 'unary'; readonly op: '-' | '!'; readonly a: Expr }
  | { readonly k: 'bin'; readonly op: string; readonly a: Expr; readonly b: Expr }
  | { readonly k: 'call'; readonly fn: string; readonly args: readonly Expr[]; readonly at: number };

/** What an expression may refer to; `tensors` are allowed only as the argument of a tensor function. */
export interface Scope {
  readonly values: ReadonlySet<string>;
  readonly tensors: ReadonlySet<string>;
}

/** Tensor lookups at evaluation time: a tensor's shape and dtype, or null for an absent optional input. */
export interface TensorInfo {
  readonly shape: readonly number[];
  readonly dtype: string;
  readonly itemsize: number;
}
export interface Env {
  readonly values: ReadonlyMap<string, Value>;
  readonly tensors: ReadonlyMap<string, TensorInfo | null>;
}

export class ExprError extends Error {
  override name = 'ExprError';
}

const TENSOR_FNS: Readonly<Record<string, number>> = { dim: 2, numel: 1, rank: 1, has: 1, dtypeof: 1, itemsize: 1 };
const NUM_FNS: Readonly<Record<string, [number, number]>> = { cdiv: [2, 2], min: [1, 16], max: [1, 16] };

type Tok = { t: 'num'; v: number; at: number } | { t: 'str'; v: string; at: number } | { t: 'name'; v: string; at: number } | { t: 'op'; v: string; at: number };

const OPS = ['//', '==', '!=', '<=', '>=', '&&', '||', '+', '-', '*', '/', '%', '<', '>', '!', '(', ')', ','];

function lex(src: string): Tok[] {
  const out: Tok[] = [];
  let i = 0;
  while (i < src.length) {
    const c = src[i]!;
    if (/\s/.test(c)) {
      i++;
      continue;
    }
    const num = /^(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?/.exec(src.slice(i));
    if (num) {
      out.push({ t: 'num', v: Number(num[0]), at: i });
      i += num[0].length;
      continue;
    }
    const name = /^[A-Za-z_]\w*(\.[A-Za-z_]\w*)?/.exec(src.slice(i));
    if (name) {
      out.push({ t: 'name', v: name[0], at: i });
      i += name[0].length;
      continue;
    }
    if (c === "'" || c === '"') {
      const end = src.indexOf(c, i + 1);
      if (end < 0) throw new ExprError(`unterminated string at column ${i + 1}`);
      out.push({ t: 'str', v: src.slice(i + 1, end), at: i });
      i = end + 1;
      continue;
    }
    const op = OPS.find((o) => src.startsWith(o, i));
    if (!op) throw new ExprError(`unexpected '${c}' at column ${i + 1}`);
    out.push({ t: 'op', v: op, at: i });
    i += op.length;
  }
  return out;
}

/** Binary operators by precedence, loosest first. */
const LEVELS: readonly (readonly string[])[] = [['||'], ['&&'], ['==', '!=', '<', '<=', '>', '>='], ['+', '-'], ['*', '/', '//', '%']];

/** Parse an expression (a JSON number is a constant). Throws ExprError with the column. */
export function parseExpr(src: string | number): Expr {
  if (typeof src === 'number') return { k: 'num', v: src };
  const toks = lex(src);
  let p = 0;
  const peek = () => toks[p];
  const fail = (what: string): never => {
    const t = peek();
    throw new ExprError(t ? `${what} at column ${t.at + 1} ('${String(t.v)}')` : `${what} at the end`);
  };
  const isOp = (v: string) => peek()?.t === 'op' && peek()!.v === v;
  const level = (n: number): Expr => {
    if (n === LEVELS.length) return unary();
    let a = level(n + 1);
    while (peek()?.t === 'op' && LEVELS[n]!.includes(peek()!.v as string)) {
      const op = toks[p++]!.v as string;
      a = { k: 'bin', op, a, b: level(n + 1) };
    }
    return a;
  };
  const unary = (): Expr => {
    if (isOp('-') || isOp('!')) {
      const op = toks[p++]!.v as '-' | '!';
      return { k: 'unary', op, a: unary() };
    }
    return primary();
  };
  const primary = (): Expr => {
    const t = peek();
    if (!t) return fail('expected a value');
    if (t.t === 'num') {
      p++;
      return { k: 'num', v: t.v };
    }
    if (t.t === 'str') {
      p++;
      return { k: 'str', v: t.v };
    }
    if (t.t === 'name') {
      p++;
      if (!isOp('(')) return { k: 'name', name: t.v, at: t.at };
      p++;
      const args: Expr[] = [];
      if (!isOp(')')) {
        for (;;) {
          args.push(level(0));
          if (isOp(',')) {
            p++;
            continue;
          }
          break;
        }
      }
      if (!isOp(')')) fail(`expected ')' to close ${t.v}(`);
      p++;
      return { k: 'call', fn: t.v, args, at: t.at };
    }
    if (isOp('(')) {
      p++;
      const e = level(0);
      if (!isOp(')')) fail("expected ')'");
      p++;
      return e;
    }
    return fail('expected a value');
  };
  if (!toks.length) throw new ExprError('is empty');
  const e = level(0);
  if (p < toks.length) fail('unexpected text');
  return e;
}

/** Check names and function calls against a scope; returns the names the expression reads. Throws ExprError. */
export function checkExpr(e: Expr, scope: Scope): Set<string> {
  const used = new Set<string>();
  const walk = (x: Expr): void => {
    switch (x.k) {
      case 'num':
      case 'str':
        return;
      case 'name':
        if (scope.values.has(x.name)) {
          used.add(x.name);
          return;
        }
        if (scope.tensors.has(x.name)) throw new ExprError(`'${x.name}' is a tensor: use dim(${x.name}, i), numel(${x.name}), has(${x.name}) or dtypeof(${x.name})`);
        throw new ExprError(`unknown name '${x.name}' (known: ${[...scope.values].sort().join(', ') || 'none'}; tensors via dim/numel/has: ${[...scope.tensors].join(', ')})`);
      case 'unary':
        return walk(x.a);
      case 'bin':
        walk(x.a);
        walk(x.b);
        return;
      case 'call': {
        const tensorArity = TENSOR_FNS[x.fn];
        if (tensorArity !== undefined) {
          if (x.args.length !== tensorArity) throw new ExprError(`${x.fn}() takes ${tensorArity} argument${tensorArity > 1 ? 's' : ''}, got ${x.args.length}`);
          const t = x.args[0]!;
          if (t.k !== 'name' || !scope.tensors.has(t.name)) throw new ExprError(`the first argument of ${x.fn}() must name a tensor (${[...scope.tensors].join(', ')})`);
          used.add(t.name);
          x.args.slice(1).forEach(walk);
          return;
        }
        const arity = NUM_FNS[x.fn];
        if (!arity) throw new ExprError(`unknown function '${x.fn}' (functions: ${[...Object.keys(NUM_FNS), ...Object.keys(TENSOR_FNS)].join(', ')})`);
        if (x.args.length < arity[0] || x.args.length > arity[1]) throw new ExprError(`${x.fn}() takes ${arity[0] === arity[1] ? arity[0] : `${arity[0]} or more`} arguments, got ${x.args.length}`);
        x.args.forEach(walk);
        return;
      }
    }
  };
  walk(e);
  return used;
}

const num = (v: Value, what: string): number => {
  if (typeof v !== 'number') throw new ExprError(`${what} needs a number, got '${v}'`);
  return v;
};

/** Evaluate a checked expression. Comparisons and logic give 1 or 0. */
export function evalExpr(e: Expr, env: Env): Value {
  switch (e.k) {
    case 'num':
    case 'str':
      return e.v;
    case 'name': {
      const v = env.values.get(e.name);
      if (v === undefined) throw new ExprError(`'${e.name}' has no value here`);
      return v;
    }
    case 'unary': {
      const a = evalExpr(e.a, env);
      return e.op === '-' ? -num(a, "'-'") : a === 0 || a === '' ? 1 : 0;
    }
    case 'bin': {
      if (e.op === '&&') return truthy(evalExpr(e.a, env)) && truthy(evalExpr(e.b, env)) ? 1 : 0;
      if (e.op === '||') return truthy(evalExpr(e.a, env)) || truthy(evalExpr(e.b, env)) ? 1 : 0;
      const a = evalExpr(e.a, env);
      const b = evalExpr(e.b, env);
      if (e.op === '==') return a === b ? 1 : 0;
      if (e.op === '!=') return a !== b ? 1 : 0;
      const x = num(a, `'${e.op}'`);
      const y = num(b, `'${e.op}'`);
      switch (e.op) {
        case '+': return x + y;
        case '-': return x - y;
        case '*': return x * y;
        case '/': return x / y;
        case '//': return Math.floor(x / y);
        case '%': return x % y;
        case '<': return x < y ? 1 : 0;
        case '<=': return x <= y ? 1 : 0;
        case '>': return x > y ? 1 : 0;
        case '>=': return x >= y ? 1 : 0;
      }
      throw new ExprError(`unknown operator ${e.op}`);
    }
    case 'call': {
      if (e.fn in TENSOR_FNS) {
        const name = (e.args[0] as { name: string }).name;
        const t = env.tensors.get(name);
        if (e.fn === 'has') return t ? 1 : 0;
        if (!t) throw new ExprError(`${e.fn}(${name}): '${name}' is not given in this call (test has(${name}) first)`);
        if (e.fn === 'numel') return t.shape.reduce((p, d) => p * d, 1);
        if (e.fn === 'rank') return t.shape.length;
        if (e.fn === 'dtypeof') return t.dtype;
        if (e.fn === 'itemsize') return t.itemsize;
        const i = num(evalExpr(e.args[1]!, env), 'dim()');
        const j = i < 0 ? t.shape.length + i : i;
        if (!Number.isInteger(j) || j < 0 || j >= t.shape.length) throw new ExprError(`dim(${name}, ${i}): ${name} has ${t.shape.length} dims`);
        return t.shape[j]!;
      }
      const xs = e.args.map((a) => num(evalExpr(a, env), `${e.fn}()`));
      if (e.fn === 'cdiv') return Math.ceil(xs[0]! / xs[1]!);
      return e.fn === 'min' ? Math.min(...xs) : Math.max(...xs);
    }
  }
}

export function truthy(v: Value): boolean {
  return v !== 0 && v !== '';
}
