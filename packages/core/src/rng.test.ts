import { describe, expect, it } from 'vitest';
import { Rng, counterUniform, fmix32 } from './rng.js';

/** An independent xoshiro128** over BigInt (explicit 32-bit masks), seeded the way Rng documents. */
function referenceXoshiro(seed: number, n: number): number[] {
  const M = 0xffffffffn;
  const rotl = (x: bigint, k: bigint) => ((x << k) | (x >> (32n - k))) & M;
  let x = BigInt(seed >>> 0);
  const next = () => {
    x = (x + 0x9e3779b9n) & M;
    return BigInt(fmix32(Number(x)));
  };
  let [s0, s1, s2, s3] = [next(), next(), next(), next()];
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    out.push(Number((rotl((s1 * 5n) & M, 7n) * 9n) & M));
    const t = (s1 << 9n) & M;
    s2 ^= s0;
    s3 ^= s1;
    s1 ^= s2;
    s0 ^= s3;
    s2 ^= t;
    s3 = rotl(s3, 11n);
  }
  return out;
}

describe('fmix32', () => {
  it('matches murmur3 fmix32 known values', () => {
    expect(fmix32(0)).toBe(0);
    expect(fmix32(1)).toBe(0x514e28b7);
    expect(fmix32(0xdeadbeef)).toBe(233162409);
    expect(fmix32(-1)).toBe(fmix32(0xffffffff));
  });
});

describe('Rng', () => {
  it('is xoshiro128** (checked against a BigInt implementation)', () => {
    for (const seed of [0, 1, 12345, 0xffffffff]) {
      const r = new Rng(seed);
      const got = Array.from({ length: 200 }, () => r.nextU32());
      expect(got).toEqual(referenceXoshiro(seed, 200));
    }
  });

  it('golden first outputs (seed 1)', () => {
    const r = new Rng(1);
    expect([r.nextU32(), r.nextU32(), r.nextU32()]).toEqual([2442144158, 3238099751, 3819917871]);
    expect(r.uniform()).toBe(0.4900204574360133);
    expect(r.normal()).toBe(-0.17867182989409275);
  });

  it('is deterministic per seed and differs across seeds', () => {
    const a = new Rng(99).fillUniform(50, 0, 1);
    const b = new Rng(99).fillUniform(50, 0, 1);
    const c = new Rng(100).fillUniform(50, 0, 1);
    expect(a).toEqual(b);
    expect(a).not.toEqual(c);
  });

  it('nextU32 is an unsigned 32-bit integer', () => {
    const r = new Rng(5);
    for (let i = 0; i < 1000; i++) {
      const v = r.nextU32();
      expect(Number.isInteger(v) && v >= 0 && v < 2 ** 32).toBe(true);
    }
  });

  it('uniform is in [0, 1) with mean 1/2 and variance 1/12', () => {
    const r = new Rng(2024);
    const n = 100_000;
    let sum = 0;
    let sq = 0;
    let min = 1;
    let max = 0;
    for (let i = 0; i < n; i++) {
      const u = r.uniform();
      sum += u;
      sq += u * u;
      if (u < min) min = u;
      if (u > max) max = u;
    }
    expect(min).toBeGreaterThanOrEqual(0);
    expect(max).toBeLessThan(1);
    const mean = sum / n;
    expect(Math.abs(mean - 0.5)).toBeLessThan(0.005);
    expect(Math.abs(sq / n - mean * mean - 1 / 12)).toBeLessThan(0.003);
  });

  it('normal has mean 0 and variance 1 over 1e5 draws', () => {
    const a = new Rng(7).fillNormal(100_000);
    const mean = a.reduce((s, v) => s + v, 0) / a.length;
    const variance = a.reduce((s, v) => s + (v - mean) ** 2, 0) / (a.length - 1);
    expect(Math.abs(mean)).toBeLessThan(0.015); // 4.7 standard errors
    expect(Math.abs(variance - 1)).toBeLessThan(0.025);
    expect(a.every(Number.isFinite)).toBe(true);
    // about 68.3% within one standard deviation
    const within = a.filter((v) => Math.abs(v) < 1).length / a.length;
    expect(Math.abs(within - 0.6827)).toBeLessThan(0.01);
  });

  it('fillNormal scales; fillUniform maps to [lo, hi)', () => {
    const n = new Rng(3).fillNormal(4, 2);
    const m = new Rng(3).fillNormal(4);
    expect([...n]).toEqual([...m].map((v) => v * 2));
    const u = new Rng(3).fillUniform(1000, -2, 5);
    expect(u.every((v) => v >= -2 && v < 5)).toBe(true);
  });

  it('fillNormal draws what as many normal() calls would, a pending spare value used first and left as normal() leaves it', () => {
    for (const lengths of [[4], [5, 3], [1, 1, 2], [0, 7, 2]]) {
      const a = new Rng(99);
      const b = new Rng(99);
      a.normal(); // a spare pending on both
      b.normal();
      for (const n of lengths) {
        const got = Array.from(a.fillNormal(n, 2));
        const want = Array.from({ length: n }, () => b.normal() * 2);
        expect(got).toEqual(want);
      }
      expect(a.normal()).toBe(b.normal()); // the same state after: the spare (or none) carried over alike
    }
  });

  it('int(lo, hi) covers [lo, hi) roughly evenly', () => {
    const r = new Rng(11);
    const counts = new Array(6).fill(0);
    for (let i = 0; i < 60_000; i++) counts[r.int(-3, 3) + 3]++;
    for (const c of counts) expect(Math.abs(c - 10_000)).toBeLessThan(500);
  });

  it('permutation is a permutation and seed-dependent', () => {
    const p = new Rng(1).permutation(100);
    expect([...p].sort((a, b) => a - b)).toEqual([...Array(100).keys()]);
    expect(p).toEqual(new Rng(1).permutation(100));
    expect(p).not.toEqual(new Rng(2).permutation(100));
    expect(new Rng(1).permutation(0)).toEqual([]);
    expect(new Rng(1).permutation(1)).toEqual([0]);
  });
});

