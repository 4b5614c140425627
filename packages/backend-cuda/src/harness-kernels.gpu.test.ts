import { Rng, Tensor, compareStatsHost, compareTensors, normalTensor, type DType } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { gpu, randomValues } from './gpu-test-util.js';

const G = { tags: ['gpu'] };

/** Values with the cases the statistics must get right: NaN, ±Inf on either side, zeros, exact matches. */
function withSpecials(n: number, seed: number, dtype: DType): { a: Float64Array; e: Float64Array } {
  const e = randomValues(n, seed, dtype);
  const noise = randomValues(n, seed + 1, 'f64');
  const a = e.map((x, i) => x + (i % 5 === 0 ? 0 : noise[i]! * 1e-2));
  if (n > 16) {
    a[1] = NaN; // actual NaN, expected finite -> nonFinite
    a[2] = NaN; e[2] = NaN; // matches
    a[3] = Infinity; e[3] = Infinity; // matches
    a[4] = -Infinity; e[4] = Infinity; // expected finite? no: expected non-finite -> neither
    e[5] = NaN; // finite actual, non-finite expected -> skipped, unmatched
    a[6] = 0; e[6] = 0;
  }
  return { a, e };
}

describe('CUDA harness kernels (device compare, fill, byte equality)', () => {
  const dtypes: DType[] = ['f32', 'bf16', 'f16'];
  for (const dtype of dtypes) {
    for (const n of [1, 33, 4097, 1_000_003]) {
      it(`compareStats ${dtype} n=${n}: the host's numbers exactly (sums to 1e-9)`, G, () => {
        const { a, e } = withSpecials(n, n + 7, dtype);
        const ta = Tensor.fromArray(gpu(), a, [n], dtype);
        const te = Tensor.fromArray(gpu(), e, [n], dtype);
        const tol = { atol: 1e-3, rtol: 4e-3 };
        const dev = gpu().harnessKernels.compareStats(ta, te, tol)!;
        const host = compareStatsHost(ta.toFloat64Array(), te.toFloat64Array(), tol);
        expect({ ...dev, sumSqDiff: 0, sumSqRef: 0 }).toEqual({ ...host, sumSqDiff: 0, sumSqRef: 0 });
        expect(Math.abs(dev.sumSqDiff - host.sumSqDiff)).toBeLessThanOrEqual(1e-9 * Math.max(1, host.sumSqDiff));
        expect(Math.abs(dev.sumSqRef - host.sumSqRef)).toBeLessThanOrEqual(1e-9 * Math.max(1, host.sumSqRef));
        ta.dispose();
        te.dispose();
      });
    }
  }

  it('compareStats on i64 outputs, a transposed view, and an all-zero output', G, () => {
    const ids = Tensor.fromArray(gpu(), [5, 7, 9, 11], [4], 'i64');
    const ids2 = Tensor.fromArray(gpu(), [5, 8, 9, 11], [4], 'i64');
    expect(gpu().harnessKernels.compareStats(ids2, ids, { atol: 0, rtol: 0 })).toMatchObject({ n: 4, matched: 3, maxAbs: 1 });
    const m = Tensor.fromArray(gpu(), randomValues(12 * 7, 3, 'f32'), [12, 7], 'f32');
    const mt = m.transpose(0, 1);
    const c = mt.contiguous();
    expect(compareTensors(mt, c, { atol: 0, rtol: 0 })).toMatchObject({ status: 'PASSED', maxAbsError: 0, matchedRatio: 1 });
    const z = Tensor.zeros(gpu(), [7, 12], 'f32');
    expect(compareTensors(z, c, { atol: 1e-2, rtol: 1e-2 }).detail).toMatch(/all zeros/);
  });

  it('fillNormal: seeded, launch-independent, N(mean, scale^2) moments, finite', G, () => {
    for (const dtype of ['f32', 'bf16'] as DType[]) {
      const n = 1 << 21;
      const t1 = normalTensor(gpu(), [n], dtype, new Rng(11), { scale: 2, mean: 0.5 });
      const t2 = normalTensor(gpu(), [n], dtype, new Rng(11), { scale: 2, mean: 0.5 });
      const t3 = normalTensor(gpu(), [n], dtype, new Rng(12), { scale: 2, mean: 0.5 });
      const v = t1.toFloat64Array();
      let s = 0;
      let s2 = 0;
      for (const x of v) {
        expect(Number.isFinite(x)).toBe(true);
        s += x;
        s2 += x * x;
      }
      const mean = s / n;
      const sd = Math.sqrt(s2 / n - mean * mean);
      expect(Math.abs(mean - 0.5)).toBeLessThan(0.01);
      expect(Math.abs(sd - 2)).toBeLessThan(0.01);
      expect(gpu().harnessKernels.countDifferentBytes(t1.storage, 0, t2.storage, 0, t1.storage.byteLength)).toBe(0);
      expect(gpu().harnessKernels.countDifferentBytes(t1.storage, 0, t3.storage, 0, t1.storage.byteLength)).toBeGreaterThan(n / 16);
      for (const t of [t1, t2, t3]) t.dispose();
    }
  });

  it('countDifferentBytes: equal ranges, one flipped byte, unaligned offsets and tails', G, () => {
    const n = 1000_003;
    const bytes = new Uint8Array(n).map((_, i) => (i * 131) & 0xff);
    const a = gpu().allocate(n, 0);
    const b = gpu().allocate(n, 0);
    gpu().write(a, 0, bytes);
    gpu().write(b, 0, bytes);
    const k = gpu().harnessKernels;
    expect(k.countDifferentBytes(a, 0, b, 0, n)).toBe(0);
    gpu().write(b, n - 1, new Uint8Array([bytes[n - 1]! ^ 1]));
    expect(k.countDifferentBytes(a, 0, b, 0, n)).toBe(1);
    expect(k.countDifferentBytes(a, 0, b, 0, n - 1)).toBe(0);
    expect(k.countDifferentBytes(a, 3, b, 3, n - 4)).toBe(0);
    gpu().write(b, 17, new Uint8Array([bytes[17]! ^ 0x80]));
    expect(k.countDifferentBytes(a, 3, b, 3, n - 4)).toBe(1);
    expect(() => k.countDifferentBytes(a, 1, b, 0, n)).toThrow(RangeError);
    a.release();
    b.release();
  });
});
