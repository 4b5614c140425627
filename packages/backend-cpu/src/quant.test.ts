import { describe, expect, it } from 'vitest';
import { FP8_E4M3_MAX, roundToDType } from '@fastkernels/core';
import { fp8Dequant, mxfp4Dequant, mxfp4Linear, perTokenGroupQuantFp8, scaledFp8Quant, scaledMm } from './ops/quant.js';
import { cpu, expectClose, randn, relayout, Rng, tensor, values } from './test-helpers.js';

const e4m3 = (x: number) => roundToDType(Math.min(Math.max(x, -448), 448), 'fp8e4m3');

describe('fp8 e4m3 per-tensor quantise / dequantise', () => {
  it('static scale: hand-computed rounding and saturation', () => {
    const x = tensor([1, -2, 500, 0.3, 1000, -1000], [6]);
    const [q, s] = scaledFp8Quant(cpu, x, { scale: tensor([2], [1]) });
    expect(q.dtype).toBe('fp8e4m3');
    // 250 rounds to 256 (step 16 in [128, 256)), 0.15 to 0.15625 (step 1/64 in [1/8, 1/4)); +-500 saturate to 448
    expect(values(q)).toEqual([0.5, -1, 256, 0.15625, 448, -448]);
    expect(values(s)).toEqual([2]);
  });

  it('dynamic scale = amax / 448, ties to even', () => {
    const [q, s] = scaledFp8Quant(cpu, tensor([50 / 128, -3.5], [2], 'f64'));
    const scale = 3.5 / 448; // 2^-7, exact
    expect(values(s)).toEqual([scale]);
    // x / scale = 50 lies halfway between 48 and 52: even mantissa (48)
    expect(values(q)).toEqual([e4m3(50 / 128 / scale), -448]);
    expect(values(q)[0]).toBe(48);
    // all zeros: the floored scale keeps q finite
    const [qz, sz] = scaledFp8Quant(cpu, tensor([0, 0], [2]));
    expect(values(qz)).toEqual([0, 0]);
    expect(values(sz)[0]).toBeGreaterThan(0);
  });

  it('random bf16 input, non-contiguous: q = e4m3(x / s), dequant within fp8 precision', () => {
    const rng = new Rng(1);
    const x = randn(rng, [5, 7], 'bf16', 3);
    const X = values(x);
    const [q, s] = scaledFp8Quant(cpu, relayout(x, 'transposed'));
    const scale = values(s)[0]!;
    expect(scale).toBe(Math.fround(Math.max(...X.map(Math.abs)) / FP8_E4M3_MAX));
    expect(values(q)).toEqual(X.map((v) => e4m3(v / scale)));
    const back = fp8Dequant(cpu, q, s, { output_dtype: 'f32' });
    expect(back.dtype).toBe('f32');
    expectClose(values(back), X, 1e-3 * scale, 2 ** -4);
    expect(fp8Dequant(cpu, q, s).dtype).toBe('bf16');
  });

  it('dequant with a per-row (broadcast) scale; errors', () => {
    const q = tensor([1, 2, 3, 4], [2, 2], 'fp8e4m3');
    expect(values(fp8Dequant(cpu, q, tensor([10, 100], [2, 1]), { output_dtype: 'f32' }))).toEqual([10, 20, 300, 400]);
    expect(() => fp8Dequant(cpu, q, tensor([1, 2, 3], [3]))).toThrow(/fp8_dequant: scale \[3\] does not broadcast to input \[2, 2\]/);
    expect(() => scaledFp8Quant(cpu, tensor([1], [1]), { scale: tensor([1, 2], [2]) })).toThrow(/scale must hold one element/);
    expect(() => scaledFp8Quant(cpu, tensor([1], [1]), { scale: tensor([0], [1]) })).toThrow(/static scale must be positive/);
  });
});

