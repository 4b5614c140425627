import { DTYPE_INFO, F, Module, defineTask, hostArray, type Tensor } from '@fastkernels/core';
import { bytesOf, fromInts, randn } from '../../../common/inputs.js';
import { FAMILY } from '../family.js';

/**
 * ColBERT's document token mask (colbert.modeling.colbert.ColBERT.mask): a token is kept when it is not the pad token and
 * not in the punctuation skiplist, from the ids alone, so any layout works: packed tokens [T] or a padded batch [B, S].
 * forward(inputIds i64) -> keep bool of the same shape. One `ne` per skiplist id (ColBERT's list is the 32 ASCII
 * punctuation tokens): a candidate may fuse it into one gather.
 */
export class ColBERTv2TokenMask extends Module {
  constructor(
    readonly skiplist: readonly number[] = [],
    readonly padTokenId = 0,
  ) {
    super();
  }

  forward(inputIds: Tensor): Tensor {
    let keep = F.ne(inputIds, this.padTokenId);
    for (const id of this.skiplist) {
      const ne = F.ne(inputIds, id);
      const next = F.logicalAnd(keep, ne);
      ne.dispose();
      keep.dispose();
      keep = next;
    }
    return keep;
  }
}

/**
 * ColBERT's late interaction (colbert.modeling.colbert.colbert_score): for query n and document n, the sum over query
 * tokens of the max over the document's kept tokens of q . d (a masked-out token scores -9999, as ColBERT pads).
 * forward(q [N, Lq, D], d [N, Ld, D], dMask [N, Ld] bool) -> scores [N]. The task's module.
 */
export class ColBERTv2MaxSim extends Module {
  forward(q: Tensor, d: Tensor, dMask: Tensor): Tensor {
    const qt = q.transpose(1, 2);
    const sim = F.bmm(d, qt); // [N, Ld, Lq]
    qt.dispose();
    const m = dMask.unsqueeze(2);
    const masked = F.where(m, sim, -9999);
    m.dispose();
    sim.dispose();
    const best = F.amax(masked, { dim: 1 }); // [N, Lq]
    masked.dispose();
    const s = F.sum(best, { dim: -1 });
    best.dispose();
    return s;
  }
}

/** Golden float64 colbert_score on host arrays. */
export function maxSimReference(q: Float64Array, d: Float64Array, mask: ArrayLike<number>, N: number, Lq: number, Ld: number, D: number): Float64Array {
  const out = new Float64Array(N);
  for (let n = 0; n < N; n++) {
    let total = 0;
    for (let i = 0; i < Lq; i++) {
      let best = -Infinity;
      for (let j = 0; j < Ld; j++) {
        let dot = 0;
        for (let e = 0; e < D; e++) dot += q[(n * Lq + i) * D + e]! * d[(n * Ld + j) * D + e]!;
        best = Math.max(best, mask[n * Ld + j] ? dot : -9999);
      }
      total += best;
    }
    out[n] = total;
  }
  return out;
}

const simCase = (name: string, dtype: 'f32' | 'bf16', N: number, Lq: number, Ld: number, D: number, docLens: number[]) => ({ name, dtype, dims: { N, Lq, Ld, D }, init: [], options: { docLens } });

export const colbertv2OpsTask = defineTask(
  {
    id: 'L2/colbertv2_ops',
    level: 2,
    className: 'ColBERTv2MaxSim',
    family: [FAMILY],
    architectures: ['colbertv2'],
    mirrors: 'colbert.modeling.colbert.colbert_score',
    description: "ColBERT late interaction: per query / document pair, sum over query tokens of the max dot product over the document's kept tokens (ColBERTv2TokenMask, in the same file, makes that mask).",
    init: [],
    inputs: [
      { name: 'q', dtype: 'act', shape: ['N', 'Lq', 'D'], doc: 'normalised query token vectors' },
      { name: 'd', dtype: 'act', shape: ['N', 'Ld', 'D'], doc: 'normalised document token vectors (padded)' },
      { name: 'dMask', dtype: 'bool', shape: ['N', 'Ld'], doc: 'kept document tokens' },
    ],
    outputs: [{ name: 'scores', dtype: 'act', shape: ['N'] }],
    tolerance: { bf16: { atol: 5e-2, rtol: 2e-2 } },
    imports: [],
    cases: {
      ci: [simCase('small-f32', 'f32', 3, 5, 9, 16, [9, 4, 6]), simCase('small-bf16', 'bf16', 2, 4, 7, 32, [3, 7])],
      // ColBERTv2 reranking: 32-token queries against 1000 candidate passages of up to 180 tokens, 128-dim vectors.
      production: [simCase('colbertv2-rerank-1000x180', 'bf16', 1000, 32, 180, 128, Array.from({ length: 1000 }, (_, i) => 60 + ((i * 37) % 121)))],
    },
  },
  {
    baseline: ColBERTv2MaxSim,
    initParameters: () => {}, // no parameters
    makeInputs: (c, ctx, rng) => {
      const { N, Lq, Ld, D } = c.dims as { N: number; Lq: number; Ld: number; D: number };
      const lens = (c.options as { docLens: number[] }).docLens;
      const mask = lens.flatMap((n) => Array.from({ length: Ld }, (_, j) => (j < n ? 1 : 0)));
      return [randn(ctx, rng, [N, Lq, D], c.dtype, 1 / Math.sqrt(D)), randn(ctx, rng, [N, Ld, D], c.dtype, 1 / Math.sqrt(D)), fromInts(ctx, mask, [N, Ld], 'bool')];
    },
    reference: ([q, d, m], _p, c) => {
      const { N, Lq, Ld, D } = c.dims as { N: number; Lq: number; Ld: number; D: number };
      return [hostArray([N], maxSimReference(q!.data, d!.data, m!.data, N, Lq, Ld, D))];
    },
    work: (c) => {
      const { N, Lq, Ld, D } = c.dims as { N: number; Lq: number; Ld: number; D: number };
      const it = DTYPE_INFO[c.dtype].itemsize;
      return { bytes: bytesOf([N, Lq + Ld, D], it) + bytesOf([N, Ld], 1) + bytesOf([N], it), flops: 2 * N * Lq * Ld * D };
    },
  },
);
