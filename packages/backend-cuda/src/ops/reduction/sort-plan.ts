/**
 * The stages of a sort / topk along a line of D elements (pure, CPU-tested). A line of at most SORT_MAX elements is one
 * segment sorted by one block. topk over a longer line runs in stages: segments of SORT_MAX, each keeping its top k
 * (so k <= SORT_MAX / 2 and each stage at least halves the line), until the candidates fit one segment.
 */
import { SORT_MAX } from './sort-source.js';

export interface SortStage {
  /** Elements of the line this stage reads. */
  readonly D: number;
  readonly segLen: number;
  readonly nSeg: number;
  /** Pairs written per segment. */
  readonly K: number;
  /** segLen rounded up to a power of two (>= 2): the bitonic network's size. */
  readonly P: number;
}

export const pow2 = (n: number) => Math.max(2, 2 ** Math.ceil(Math.log2(Math.max(n, 1))));

/** The block size for a network of P: half of P (a thread a pair), at least a warp, at most 1024. */
export const sortThreads = (P: number) => Math.min(1024, Math.max(32, P >> 1));

/** Stages of a topk (k of D) or a sort (k = D); a string says why it is not supported. */
export function planSort(D: number, k: number, max = SORT_MAX): SortStage[] | string {
  if (D <= max) return [{ D, segLen: D, nSeg: 1, K: k, P: pow2(D) }];
  if (k === D) return `sort of a dim of ${D} elements: the shared-memory sort takes at most ${max}`;
  if (k > max / 2) return `topk with k=${k} > ${max / 2} over a dim of ${D} > ${max} elements`;
  const stages: SortStage[] = [];
  let d = D;
  while (d > max) {
    const nSeg = Math.ceil(d / max);
    stages.push({ D: d, segLen: max, nSeg, K: k, P: max });
    d = nSeg * k;
  }
  stages.push({ D: d, segLen: d, nSeg: 1, K: k, P: pow2(d) });
  return stages;
}
