/**
 * layer_norm_modulate (adaLN) on the float64 CPU backend: hand values, the broadcasts adaLN uses (one modulation row
 * a sample, a chunk of the modulation vector as a strided view, per-token rows, one row for all), odd widths, f32 /
 * bf16 / f16, the decomposition (what a backend without the kernel runs), and the shape errors.
 */
import { F, inferOp, roundToDType, type DType, type OpArg, type Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { LAYOUTS, Rng, cpu, expectClose, randn, relayout, tensor, values } from './test-helpers.js';

const FLOATS: DType[] = ['f32', 'bf16', 'f16'];
const tolOf = (d: DType) => (d === 'f32' ? 1e-5 : d === 'f16' ? 2e-3 : 1.6e-2);

function decomposed(inputs: OpArg[], attrs: Record<string, unknown>): Tensor {
  const info = inferOp('layer_norm_modulate', inputs, attrs);
  return info.spec.decompose!({ op: info.spec, backend: cpu, inputs, attrs: info.attrs as Record<string, unknown>, outputs: info.outputs })[0]!;
}

/** Naive float64 adaLN of x [B, S, D] with scale / shift read at (b, s, j) through `at`, rounded to `dtype`. */
function naive(X: number[], [B, S, D]: number[], sc: (b: number, s: number, j: number) => number, sh: (b: number, s: number, j: number) => number, dtype: DType, eps = 1e-6, offset = 1): number[] {
  const out: number[] = [];
  for (let b = 0; b < B!; b++) {
    for (let s = 0; s < S!; s++) {
      const row = X.slice((b * S! + s) * D!, (b * S! + s + 1) * D!);
      const m = row.reduce((a, v) => a + v, 0) / D!;
      const v = row.reduce((a, q) => a + (q - m) ** 2, 0) / D!;
      row.forEach((q, j) => out.push(roundToDType(((q - m) / Math.sqrt(v + eps)) * (offset + sc(b, s, j)) + sh(b, s, j), dtype)));
    }
  }
  return out;
}

describe('layer_norm_modulate', () => {
  it('hand values: a row normalised, then * (1 + scale) + shift', () => {
    const x = tensor([1, 2, 3, 4, 4, 4], [1, 2, 3]);
    const y = F.layerNormModulate(x, tensor([1, 0, -1], [1, 1, 3]), tensor([0, 1, 2], [1, 1, 3]), 1e-12);
    const r = 1 / Math.sqrt(2 / 3); // (x - mean) / sqrt(var) at x - mean = 1 (eps 1e-12: a constant row stays finite)
    expectClose(values(y), [-2 * r, 1, 2, 0, 1, 2], 1e-6); // a constant row normalises to 0: only the shift is left
    const z = F.layerNormModulate(x, tensor([1, 0, -1], [3]), tensor([0, 0, 0], [3]), 1e-12, 0); // scale_offset 0: x * scale
    expectClose(values(z), [-r, 0, -r, 0, 0, 0], 1e-6);
  });

  it('broadcasts (per sample, chunk views, per token, one row), odd widths, dtypes and layouts vs a naive loop and the decomposition', () => {
    const rng = new Rng(3);
    for (const dtype of FLOATS) {
      for (const [B, S, D] of [[2, 5, 32], [1, 7, 37], [3, 1, 1], [2, 4, 3072 / 16]] as const) {
        const x = randn(rng, [B, S, D], dtype, 2);
        const X = values(x);
        // one modulation row a sample, taken as diffusers does: chunks of linear(silu(temb)) [B, 6D] (strided views)
        const emb = randn(rng, [B, 6 * D], dtype);
        const E = values(emb);
        const [shift, scale] = F.chunk(emb, 6, 1) as [Tensor, Tensor];
        const want = naive(X, [B, S, D], (b, _s, j) => E[b * 6 * D + D + j]!, (b, _s, j) => E[b * 6 * D + j]!, dtype);
        const y = F.layerNormModulate(x, scale.unsqueeze(1), shift.unsqueeze(1));
        expect(y.dtype).toBe(dtype);
        expect(y.shape).toEqual([B, S, D]);
        expectClose(values(y), want, 1e-5, tolOf(dtype));
        expectClose(values(decomposed([x, scale.unsqueeze(1), shift.unsqueeze(1)], {})), want, 1e-5, tolOf(dtype));
        for (const layout of LAYOUTS) expectClose(values(F.layerNormModulate(relayout(x, layout), scale.unsqueeze(1), shift.unsqueeze(1))), want, 1e-5, tolOf(dtype));
        // per token (the full shape) and one row for every token (rank 1), f32 modulation on a 16-bit input
        const full = randn(rng, [B, S, D], 'f32');
        const one = randn(rng, [D], 'f32');
        const F_ = values(full);
        const O = values(one);
        const want2 = naive(X, [B, S, D], (b, s, j) => F_[(b * S + s) * D + j]!, (_b, _s, j) => O[j]!, dtype, 1e-5, 0.5);
        expectClose(values(F.layerNormModulate(x, full, one, 1e-5, 0.5)), want2, 1e-5, tolOf(dtype));
        expectClose(values(decomposed([x, full, one], { eps: 1e-5, scale_offset: 0.5 })), want2, 1e-5, tolOf(dtype));
      }
    }
  });

  it('shape errors name the operand', () => {
    const x = tensor(new Array(24).fill(0), [2, 3, 4]);
    expect(() => F.layerNormModulate(x, tensor([0, 0, 0], [1, 1, 3]), tensor([0, 0, 0, 0], [4]))).toThrow(/layer_norm_modulate: scale \[1, 1, 3\] must end in the input's last dim 4/);
    expect(() => F.layerNormModulate(x, tensor(new Array(12).fill(0), [3, 1, 4]), tensor([0, 0, 0, 0], [4]))).toThrow(/layer_norm_modulate: shapes do not broadcast/);
    expect(() => F.layerNormModulate(x, tensor(new Array(48).fill(0), [2, 2, 3, 4]), tensor([0, 0, 0, 0], [4]))).toThrow(/scale \[2, 2, 3, 4\] must broadcast to the input \[2, 3, 4\]/);
    expect(F.layerNormModulate(tensor([], [0, 4]), tensor([0, 0, 0, 0], [4]), tensor([0, 0, 0, 0], [4])).shape).toEqual([0, 4]);
  });
});
