/** The matmul and conv groups through the op registry on the cpu backend: routing, attrs, outputs, errors. */
import { describe, expect, it } from 'vitest';
import { callOp, F, inferOp, listOps, OpError, opRoute, supportedOps, type OpArg, type OpCall, type Tensor } from '@fastkernels/core';
import { geluTanh } from './math.js';
import { cpu, expectClose, randn, relayout, Rng, tensor, values } from './test-helpers.js';

describe('coverage', () => {
  it('every op of the matmul, conv, attention, quant and recurrent groups runs on the cpu backend', () => {
    const runnable = new Map(supportedOps(cpu).map((s) => [s.name, s.via]));
    for (const group of ['matmul', 'conv', 'attention', 'quant', 'recurrent'] as const) {
      const ops = listOps(group);
      expect(ops.length).toBeGreaterThan(0);
      // chunk_* (but chunk_gla) and conv2d_act (conv2d then the activation) run as their decompositions here
      const viaDecomposition = (name: string) => (name.startsWith('chunk_') && name !== 'chunk_gla') || name === 'conv2d_act';
      for (const op of ops) expect([op.name, runnable.get(op.name)]).toEqual([op.name, viaDecomposition(op.name) ? 'decomposition' : 'kernel']);
    }
  });
});

describe('matmul group via the registry', () => {
  it('every op runs as a cpu kernel', () => {
    const names = supportedOps(cpu).filter((s) => s.group === 'matmul' || s.group === 'conv');
    for (const n of ['matmul', 'bmm', 'baddbmm', 'linear', 'einsum', 'grouped_gemm', 'conv2d', 'conv_transpose3d', 'max_pool2d_with_indices', 'adaptive_avg_pool1d']) {
      expect(names.find((s) => s.name === n)?.via).toBe('kernel');
    }
    expect(opRoute('matmul', [tensor([1, 2], [2]), tensor([3, 4], [2])])).toEqual({ via: 'kernel' });
  });

  it('F front ends give the hand-computed results', () => {
    expect(values(F.matmul(tensor([1, 2, 3], [3]), tensor([4, 5, 6], [3])))).toEqual([32]);
    const a = tensor([1, 2, 3, 4], [1, 2, 2]);
    expect(F.bmm(a, a).toNested()).toEqual([[[7, 10], [15, 22]]]);
    expect(values(F.baddbmm(tensor([1], [1]), a, a, { beta: 2, alpha: -1 }))).toEqual([-5, -8, -13, -20]);
    expect(F.linear(tensor([1, -2], [1, 2]), tensor([1, 0, 0, 1], [2, 2]), tensor([0.5, 0.5], [2]), { activation: 'relu' }).toNested()).toEqual([[1.5, 0]]);
    // silu(1 * 1 + 2 * 0) * (1 * 0 + 2 * 1) = silu(1) * 2
    expect(values(F.linearSiluAndMul(tensor([1, 2], [1, 2], 'f64'), tensor([1, 0, 0, 1], [2, 2], 'f64')))[0]).toBeCloseTo(2 / (1 + Math.exp(-1)), 12);
    expect(() => F.linearSiluAndMul(tensor([1, 2], [1, 2]), tensor([1, 0, 0, 1, 1, 1], [3, 2]))).toThrow(/linear_silu_and_mul: weight must be \[2d, in_features\]/);
    expect(F.einsum('ij->ji', tensor([1, 2, 3, 4, 5, 6], [2, 3])).toNested()).toEqual([[1, 4], [2, 5], [3, 6]]);
    const g = F.groupedGemm(tensor([1, 2, 3, 4], [2, 2]), tensor([1, 0, 0, 1, 2, 0, 0, 2], [2, 2, 2]), { offsets: tensor([0, 1, 2], [3], 'i32') });
    expect(g.toNested()).toEqual([[1, 2], [6, 8]]);
  });

  it('linear gelu_tanh epilogue rounds once (bf16)', () => {
    const rng = new Rng(1);
    const x = randn(rng, [3, 8], 'bf16');
    const w = randn(rng, [4, 8], 'bf16');
    const X = values(x);
    const W = values(w);
    const want: number[] = [];
    for (let r = 0; r < 3; r++) for (let n = 0; n < 4; n++) want.push(geluTanh(X.slice(r * 8, r * 8 + 8).reduce((s, v, k) => s + v * W[n * 8 + k]!, 0)));
    const y = F.linear(relayout(x, 'transposed'), w, null, { activation: 'gelu_tanh' });
    expectClose(values(y), values(tensor(want, [3, 4], 'bf16')), 0, 0);
  });

  it('shape errors are OpErrors naming the op, the argument and the shapes', () => {
    const err = (f: () => unknown) => {
      try {
        f();
      } catch (e) {
        expect(e).toBeInstanceOf(OpError);
        return (e as Error).message;
      }
      throw new Error('no error');
    };
    expect(err(() => F.matmul(randn(new Rng(0), [2, 3]), randn(new Rng(0), [4, 5])))).toMatch(/^matmul: input \[2, 3\] and other \[4, 5\] cannot be multiplied/);
    expect(err(() => F.matmul(randn(new Rng(0), [2, 3], 'bf16'), randn(new Rng(0), [3, 5])))).toMatch(/matmul: input is bf16 but other is f32/);
    expect(err(() => F.linear(randn(new Rng(0), [2, 3]), randn(new Rng(0), [4, 3]), null, { activation: 'tanh' as never }))).toMatch(/linear: bad arguments: activation/);
    expect(err(() => F.einsum('ij,jk->ik', randn(new Rng(0), [2, 3]), randn(new Rng(0), [4, 2])))).toMatch(/subscript 'j' has size 4 in operand 1/);
    expect(err(() => F.groupedGemm(randn(new Rng(0), [2, 3]), randn(new Rng(0), [2, 4, 3]), {}))).toMatch(/grouped_gemm: give exactly one of offsets/);
    expect(err(() => F.bmm(randn(new Rng(0), [2, 3, 4]), randn(new Rng(0), [2, 5, 4])))).toMatch(/bmm: mat2 \[2, 5, 4\] must be \[2, 4, p\]/);
    expect(err(() => F.baddbmm(randn(new Rng(0), [3, 3]), randn(new Rng(0), [2, 3, 4]), randn(new Rng(0), [2, 4, 5])))).toMatch(/baddbmm:/);
  });
});

