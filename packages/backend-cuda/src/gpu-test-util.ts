/** Helpers shared by the *.gpu.test.ts files (not exported from the package). */
import { roundToDType, Tensor, type DType } from '@fastkernels/core';
import { CudaBackend } from './backend.js';

let backend: CudaBackend | undefined;
/** One backend per process; throws with the probe's reason when CUDA is unusable. */
export function gpu(): CudaBackend {
  backend ??= new CudaBackend();
  const a = backend.availability();
  if (!a.available) throw new Error(`CUDA unavailable: ${a.reason}`);
  return backend;
}

/** A seeded uniform [-1, 1) generator (mulberry32). */
export function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (((t ^ (t >>> 14)) >>> 0) / 4294967296) * 2 - 1;
  };
}

export function randomValues(n: number, seed: number, dtype: DType = 'f64'): Float64Array {
  const r = rng(seed);
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) out[i] = roundToDType(r(), dtype);
  return out;
}

export function upload(data: ArrayLike<number>, shape: number[], dtype: DType): Tensor {
  return Tensor.fromArray(gpu(), data, shape, dtype);
}

/** Max |a - b| / (atol + rtol |b|) over all elements (<= 1 passes). */
export function worstRatio(a: ArrayLike<number>, b: ArrayLike<number>, atol: number, rtol: number): number {
  if (a.length !== b.length) throw new Error(`length ${a.length} vs ${b.length}`);
  let w = 0;
  for (let i = 0; i < a.length; i++) {
    const r = Math.abs(a[i]! - b[i]!) / (atol + rtol * Math.abs(b[i]!));
    if (!(r <= w)) w = Number.isNaN(r) ? Infinity : r;
  }
  return w;
}

/** float64 reference: out[b][m][n] = sum_k A[b][m][k] B[b][k][n] (+ bias[n]). */
export function refMatmul(a: Float64Array, b: Float64Array, batch: number, m: number, n: number, k: number, opts: { bBroadcast?: boolean; bias?: Float64Array } = {}): Float64Array {
  const out = new Float64Array(batch * m * n);
  for (let p = 0; p < batch; p++) {
    const ao = p * m * k;
    const bo = opts.bBroadcast ? 0 : p * k * n;
    for (let i = 0; i < m; i++) {
      for (let j = 0; j < n; j++) {
        let s = opts.bias ? opts.bias[j]! : 0;
        for (let q = 0; q < k; q++) s += a[ao + i * k + q]! * b[bo + q * n + j]!;
        out[p * m * n + i * n + j] = s;
      }
    }
  }
  return out;
}