describe('per_token_group_quant_fp8', () => {
  it('hand-computed groups of 2', () => {
    const [q, s] = scaledGroup([448, -224, 0, 0, 1, 3], [1, 6], 2);
    expect(s.shape).toEqual([1, 3]);
    expect(values(s)).toEqual([1, Math.fround(1e-10 / 448), Math.fround(3 / 448)]);
    expect(values(q).slice(0, 4)).toEqual([448, -224, 0, 0]);
    expect(values(q).slice(4)).toEqual([e4m3(1 / Math.fround(3 / 448)), 448]);
  });

  it('random input against an independent loop, incl. ue8m0 scales and a leading batch', () => {
    const rng = new Rng(2);
    const x = randn(rng, [2, 3, 16], 'bf16', 5);
    const X = values(x);
    for (const ue8m0 of [false, true]) {
      const [q, s] = perTokenGroupQuantFp8(cpu, relayout(x, 'stepped'), 8, { scale_ue8m0: ue8m0 });
      expect(s.shape).toEqual([2, 3, 2]);
      const S = values(s);
      const Q = values(q);
      for (let g = 0; g < 12; g++) {
        const grp = X.slice(g * 8, g * 8 + 8);
        const raw = Math.fround(Math.max(...grp.map(Math.abs), 1e-10) / 448);
        const want = ue8m0 ? 2 ** Math.ceil(Math.log2(raw)) : raw;
        expect(S[g]).toBe(want);
        expect(Q.slice(g * 8, g * 8 + 8)).toEqual(grp.map((v) => e4m3(v / want)));
      }
    }
    expect(() => perTokenGroupQuantFp8(cpu, x, 5)).toThrow(/last dim of x \[2, 3, 16\] must be divisible by group_size 5/);
  });
});

function scaledGroup(data: number[], shape: number[], g: number) {
  return perTokenGroupQuantFp8(cpu, tensor(data, shape, 'f32'), g);
}

describe('scaled_mm (fp8 GEMM)', () => {
  it('hand-computed per-tensor', () => {
    const a = tensor([1, 2, 3, 4], [2, 2], 'fp8e4m3');
    const b = tensor([1, 0, 0, 1], [2, 2], 'fp8e4m3');
    const y = scaledMm(cpu, a, b, tensor([0.5], [1]), tensor([4], [1]));
    expect(y.dtype).toBe('bf16');
    expect(y.toNested()).toEqual([[2, 4], [6, 8]]);
  });

  it('per-row / per-column scales, column-major b, bias, against a naive loop', () => {
    const rng = new Rng(3);
    const [M, K, N] = [5, 16, 6];
    const [a] = scaledFp8Quant(cpu, randn(rng, [M, K]));
    const wt = randn(rng, [N, K]); // a row-major [N, K] weight, used as b = w^T
    const [wq] = scaledFp8Quant(cpu, wt);
    const b = wq.transpose(0, 1);
    const sa = tensor(Array.from({ length: M }, (_, i) => 0.1 * (i + 1)), [M, 1]);
    const sb = tensor(Array.from({ length: N }, (_, i) => 2 - 0.25 * i), [1, N]);
    const bias = randn(rng, [N], 'bf16');
    const A = values(a);
    const W = values(wq);
    const SA = values(sa);
    const SB = values(sb);
    const BI = values(bias);
    const want: number[] = [];
    for (let m = 0; m < M; m++) for (let n = 0; n < N; n++) want.push(A.slice(m * K, m * K + K).reduce((s, x, k) => s + x * W[n * K + k]!, 0) * SA[m]! * SB[n]! + BI[n]!);
    const y = scaledMm(cpu, a, b, sa, sb, { bias, out_dtype: 'bf16' });
    expectClose(values(y), want.map((v) => roundToDType(v, 'bf16')), 0, 0);
    expect(scaledMm(cpu, a, b, tensor([1], []), tensor([1], [1]), { out_dtype: 'f32' }).dtype).toBe('f32');
  });

  it('rejects bad scales and dtypes', () => {
    const a = tensor([1, 2], [1, 2], 'fp8e4m3');
    const b = tensor([1, 2], [2, 1], 'fp8e4m3');
    expect(() => scaledMm(cpu, a, b, tensor([1, 2], [2, 1]), tensor([1], [1]))).toThrow(/scale_a \[2, 1\] must be one element \(per-tensor\) or \[1, 1\] \(per-row\)/);
    expect(() => scaledMm(cpu, tensor([1, 2], [1, 2]), b, tensor([1], [1]), tensor([1], [1]))).toThrow(/a must be fp8e4m3 or fp8e5m2, got f32/);
    expect(() => scaledMm(cpu, a, a, tensor([1], [1]), tensor([1], [1]))).toThrow(/must be \[M, K\] and \[K, N\]/);
  });
});

