/**
 * The block table of a paged KV cache for the paged attention GPU tests (attention.gpu.test.ts,
 * attention-sinks.gpu.test.ts, mla-decode.gpu.test.ts): each sequence's pages drawn in a shuffled order from a pool
 * of just enough blocks plus 3 spare, one spare column a row (zeros past a sequence's pages).
 */
import { Rng, Tensor } from '@fastkernels/core';
import { cpu } from './spine-helpers.js';

export interface PagedBlockTable {
  /** [numSeqs, maxBlocks] i32 on the CPU */
  readonly bt: Tensor;
  readonly maxBlocks: number;
  /** blocks in the cache's pool (the cache tensor's first dim) */
  readonly numBlocks: number;
}

/** The table of sequences of `lens` tokens in blocks of `blockSize`, the pool shuffled by `seed`. */
export function shuffledBlockTable(lens: readonly number[], blockSize: number, seed: number): PagedBlockTable {
  const pages = (L: number) => Math.ceil(L / blockSize);
  const maxBlocks = Math.max(1, ...lens.map(pages)) + 1;
  const numBlocks = lens.reduce((a, L) => a + pages(L), 0) + 3;
  const pool = new Rng(seed).permutation(numBlocks);
  const table = new Array<number>(lens.length * maxBlocks).fill(0);
  let next = 0;
  lens.forEach((L, b) => {
    for (let i = 0; i < pages(L); i++) table[b * maxBlocks + i] = pool[next++]!;
  });
  return { bt: Tensor.fromArray(cpu(), table, [lens.length, maxBlocks], 'i32'), maxBlocks, numBlocks };
}