/** Run an op's decomposition directly (what a backend without the kernel gets). */
function viaDecomposition(name: string, inputs: OpArg[], attrs: Record<string, unknown> = {}): Tensor[] {
  const { spec, attrs: parsed, outputs } = inferOp(name, inputs, attrs);
  const call: OpCall = { op: spec, backend: cpu, inputs, attrs: parsed as Record<string, unknown>, outputs };
  return spec.decompose!(call) as Tensor[];
}

describe('matmul group decompositions (backends without the kernel)', () => {
  it('match the kernels', () => {
    const rng = new Rng(5);
    const same = (name: string, inputs: OpArg[], attrs: Record<string, unknown> = {}, tol = 1e-6) => {
      const [want] = callOp(name, inputs, attrs);
      const [got] = viaDecomposition(name, inputs, attrs);
      expect(got!.shape).toEqual(want!.shape);
      expect(got!.dtype).toBe(want!.dtype);
      expectClose(values(got!), values(want!), tol, tol);
    };
    same('matmul', [randn(rng, [4]), randn(rng, [4])]);
    same('matmul', [randn(rng, [4]), randn(rng, [2, 4, 3])]);
    same('matmul', [randn(rng, [2, 3, 4]), randn(rng, [4])]);
    same('baddbmm', [randn(rng, [1, 5]), randn(rng, [2, 3, 4]), randn(rng, [2, 4, 5])], { beta: 0.5, alpha: 2 });
    same('baddbmm', [tensor([NaN], [1]), randn(rng, [2, 3, 4]), randn(rng, [2, 4, 5])], { beta: 0, alpha: -1 });
    same('linear', [randn(rng, [3, 8]), randn(rng, [5, 8]), randn(rng, [5])], { activation: 'silu' });
    same('linear_silu_and_mul', [randn(rng, [2, 3, 8]), randn(rng, [6, 8]), randn(rng, [6])]);
    same('matmul', [randn(rng, [3, 8]), randn(rng, [8, 2])]);
    const x = randn(rng, [7, 4]);
    const w = randn(rng, [3, 5, 4]);
    const b = randn(rng, [3, 5]);
    same('grouped_gemm', [x, w, tensor([0, 2, 2, 6], [4], 'i32'), null, b]);
    same('grouped_gemm', [x, w, null, tensor([2, 2, -1, 0, 1, 1, 0], [7], 'i64'), null]);
    expect(() => viaDecomposition('grouped_gemm', [x, w, tensor([0, 3, 2, 6], [4], 'i32'), null, null])).toThrow(/offsets must be non-decreasing/);
  });
});

