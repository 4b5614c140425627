import { F, finfoEps, inferOp, roundToDType, type DType, type OpArg, type Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { LAYOUTS, Rng, cpu, expectClose, randn, relayout, tensor, values } from './test-helpers.js';

const FLOATS: DType[] = ['f32', 'bf16', 'f16'];
const tolOf = (d: DType) => (d === 'f32' ? 1e-5 : d === 'f16' ? 2e-3 : 1.6e-2);
const sig = (v: number) => 1 / (1 + Math.exp(-v));

/** The op's decomposition (what a backend without the kernel runs), on the cpu. */
function decomposed(name: string, inputs: OpArg[], attrs: Record<string, unknown>): Tensor[] {
  const info = inferOp(name, inputs, attrs);
  return [...info.spec.decompose!({ op: info.spec, backend: cpu, inputs, attrs: info.attrs as Record<string, unknown>, outputs: info.outputs })];
}

describe('layer_norm', () => {
  it('hand values with weight and bias', () => {
    const x = tensor([1, 2, 3, 4, 4, 4], [2, 3]);
    const y = F.layerNorm(x, [3], tensor([1, 2, 1], [3]), tensor([0, 0, 1], [3]));
    const r = 1 / Math.sqrt(2 / 3 + 1e-5); // (x - mean) / sqrt(var + eps) at x - mean = 1, var = 2/3
    expectClose(values(y), [-r, 0, 1 + r, 0, 0, 1], 1e-6); // a constant row normalises to 0 (+ bias)
    expect(() => F.layerNorm(x, [2])).toThrow(/layer_norm: normalized_shape \[2\] must be a non-empty suffix of the input shape \[2, 3\]/);
    expect(() => F.layerNorm(x, [3], tensor([1, 2], [2]))).toThrow(/layer_norm: weight \[2\] must have shape \[3\]/);
  });

  it('random over two trailing dims, layouts and dtypes vs a naive loop and the decomposition', () => {
    const rng = new Rng(1);
    for (const dtype of FLOATS) {
      const base = randn(rng, [3, 4, 5], dtype, 2);
      const w = randn(rng, [4, 5], 'f32');
      const b = randn(rng, [4, 5], 'f32');
      const X = values(base);
      const W = values(w);
      const B = values(b);
      const want: number[] = [];
      for (let r = 0; r < 3; r++) {
        const row = X.slice(r * 20, r * 20 + 20);
        const m = row.reduce((s, v) => s + v, 0) / 20;
        const v = row.reduce((s, q) => s + (q - m) ** 2, 0) / 20;
        row.forEach((q, k) => want.push(roundToDType(((q - m) / Math.sqrt(v + 1e-5)) * W[k]! + B[k]!, dtype)));
      }
      for (const layout of LAYOUTS) {
        const y = F.layerNorm(relayout(base, layout), [4, 5], w, b);
        expect(y.dtype).toBe(dtype);
        expectClose(values(y), want, 1e-5, tolOf(dtype));
      }
      expectClose(values(decomposed('layer_norm', [base, w, b], { normalized_shape: [4, 5] })[0]!), want, 1e-5, tolOf(dtype));
    }
  });

  it('empty rows', () => {
    expect(F.layerNorm(tensor([], [0, 4]), [4]).shape).toEqual([0, 4]);
  });
});

describe('group_norm / batch_norm', () => {
  it('group_norm hand values: 2 groups of 2 channels x 2 positions', () => {
    const x = tensor([1, 2, 3, 4, 10, 10, 10, 14], [1, 4, 2]);
    const y = F.groupNorm(x, 2, tensor([1, 1, 1, 2], [4]), tensor([0, 0, 0, 1], [4]), 0);
    const r = Math.sqrt(1.25);
    expectClose(values(y), [-1.5 / r, -0.5 / r, 0.5 / r, 1.5 / r, -1 / Math.sqrt(3), -1 / Math.sqrt(3), 1 - 2 / Math.sqrt(3), 1 + 6 / Math.sqrt(3)], 1e-6);
    expect(() => F.groupNorm(x, 3)).toThrow(/group_norm: channels 4 of input \[1, 4, 2\] are not divisible by num_groups 3/);
  });

  it('group_norm random [2, 6, 3, 3], layouts, dtypes vs a naive loop and the decomposition', () => {
    const rng = new Rng(2);
    for (const dtype of FLOATS) {
      const base = randn(rng, [2, 6, 3, 3], dtype);
      const w = randn(rng, [6], dtype);
      const b = randn(rng, [6], dtype);
      const X = values(base);
      const W = values(w);
      const B = values(b);
      const want = new Array<number>(X.length);
      for (let n = 0; n < 2; n++) for (let g = 0; g < 3; g++) {
        const idx = Array.from({ length: 18 }, (_, k) => n * 54 + g * 18 + k);
        const m = idx.reduce((s, i) => s + X[i]!, 0) / 18;
        const v = idx.reduce((s, i) => s + (X[i]! - m) ** 2, 0) / 18;
        for (const i of idx) {
          const c = Math.floor((i % 54) / 9);
          want[i] = roundToDType(((X[i]! - m) / Math.sqrt(v + 1e-5)) * W[c]! + B[c]!, dtype);
        }
      }
      for (const layout of LAYOUTS) expectClose(values(F.groupNorm(relayout(base, layout), 3, w, b)), want, 1e-5, tolOf(dtype));
      expectClose(values(decomposed('group_norm', [base, w, b], { num_groups: 3 })[0]!), want, 1e-5, tolOf(dtype));
    }
  });

  it('batch_norm (inference) hand values, random vs decomposition, training refused', () => {
    const x = tensor([1, 2, 3, 4], [1, 2, 2]);
    const y = F.batchNorm(x, tensor([1, 2], [2]), tensor([4, 1], [2]), tensor([2, 1], [2]), tensor([0, 1], [2]), false, 0.1, 0);
    expectClose(values(y), [0, 1, 2, 3]);
    expect(() => F.batchNorm(x, tensor([1, 2], [2]), tensor([4, 1], [2]), null, null, true)).toThrow(/batch_norm: training=True is not supported/);
    expect(() => F.batchNorm(x, tensor([1], [1]), tensor([4, 1], [2]))).toThrow(/batch_norm: running_mean \[1\] must have shape \[2\]/);
    const rng = new Rng(3);
    const r = randn(rng, [3, 4, 5], 'bf16');
    const rm = randn(rng, [4], 'f32');
    const rv = tensor([0.5, 1, 2, 3], [4]);
    const k = F.batchNorm(relayout(r, 'transposed'), rm, rv, null, null);
    expectClose(values(k), values(decomposed('batch_norm', [r, rm, rv, null, null], {})[0]!), 1e-6, 1.6e-2);
  });
});

describe('rms_norm', () => {
  it('hand values: plain, Gemma offset, default eps', () => {
    const x = tensor([3, 4], [1, 2]);
    const rms = Math.sqrt(12.5);
    expectClose(values(F.rmsNorm(x, null, tensor([1, 2], [2]), 0)), [3 / rms, 8 / rms], 1e-7);
    expectClose(values(F.rmsNorm(x, [2], tensor([0, 1], [2]), 0, { weight_offset: 1 })), [3 / rms, 8 / rms], 1e-7);
    expectClose(values(F.rmsNorm(x)), [3 / Math.sqrt(12.5 + finfoEps('f32')), 4 / Math.sqrt(12.5 + finfoEps('f32'))], 1e-7);
    expect(finfoEps('bf16')).toBe(0.0078125);
  });

  it('gated forms and group_size vs a naive loop, every dtype, layouts, and the decomposition', () => {
    const rng = new Rng(4);
    for (const dtype of FLOATS) {
      const xb = randn(rng, [3, 8], dtype);
      const zb = randn(rng, [3, 8], dtype);
      const w = randn(rng, [8], dtype);
      const X = values(xb);
      const Z = values(zb);
      const W = values(w);
      for (const normBeforeGate of [true, false]) {
        for (const group of [null, 4]) {
          for (const activation of ['silu', 'sigmoid'] as const) {
            const act = (v: number) => (activation === 'silu' ? v * sig(v) : sig(v));
            const G = group ?? 8;
            const want: number[] = [];
            for (let r = 0; r < 3; r++) for (let g0 = 0; g0 < 8; g0 += G) {
              const xs = Array.from({ length: G }, (_, k) => X[r * 8 + g0 + k]! * (normBeforeGate ? 1 : act(Z[r * 8 + g0 + k]!)));
              const inv = 1 / Math.sqrt(xs.reduce((s, v) => s + v * v, 0) / G + 1e-6);
              xs.forEach((v, k) => want.push(roundToDType(v * inv * W[g0 + k]! * (normBeforeGate ? act(Z[r * 8 + g0 + k]!) : 1), dtype)));
            }
            const opts = { norm_before_gate: normBeforeGate, group_size: group, activation };
            for (const layout of LAYOUTS) {
              const y = F.rmsNorm(relayout(xb, layout), null, w, 1e-6, { z: relayout(zb, layout), ...opts });
              expectClose(values(y), want, 1e-5, tolOf(dtype));
            }
            expectClose(values(decomposed('rms_norm', [xb, w, zb], { eps: 1e-6, ...opts })[0]!), want, 1e-5, tolOf(dtype));
          }
        }
      }
    }
  });

  it('shape errors', () => {
    const x = tensor([1, 2, 3, 4, 5, 6], [2, 3]);
    expect(() => F.rmsNorm(x, null, tensor([1, 1], [2]))).toThrow(/rms_norm: weight \[2\] must have shape \[3\]/);
    expect(() => F.rmsNorm(x, null, null, null, { z: tensor([1, 2, 3], [3]) })).toThrow(/rms_norm: gate z \[3\] must have the input's shape \[2, 3\]/);
    expect(() => F.rmsNorm(x, null, null, null, { group_size: 2 })).toThrow(/rms_norm: group_size 2 does not divide the last dim 3/);
    expect(() => F.rmsNorm(tensor([1], [1], 'i32'))).toThrow(/rms_norm: input has dtype i32; expected float dtypes/);
  });

  it('the plain form equals the Llama Ops.rmsNorm (its viaOps route)', () => {
    const rng = new Rng(5);
    const x = randn(rng, [4, 16], 'bf16');
    const w = randn(rng, [16], 'bf16');
    expect(values(F.rmsNorm(x, null, w, 1e-6))).toEqual(values(cpu.ops.rmsNorm(x, w, 1e-6)));
  });
});

describe('fused_add_rms_norm', () => {
  it('equals Ops.fusedAddRmsNorm and its decomposition; with the Gemma offset', () => {
    const rng = new Rng(6);
    for (const dtype of FLOATS) {
      const x = randn(rng, [3, 8], dtype);
      const r = randn(rng, [3, 8], dtype);
      const w = randn(rng, [8], dtype);
      const [y, res] = F.fusedAddRmsNorm(relayout(x, 'stepped'), r, w, 1e-6);
      const [ly, lres] = cpu.ops.fusedAddRmsNorm(x, r, w, 1e-6);
      expect(values(y)).toEqual(values(ly));
      expect(values(res)).toEqual(values(lres));
      const [dy, dres] = decomposed('fused_add_rms_norm', [x, r, w], { eps: 1e-6 });
      expect(values(dres!)).toEqual(values(lres));
      expectClose(values(dy!), values(ly), 1e-5, tolOf(dtype));
      const [gy] = F.fusedAddRmsNorm(x, r, w, 1e-6, 1);
      const w1 = tensor(values(w).map((v) => v + 1), [8], 'f64');
      expectClose(values(gy), values(F.rmsNorm(res, null, w1, 1e-6)).map((v) => roundToDType(v, dtype)), 1e-5, tolOf(dtype));
    }
    expect(() => F.fusedAddRmsNorm(tensor([1, 2], [2]), tensor([1, 2], [2], 'bf16'), tensor([1, 1], [2]))).toThrow(/fused_add_rms_norm: residual dtype bf16 must equal the input dtype f32/);
  });
});

describe('normalize / l2_norm', () => {
  it('hand values; p = 1; eps clamps a zero vector', () => {
    const x = tensor([3, 4, 0, 0], [2, 2]);
    expectClose(values(F.normalize(x)), [0.6, 0.8, 0, 0]); // dim 1; the zero row stays 0 (eps)
    expectClose(values(F.normalize(x, { dim: 0 })), [1, 1, 0, 0]);
    expectClose(values(F.normalize(x, { p: 1, dim: -1 })), [3 / 7, 4 / 7, 0, 0]);
    expectClose(values(F.l2Norm(tensor([3, 4], [2]), 0)), [0.6, 0.8]);
    expectClose(values(F.l2Norm(tensor([0, 0], [2]))), [0, 0]);
  });

  it('random, layouts, dtypes vs a naive loop and the decompositions', () => {
    const rng = new Rng(7);
    for (const dtype of FLOATS) {
      const base = randn(rng, [3, 5, 2], dtype);
      const X = values(base);
      const want: number[] = new Array(30);
      const wantL2: number[] = new Array(30);
      for (let i = 0; i < 3; i++) for (let k = 0; k < 2; k++) {
        let s = 0;
        for (let j = 0; j < 5; j++) s += X[i * 10 + j * 2 + k]! ** 2;
        for (let j = 0; j < 5; j++) want[i * 10 + j * 2 + k] = roundToDType(X[i * 10 + j * 2 + k]! / Math.max(Math.sqrt(s), 1e-12), dtype);
      }
      for (let r = 0; r < 15; r++) {
        const s = X[2 * r]! ** 2 + X[2 * r + 1]! ** 2;
        for (const k of [0, 1]) wantL2[2 * r + k] = roundToDType(X[2 * r + k]! / Math.sqrt(s + 1e-6), dtype);
      }
      for (const layout of LAYOUTS) {
        expectClose(values(F.normalize(relayout(base, layout))), want, 1e-5, tolOf(dtype));
        expectClose(values(F.l2Norm(relayout(base, layout))), wantL2, 1e-5, tolOf(dtype));
      }
      expectClose(values(decomposed('normalize', [base], {})[0]!), want, 1e-5, tolOf(dtype));
      expectClose(values(decomposed('normalize', [base], { p: 3 })[0]!), values(F.normalize(base, { p: 3 })), 1e-5, tolOf(dtype));
      expectClose(values(decomposed('l2_norm', [base], {})[0]!), wantL2, 1e-5, tolOf(dtype));
    }
  });
});
