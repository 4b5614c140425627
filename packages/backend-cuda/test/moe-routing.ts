/**
 * Routing inputs for the fused MoE GEMM tests (CPU emulation and GPU): random top-k expert choices with some experts
 * never chosen, and moe_align's layout of them in plain loops (vLLM's moe_align_block_size: slots grouped by expert in
 * ascending order, each expert padded to whole blocks, padding = numel, blocks past the padded count expert -1).
 */
import type { Rng } from '@fastkernels/core';
import type { MoeShape } from '../src/ops/moe/fused-moe-plan.js';

export interface Alignment {
  readonly sorted: number[];
  readonly experts: number[];
  readonly post: number;
  readonly blockSize: number;
}

/** The MoE widths the tests plan and run at: experts, top-k, hidden size H, expert intermediate size I. */
export const MIXTRAL = { E: 8, topK: 2, H: 4096, I: 14336 } as const;
export const QWEN3 = { E: 128, topK: 8, H: 2048, I: 768 } as const;

/** moe_align's sizes for M tokens, top-k of E, blocks of bs (P = M topK + E (bs - 1), whole blocks), an [N, K] weight. */
export function moeShape(M: number, topK: number, E: number, N: number, K: number, bs: number): MoeShape {
  const NB = Math.ceil((M * topK + E * (bs - 1)) / bs);
  return { M, topK, E, N, K, P: NB * bs, NB };
}

/** topK distinct experts per row among `allowed` (default: all but the first and last, so zero-token experts exist). */
export function randomRouting(rng: Rng, M: number, E: number, topK: number, allowed?: readonly number[]): number[] {
  const pool0 = allowed ?? (E > topK + 1 ? Array.from({ length: E - 2 }, (_, i) => i + 1) : Array.from({ length: E }, (_, i) => i));
  if (pool0.length < topK) throw new RangeError(`randomRouting: ${pool0.length} experts allowed for top-${topK}`);
  const ids: number[] = [];
  for (let m = 0; m < M; m++) {
    const pool = [...pool0];
    for (let k = 0; k < topK; k++) {
      const j = k + rng.int(0, pool.length - k);
      [pool[k], pool[j]] = [pool[j]!, pool[k]!];
      ids.push(pool[k]!);
    }
  }
  return ids;
}

/** moe_align_block_size in plain loops (P = numel + E * (bs - 1) rounded up to whole blocks). */
export function alignRouting(ids: readonly number[], E: number, blockSize: number): Alignment {
  const n = ids.length;
  const NB = Math.ceil((n + E * (blockSize - 1)) / blockSize);
  const sorted = new Array<number>(NB * blockSize).fill(n);
  const experts = new Array<number>(NB).fill(-1);
  let at = 0;
  for (let e = 0; e < E; e++) {
    const slots = ids.flatMap((x, s) => (x === e ? [s] : []));
    slots.forEach((s, j) => (sorted[at + j] = s));
    const padded = Math.ceil(slots.length / blockSize) * blockSize;
    for (let b = at / blockSize; b < (at + padded) / blockSize; b++) experts[b] = e;
    at += padded;
  }
  return { sorted, experts, post: at, blockSize };
}

/** The same layout with `expert`'s blocks marked -1 (a non-local expert under expert parallelism: zero rows). */
export function withNonLocal(a: Alignment, expert: number): Alignment {
  return { ...a, experts: a.experts.map((e) => (e === expert ? -1 : e)) };
}

/** Float64 reference of fused_moe_gemm over an alignment (the op's contract), as a flat [M * topK, N] array. */
export function fusedMoeReference(x: ArrayLike<number>, w: ArrayLike<number>, tw: ArrayLike<number> | null, a: Alignment, M: number, K: number, N: number, topK: number): Float64Array {
  const out = new Float64Array(M * topK * N);
  const bs = a.blockSize;
  a.sorted.forEach((s, i) => {
    const b = Math.floor(i / bs);
    if (s >= M * topK || b * bs >= a.post) return;
    const e = a.experts[b]!;
    for (let n = 0; n < N; n++) {
      let acc = 0;
      if (e >= 0) for (let k = 0; k < K; k++) acc += x[Math.floor(s / topK) * K + k]! * w[(e * N + n) * K + k]!;
      out[s * N + n] = acc * (tw ? tw[s]! : 1);
    }
  });
  return out;
}

/** A grouped_gemm call's shape: T routed rows, E experts of an [N, K] weight, its routing form, bias and weight layout. */
export interface GroupedGemmCase {
  readonly T: number;
  readonly E: number;
  readonly N: number;
  readonly K: number;
  readonly routing: 'ids' | 'offsets';
  readonly bias: boolean;
  /** weights as the transposed view of an [E, K, N] tensor (n contiguous) */
  readonly transposed: boolean;
}

/**
 * grouped_gemm's routing for a case: 'ids' gives each row an expert, every `skipEvery`-th row (from `skipAt`) -1 (a row
 * no expert takes); 'offsets' gives [E + 1] sorted run starts with some experts empty and the last two rows padding.
 */
export function groupedGemmRouting(c: GroupedGemmCase, rng: Rng, skipEvery = 7, skipAt = 3): number[] {
  if (c.routing === 'ids') return Array.from({ length: c.T }, (_, t) => (t % skipEvery === skipAt ? -1 : rng.int(0, c.E)));
  const live = Math.max(0, c.T - 2);
  const cuts = Array.from({ length: c.E - 1 }, () => rng.int(0, live + 1)).sort((a, b) => a - b);
  return [0, ...cuts, live];
}
