import { describe, expect, it } from 'vitest';
import { roundToDType, type DType } from '@fastkernels/core';
import { baddbmm, bmm, einsum, groupedGemm, linear, matmul } from './ops/matmul-general.js';
import { geluErf, geluTanh, silu } from './math.js';
import { cpu, expectClose, LAYOUTS, randn, relayout, Rng, tensor, values } from './test-helpers.js';

/** Row-major index helpers for the naive references. */
const strides = (shape: readonly number[]): number[] => shape.map((_, i) => shape.slice(i + 1).reduce((a, b) => a * b, 1));
const at = (v: number[], shape: readonly number[], idx: number[]): number => {
  const s = strides(shape);
  // broadcast: a size-1 dim reads index 0; missing leading dims are dropped
  const lead = idx.length - shape.length;
  return v[idx.slice(lead).reduce((o, x, d) => o + (shape[d] === 1 ? 0 : x) * s[d]!, 0)]!;
};
function* indices(shape: readonly number[]): Generator<number[]> {
  const n = shape.reduce((a, b) => a * b, 1);
  for (let i = 0; i < n; i++) yield shape.map((_, d) => Math.floor(i / strides(shape)[d]!) % shape[d]!);
}

/** Naive batched matmul over broadcast batch dims (both operands rank >= 2). */
function naiveMatmul(A: number[], as: number[], B: number[], bs: number[]): { v: number[]; shape: number[] } {
  const M = as[as.length - 2]!;
  const K = as[as.length - 1]!;
  const N = bs[bs.length - 1]!;
  const ba = as.slice(0, -2);
  const bb = bs.slice(0, -2);
  const rank = Math.max(ba.length, bb.length);
  const batch = Array.from({ length: rank }, (_, i) => Math.max(ba[ba.length - rank + i] ?? 1, bb[bb.length - rank + i] ?? 1));
  const shape = [...batch, M, N];
  const v: number[] = [];
  for (const idx of indices(shape)) {
    const b = idx.slice(0, -2);
    let s = 0;
    for (let k = 0; k < K; k++) s += at(A, as, [...b, idx[rank]!, k]) * at(B, bs, [...b, k, idx[rank + 1]!]);
    v.push(s);
  }
  return { v, shape };
}

const round = (v: number[], d: DType): number[] => v.map((x) => roundToDType(x, d));

describe('matmul (torch.matmul semantics)', () => {
  it('hand-computed: 2-D, 1-D x 1-D (dot), 1-D x 2-D and 2-D x 1-D', () => {
    const a = tensor([1, 2, 3, 4, 5, 6], [2, 3]);
    const b = tensor([7, 8, 9, 10, 11, 12], [3, 2]);
    expect(matmul(cpu, a, b).toNested()).toEqual([[58, 64], [139, 154]]);
    const dot = matmul(cpu, tensor([1, 2, 3], [3]), tensor([4, 5, 6], [3]));
    expect(dot.shape).toEqual([]);
    expect(values(dot)).toEqual([32]);
    const vm = matmul(cpu, tensor([1, 1, 1], [3]), b);
    expect(vm.shape).toEqual([2]);
    expect(values(vm)).toEqual([27, 30]);
    const mv = matmul(cpu, a, tensor([1, 0, 1], [3]));
    expect(mv.shape).toEqual([2]);
    expect(values(mv)).toEqual([4, 10]);
  });

  it('1-D with batched operands: [3] x [2, 3, 4] -> [2, 4]; [2, 5, 3] x [3] -> [2, 5]', () => {
    const rng = new Rng(3);
    const v = randn(rng, [3]);
    const m = randn(rng, [2, 3, 4]);
    const r = matmul(cpu, v, m);
    expect(r.shape).toEqual([2, 4]);
    const want = naiveMatmul(values(v), [1, 3], values(m), [2, 3, 4]).v;
    expectClose(values(r), round(want, 'f32'), 1e-6);
    const m2 = randn(rng, [2, 5, 3]);
    const r2 = matmul(cpu, m2, v);
    expect(r2.shape).toEqual([2, 5]);
    expectClose(values(r2), round(naiveMatmul(values(m2), [2, 5, 3], values(v), [3, 1]).v, 'f32'), 1e-6);
  });

  it('broadcasts batch dims against a naive loop, for every dtype and layout', () => {
    const rng = new Rng(7);
    for (const dtype of ['f32', 'bf16', 'f16'] as DType[]) {
      for (const layout of LAYOUTS) {
        const a = randn(rng, [3, 1, 5, 7], dtype);
        const b = randn(rng, [4, 7, 3], dtype);
        const want = round(naiveMatmul(values(a), [3, 1, 5, 7], values(b), [4, 7, 3]).v, dtype);
        const r = matmul(cpu, relayout(a, layout), relayout(b, layout));
        expect(r.shape).toEqual([3, 4, 5, 3]);
        expect(r.dtype).toBe(dtype);
        expectClose(values(r), want, 1e-6, 1e-6);
      }
    }
  });

  it('handles empty and zero-K operands', () => {
    expect(matmul(cpu, randn(new Rng(1), [0, 3]), randn(new Rng(1), [3, 2])).shape).toEqual([0, 2]);
    const z = matmul(cpu, randn(new Rng(1), [2, 0]), randn(new Rng(1), [0, 3]));
    expect(values(z)).toEqual([0, 0, 0, 0, 0, 0]);
  });

  it('names the operands and shapes in its errors', () => {
    expect(() => matmul(cpu, tensor([1, 2, 3, 4], [2, 2]), tensor([1, 2, 3], [3, 1]))).toThrow(/matmul: input \[2, 2\] and other \[3, 1\] cannot be multiplied/);
    expect(() => matmul(cpu, randn(new Rng(0), [2, 1, 1]), randn(new Rng(0), [3, 1, 1]))).toThrow(/do not broadcast/);
    expect(() => matmul(cpu, tensor([1], []), tensor([1], [1]))).toThrow(/at least 1 dim/);
    expect(() => matmul(cpu, tensor([1], [1], 'f32'), tensor([1], [1], 'bf16'))).toThrow(/f32 but other is bf16/);
  });
});

