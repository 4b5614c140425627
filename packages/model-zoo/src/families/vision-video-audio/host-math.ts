/**
 * Float64 building blocks of the family's references (plain loops over row-major host arrays, nothing shared with
 * the modules under test): linear, layer / RMS norms, activations, token-major multi-head attention, interleaved rotary.
 */
import type { HostArray } from '@fastkernels/core';

/** A named parameter of a reference's map; a missing name is a bug in the test, said plainly. */
export function param(params: ReadonlyMap<string, HostArray>, name: string): HostArray {
  const p = params.get(name);
  if (!p) throw new Error(`reference: no parameter '${name}' (have ${[...params.keys()].slice(0, 8).join(', ')}, ...)`);
  return p;
}

/** The parameters under `prefix.`, renamed without it. */
export function sub(params: ReadonlyMap<string, HostArray>, prefix: string): Map<string, HostArray> {
  const p = `${prefix}.`;
  return new Map([...params].filter(([k]) => k.startsWith(p)).map(([k, v]) => [k.slice(p.length), v]));
}

/** y = x W^T + b for `rows` rows of x [rows, K]; W [N, K]. */
export function linear(x: ArrayLike<number>, rows: number, w: HostArray, b: HostArray | null = null): Float64Array {
  const [N, K] = w.shape as [number, number];
  const y = new Float64Array(rows * N);
  for (let r = 0; r < rows; r++)
    for (let n = 0; n < N; n++) {
      let acc = b ? b.data[n]! : 0;
      for (let k = 0; k < K; k++) acc += x[r * K + k]! * w.data[n * K + k]!;
      y[r * N + n] = acc;
    }
  return y;
}

export function layerNorm(x: ArrayLike<number>, rows: number, H: number, eps: number, w: HostArray | null = null, b: HostArray | null = null): Float64Array {
  const y = new Float64Array(rows * H);
  for (let r = 0; r < rows; r++) {
    let mean = 0;
    for (let j = 0; j < H; j++) mean += x[r * H + j]!;
    mean /= H;
    let v = 0;
    for (let j = 0; j < H; j++) v += (x[r * H + j]! - mean) ** 2;
    const inv = 1 / Math.sqrt(v / H + eps);
    for (let j = 0; j < H; j++) y[r * H + j] = (x[r * H + j]! - mean) * inv * (w ? w.data[j]! : 1) + (b ? b.data[j]! : 0);
  }
  return y;
}

export function rmsNorm(x: ArrayLike<number>, rows: number, H: number, w: HostArray, eps: number): Float64Array {
  const y = new Float64Array(rows * H);
  for (let r = 0; r < rows; r++) {
    let ss = 0;
    for (let j = 0; j < H; j++) ss += x[r * H + j]! ** 2;
    const inv = 1 / Math.sqrt(ss / H + eps);
    for (let j = 0; j < H; j++) y[r * H + j] = x[r * H + j]! * inv * w.data[j]!;
  }
  return y;
}

export const silu = (v: number): number => v / (1 + Math.exp(-v));
export const quickGelu = (v: number): number => v / (1 + Math.exp(-1.702 * v));
export const geluTanh = (v: number): number => 0.5 * v * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (v + 0.044715 * v ** 3)));
export const relu = (v: number): number => (v > 0 ? v : 0);
export function geluErf(v: number): number {
  // Abramowitz-Stegun 7.1.26 is too coarse for a golden value: integrate erf by its series / continued fraction
  return 0.5 * v * (1 + erf(v / Math.SQRT2));
}
function erf(x: number): number {
  const t = Math.abs(x);
  if (t < 3) {
    let sum = t;
    let term = t;
    for (let n = 1; n < 80; n++) {
      term *= (-t * t) / n;
      sum += term / (2 * n + 1);
    }
    return Math.sign(x) * ((2 / Math.sqrt(Math.PI)) * sum);
  }
  // erfc continued fraction for the tail
  let f = 0;
  for (let n = 60; n >= 1; n--) f = n / 2 / (t + f);
  return Math.sign(x) * (1 - Math.exp(-t * t) / Math.sqrt(Math.PI) / (t + f));
}

/**
 * Multi-head attention on token-major arrays: q [B, L, H, E], k / v [B, S, H, E] -> [B, L, H, E];
 * softmax(q k^T * scale + bias(b, h, i, j)) v, a -Infinity bias hides a key.
 */
export function attention(
  q: ArrayLike<number>,
  k: ArrayLike<number>,
  v: ArrayLike<number>,
  dims: { B: number; L: number; S: number; H: number; E: number },
  scale: number,
  bias: ((b: number, h: number, i: number, j: number) => number) | null = null,
): Float64Array {
  const { B, L, S, H, E } = dims;
  const out = new Float64Array(B * L * H * E);
  const w = new Float64Array(S);
  for (let b = 0; b < B; b++)
    for (let h = 0; h < H; h++)
      for (let i = 0; i < L; i++) {
        let max = -Infinity;
        for (let j = 0; j < S; j++) {
          let dot = 0;
          for (let e = 0; e < E; e++) dot += q[((b * L + i) * H + h) * E + e]! * k[((b * S + j) * H + h) * E + e]!;
          w[j] = dot * scale + (bias ? bias(b, h, i, j) : 0);
          max = Math.max(max, w[j]!);
        }
        let sum = 0;
        for (let j = 0; j < S; j++) sum += w[j] = w[j] === -Infinity ? 0 : Math.exp(w[j]! - max);
        for (let e = 0; e < E; e++) {
          let acc = 0;
          for (let j = 0; j < S; j++) acc += w[j]! * v[((b * S + j) * H + h) * E + e]!;
          out[((b * L + i) * H + h) * E + e] = acc / sum;
        }
      }
  return out;
}

/** Interleaved-pair rotary in place on x [B, S, H, D] with cos / sin [S, D / 2]. */
export function ropeInterleaved(x: Float64Array, B: number, S: number, H: number, D: number, cos: ArrayLike<number>, sin: ArrayLike<number>): Float64Array {
  const half = D / 2;
  for (let b = 0; b < B; b++)
    for (let t = 0; t < S; t++)
      for (let h = 0; h < H; h++)
        for (let i = 0; i < half; i++) {
          const a = ((b * S + t) * H + h) * D + 2 * i;
          const c = cos[t * half + i]!;
          const s = sin[t * half + i]!;
          const x0 = x[a]!;
          const x1 = x[a + 1]!;
          x[a] = x0 * c - x1 * s;
          x[a + 1] = x1 * c + x0 * s;
        }
  return x;
}

/** Rows [start, start + n) of each batch of a [B, R, C] array. */
export function rowsOf(x: ArrayLike<number>, B: number, R: number, C: number, start: number, n: number): Float64Array {
  const y = new Float64Array(B * n * C);
  for (let b = 0; b < B; b++) for (let r = 0; r < n; r++) for (let c = 0; c < C; c++) y[(b * n + r) * C + c] = x[(b * R + start + r) * C + c]!;
  return y;
}

/** [B, R1, C] ++ [B, R2, C] along the rows. */
export function catRows(a: ArrayLike<number>, r1: number, b: ArrayLike<number>, r2: number, B: number, C: number): Float64Array {
  const y = new Float64Array(B * (r1 + r2) * C);
  for (let i = 0; i < B; i++) {
    y.set(Array.prototype.slice.call(a, i * r1 * C, (i + 1) * r1 * C) as number[], i * (r1 + r2) * C);
    y.set(Array.prototype.slice.call(b, i * r2 * C, (i + 1) * r2 * C) as number[], (i * (r1 + r2) + r1) * C);
  }
  return y;
}
