/**
 * add_layer_norm (the post-LN residual: layer_norm(input + residual)) on the float64 CPU backend: hand values, odd
 * widths, weight / bias broadcast over the rows of two trailing dims, strided layouts, bf16 / f16 (the sum rounded to the
 * dtype first, as the unfused add stores it), the decomposition, and the errors.
 */
import { F, inferOp, roundToDType, type DType, type OpArg, type Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { LAYOUTS, Rng, cpu, expectClose, randn, relayout, tensor, values } from './test-helpers.js';

const FLOATS: DType[] = ['f32', 'bf16', 'f16'];
const tolOf = (d: DType) => (d === 'f32' ? 1e-5 : d === 'f16' ? 2e-3 : 1.6e-2);

function decomposed(inputs: OpArg[], attrs: Record<string, unknown>): Tensor {
  const info = inferOp('add_layer_norm', inputs, attrs);
  return info.spec.decompose!({ op: info.spec, backend: cpu, inputs, attrs: info.attrs as Record<string, unknown>, outputs: info.outputs })[0]!;
}

/** The naive loop: rows of K, the sum rounded to the dtype, biased variance. */
function naive(X: number[], R: number[], W: number[] | null, B: number[] | null, K: number, eps: number, dtype: DType): number[] {
  const S = X.map((v, i) => roundToDType(v + R[i]!, dtype));
  const out: number[] = [];
  for (let base = 0; base < S.length; base += K) {
    const row = S.slice(base, base + K);
    const m = row.reduce((s, v) => s + v, 0) / K;
    const v = row.reduce((s, q) => s + (q - m) ** 2, 0) / K;
    row.forEach((q, k) => out.push(roundToDType(((q - m) / Math.sqrt(v + eps)) * (W ? W[k]! : 1) + (B ? B[k]! : 0), dtype)));
  }
  return out;
}

describe('add_layer_norm', () => {
  it('hand values: the sum normalised, with weight and bias', () => {
    const x = tensor([0, 1, 2, 4, 4, 4], [2, 3]);
    const r = tensor([1, 1, 1, 0, 0, 0], [2, 3]);
    const y = F.addLayerNorm(x, r, [3], tensor([1, 2, 1], [3]), tensor([0, 0, 1], [3]));
    const s = 1 / Math.sqrt(2 / 3 + 1e-5); // row 0: 1, 2, 3 -> (x - 2) / sqrt(2/3 + eps)
    expectClose(values(y), [-s, 0, 1 + s, 0, 0, 1], 1e-6);
  });

  it('odd widths, two trailing dims, layouts and dtypes vs the naive loop, add + layer_norm and the decomposition', () => {
    const rng = new Rng(7);
    for (const dtype of FLOATS) {
      for (const [shape, ns] of [[[5, 7], [7]], [[3, 13], [13]], [[2, 3, 4, 5], [4, 5]], [[1, 1], [1]]] as [number[], number[]][]) {
        const x = randn(rng, shape, dtype, 2);
        const r = randn(rng, shape, dtype, 2);
        const w = randn(rng, ns, 'f32');
        const b = randn(rng, ns, 'f32');
        const K = ns.reduce((p, d) => p * d, 1);
        const want = naive(values(x), values(r), values(w), values(b), K, 1e-5, dtype);
        for (const layout of LAYOUTS) {
          const y = F.addLayerNorm(relayout(x, layout), relayout(r, layout), ns, w, b);
          expect(y.dtype).toBe(dtype);
          expect(y.shape).toEqual(shape);
          expectClose(values(y), want, 1e-12, 1e-12);
        }
        // the float64 kernel is bit-equal to its unfused composition (the sum stored in the dtype, then layer_norm)
        const sum = F.add(x, r);
        expect(values(F.addLayerNorm(x, r, ns, w, b))).toEqual(values(F.layerNorm(sum, ns, w, b)));
        expectClose(values(decomposed([x, r, w, b], { normalized_shape: ns })), want, 1e-5, tolOf(dtype));
        // no affine
        expectClose(values(F.addLayerNorm(x, r, ns, null, null, 1e-6)), naive(values(x), values(r), null, null, K, 1e-6, dtype), 1e-12, 1e-12);
      }
    }
  });

  it('bf16: rounding the sum first matters and is kept', () => {
    // 256 + 1 is not a bf16 value (ulp 2 at 256): the sum stores 256, so the row normalises as [256, 0]
    const x = tensor([256, 0], [1, 2], 'bf16');
    const r = tensor([1, 0], [1, 2], 'bf16');
    const y = F.addLayerNorm(x, r, [2], null, null, 0);
    expect(values(y)).toEqual([1, -1]);
  });

  it('empty rows and errors', () => {
    expect(F.addLayerNorm(tensor([], [0, 4]), tensor([], [0, 4]), [4]).shape).toEqual([0, 4]);
    const x = tensor([1, 2, 3, 4, 5, 6], [2, 3]);
    expect(() => F.addLayerNorm(x, tensor([1, 2, 3], [1, 3]), [3])).toThrow(/add_layer_norm: residual \[1, 3\] must have the input's shape \[2, 3\]/);
    expect(() => F.addLayerNorm(x, tensor([1, 2, 3, 4, 5, 6], [2, 3], 'bf16'), [3])).toThrow(/add_layer_norm: residual dtype bf16 must equal the input dtype f32/);
    expect(() => F.addLayerNorm(x, x, [2])).toThrow(/add_layer_norm: normalized_shape \[2\] must be a non-empty suffix/);
    expect(() => F.addLayerNorm(x, x, [3], tensor([1, 2], [2]))).toThrow(/add_layer_norm: weight \[2\] must have shape \[3\]/);
  });
});
