import { F, callOp, inferOp, roundToDType, type DType, type Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { LAYOUTS, Rng, expectClose, randn, relayout, tensor, values } from './test-helpers.js';

const FLOATS: DType[] = ['f32', 'bf16', 'f16'];
const tolOf = (d: DType) => (d === 'f32' ? 1e-6 : d === 'f16' ? 1e-3 : 8e-3);

/** x[i, j, k] of a row-major [A, B, C] array. */
const at3 = (X: number[], B: number, C: number) => (i: number, j: number, k: number) => X[(i * B + j) * C + k]!;

describe('sum / mean / amax / amin / var', () => {
  const x = tensor([1, 2, 3, 4, 5, 6], [2, 3]);

  it('hand-computed values over each dim, all dims, keepdim', () => {
    expect(values(F.sum(x))).toEqual([21]);
    expect(F.sum(x).shape).toEqual([]);
    expect(values(F.sum(x, { dim: 0 }))).toEqual([5, 7, 9]);
    expect(values(F.sum(x, { dim: -1, keepdim: true }))).toEqual([6, 15]);
    expect(F.sum(x, { dim: -1, keepdim: true }).shape).toEqual([2, 1]);
    expect(values(F.mean(x, { dim: [0, 1] }))).toEqual([3.5]);
    expect(values(F.amax(x, { dim: 1 }))).toEqual([3, 6]);
    expect(values(F.amin(x, { dim: 0 }))).toEqual([1, 2, 3]);
    expectClose(values(F.var(x, { dim: 1 })), [1, 1]);
    expectClose(values(F.var(x, { dim: 1, correction: 0 })), [2 / 3, 2 / 3]);
    expectClose(values(F.var(x)), [3.5]);
  });

  it('dtypes: integer sums give i64, dtype casts, mean of ints needs a dtype', () => {
    const i = tensor([1, 2, 3], [3], 'i32');
    expect(F.sum(i).dtype).toBe('i64');
    expect(F.sum(tensor([1, 0, 1], [3], 'bool')).dtype).toBe('i64');
    expect(values(F.sum(tensor([1, 0, 1], [3], 'bool')))).toEqual([2]);
    expect(F.sum(x, { dtype: 'f64' }).dtype).toBe('f64');
    expect(() => F.mean(i)).toThrow(/mean: could not infer the output dtype/);
    expect(values(F.mean(i, { dtype: 'f32' }))).toEqual([2]);
    expect(F.amax(tensor([1, 7], [2], 'i32')).dtype).toBe('i32');
  });

  it('NaN propagates through amax / amin; empty reductions', () => {
    expect(values(F.amax(tensor([1, NaN, 3], [3])))).toEqual([NaN]);
    expect(values(F.amin(tensor([NaN, 1], [2])))).toEqual([NaN]);
    const e = tensor([], [0, 3]);
    expect(values(F.sum(e, { dim: 0 }))).toEqual([0, 0, 0]);
    expect(values(F.mean(e, { dim: 0 }))).toEqual([NaN, NaN, NaN]);
    expect(F.sum(e, { dim: 1 }).shape).toEqual([0]);
    expect(() => F.amax(e, { dim: 0 })).toThrow(/amax: cannot reduce over a zero-size dimension of \[0, 3\]/);
    expect(F.amax(e, { dim: 1 }).shape).toEqual([0]);
    expect(() => F.sum(x, { dim: 2 })).toThrow(/sum: dim=2 is out of range for a tensor of rank 2/);
    expect(() => F.sum(x, { dim: [1, -1] })).toThrow(/names a dimension twice/);
  });

  it('random [3, 4, 5] over dims (0, 2) on non-contiguous views vs a naive loop, every float dtype', () => {
    const rng = new Rng(7);
    for (const dtype of FLOATS) {
      const base = randn(rng, [3, 4, 5], dtype);
      const X = values(base);
      const g = at3(X, 4, 5);
      const sum: number[] = [];
      const max: number[] = [];
      const vr: number[] = [];
      for (let j = 0; j < 4; j++) {
        let s = 0;
        let m = -Infinity;
        for (let i = 0; i < 3; i++) for (let k = 0; k < 5; k++) (s += g(i, j, k)), (m = Math.max(m, g(i, j, k)));
        let q = 0;
        for (let i = 0; i < 3; i++) for (let k = 0; k < 5; k++) q += (g(i, j, k) - s / 15) ** 2;
        sum.push(s);
        max.push(m);
        vr.push(q / 14);
      }
      for (const layout of LAYOUTS) {
        const v = relayout(base, layout);
        expectClose(values(F.sum(v, { dim: [0, 2] })), sum.map((s) => roundToDType(s, dtype)), 1e-6, tolOf(dtype));
        expectClose(values(F.mean(v, { dim: [2, 0], keepdim: true })), sum.map((s) => roundToDType(s / 15, dtype)), 1e-6, tolOf(dtype));
        expect(F.mean(v, { dim: [2, 0], keepdim: true }).shape).toEqual([1, 4, 1]);
        expect(values(F.amax(v, { dim: [0, 2] }))).toEqual(max);
        expectClose(values(F.var(v, { dim: [0, 2] })), vr.map((s) => roundToDType(s, dtype)), 1e-6, tolOf(dtype));
      }
    }
  });
});

describe('argmax / argmin', () => {
  it('first index on ties, NaN wins, flattened when dim is null', () => {
    const x = tensor([3, 7, 7, 1, 0, 1], [2, 3]);
    expect(values(F.argmax(x, { dim: 1 }))).toEqual([1, 0]);
    expect(values(F.argmin(x, { dim: 1 }))).toEqual([0, 1]);
    expect(values(F.argmax(x))).toEqual([1]);
    expect(F.argmax(x).dtype).toBe('i64');
    expect(F.argmax(x, { keepdim: true }).shape).toEqual([1, 1]);
    expect(F.argmin(x, { dim: 0, keepdim: true }).shape).toEqual([1, 3]);
    expect(values(F.argmax(tensor([1, NaN, 5, NaN], [4])))).toEqual([1]);
    expect(values(F.argmin(tensor([1, NaN, -5], [3])))).toEqual([1]);
    expect(() => F.argmax(tensor([], [0]))).toThrow(/argmax: cannot take argmax of an empty tensor/);
  });

  it('random, transposed view, dim 0', () => {
    const rng = new Rng(2);
    const base = randn(rng, [6, 5], 'bf16');
    const X = values(base);
    const want = [0, 1, 2, 3, 4].map((j) => {
      let b = 0;
      for (let i = 1; i < 6; i++) if (X[i * 5 + j]! > X[b * 5 + j]!) b = i;
      return b;
    });
    expect(values(F.argmax(relayout(base, 'transposed'), { dim: 0 }))).toEqual(want);
  });
});

describe('softmax / log_softmax', () => {
  it('hand-computed values, a -inf entry, an all -inf row', () => {
    const x = tensor([0, Math.log(3), -Infinity, -Infinity, -Infinity, -Infinity], [3, 2]);
    const s = values(F.softmax(x, { dim: -1 }));
    expectClose(s.slice(0, 2), [0.25, 0.75]);
    expect(s.slice(2)).toEqual([NaN, NaN, NaN, NaN]);
    expectClose(values(F.logSoftmax(tensor([0, Math.log(3)], [2]), { dim: 0 })), [Math.log(0.25), Math.log(0.75)], 1e-7);
    expectClose(values(F.softmax(tensor([1, 1000], [2], 'f32'), { dim: 0 })), [0, 1]);
  });

  it('random, every dim of a [3, 4, 5] view, every float dtype, vs a naive loop; log_softmax = log(softmax)', () => {
    const rng = new Rng(4);
    for (const dtype of FLOATS) {
      const base = randn(rng, [3, 4, 5], dtype, 3);
      const X = values(base);
      for (const dim of [0, 1, 2]) {
        const shape = [3, 4, 5];
        const want = new Array<number>(60);
        const wantLog = new Array<number>(60);
        const strides = [20, 5, 1];
        for (let flat = 0; flat < 60; flat++) {
          const pos = [Math.floor(flat / 20), Math.floor(flat / 5) % 4, flat % 5];
          let den = 0;
          for (let t = 0; t < shape[dim]!; t++) den += Math.exp(X[flat + (t - pos[dim]!) * strides[dim]!]!);
          want[flat] = roundToDType(Math.exp(X[flat]!) / den, dtype);
          wantLog[flat] = roundToDType(X[flat]! - Math.log(den), dtype);
        }
        const v = relayout(base, 'transposed');
        expectClose(values(F.softmax(v, { dim })), want, 1e-6, tolOf(dtype));
        expectClose(values(F.logSoftmax(v, { dim: dim - 3 })), wantLog, 1e-5, tolOf(dtype));
      }
      expect(F.softmax(base, { dim: 1, dtype: 'f32' }).dtype).toBe('f32');
    }
    expect(() => F.softmax(tensor([1], [1], 'i32'), { dim: 0 })).toThrow(/softmax: needs a float input or a float dtype, got i32/);
    expect(F.softmax(tensor([1, 2], [2], 'i32'), { dim: 0, dtype: 'f32' }).dtype).toBe('f32');
  });
});

describe('cumsum', () => {
  it('hand values, ints to i64, dims, empty', () => {
    expect(values(F.cumsum(tensor([1, 2, 3, 4, 5, 6], [2, 3]), { dim: 1 }))).toEqual([1, 3, 6, 4, 9, 15]);
    expect(values(F.cumsum(tensor([1, 2, 3, 4, 5, 6], [2, 3]), { dim: 0 }))).toEqual([1, 2, 3, 5, 7, 9]);
    const c = F.cumsum(tensor([1, 1, 0, 1], [4], 'bool'), { dim: 0 });
    expect(c.dtype).toBe('i64');
    expect(values(c)).toEqual([1, 2, 2, 3]);
    expect(F.cumsum(tensor([], [0, 2]), { dim: 0 }).shape).toEqual([0, 2]);
    const s = relayout(tensor([1, 2, 3, 4, 5, 6], [2, 3], 'bf16'), 'stepped');
    expect(values(F.cumsum(s, { dim: -1 }))).toEqual([1, 3, 6, 4, 9, 15]);
  });
});

describe('topk / sort', () => {
  it('topk: largest and smallest, ties keep the lower index, NaN is the largest', () => {
    const x = tensor([1, 5, 3, 5, 2, NaN, 0], [7]);
    const [v, i] = F.topk(x, 3);
    expect(values(v)).toEqual([NaN, 5, 5]);
    expect(values(i)).toEqual([5, 1, 3]);
    expect(i.dtype).toBe('i64');
    const [vs, is] = F.topk(x, 2, { largest: false });
    expect(values(vs)).toEqual([0, 1]);
    expect(values(is)).toEqual([6, 0]);
    expect(() => F.topk(x, 8)).toThrow(/topk: k=8 is larger than the size 7 of dim -1 of input \[7\]/);
    const [v0] = F.topk(x, 0);
    expect(v0.shape).toEqual([0]);
  });

  it('topk along dim 0 of a transposed bf16 view vs a naive sort', () => {
    const rng = new Rng(9);
    const base = randn(rng, [9, 4], 'bf16');
    const X = values(base);
    const [v, i] = F.topk(relayout(base, 'transposed'), 4, { dim: 0 });
    expect(v.shape).toEqual([4, 4]);
    for (let j = 0; j < 4; j++) {
      const col = [...Array(9).keys()].sort((a, b) => X[b * 4 + j]! - X[a * 4 + j]! || a - b);
      expect([0, 1, 2, 3].map((r) => values(i)[r * 4 + j])).toEqual(col.slice(0, 4));
      expect([0, 1, 2, 3].map((r) => values(v)[r * 4 + j])).toEqual(col.slice(0, 4).map((r) => X[r * 4 + j]));
    }
  });

  it('sort: ascending / descending, stable, NaN last when ascending', () => {
    const x = tensor([2, 1, NaN, 2, 0, 1], [2, 3]);
    const [v, i] = F.sort(x);
    expect(values(v)).toEqual([1, 2, NaN, 0, 1, 2]);
    expect(values(i)).toEqual([1, 0, 2, 1, 2, 0]);
    const [vd, id] = F.sort(tensor([1, 3, 1, 3, NaN], [5], 'f16'), { descending: true, stable: true });
    expect(values(vd)).toEqual([NaN, 3, 3, 1, 1]);
    expect(values(id)).toEqual([4, 1, 3, 0, 2]);
    const [v0, i0] = F.sort(tensor([3, 1, 2, 0], [2, 2], 'i32'), { dim: 0 });
    expect(values(v0)).toEqual([2, 0, 3, 1]);
    expect(values(i0)).toEqual([1, 1, 0, 0]);
    expect(v0.dtype).toBe('i32');
    const [ve] = callOp('sort', [tensor([], [0])]);
    expect(ve!.shape).toEqual([0]);
  });
});

describe('std / logsumexp / max / min', () => {
  it('hand values', () => {
    const x = tensor([1, 2, 3, 4, 5, 6], [2, 3]);
    expectClose(values(F.std(x, { dim: 1 })), [1, 1]);
    expectClose(values(F.std(x, { dim: 0, correction: 0 })), [1.5, 1.5, 1.5]);
    expectClose(values(F.logsumexp(tensor([0, Math.log(3)], [2]), { dim: 0 })), [Math.log(4)]);
    expectClose(values(F.logsumexp(tensor([1000, 1000], [2], 'f32'))), [1000 + Math.log(2)], 1e-4);
    expect(values(F.logsumexp(tensor([-Infinity, -Infinity], [2])))).toEqual([-Infinity]);
    expect(values(F.logsumexp(tensor([], [0, 2]), { dim: 0 }))).toEqual([-Infinity, -Infinity]);
    expect(F.logsumexp(tensor([1, 2], [2], 'i32')).dtype).toBe('f32');
    const [v, i] = F.max(tensor([3, 7, 7, 1, NaN, 1], [2, 3]), 1);
    expect(values(v)).toEqual([7, NaN]);
    expect(values(i)).toEqual([1, 1]);
    const [vm, im] = F.min(tensor([3, 7, 0, 1, 0, 1], [2, 3]), 0, true);
    expect(vm.shape).toEqual([1, 3]);
    expect(values(vm)).toEqual([1, 0, 0]);
    expect(values(im)).toEqual([1, 1, 0]);
    expect(() => F.max(tensor([], [0, 2]), 0)).toThrow(/max: cannot reduce over the zero-size dim 0/);
  });

  it('random non-contiguous inputs vs a naive loop, every float dtype', () => {
    const rng = new Rng(13);
    for (const dtype of FLOATS) {
      const base = randn(rng, [4, 6], dtype, 3);
      const X = values(base);
      const lse: number[] = [];
      const sd: number[] = [];
      const mx: number[] = [];
      const ix: number[] = [];
      for (let j = 0; j < 6; j++) {
        const col = [0, 1, 2, 3].map((i) => X[i * 6 + j]!);
        lse.push(roundToDType(Math.log(col.reduce((s, v) => s + Math.exp(v), 0)), dtype));
        const m = col.reduce((s, v) => s + v, 0) / 4;
        sd.push(roundToDType(Math.sqrt(col.reduce((s, v) => s + (v - m) ** 2, 0) / 3), dtype));
        const best = col.indexOf(Math.max(...col));
        mx.push(col[best]!);
        ix.push(best);
      }
      const v = relayout(base, 'transposed');
      expectClose(values(F.logsumexp(v, { dim: 0 })), lse, 1e-6, tolOf(dtype));
      expectClose(values(F.std(v, { dim: 0 })), sd, 1e-6, tolOf(dtype));
      const [mv, mi] = F.max(v, 0);
      expect(values(mv)).toEqual(mx);
      expect(values(mi)).toEqual(ix);
    }
  });
});

describe('decompositions (what a backend without the kernel runs)', () => {
  const decomposed = (name: string, x: Tensor, attrs: Record<string, unknown>) => {
    const info = inferOp(name, [x], attrs);
    return info.spec.decompose!({ op: info.spec, backend: x.backend, inputs: [x], attrs: info.attrs as Record<string, unknown>, outputs: info.outputs });
  };

  it('var, std, logsumexp, log_softmax, max / min equal the kernels', () => {
    const rng = new Rng(17);
    for (const dtype of FLOATS) {
      const x = relayout(randn(rng, [3, 4, 5], dtype, 2), 'transposed');
      for (const [name, attrs] of [
        ['var', { dim: [0, 2], correction: 1 }], ['var', { dim: 1, keepdim: true, correction: 0 }], ['std', { dim: -1 }],
        ['logsumexp', { dim: [1, 2] }], ['logsumexp', { dim: 0, keepdim: true }], ['log_softmax', { dim: 1 }],
      ] as const) {
        const [d] = decomposed(name, x, attrs);
        const k = callOp(name, [x], attrs)[0]!;
        expect(d!.shape).toEqual(k.shape);
        expect(d!.dtype).toBe(k.dtype);
        expectClose(values(d!), values(k), 1e-5, tolOf(dtype));
      }
      const [v, i] = F.max(x, 1);
      const [dv, di] = decomposed('max', x, { dim: 1 });
      expect(values(dv!)).toEqual(values(v));
      expect(values(di!)).toEqual(values(i));
    }
    expect(values(decomposed('logsumexp', tensor([-Infinity, -Infinity, 1, Infinity], [2, 2]), { dim: 1 })[0]!)).toEqual([-Infinity, Infinity]);
  });
});
