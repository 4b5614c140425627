/**
 * A sweep over the elementwise, reduction, layout and norm groups: every op on empty, odd-sized, 0-d where it makes
 * sense, every float dtype, and non-contiguous views, checked against the same op on a contiguous f64 copy (the
 * float64 answer rounded once to the dtype), plus integer inputs where PyTorch takes them.
 */
import { callOp, roundToDType, type DType, type OpArg, type Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { LAYOUTS, Rng, expectClose, randn, relayout, tensor, values } from './test-helpers.js';

const FLOATS: DType[] = ['f32', 'bf16', 'f16'];

interface Case { op: string; attrs?: Record<string, unknown>; extra?: (rng: Rng, x: Tensor) => OpArg[]; shapes?: number[][] }

const CASES: Case[] = [
  ...['neg', 'abs', 'exp', 'sin', 'cos', 'tanh', 'sigmoid', 'relu', 'silu', 'quick_gelu', 'softplus', 'log_sigmoid', 'erf', 'square', 'gelu'].map((op) => ({ op })),
  { op: 'gelu', attrs: { approximate: 'tanh' } },
  { op: 'add', extra: (r, x) => [randn(r, x.shape.slice(-1), x.dtype)], attrs: { alpha: -0.5 } },
  { op: 'mul', extra: () => [3] },
  { op: 'maximum', extra: (r, x) => [randn(r, [1, ...x.shape.slice(1)], x.dtype)] },
  { op: 'clamp', extra: () => [-0.5, 0.5] },
  { op: 'sum', attrs: { dim: -1 } },
  { op: 'mean', attrs: { dim: 0, keepdim: true } },
  { op: 'var', attrs: { dim: [0, -1], correction: 0 } },
  { op: 'softmax', attrs: { dim: -1 } },
  { op: 'log_softmax', attrs: { dim: 0 } },
  { op: 'cumsum', attrs: { dim: -1 } },
  { op: 'sort', attrs: { dim: 0, descending: true } },
  { op: 'topk', attrs: { k: 1, dim: 0 }, shapes: [[1, 0], [7, 3], [3, 5, 9]] },
  { op: 'pad', attrs: { pad: [1, 2], mode: 'replicate' }, shapes: [[0, 3], [7, 3], [3, 5, 9]] },
  { op: 'pad', attrs: { pad: [2, 1, 0, 1], mode: 'circular' }, shapes: [[1, 3], [7, 3], [3, 5, 9]] },
  { op: 'cat', extra: (r, x) => [randn(r, x.shape, x.dtype)], attrs: { dim: -1 } },
  { op: 'repeat', attrs: { repeats: [2, 1, 3, 1] } },
  { op: 'flip_free_transpose_contiguous' },
  { op: 'layer_norm', extra: (r, x) => [randn(r, x.shape.slice(-1), 'f32'), null], attrs: { normalized_shape: 'last' } },
  { op: 'rms_norm', extra: (r, x) => [randn(r, x.shape.slice(-1), x.dtype), null], attrs: { eps: 1e-6 } },
  { op: 'l2_norm' },
  { op: 'normalize', attrs: { dim: 0 } },
];

const SHAPES = [[0, 3], [7, 3], [3, 5, 9], [1, 1]];

/** Run a case on x (and derived extras); returns flattened values of every output. */
function run(c: Case, x: Tensor, extras: OpArg[]): number[][] {
  if (c.op === 'flip_free_transpose_contiguous') return callOp('contiguous', [x]).map(values);
  const attrs = { ...c.attrs };
  if (attrs.normalized_shape === 'last') attrs.normalized_shape = x.shape.slice(-1);
  return callOp(c.op, [x, ...extras], attrs).map(values);
}

describe('sweep: every op on empty / odd / unit shapes, float dtypes and layouts', () => {
  for (const c of CASES) {
    it(`${c.op} ${JSON.stringify(c.attrs ?? {})}`, () => {
      const rng = new Rng(c.op.length * 31 + JSON.stringify(c.attrs ?? {}).length);
      for (const shape of c.shapes ?? SHAPES) {
        for (const dtype of FLOATS) {
          const x = randn(rng, shape, dtype);
          const extras = c.extra ? c.extra(rng, x) : [];
          // the reference: the same op on f64 copies, rounded once to the dtype
          const x64 = tensor(values(x), shape, 'f64');
          const e64 = extras.map((e) => (e !== null && typeof e === 'object' ? tensor(values(e), e.shape, 'f64') : e));
          const ref = run(c, x64, e64);
          for (const layout of [null, ...LAYOUTS]) {
            const xv = layout && x.numel > 0 ? relayout(x, layout) : x;
            const got = run(c, xv, extras);
            expect(got.length).toBe(ref.length);
            got.forEach((g, k) => {
              const isIndex = (c.op === 'sort' || c.op === 'topk') && k === 1;
              const tol = dtype === 'f32' ? 1e-5 : dtype === 'f16' ? 2e-3 : 1.6e-2;
              if (isIndex) expect(g.length).toBe(ref[k]!.length);
              else {
                const want = ref[k]!.map((v) => roundToDType(v, dtype));
                expect(g.map(Number.isNaN)).toEqual(want.map(Number.isNaN)); // empty means are NaN in both
                expectClose(g.map((v) => (Number.isNaN(v) ? 0 : v)), want.map((v) => (Number.isNaN(v) ? 0 : v)), 1e-5, tol);
              }
            });
          }
        }
      }
    });
  }

  it('integer inputs where PyTorch takes them', () => {
    const x = tensor([3, -1, 4, 1, -5, 9], [2, 3], 'i32');
    expect(values(callOp('sum', [x], { dim: 1 })[0]!)).toEqual([6, 5]);
    expect(values(callOp('cumsum', [x], { dim: 0 })[0]!)).toEqual([3, -1, 4, 4, -6, 13]);
    expect(values(callOp('amax', [x], { dim: 0 })[0]!)).toEqual([3, -1, 9]);
    const [v, i] = callOp('sort', [x], { dim: 1 });
    expect(values(v!)).toEqual([-1, 3, 4, -5, 1, 9]);
    expect(values(i!)).toEqual([1, 0, 2, 1, 0, 2]);
    expect(values(callOp('pad', [x], { pad: [1, 0], mode: 'reflect' })[0]!)).toEqual([-1, 3, -1, 4, -5, 1, -5, 9]);
    expect(callOp('cat', [x, x], { dim: 0 })[0]!.dtype).toBe('i32');
    expect(values(callOp('gather', [x, tensor([2, 0], [2, 1], 'i64')], { dim: 1 })[0]!)).toEqual([4, 1]);
    expect(values(callOp('maximum', [x, 0])[0]!)).toEqual([3, 0, 4, 1, 0, 9]);
    expect(callOp('relu', [x])[0]!.dtype).toBe('i32');
    expect(values(callOp('where', [callOp('gt', [x, 0])[0]!, x, -x.numel])[0]!)).toEqual([3, -6, 4, 1, -6, 9]);
  });
});