describe('counterUniform', () => {
  it('golden values (GPU ports must reproduce these bit for bit)', () => {
    expect(counterUniform(0, 0, 0)).toBe(0.21822303533554077);
    expect(counterUniform(42, 3, 17)).toBe(0.6736953854560852);
    expect(counterUniform(2 ** 40 + 7, 1, 50000)).toBe(0.2210823893547058);
    // a negative i64 seed splits as two's complement halves (hi = lo = 0xFFFFFFFF for -1)
    expect(counterUniform(-1, 0, 5)).toBe(0.19876736402511597);
  });

  it('follows the documented formula', () => {
    const ref = (seedHi: number, seedLo: number, row: number, col: number) => {
      let h = fmix32((col + 0x9e3779b9) >>> 0);
      h = fmix32((row ^ h) >>> 0);
      h = fmix32((seedHi ^ h) >>> 0);
      h = fmix32((seedLo ^ h) >>> 0);
      return Math.fround((Math.fround(h >>> 9) + 0.5) * Math.fround(1 / 8388608));
    };
    expect(counterUniform(2 ** 40 + 7, 1, 50000)).toBe(ref(256, 7, 1, 50000));
    expect(counterUniform(-1, 0, 5)).toBe(ref(0xffffffff, 0xffffffff, 0, 5));
    expect(counterUniform(-(2 ** 33), 9, 9)).toBe(ref(0xfffffffe, 0, 9, 9));
  });

  it('is in (0, 1), exact in float32, and deterministic', () => {
    for (let row = 0; row < 50; row++) {
      for (let col = 0; col < 200; col++) {
        const u = counterUniform(1234, row, col);
        expect(u > 0 && u < 1).toBe(true);
        if (Math.fround(u) !== u) expect.fail(`counterUniform(1234, ${row}, ${col}) = ${u} is not a float32`);
        if (counterUniform(1234, row, col) !== u) expect.fail('not deterministic');
      }
    }
  });

  it('different (seed, row, col) give different values and the values look uniform', () => {
    const seen = new Set<number>();
    let sum = 0;
    const n = 100 * 100;
    for (let row = 0; row < 100; row++) for (let col = 0; col < 100; col++) {
      const u = counterUniform(7, row, col);
      seen.add(u);
      sum += u;
    }
    expect(seen.size).toBeGreaterThan(n * 0.99); // 23-bit values: a few collisions are expected
    expect(Math.abs(sum / n - 0.5)).toBeLessThan(0.01);
    expect(counterUniform(7, 1, 2)).not.toBe(counterUniform(7, 2, 1));
    expect(counterUniform(7, 0, 1)).not.toBe(counterUniform(8, 0, 1));
    expect(counterUniform(7, 0, 1)).not.toBe(counterUniform(7 + 2 ** 32, 0, 1));
  });
});
