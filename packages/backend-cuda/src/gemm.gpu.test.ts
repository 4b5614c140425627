import { Tensor, type DType } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { gpu, randomValues, refMatmul, upload, worstRatio } from './gpu-test-util.js';

const G = { tags: ['gpu'] };
const TOL: Record<string, [number, number]> = { f32: [1e-4, 1e-4], f16: [1e-2, 1e-2], bf16: [2e-2, 2e-2] };

describe('cuBLASLt matmul vs a float64 reference', () => {
  for (const dtype of ['bf16', 'f16', 'f32'] as DType[]) {
    for (const [m, n, k] of [[1, 64, 64], [17, 33, 65], [128, 256, 64], [64, 1024, 512], [5, 4096, 128]] as const) {
      it(`${dtype} [${m}x${k}] @ [${k}x${n}]`, G, () => {
        const a = randomValues(m * k, m + k, dtype);
        const b = randomValues(k * n, n + 3, dtype);
        const out = gpu().ops.matmul(upload(a, [m, k], dtype), upload(b, [k, n], dtype));
        expect(out.shape).toEqual([m, n]);
        const [atol, rtol] = TOL[dtype]!;
        expect(worstRatio(out.toFloat64Array(), refMatmul(a, b, 1, m, n, k), atol, rtol)).toBeLessThanOrEqual(1);
      });
    }
  }

  it('batched with a broadcast right operand, f32 output from bf16 inputs', G, () => {
    const [batch, m, n, k] = [3, 20, 48, 40];
    const a = randomValues(batch * m * k, 11, 'bf16');
    const b = randomValues(k * n, 12, 'bf16');
    const out = gpu().ops.matmul(upload(a, [batch, m, k], 'bf16'), upload(b, [k, n], 'bf16'), { outDType: 'f32' });
    expect(out.shape).toEqual([batch, m, n]);
    expect(out.dtype).toBe('f32');
    expect(worstRatio(out.toFloat64Array(), refMatmul(a, b, batch, m, n, k, { bBroadcast: true }), 1e-4, 1e-4)).toBeLessThanOrEqual(1);
  });

  it('transposed operand views are read in place (a Linear weight [N, K] as w.T) and strided batches', G, () => {
    const [batch, m, n, k] = [2, 9, 24, 16];
    const a = randomValues(batch * m * k, 21, 'f16');
    const w = randomValues(batch * n * k, 22, 'f16'); // [batch, N, K]
    const W = upload(w, [batch, n, k], 'f16');
    const out = gpu().ops.matmul(upload(a, [batch, m, k], 'f16'), W.transpose(1, 2));
    const bT = new Float64Array(batch * k * n);
    for (let p = 0; p < batch; p++) for (let i = 0; i < n; i++) for (let j = 0; j < k; j++) bT[p * k * n + j * n + i] = w[p * n * k + i * k + j]!;
    expect(worstRatio(out.toFloat64Array(), refMatmul(a, bT, batch, m, n, k), 1e-2, 1e-2)).toBeLessThanOrEqual(1);
  });

  it('bias epilogue (gemmInto with transB, the Linear path)', G, () => {
    const [m, n, k] = [33, 80, 64];
    for (const dtype of ['bf16', 'f32'] as DType[]) {
      const x = randomValues(m * k, 31, dtype);
      const w = randomValues(n * k, 32, dtype);
      const bias = randomValues(n, 33, dtype);
      const out = Tensor.empty(gpu(), [m, n], dtype);
      gpu().ops.gemmInto(out, upload(x, [m, k], dtype), upload(w, [n, k], dtype), { transB: true, bias: upload(bias, [n], dtype) });
      const wT = new Float64Array(k * n);
      for (let i = 0; i < n; i++) for (let j = 0; j < k; j++) wT[j * n + i] = w[i * k + j]!;
      const [atol, rtol] = TOL[dtype]!;
      expect(worstRatio(out.toFloat64Array(), refMatmul(x, wT, 1, m, n, k, { bias }), atol, rtol)).toBeLessThanOrEqual(1);
    }
  });

  it('non-contiguous inputs are made contiguous; plans are cached per shape', G, () => {
    const rt = gpu().runtime;
    const a = randomValues(8 * 2 * 16, 41, 'f32');
    const A = upload(a, [8, 32], 'f32').slice(1, 0, 32, 2); // [8, 16] with column stride 2
    const b = randomValues(16 * 4, 42, 'f32');
    const before = rt.addon.ltPlanCount();
    const o1 = gpu().ops.matmul(A, upload(b, [16, 4], 'f32'));
    const o2 = gpu().ops.matmul(A, upload(b, [16, 4], 'f32'));
    expect(rt.addon.ltPlanCount()).toBeLessThanOrEqual(before + 1);
    const ac = new Float64Array(8 * 16);
    for (let i = 0; i < 8; i++) for (let j = 0; j < 16; j++) ac[i * 16 + j] = a[i * 32 + 2 * j]!;
    expect(worstRatio(o1.toFloat64Array(), refMatmul(ac, b, 1, 8, 4, 16), 1e-4, 1e-4)).toBeLessThanOrEqual(1);
    expect(o2.toFloat64Array()).toEqual(o1.toFloat64Array());
  });
});
