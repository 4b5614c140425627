/**
 * Engine checks every model with recurrent state in the engine's pool shares (GLA's engine test, and the hybrid models'
 * through hybrid-engine-harness.ts): the prompt sets, recompute preemption = an uninterrupted run, and aborts that free
 * their slots while the other requests finish as they would alone.
 */
import { Rng } from '@fastkernels/core';
import { expect } from 'vitest';
import type { EngineOptions, LLMEngine } from '../src/engine/engine.js';

/** Prompts of assorted lengths: one token, short ones, and a few longer than a 64-token chunk. */
export function enginePrompts(n: number, seed: number, vocabSize: number): number[][] {
  const rng = new Rng(seed);
  const lens = [1, 70, 5, 23, 2, 81, 12, 40, 9, 3];
  return Array.from({ length: n }, (_, i) => Array.from({ length: lens[i % lens.length]! }, () => rng.int(0, vocabSize)));
}

/** Prompt i's max_tokens (2 to 10). */
export const engineMaxTokens = (i: number) => 2 + ((i * 5) % 9);

/** The tokens each preemption prompt generates. */
export const PREEMPT_MAX_TOKENS = 9;

/** Six prompts of 12 to 17 tokens, just under a 16-position block, that grow past it. */
export function preemptionPrompts(vocabSize: number): number[][] {
  const rng = new Rng(9);
  return Array.from({ length: 6 }, (_, i) => Array.from({ length: 12 + i }, () => rng.int(0, vocabSize)));
}

/**
 * The preemption prompts on engines with too few KV blocks for all of them (6, and 7 with chunked steps): some are
 * preempted, recomputed into a fresh slot, and still generate `want`; every slot is free afterwards.
 */
export function expectPreemptionsRecompute(engine: (opts: EngineOptions) => LLMEngine, ps: readonly number[][], want: readonly number[][]): void {
  for (const opts of [{ numKvBlocks: 6, maxModelLen: 32 }, { numKvBlocks: 7, maxModelLen: 32, maxNumBatchedTokens: 10, maxNumSeqs: 5 }]) {
    const e = engine(opts);
    try {
      const out = e.generate(ps.map((p) => ({ promptIds: p, params: { maxTokens: PREEMPT_MAX_TOKENS } })));
      expect(out.map((o) => o.tokenIds)).toEqual(want);
      expect(out.reduce((a, o) => a + o.numPreemptions, 0)).toBeGreaterThan(0);
      expect(e.stateSlots!.numUsedSlots).toBe(0);
    } finally {
      e.dispose();
    }
  }
}

/**
 * On `e` (16 tokens a step, 4 sequences): the prompts added, three steps run, requests 1, 2 and 7 aborted (running,
 * mid-prefill or waiting); every slot is free once the rest finish, the aborted ones return nothing and the others
 * `want`. The engine is left for the caller to go on with and dispose.
 */
export function expectAbortsFreeSlots(e: LLMEngine, prompts: readonly number[][], maxTokens: (i: number) => number, want: readonly number[][]): void {
  const ids = prompts.map((p, i) => e.addRequest(p, { maxTokens: maxTokens(i) }));
  const done = new Map<number, number[]>();
  for (let s = 0; s < 3; s++) for (const f of e.step().finished) done.set(f.requestId, f.tokenIds);
  expect(e.stateSlots!.numUsedSlots).toBeGreaterThan(0);
  const dropped = [ids[1]!, ids[2]!, ids[7]!];
  for (const id of dropped) expect(e.abortRequest(id)).toBe(true);
  while (e.hasUnfinished) for (const f of e.step().finished) done.set(f.requestId, f.tokenIds);
  expect(e.stateSlots!.numUsedSlots).toBe(0);
  ids.forEach((id, i) => (dropped.includes(id) ? expect(done.has(id)).toBe(false) : expect(done.get(id)).toEqual(want[i])));
}
