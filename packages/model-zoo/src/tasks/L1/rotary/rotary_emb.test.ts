import { ModuleRegistry, compareTensors, hostArray, withContext, type DType } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cpuBackend, describeTaskContract } from '../../../../test/l1-harness.js';
import {
  LLAMA31_ROPE_SCALING,
  Llama3RotaryEmbedding,
  RotaryEmbedding,
  computeCosSinCacheF32,
  computeInvFreqF32,
  cosSinCacheReference,
  rotaryEmbTask,
  rotaryReference,
} from './rotary_emb.js';

/** headSize 4, rotaryDim 4, base 10000: inv_freq = [1, 10000^-0.5 = 0.01]; cache rows for positions 0 and 1. */
const c1 = Math.cos(1);
const s1 = Math.sin(1);
const c01 = Math.cos(0.01);
const s01 = Math.sin(0.01);
const cache2 = hostArray([2, 4], [1, 1, 0, 0, c1, c01, s1, s01]);

describe('rotaryReference', () => {
  it('neox style on 2 positions by hand: pairs (0, 2) at 1 rad/pos and (1, 3) at 0.01 rad/pos', () => {
    const q = hostArray([2, 4], [1, 2, 3, 4, 1, 2, 3, 4]);
    const y = rotaryReference(hostArray([2], [0, 1]), q, cache2, 4, true);
    expect([...y.data.slice(0, 4)]).toEqual([1, 2, 3, 4]); // position 0 is the identity
    // (a, b) -> (a cos - b sin, b cos + a sin)
    const want = [-1.9841106485555495, 1.959900667496664, 2.4623779024123156, 4.019799668334994];
    y.data.slice(4).forEach((v, i) => expect(v).toBeCloseTo(want[i]!, 14));
  });

  it('GPT-J style on 2 positions by hand: pairs (0, 1) at 1 rad/pos and (2, 3) at 0.01 rad/pos', () => {
    const q = hostArray([2, 4], [1, 2, 3, 4, 1, 2, 3, 4]);
    const y = rotaryReference(hostArray([2], [1, 0]), q, cache2, 4, false);
    const want = [-1.1426396637476532, 1.922075596544176, 2.9598506679133294, 4.029799501669161];
    y.data.slice(0, 4).forEach((v, i) => expect(v).toBeCloseTo(want[i]!, 14));
    expect([...y.data.slice(4)]).toEqual([1, 2, 3, 4]);
  });

  it('partial rotary leaves dims past rotaryDim alone, per head', () => {
    // headSize 3 with rotaryDim 2 (cache [1, 2] at angle 1): two heads [1, 0, 7], [0, 1, 8]
    const cache = hostArray([1, 2], [c1, s1]);
    const y = rotaryReference(hostArray([1], [0]), hostArray([1, 6], [1, 0, 7, 0, 1, 8]), cache, 3, true);
    const want = [c1, s1, 7, -s1, c1, 8];
    y.data.forEach((v, i) => expect(v).toBeCloseTo(want[i]!, 15));
    expect(() => rotaryReference(hostArray([1], [1]), hostArray([1, 6]), cache, 3, true)).toThrow(/position/);
  });

  it('preserves the norm of every rotated pair', () => {
    const cache = cosSinCacheReference(8, 16, 10000);
    const x = hostArray([1, 8], [1, -2, 3, 0.5, 4, -1, 2, 2]);
    const y = rotaryReference(hostArray([1], [13]), x, cache, 8, true);
    for (let i = 0; i < 4; i++) {
      expect(y.data[i]! ** 2 + y.data[i + 4]! ** 2).toBeCloseTo(x.data[i]! ** 2 + x.data[i + 4]! ** 2, 12);
    }
  });
});

