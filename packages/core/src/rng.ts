/**
 * Deterministic randomness.
 * - `Rng`: a seeded stream (xoshiro128**) for generating inputs and weights.
 * - `counterUniform`: a stateless hash of (seed, row, col), the noise source for sampling,
 *   simple enough that every backend (TypeScript, CUDA, Triton) reproduces it bit for bit.
 */

/** murmur3's 32-bit finaliser. */
export function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/**
 * Uniform in (0, 1) from (seed, row, col): 23 random bits plus a half step, (2k + 1) / 2^24 with k < 2^23,
 * so every value has at most 24 significant bits and is exact in float32 (min 2^-24, max 1 - 2^-24).
 * (24 random bits plus a half would need 25 bits: float32 arithmetic would round half the values.)
 * CUDA: `h = fmix32(col + 0x9e3779b9u); h = fmix32(row ^ h); h = fmix32(seed_hi ^ h); h = fmix32(seed_lo ^ h);
 * u = ((h >> 9) + 0.5f) * (1.0f / 8388608.0f)` with seed split into 32-bit halves (two's complement for negatives).
 */
export function counterUniform(seed: number, row: number, col: number): number {
  const seedLo = seed >>> 0;
  const seedHi = Math.floor(seed / 4294967296) >>> 0;
  let h = fmix32((col + 0x9e3779b9) >>> 0);
  h = fmix32((row ^ h) >>> 0);
  h = fmix32((seedHi ^ h) >>> 0);
  h = fmix32((seedLo ^ h) >>> 0);
  return ((h >>> 9) + 0.5) / 8388608;
}

export class Rng {
  // xoshiro128** state as int32 words in a typed array: object fields holding uint32 values past V8's small-integer
  // range were boxed, which made every draw ~6x slower (the GPU tests draw ~1e8 weights at production widths)
  private readonly s = new Int32Array(4);
  private spare: number | undefined;

  constructor(seed: number) {
    // splitmix32 to spread the seed over the state
    let x = seed >>> 0;
    const next = () => {
      x = (x + 0x9e3779b9) >>> 0;
      return fmix32(x);
    };
    const s = this.s;
    s[0] = next();
    s[1] = next();
    s[2] = next();
    s[3] = next();
    if ((s[0]! | s[1]! | s[2]! | s[3]!) === 0) s[0] = 1;
  }

  /** 32 random bits. */
  nextU32(): number {
    const s = this.s;
    const s1 = s[1]!;
    const m = Math.imul(s1, 5);
    const result = Math.imul((m << 7) | (m >>> 25), 9) >>> 0;
    const t = s1 << 9;
    s[2]! ^= s[0]!;
    s[3]! ^= s1;
    s[1]! ^= s[2]!;
    s[0]! ^= s[3]!;
    s[2]! ^= t;
    const s3 = s[3]!;
    s[3] = (s3 << 11) | (s3 >>> 21);
    return result;
  }

  /** Uniform in [0, 1) with 53 bits. */
  uniform(): number {
    const hi = this.nextU32() >>> 5;
    const lo = this.nextU32() >>> 6;
    return (hi * 67108864 + lo) / 9007199254740992;
  }

  /** Integer in [lo, hi). */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.uniform() * (hi - lo));
  }

  /** Standard normal (Box-Muller). */
  normal(): number {
    if (this.spare !== undefined) {
      const s = this.spare;
      this.spare = undefined;
      return s;
    }
    let u = 0;
    while (u === 0) u = this.uniform();
    const v = this.uniform();
    const r = Math.sqrt(-2 * Math.log(u));
    this.spare = r * Math.sin(2 * Math.PI * v);
    return r * Math.cos(2 * Math.PI * v);
  }

  /** n draws of normal() * scale (the same values; the pair's second draw stored directly rather than as the spare). */
  fillNormal(n: number, scale = 1): Float64Array {
    const a = new Float64Array(n);
    let i = 0;
    if (n > 0 && this.spare !== undefined) {
      a[i++] = this.spare * scale;
      this.spare = undefined;
    }
    for (; i < n; i += 2) {
      let u = 0;
      while (u === 0) u = this.uniform();
      const v = this.uniform();
      const r = Math.sqrt(-2 * Math.log(u));
      a[i] = r * Math.cos(2 * Math.PI * v) * scale;
      const second = r * Math.sin(2 * Math.PI * v);
      if (i + 1 < n) a[i + 1] = second * scale;
      else this.spare = second;
    }
    return a;
  }

  fillUniform(n: number, lo: number, hi: number): Float64Array {
    const a = new Float64Array(n);
    for (let i = 0; i < n; i++) a[i] = lo + (hi - lo) * this.uniform();
    return a;
  }

  /** Fisher-Yates shuffle of [0, n). */
  permutation(n: number): number[] {
    const p = [...Array(n).keys()];
    for (let i = n - 1; i > 0; i--) {
      const j = this.int(0, i + 1);
      [p[i], p[j]] = [p[j]!, p[i]!];
    }
    return p;
  }
}
