import { formatShape, type Backend, type DType, type Tensor } from '@fastkernels/core';
import { broadcastShapes, expectRank, gather, gatherBroadcast, gatherInts, output, StridedView } from '../strided.js';

/** a [..., M, K] x b [..., K, N] -> [..., M, N]; batch dims broadcast; float64 sums in k order. */
export function matmul(backend: Backend, a: Tensor, b: Tensor, options: { outDType?: DType } = {}): Tensor {
  if (a.rank < 2 || b.rank < 2) throw new RangeError(`matmul: operands need rank >= 2, got ${formatShape(a.shape)} and ${formatShape(b.shape)}`);
  const M = a.shape[a.rank - 2]!;
  const K = a.shape[a.rank - 1]!;
  const N = b.shape[b.rank - 1]!;
  if (b.shape[b.rank - 2] !== K) throw new RangeError(`matmul: inner dims differ: ${formatShape(a.shape)} x ${formatShape(b.shape)}`);
  const batch = broadcastShapes(a.shape.slice(0, -2), b.shape.slice(0, -2), 'matmul (batch dims)');
  const A = gatherBroadcast(a, [...batch, M, K], 'matmul');
  const B = gatherBroadcast(b, [...batch, K, N], 'matmul');
  const nb = batch.reduce((p, d) => p * d, 1);
  const C = new Float64Array(nb * M * N);
  for (let bi = 0; bi < nb; bi++) {
    const a0 = bi * M * K;
    const b0 = bi * K * N;
    const c0 = bi * M * N;
    for (let m = 0; m < M; m++) {
      const row = c0 + m * N;
      // i-k-j order: each C[m, n] still sums its products in increasing k
      for (let k = 0; k < K; k++) {
        const av = A[a0 + m * K + k]!;
        const br = b0 + k * N;
        for (let n = 0; n < N; n++) C[row + n]! += av * B[br + n]!;
      }
    }
  }
  return output(backend, [...batch, M, N], options.outDType ?? a.dtype, C, 'matmul');
}

/** y = x W^T + b. The weight is read one row at a time, so a large W is never gathered whole into float64. */
export function linear(backend: Backend, x: Tensor, weight: Tensor, bias: Tensor | null): Tensor {
  expectRank(weight, 2, 'linear', 'weight [N, K]');
  const [N, K] = weight.shape as [number, number];
  if (x.rank < 1 || x.shape[x.rank - 1] !== K) throw new RangeError(`linear: x ${formatShape(x.shape)} has last dim != K = ${K} of weight ${formatShape(weight.shape)}`);
  if (bias && (bias.rank !== 1 || bias.shape[0] !== N)) throw new RangeError(`linear: bias ${formatShape(bias.shape)} must be [${N}]`);
  const X = gather(x, 'linear x');
  // Rows from the leading dims, not X.length / K: with K = 0 there are rows but no values.
  const rows = x.shape.slice(0, -1).reduce((a, d) => a * d, 1);
  const bv = bias ? gather(bias, 'linear bias') : undefined;
  const W = new StridedView(weight, 'linear weight');
  const [ws0, ws1] = W.strides as [number, number];
  const wrow = new Float64Array(K);
  const Y = new Float64Array(rows * N);
  for (let n = 0; n < N; n++) {
    for (let k = 0; k < K; k++) wrow[k] = W.acc.get(W.offset + n * ws0 + k * ws1);
    const b = bv ? bv[n]! : 0;
    for (let r = 0; r < rows; r++) {
      let s = 0;
      for (let k = 0; k < K; k++) s += X[r * K + k]! * wrow[k]!;
      Y[r * N + n] = s + b;
    }
  }
  return output(backend, [...x.shape.slice(0, -1), N], x.dtype, Y, 'linear');
}

/** weight [V, H] gathered at integer ids [...] -> [..., H] in the weight's dtype. */
export function embedding(backend: Backend, ids: Tensor, weight: Tensor): Tensor {
  return gatherRows(backend, ids, weight, 0, 'embedding');
}

/**
 * A vocabulary shard's gather: weight [Vlocal, H] holds rows [start, start + Vlocal) of the full table; ids in that
 * range read weight[id - start], every other id gives a zero row.
 */
export function embeddingMasked(backend: Backend, ids: Tensor, weight: Tensor, start: number): Tensor {
  if (!Number.isInteger(start) || start < 0) throw new RangeError(`embeddingMasked: start ${start} must be a non-negative integer`);
  return gatherRows(backend, ids, weight, start, 'embeddingMasked');
}

/** Rows id - start of weight [V, H]; out-of-range ids throw (embedding) or give zero rows (embeddingMasked). */
function gatherRows(backend: Backend, ids: Tensor, weight: Tensor, start: number, op: 'embedding' | 'embeddingMasked'): Tensor {
  expectRank(weight, 2, op, 'weight [V, H]');
  const [V, H] = weight.shape as [number, number];
  const idv = gatherInts(ids, `${op} ids`);
  const W = new StridedView(weight, `${op} weight`);
  const [ws0, ws1] = W.strides as [number, number];
  const out = new Float64Array(idv.length * H); // zeros: the masked rows
  for (let i = 0; i < idv.length; i++) {
    const id = idv[i]! - start;
    if (id < 0 || id >= V) {
      if (op === 'embeddingMasked') continue;
      throw new RangeError(`embedding: id ${id} (at flat index ${i}) out of range for vocab size ${V}`);
    }
    for (let h = 0; h < H; h++) out[i * H + h] = W.acc.get(W.offset + id * ws0 + h * ws1);
  }
  return output(backend, [...ids.shape, H], weight.dtype, out, op);
}