describe('conv group via the registry', () => {
  it('conv2d / conv_transpose2d / pools through F', () => {
    const x = tensor([1, 2, 3, 4, 5, 6, 7, 8, 9], [1, 1, 3, 3]);
    expect(F.conv2d(x, tensor([1, 0, 0, -1], [1, 1, 2, 2])).toNested()).toEqual([[[[-4, -4], [-4, -4]]]]);
    expect(F.conv2d(x, tensor([1], [1, 1, 1, 1]), null, { padding: 'same' }).shape).toEqual([1, 1, 3, 3]);
    expect(values(F.convTranspose1d(tensor([1, 2], [1, 1, 2]), tensor([1, 10, 100], [1, 1, 3]), null, { stride: 2 }))).toEqual([1, 10, 102, 20, 200]);
    expect(values(F.maxPool2d(x, 2, { stride: 1 }))).toEqual([5, 6, 8, 9]);
    const [m, i] = F.maxPool2dWithIndices(x, 2, { stride: 1 });
    expect(values(m)).toEqual([5, 6, 8, 9]);
    expect(values(i)).toEqual([4, 5, 7, 8]);
    expect(values(F.avgPool2d(x, 2, { padding: 1, count_include_pad: false }))).toEqual([1, 2.5, 5.5, 7]);
    expect(values(F.adaptiveAvgPool2d(x, 1))).toEqual([5]);
    expect(values(F.adaptiveMaxPool1d(tensor([3, 1, 4, 1, 5], [1, 5]), 2))).toEqual([4, 5]);
    const [am, ai] = F.adaptiveMaxPool1dWithIndices(tensor([3, 1, 4, 1, 5], [1, 5]), 2);
    expect([values(am), values(ai)]).toEqual([[4, 5], [2, 4]]);
  });

  it('the spec and the kernel agree on output shapes over many configurations (callOp checks them)', () => {
    const rng = new Rng(2);
    for (const [pad, stride, dil, groups] of [[0, 1, 1, 1], [2, 3, 1, 2], ['same', 1, 2, 4], ['valid', 2, 1, 1], [[1, 0], [1, 2], [2, 1], 1]] as const) {
      const y = F.conv2d(randn(rng, [2, 4, 9, 8]), randn(rng, [4, 4 / groups, 3, 2]), randn(rng, [4]), { padding: pad as never, stride: stride as never, dilation: dil as never, groups });
      expect(y.shape.length).toBe(4);
    }
    for (const ceil of [false, true]) for (const k of [2, 3]) expect(F.avgPool3d(randn(rng, [1, 2, 5, 6, 7]), k, { stride: 2, padding: 1, ceil_mode: ceil }).rank).toBe(5);
    expect(F.conv1d(randn(rng, [3, 10]), randn(rng, [5, 3, 4])).shape).toEqual([5, 7]);
    expect(F.convTranspose2d(randn(rng, [1, 2, 3, 3]), randn(rng, [2, 3, 3, 3]), null, { stride: 2, output_padding: 1 }).shape).toEqual([1, 3, 8, 8]);
  });

  it('errors through the registry', () => {
    expect(() => F.conv2d(randn(new Rng(0), [1, 4, 5, 5]), randn(new Rng(0), [2, 3, 3, 3]))).toThrow(/conv2d: given groups=1, weight \[2, 3, 3, 3\] expects input \[1, 4, 5, 5\] to have 3 channels, but it has 4/);
    expect(() => F.maxPool2d(randn(new Rng(0), [1, 1, 4, 4]), 2, { padding: 2 })).toThrow(/max_pool2d: padding \[2,2\] should be at most half/);
    expect(() => F.avgPool1d(randn(new Rng(0), [1, 4]), 2, { divisor_override: 2 })).toThrow(/avg_pool1d: has no divisor_override/);
    expect(() => F.conv2d(randn(new Rng(0), [1, 4, 5, 5], 'bf16'), randn(new Rng(0), [2, 4, 3, 3]))).toThrow(/conv2d: input is bf16 but weight is f32/);
    expect(() => callOp('conv2d', [randn(new Rng(0), [1, 4, 5, 5]), randn(new Rng(0), [2, 4, 3, 3]), null], { stride: 1, paddin: 1 })).toThrow(/conv2d: bad arguments/);
  });
});