describe('MXFP4', () => {
  const LUT = [0, 0.5, 1, 1.5, 2, 3, 4, 6];
  const fp4 = (c: number) => (c & 8 ? -1 : 1) * LUT[c & 7]!;

  it('hand-computed: low nibble first, scale 2^(e - 127)', () => {
    const blocks = new Array<number>(16).fill(0);
    blocks[0] = 0x21; // elements 0, 1 = codes 1, 2 = 0.5, 1.0
    blocks[15] = 0xf7; // elements 30, 31 = codes 7, 15 = 6, -6
    const y = mxfp4Dequant(cpu, tensor(blocks, [1, 16], 'u8'), tensor([128], [1], 'u8'), { dtype: 'f32' });
    expect(y.shape).toEqual([32]);
    const v = values(y);
    expect(v.slice(0, 2)).toEqual([1, 2]);
    expect(v.slice(30)).toEqual([12, -12]);
    expect(v.slice(2, 30).every((x) => x === 0)).toBe(true);
  });

  it('random blocks [E, N, G, 16] against an independent decode; linear over MXFP4 weights', () => {
    const rng = new Rng(4);
    const [N, G] = [6, 3];
    const bytes = Array.from({ length: 2 * N * G * 16 }, () => Math.floor(rng.uniform() * 256));
    const exps = Array.from({ length: 2 * N * G }, () => 120 + Math.floor(rng.uniform() * 12));
    const blocks = tensor(bytes, [2, N, G, 16], 'u8');
    const scales = tensor(exps, [2, N, G], 'u8');
    const want: number[] = [];
    for (let r = 0; r < 2 * N; r++) {
      for (let g = 0; g < G; g++) {
        for (let j = 0; j < 16; j++) {
          const byte = bytes[(r * G + g) * 16 + j]!;
          const sc = Math.pow(2, exps[r * G + g]! - 127);
          want.push(fp4(byte & 15) * sc, fp4(byte >> 4) * sc);
        }
      }
    }
    const w = mxfp4Dequant(cpu, relayout(blocks, 'stepped'), scales, { dtype: 'f32' });
    expect(w.shape).toEqual([2, N, 96]);
    expect(values(w)).toEqual(want); // exact: every value is a small binary fraction
    // the linear layer dequantises inside: compare with x @ W^T from the decoded expert 1
    const x = randn(rng, [2, 2, 96], 'bf16');
    const bias = randn(rng, [N], 'bf16');
    const X = values(x);
    const W1 = want.slice(N * 96);
    const B = values(bias);
    const ref: number[] = [];
    for (let r = 0; r < 4; r++) for (let n = 0; n < N; n++) ref.push(X.slice(r * 96, r * 96 + 96).reduce((s, xv, k) => s + xv * W1[n * 96 + k]!, B[n]!));
    const y = mxfp4Linear(cpu, relayout(x, 'transposed'), blocks.select(0, 1), scales.select(0, 1), bias);
    expect(y.shape).toEqual([2, 2, N]);
    expectClose(values(y), ref.map((v) => roundToDType(v, 'bf16')), 0, 0);
  });

  it('scale 255 is NaN (OCP); bad shapes are explained', () => {
    expect(values(mxfp4Dequant(cpu, tensor(new Array(16).fill(0x11), [1, 16], 'u8'), tensor([255], [1], 'u8'), { dtype: 'f32' })).every(Number.isNaN)).toBe(true);
    expect(() => mxfp4Dequant(cpu, tensor(new Array(32).fill(0), [2, 16], 'u8'), tensor([1], [1], 'u8'))).toThrow(/scales \[1\] must be \[2\]/);
    expect(() => mxfp4Dequant(cpu, tensor(new Array(8).fill(0), [1, 8], 'u8'), tensor([1], [1], 'u8'))).toThrow(/blocks must be \[\.\.\., G, 16\]/);
    expect(() => mxfp4Linear(cpu, randn(new Rng(0), [2, 31]), tensor(new Array(32).fill(0), [2, 1, 16], 'u8'), tensor([127, 127], [2, 1], 'u8'))).toThrow(/input \[2, 31\] last dim must be K = 32/);
  });
});

describe('empty inputs', () => {
  it('every quant op accepts zero rows', () => {
    const [q, s] = scaledFp8Quant(cpu, randn(new Rng(0), [0, 8]));
    expect([q.shape, values(s).length]).toEqual([[0, 8], 1]);
    const [gq, gs] = perTokenGroupQuantFp8(cpu, randn(new Rng(0), [0, 8]), 4);
    expect([gq.shape, gs.shape]).toEqual([[0, 8], [0, 2]]);
    const a = tensor([], [0, 4], 'fp8e4m3');
    expect(scaledMm(cpu, a, tensor(new Array(8).fill(1), [4, 2], 'fp8e4m3'), tensor([1], [1]), tensor([1], [1])).shape).toEqual([0, 2]);
    expect(mxfp4Linear(cpu, randn(new Rng(0), [0, 32]), tensor(new Array(32).fill(0), [2, 1, 16], 'u8'), tensor([127, 127], [2, 1], 'u8')).shape).toEqual([0, 2]);
    expect(mxfp4Dequant(cpu, tensor([], [0, 1, 16], 'u8'), tensor([], [0, 1], 'u8')).shape).toEqual([0, 32]);
  });
});