describe('bmm and baddbmm', () => {
  it('bmm hand-computed and against naive on transposed views', () => {
    const a = tensor([1, 2, 3, 4, 1, 0, 0, 1], [2, 2, 2]);
    const b = tensor([1, 0, 0, 1, 5, 6, 7, 8], [2, 2, 2]);
    expect(bmm(cpu, a, b).toNested()).toEqual([[[1, 2], [3, 4]], [[5, 6], [7, 8]]]);
    const rng = new Rng(11);
    const x = randn(rng, [3, 5, 4], 'bf16');
    const y = randn(rng, [3, 4, 6], 'bf16');
    const want = round(naiveMatmul(values(x), [3, 5, 4], values(y), [3, 4, 6]).v, 'bf16');
    expectClose(values(bmm(cpu, relayout(x, 'transposed'), relayout(y, 'stepped'))), want, 0, 0);
  });

  it('bmm rejects mismatched batches and non-3-D operands', () => {
    expect(() => bmm(cpu, randn(new Rng(0), [2, 3, 4]), randn(new Rng(0), [3, 4, 5]))).toThrow(/bmm: mat2 \[3, 4, 5\] must be \[2, 4, p\]/);
    expect(() => bmm(cpu, randn(new Rng(0), [3, 4]), randn(new Rng(0), [4, 5]))).toThrow(/must be 3-D/);
  });

  it('baddbmm = beta * input + alpha * b1 @ b2 with a broadcast input', () => {
    const rng = new Rng(5);
    const b1 = randn(rng, [2, 3, 4], 'f32');
    const b2 = randn(rng, [2, 4, 5], 'f32');
    const inp = randn(rng, [1, 5], 'f32');
    const mm = naiveMatmul(values(b1), [2, 3, 4], values(b2), [2, 4, 5]).v;
    const iv = values(inp);
    const want = mm.map((x, i) => 0.5 * iv[i % 5]! + -2 * x);
    expectClose(values(baddbmm(cpu, inp, b1, relayout(b2, 'transposed'), { beta: 0.5, alpha: -2 })), round(want, 'f32'), 1e-6, 1e-6);
  });

  it('baddbmm with beta = 0 ignores NaN in input', () => {
    const nan = tensor([NaN], [1, 1, 1]);
    const r = baddbmm(cpu, nan, tensor([2], [1, 1, 1]), tensor([3], [1, 1, 1]), { beta: 0 });
    expect(values(r)).toEqual([6]);
    expect(values(baddbmm(cpu, tensor([1], [1, 1, 1]), tensor([2], [1, 1, 1]), tensor([3], [1, 1, 1])))).toEqual([7]);
    expect(() => baddbmm(cpu, randn(new Rng(0), [3, 3]), randn(new Rng(0), [2, 3, 4]), randn(new Rng(0), [2, 4, 5]))).toThrow(/baddbmm: input \[3, 3\] does not broadcast to \[2, 3, 5\]/);
  });
});