describe('cos_sin_cache and inv_freq', () => {
  it('inv_freq = 1 / base^(2i/rotaryDim) in float32', () => {
    expect([...computeInvFreqF32(4, 10000)]).toEqual([1, Math.fround(0.01)]);
    const inv = computeInvFreqF32(128, 500000);
    expect(inv[20]).toBeCloseTo(0.016560440080994446, 8);
  });

  it('llama3 scaling by hand (Llama-3.1: factor 8, low 1, high 4, original 8192; rotaryDim 128, base 500000)', () => {
    const plain = computeInvFreqF32(128, 500000);
    const scaled = computeInvFreqF32(128, 500000, LLAMA31_ROPE_SCALING);
    // i = 0: wavelength 2 pi < 8192 / 4 -> unchanged
    expect(scaled[0]).toBe(1);
    // i = 20: 2 pi / 0.01656 = 379 < 2048 -> unchanged
    expect(scaled[20]).toBe(plain[20]);
    // i = 63: wavelength 2 pi / 500000^(-126/128) >> 8192 -> divided by 8: 3.068925988914511e-7
    expect(scaled[63]! / 3.068925988914511e-7).toBeCloseTo(1, 6);
    // i = 30: inv 500000^(-60/128) = 0.0021311195369119653, wavelength 2948.3 in [2048, 8192]:
    // smooth = (8192 / 2948.3 - 1) / 3 = 0.59285; (1 - smooth) inv / 8 + smooth inv = 0.0013718935677611381
    expect(scaled[30]! / 0.0013718935677611381).toBeCloseTo(1, 6);
    // the interpolation is monotone: frequencies still decrease with i
    for (let i = 1; i < 64; i++) expect(scaled[i]!).toBeLessThan(scaled[i - 1]!);
  });

  it('the float32 cache agrees with a float64 recomputation', () => {
    for (const scaling of [null, LLAMA31_ROPE_SCALING]) {
      const f = computeCosSinCacheF32(32, 2048, 500000, scaling);
      const d = cosSinCacheReference(32, 2048, 500000, scaling);
      // angles up to 2047 rad carry float32 rounding of ~1e-4; cos/sin stay within that.
      let max = 0;
      for (let i = 0; i < f.length; i++) max = Math.max(max, Math.abs(f[i]! - d.data[i]!));
      expect(max).toBeLessThan(5e-4);
    }
    const c = computeCosSinCacheF32(4, 2, 10000);
    expect([...c.slice(0, 4)]).toEqual([1, 1, 0, 0]); // position 0: cos 1, sin 0
  });
});

describe('rotary_emb task', () => {
  it('work: positions + gathered cache rows + q/k read and written', () => {
    const c = rotaryEmbTask.cases.ci[0]!; // f32 T=7 NQ=4 NK=2 D=16 R=16, cache f32
    expect(rotaryEmbTask.work(c)).toEqual({ bytes: 7 * 8 + 7 * 16 * 4 + 2 * 7 * 6 * 16 * 4, flops: 3 * 7 * 6 * 16 });
    const qOnly = rotaryEmbTask.cases.ci.find((x) => x.options.key === false)!;
    expect(rotaryEmbTask.work(qOnly).flops).toBe(3 * 4 * 2 * 8);
  });

  it('CI covers neox, GPT-J, partial rotary, llama3 scaling and a query-only call', () => {
    const ci = rotaryEmbTask.cases.ci;
    expect(ci.some((c) => c.init[4] === true)).toBe(true);
    expect(ci.some((c) => c.init[4] === false)).toBe(true);
    expect(ci.some((c) => c.dims.R! < c.dims.D!)).toBe(true);
    expect(ci.some((c) => (c.init[6] as { ropeType?: string } | undefined)?.ropeType === 'llama3')).toBe(true);
    const prod = rotaryEmbTask.cases.production.find((c) => c.init[6])!;
    expect(prod.init).toEqual([128, 128, 131072, 500000, true, 'bf16', LLAMA31_ROPE_SCALING]);
  });

  it.skipIf(!cpuBackend())('the constructor registers cos_sin_cache [maxPos, rotaryDim] in dtype, and initParameters keeps it', () => {
    const backend = cpuBackend()!;
    const registry = new ModuleRegistry();
    registry.registerTask(rotaryEmbTask);
    for (const dtype of ['f32', 'bf16'] as DType[]) {
      const ctx = { backend, device: 0, dtype, registry };
      const m = registry.createIn<RotaryEmbedding>(ctx, 'L1/rotary_emb', 32, 32, 2048, 500000, true, dtype, LLAMA31_ROPE_SCALING);
      const p = m.stateDict().get('cos_sin_cache')!;
      expect([...p.shape]).toEqual([2048, 32]);
      expect(p.dtype).toBe(dtype);
      const before = p.toFloat64Array();
      rotaryEmbTask.initParameters!(m, rotaryEmbTask.cases.ci[2]!, undefined as never);
      expect(p.toFloat64Array()).toEqual(before);
      const want = cosSinCacheReference(32, 2048, 500000, LLAMA31_ROPE_SCALING);
      expect(compareTensors(p, want, dtype === 'f32' ? { atol: 5e-4, rtol: 0 } : { atol: 4e-3, rtol: 4e-3 }).status).toBe('PASSED');
      // vLLM's Llama3RotaryEmbedding signature builds the same cache
      const l3 = withContext(ctx, () => new Llama3RotaryEmbedding(32, 32, 2048, 500000, true, dtype, 8, 1, 4, 8192));
      expect(l3.cosSinCache.toFloat64Array()).toEqual(before);
    }
    expect(() => registry.createIn({ backend, device: 0, dtype: 'f32', registry }, 'L1/rotary_emb', 8, 10, 16, 10000, true, 'f32')).toThrow(/rotaryDim/);
  });
});

describeTaskContract(rotaryEmbTask, cpuBackend);
