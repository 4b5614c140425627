/**
 * Plain float64 loops the whole-model oracles of the generate tests share (engine/generate.test.ts, the MoE and gpt-oss
 * generate tests): written apart from the models' own reference code, so a test compares two implementations.
 */

/** A checkpoint tensor as the oracles read it: row-major values and their shape. */
export interface OracleTensor {
  readonly shape: readonly number[];
  readonly data: Float64Array;
}

/** y = x W^T (+ b) for x [n, K] row-major and W [N, K]. */
export function oracleLinear(x: Float64Array, n: number, w: OracleTensor, b?: OracleTensor): Float64Array {
  const [N, K] = w.shape as [number, number];
  const y = new Float64Array(n * N);
  for (let r = 0; r < n; r++) {
    for (let j = 0; j < N; j++) {
      let acc = b ? b.data[j]! : 0;
      for (let k = 0; k < K; k++) acc += x[r * K + k]! * w.data[j * K + k]!;
      y[r * N + j] = acc;
    }
  }
  return y;
}

/** RMSNorm of each of the n rows of x (row length = w's) with weight w. */
export function oracleRmsNorm(x: Float64Array, n: number, w: Float64Array, eps: number): Float64Array {
  const H = w.length;
  const y = new Float64Array(x.length);
  for (let r = 0; r < n; r++) {
    let ss = 0;
    for (let j = 0; j < H; j++) ss += x[r * H + j]! ** 2;
    const inv = 1 / Math.sqrt(ss / H + eps);
    for (let j = 0; j < H; j++) y[r * H + j] = x[r * H + j]! * inv * w[j]!;
  }
  return y;
}