describe('linear with an activation epilogue', () => {
  it('hand-computed with bias and relu', () => {
    const x = tensor([1, 2, 3, 4, 5, 6], [2, 3]);
    const w = tensor([1, 0, 0, 0, -1, -1], [2, 3]);
    const b = tensor([10, 1], [2]);
    expect(linear(cpu, x, w, b).toNested()).toEqual([[11, -4], [14, -10]]);
    expect(linear(cpu, x, w, b, { activation: 'relu' }).toNested()).toEqual([[11, 0], [14, 0]]);
    const v = linear(cpu, tensor([1, 2, 3], [3]), w, null);
    expect(v.shape).toEqual([2]);
    expect(values(v)).toEqual([1, -5]);
  });

  it('every activation against a naive reference, non-contiguous weights, bf16', () => {
    const rng = new Rng(9);
    const acts = { none: (v: number) => v, relu: (v: number) => Math.max(v, 0), gelu: geluErf, gelu_tanh: geluTanh, silu } as const;
    for (const [name, f] of Object.entries(acts)) {
      const x = randn(rng, [2, 3, 5], 'bf16');
      const w = randn(rng, [7, 5], 'bf16');
      const bias = randn(rng, [7], 'bf16');
      const X = values(x);
      const W = values(w);
      const B = values(bias);
      const want: number[] = [];
      for (let r = 0; r < 6; r++) for (let n = 0; n < 7; n++) want.push(f(X.slice(r * 5, r * 5 + 5).reduce((s, xv, k) => s + xv * W[n * 5 + k]!, B[n]!)));
      const got = linear(cpu, relayout(x, 'stepped'), relayout(w, 'transposed'), bias, { activation: name as keyof typeof acts });
      expect(got.shape).toEqual([2, 3, 7]);
      expectClose(values(got), round(want, 'bf16'), 0, 0);
    }
  });

  it('rejects bad shapes and activations', () => {
    const x = randn(new Rng(0), [2, 3]);
    expect(() => linear(cpu, x, randn(new Rng(0), [4, 5]))).toThrow(/linear: input \[2, 3\] last dim must equal in_features 5/);
    expect(() => linear(cpu, x, randn(new Rng(0), [4, 3]), randn(new Rng(0), [3]))).toThrow(/bias \[3\] must be \[4\]/);
    expect(() => linear(cpu, x, randn(new Rng(0), [4, 3]), null, { activation: 'tanh' as never })).toThrow(/activation must be one of/);
  });
});

describe('einsum', () => {
  /** Independent reference: compose with matmul on permuted views. */
  it('attention patterns agree with matmul', () => {
    const rng = new Rng(21);
    const q = randn(rng, [2, 3, 4, 8]);
    const k = randn(rng, [2, 3, 5, 8]);
    const v = randn(rng, [2, 3, 5, 6]);
    const s = einsum(cpu, 'bhqd,bhkd->bhqk', q, k);
    expect(s.shape).toEqual([2, 3, 4, 5]);
    expectClose(values(s), values(matmul(cpu, q, k.transpose(2, 3))), 1e-6, 1e-6);
    const o = einsum(cpu, 'bhqk,bhkd->bhqd', s, v);
    expectClose(values(o), values(matmul(cpu, s, v)), 1e-6, 1e-6);
  });

  it("bij,bjk->bik, '...ij,...jk->...ik' with broadcast ellipsis, and a transposed operand", () => {
    const rng = new Rng(22);
    const a = randn(rng, [3, 4, 5]);
    const b = randn(rng, [3, 5, 2]);
    expectClose(values(einsum(cpu, 'bij,bjk->bik', a, b)), values(bmm(cpu, a, b)), 1e-6, 1e-6);
    const c = randn(rng, [2, 1, 4, 5]);
    const d = randn(rng, [3, 5, 6]);
    const e = einsum(cpu, '...ij,...jk->...ik', c, d);
    expect(e.shape).toEqual([2, 3, 4, 6]);
    expectClose(values(e), values(matmul(cpu, c, d)), 1e-6, 1e-6);
    const bt = randn(rng, [3, 2, 5]); // b stored [b, k, j]
    expectClose(values(einsum(cpu, 'bij,bkj->bik', relayout(a, 'stepped'), bt)), values(bmm(cpu, a, bt.transpose(1, 2))), 1e-6, 1e-6);
  });

  it('hand-computed: trace, diagonal, outer product, sum, implicit output, transpose', () => {
    const m = tensor([1, 2, 3, 4], [2, 2]);
    expect(values(einsum(cpu, 'ii', m))).toEqual([5]);
    expect(values(einsum(cpu, 'ii->i', m))).toEqual([1, 4]);
    expect(einsum(cpu, 'i,j->ij', tensor([1, 2], [2]), tensor([3, 4, 5], [3])).toNested()).toEqual([[3, 4, 5], [6, 8, 10]]);
    expect(values(einsum(cpu, 'ij->', m))).toEqual([10]);
    expect(einsum(cpu, 'ji', m).toNested()).toEqual([[1, 3], [2, 4]]); // implicit output 'ij' of 'ji' is the transpose
    expect(einsum(cpu, 'ij,jk', m, m).toNested()).toEqual([[7, 10], [15, 22]]);
  });

  it('three operands and empty dims', () => {
    const rng = new Rng(23);
    const a = randn(rng, [3, 4]);
    const b = randn(rng, [4, 5]);
    const c = randn(rng, [5, 2]);
    const want = values(matmul(cpu, matmul(cpu, a.to('f64'), b.to('f64')), c.to('f64')));
    expectClose(values(einsum(cpu, 'ij,jk,kl->il', a, b, c)), round(want, 'f32'), 1e-6, 1e-6);
    expect(einsum(cpu, 'ij,jk->ik', randn(rng, [0, 3]), randn(rng, [3, 2])).shape).toEqual([0, 2]);
    expect(values(einsum(cpu, 'ij,jk->ik', randn(rng, [2, 0]), randn(rng, [0, 2])))).toEqual([0, 0, 0, 0]);
  });

  it('explains bad equations', () => {
    const a = randn(new Rng(0), [2, 3]);
    expect(() => einsum(cpu, 'ij,jk->ik', a, randn(new Rng(0), [4, 2]))).toThrow(/subscript 'j' has size 4 in operand 1 \[4, 2\] but 3 elsewhere/);
    expect(() => einsum(cpu, 'ijk->i', a)).toThrow(/operand 0 \[2, 3\] has 2 dims but its subscripts name 3/);
    expect(() => einsum(cpu, 'ij->iz', a)).toThrow(/einsum\('ij->iz'\): output subscript 'z' appears in no input/);
    expect(() => einsum(cpu, 'ij,jk->ik', a)).toThrow(/names 2 operands but 1 were given/);
    expect(() => einsum(cpu, 'i1->i', a)).toThrow(/invalid subscript '1'/);
  });
});

