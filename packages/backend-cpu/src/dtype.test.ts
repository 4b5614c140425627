import { roundToDType, type DType } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cpu, randn, Rng, tensor, values } from './test-helpers.js';

const ops = cpu.ops;

describe('output dtype rounding', () => {
  it('rounds once from float64 (no double rounding through float32)', () => {
    // 1 + 2^-8 + 2^-30: float32 would make it the tie 1 + 2^-8, which bf16 rounds down to 1.
    const y = ops.add(tensor([1], [1], 'bf16'), tensor([2 ** -8 + 2 ** -30], [1], 'f64'));
    expect(values(y)).toEqual([1 + 2 ** -7]);
    const h = ops.add(tensor([1], [1], 'f16'), tensor([2 ** -11 + 2 ** -40], [1], 'f64'));
    expect(values(h)).toEqual([1 + 2 ** -10]);
  });

  it.each<DType>(['bf16', 'f16', 'fp8e4m3', 'fp8e5m2', 'f32'])('every float op output is the float64 result rounded to %s', (dtype) => {
    const rng = new Rng(12);
    const xf = randn(rng, [3, 8], 'f64', 0.5);
    const wf = randn(rng, [8], 'f64', 0.5);
    const x = xf.to(dtype);
    const w = wf.to(dtype);
    const X = values(x);
    const W = values(w);
    const cases: [string, number[], number[]][] = [];
    // elementwise: exact float64 arithmetic on the stored inputs
    cases.push(['mul', values(ops.mul(x, w)), X.map((v, i) => roundToDType(v * W[i % 8]!, dtype))]);
    cases.push(['add', values(ops.add(x, w)), X.map((v, i) => roundToDType(v + W[i % 8]!, dtype))]);
    const silu = values(ops.siluAndMul(x));
    const wantSilu: number[] = [];
    for (let r = 0; r < 3; r++) for (let i = 0; i < 4; i++) wantSilu.push(roundToDType((X[r * 8 + i]! / (1 + Math.exp(-X[r * 8 + i]!))) * X[r * 8 + 4 + i]!, dtype));
    cases.push(['siluAndMul', silu, wantSilu]);
    const mm = ops.matmul(x, w.view(8, 1));
    expect(mm.dtype).toBe(dtype);
    cases.push(['matmul', values(mm), [0, 1, 2].map((r) => roundToDType(X.slice(r * 8, r * 8 + 8).reduce((s, v, k) => s + v * W[k]!, 0), dtype))]);
    for (const [name, got, want] of cases) expect(got, name).toEqual(want);
    for (const out of [ops.rmsNorm(x, w, 1e-6), ops.softmax(x, -1), ops.geluAndMul(x, 'none'), ops.linear(x, x, null)]) {
      expect(out.dtype).toBe(dtype);
      const v = values(out);
      expect(v.map((e) => roundToDType(e, dtype))).toEqual(v); // representable in dtype
    }
  });

  it('overflow follows the torch casts: f16 -> inf, e4m3fn -> NaN, e5m2 -> inf', () => {
    expect(values(ops.mul(tensor([300], [1], 'f16'), tensor([300], [1], 'f32')))).toEqual([Infinity]);
    expect(Number.isNaN(values(ops.mul(tensor([100], [1], 'fp8e4m3'), tensor([10], [1], 'f32')))[0])).toBe(true);
    expect(values(ops.mul(tensor([-57344], [1], 'fp8e5m2'), tensor([2], [1], 'f32')))).toEqual([-Infinity]);
  });

  it('matmul outDType may be wider, narrower or an integer type', () => {
    const a = tensor([1.5, 2.25], [1, 2], 'bf16');
    const b = tensor([3, 1], [2, 1], 'bf16');
    expect(values(ops.matmul(a, b, { outDType: 'f64' }))).toEqual([6.75]);
    expect(values(ops.matmul(a, b, { outDType: 'fp8e4m3' }))).toEqual([roundToDType(6.75, 'fp8e4m3')]);
    expect(values(ops.matmul(a, b, { outDType: 'i32' }))).toEqual([6]);
  });

  it('float outputs are allocated through the backend (poison is overwritten)', () => {
    const before = cpu.memoryStats().liveStorages;
    const y = ops.rmsNorm(tensor([1, 2], [1, 2], 'f32'), tensor([1, 1], [2], 'f32'), 0);
    expect(values(y).some(Number.isNaN)).toBe(false);
    expect(cpu.memoryStats().liveStorages).toBeGreaterThan(before);
  });
});
