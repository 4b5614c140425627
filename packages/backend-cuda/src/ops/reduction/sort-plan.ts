/**
 * The stages of a sort / topk along a line of D elements (pure, CPU-tested). A line of at most SORT_MAX elements is one
 * segment sorted by one block. topk over a longer line runs in stages: segments of SORT_MAX, each keeping its top k
 * (so k <= SORT_MAX / 2 and each stage at least halves the line), until the candidates fit one segment. Longer sorts
 * (and larger k) take the global-memory bitonic sort (planLongSort).
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

/**
 * Stages of a topk (k of D) or a sort (k = D) in shared memory; a string when the line needs the long sort instead
 * (planLongSort: a sort, or a topk with k > max / 2, of a line longer than max).
 */
export function planSort(D: number, k: number, max = SORT_MAX): SortStage[] | string {
  if (D <= max) return [{ D, segLen: D, nSeg: 1, K: k, P: pow2(D) }];
  if (k > max / 2) return `${k === D ? 'sort' : `topk with k=${k}`} of a dim of ${D} > ${max} elements`;
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

/** One launch of the long sort (long-sort-source.ts): a chunk-local pass over stages kLo..kHi, or one global step. */
export type LongSortStep = { readonly local: true; readonly kLo: number; readonly kHi: number } | { readonly local: false; readonly k: number; readonly j: number };

/** Longest line the long sort takes (its positions are 32-bit; the pairs of a line take 12 x P bytes at most). */
export const LONG_SORT_MAX = 2 ** 24;

/**
 * The launches sorting lines of D > chunk elements in global memory: each chunk sorted locally (stages 2..chunk), then
 * for every larger stage k the steps with j >= chunk one launch each and the rest in one chunk-local pass.
 */
export function planLongSort(D: number, chunk = SORT_MAX, max = LONG_SORT_MAX): { P: number; steps: LongSortStep[] } | string {
  if (D > max) return `sort of a dim of ${D} elements: the global-memory sort takes at most ${max}`;
  const P = Math.max(pow2(D), chunk);
  const steps: LongSortStep[] = [{ local: true, kLo: 2, kHi: chunk }];
  for (let k = 2 * chunk; k <= P; k *= 2) {
    for (let j = k / 2; j >= chunk; j /= 2) steps.push({ local: false, k, j });
    steps.push({ local: true, kLo: k, kHi: k });
  }
  return { P, steps };
}