describe('groupedGemm (MoE)', () => {
  const rng = new Rng(31);
  const x = randn(rng, [6, 4], 'bf16');
  const w = randn(rng, [3, 5, 4], 'bf16');
  const bias = randn(rng, [3, 5], 'bf16');
  const X = values(x);
  const W = values(w);
  const B = values(bias);
  const naive = (experts: number[], withBias: boolean): number[] => {
    const out: number[] = [];
    experts.forEach((e, t) => {
      for (let n = 0; n < 5; n++) {
        if (e < 0) out.push(0);
        else out.push(X.slice(t * 4, t * 4 + 4).reduce((s, xv, k) => s + xv * W[(e * 5 + n) * 4 + k]!, withBias ? B[e * 5 + n]! : 0));
      }
    });
    return round(out, 'bf16');
  };

  it('offsets: rows sorted by expert, an empty expert and padding rows', () => {
    const offsets = tensor([0, 2, 2, 5], [4], 'i32'); // expert 1 has no rows, row 5 is padding
    const got = groupedGemm(cpu, relayout(x, 'transposed'), relayout(w, 'stepped'), { offsets, bias });
    expect(got.shape).toEqual([6, 5]);
    expectClose(values(got), naive([0, 0, 2, 2, 2, -1], true), 0, 0);
  });

  it('expertIds: one id per row, -1 skipped', () => {
    const ids = tensor([2, 0, -1, 1, 0, 2], [6], 'i64');
    expectClose(values(groupedGemm(cpu, x, w, { expertIds: ids })), naive([2, 0, -1, 1, 0, 2], false), 0, 0);
  });

  it('hand-computed', () => {
    const r = groupedGemm(cpu, tensor([1, 2, 3, 4], [2, 2]), tensor([1, 0, 0, 1, 2, 0, 0, 2], [2, 2, 2]), { expertIds: tensor([1, 0], [2], 'i32') });
    expect(r.toNested()).toEqual([[2, 4], [3, 4]]);
  });

  it('rejects bad routing', () => {
    expect(() => groupedGemm(cpu, x, w, {})).toThrow(/exactly one of offsets/);
    expect(() => groupedGemm(cpu, x, w, { offsets: tensor([0, 3, 2, 6], [4], 'i32') })).toThrow(/non-decreasing/);
    expect(() => groupedGemm(cpu, x, w, { offsets: tensor([0, 3, 6, 7], [4], 'i32') })).toThrow(/exceeds the 6 input rows/);
    expect(() => groupedGemm(cpu, x, w, { offsets: tensor([0, 6], [2], 'i32') })).toThrow(/must be \[4\] \(E \+ 1\)/);
    expect(() => groupedGemm(cpu, x, w, { expertIds: tensor([0, 0, 0, 0, 0, 3], [6], 'i32') })).toThrow(/expertIds\[5\] = 3 is out of range for 3 experts/);
    expect(() => groupedGemm(cpu, x, randn(rng, [3, 5, 3], 'bf16'), { expertIds: tensor([0, 0, 0, 0, 0, 0], [6], 'i32') })).toThrow(/K = 3 but input \[6, 4\] has K = 4/);
  });
});
