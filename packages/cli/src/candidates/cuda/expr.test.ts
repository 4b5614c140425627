import { describe, expect, it } from 'vitest';
import { ExprError, checkExpr, evalExpr, parseExpr, type Env } from './expr.js';

const scope = { values: new Set(['T', 'H', 'eps', 'dtype']), tensors: new Set(['x', 'residual', 'out.y']) };
const env = (values: Record<string, number | string>, tensors: Env['tensors'] = new Map()): Env => ({ values: new Map(Object.entries(values)), tensors });
const run = (src: string, e: Env) => {
  const x = parseExpr(src);
  checkExpr(x, scope);
  return evalExpr(x, e);
};

describe('manifest expressions', () => {
  it('evaluate arithmetic with C-like precedence against an independent computation, on random values', () => {
    for (let trial = 0; trial < 200; trial++) {
      const T = 1 + Math.floor(Math.random() * 5000);
      const H = 1 + Math.floor(Math.random() * 9000);
      const e = env({ T, H });
      expect(run('cdiv(T * H, 256)', e)).toBe(Math.ceil((T * H) / 256));
      expect(run('T * H // 7 + H % 3 - -2', e)).toBe(Math.floor((T * H) / 7) + (H % 3) + 2);
      expect(run('(T + H) * 2 / 4', e)).toBe(((T + H) * 2) / 4);
      expect(run('max(1, min(cdiv(T, 8), 65535), H // 1000)', e)).toBe(Math.max(1, Math.min(Math.ceil(T / 8), 65535), Math.floor(H / 1000)));
      expect(run('H % 8 == 0 && T > 100 || !(T <= 4000)', e)).toBe((H % 8 === 0 && T > 100) || !(T <= 4000) ? 1 : 0);
    }
  });

  it('reads tensor shapes through dim / numel / rank / has / dtypeof, and dtype strings', () => {
    const tensors = new Map([['x', { shape: [3, 5, 8], dtype: 'bf16', itemsize: 2 }], ['residual', null]] as const);
    const e = env({ T: 15, H: 8, dtype: 'bf16' }, tensors);
    expect(run('dim(x, -1) * dim(x, 0)', e)).toBe(24);
    expect(run('numel(x) / rank(x)', e)).toBe(40);
    expect(run('has(x) + has(residual)', e)).toBe(1);
    expect(run("dtypeof(x) == 'bf16' && dtype != 'f32'", e)).toBe(1);
    expect(() => run('dim(residual, 0)', e)).toThrow(/residual.*not given in this call.*has\(residual\)/);
    expect(() => run('dim(x, 3)', e)).toThrow(/x has 3 dims/);
  });

  it('rejects bad syntax and unknown names with the column and what is known', () => {
    expect(() => parseExpr('T * ')).toThrow(/expected a value at the end/);
    expect(() => parseExpr('T $ H')).toThrow(/unexpected '\$' at column 3/);
    expect(() => parseExpr('cdiv(T, 8')).toThrow(/expected '\)' to close cdiv\(/);
    expect(() => parseExpr('')).toThrow(ExprError);
    expect(() => checkExpr(parseExpr('T * Q'), scope)).toThrow(/unknown name 'Q' \(known: H, T, dtype, eps/);
    expect(() => checkExpr(parseExpr('x * 2'), scope)).toThrow(/'x' is a tensor: use dim\(x, i\)/);
    expect(() => checkExpr(parseExpr('numel(T)'), scope)).toThrow(/first argument of numel\(\) must name a tensor/);
    expect(() => checkExpr(parseExpr('floor(T)'), scope)).toThrow(/unknown function 'floor'/);
    expect(() => checkExpr(parseExpr('cdiv(T)'), scope)).toThrow(/cdiv\(\) takes 2 arguments, got 1/);
  });

  it('a JSON number is a constant', () => {
    expect(evalExpr(parseExpr(256), env({}))).toBe(256);
  });
});
