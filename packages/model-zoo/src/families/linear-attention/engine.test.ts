/**
 * GLA on the engine (CPU, f32): continuous batching with the recurrent state in the engine's state pool equals each
 * sequence generated alone with the state carried by hand (greedyGenerateRecurrent on L4/gla, the same weights) —
 * batched with prompts of different lengths, with chunked prefill carrying the state across chunks and mixed
 * prefill + decode steps, with recompute preemption, and with (emulated) CUDA-graph decode whose padding rows touch no
 * slot; every state slot is back in the free list after the requests finish or are aborted.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Rng, type ExecutionContext } from '@fastkernels/core';
import { afterAll, describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../test/l1-harness.js';
import { EmulatedGraphRuntime } from '../../engine/device-io.js';
import { LLMEngine, type EngineOptions } from '../../engine/engine.js';
import { greedyGenerateRecurrent } from '../../engine/recurrent-generate.js';
import { baselineRegistry } from '../../index.js';
import { initGlaParameters } from './cases.js';
import { GLACausalLM } from './causal-lm.js';
import { parseGlaConfig } from './config.js';
import type { GLAForCausalLM } from './L4/gla.js';
import { glaArchitecture } from './model.js';

const FIXTURE = join(import.meta.dirname, '../../../fixtures/tiny-gla');
const cfg = parseGlaConfig(JSON.parse(readFileSync(join(FIXTURE, 'config.json'), 'utf8')));
const ctx: ExecutionContext = { backend: cpuBackend(), device: 0, dtype: 'f32', registry: baselineRegistry() };
const geometry = glaArchitecture.geometry(cfg);

// the state-in / state-out model (L4/gla) and the engine's model with the same tensors
const reference = ctx.registry.createIn<GLAForCausalLM>(ctx, 'L4/gla', cfg);
initGlaParameters(reference, new Rng(31));
const model = GLACausalLM.create(ctx, cfg);
const params = new Map(reference.namedParameters());
for (const [name, t] of model.namedParameters()) t.copy_(params.get(name)!);
afterAll(() => {
  reference.dispose();
  model.dispose();
});

/** Prompts of assorted lengths: one token, short ones, and two longer than FLA's recurrent cut-off (64). */
function prompts(n: number, seed: number): number[][] {
  const rng = new Rng(seed);
  const lens = [1, 70, 5, 23, 2, 81, 12, 40, 9, 3];
  return Array.from({ length: n }, (_, i) => Array.from({ length: lens[i % lens.length]! }, () => Math.floor(rng.uniform() * cfg.vocabSize)));
}
const PS = prompts(8, 3);
const MAXT = (i: number) => 2 + ((i * 5) % 9);
const WANT = PS.map((p, i) => greedyGenerateRecurrent(reference, ctx, p, MAXT(i)));

function engine(opts: EngineOptions): LLMEngine {
  return new LLMEngine(model, ctx, geometry, { maxModelLen: 128, maxNumSeqs: 8, maxNumBatchedTokens: 256, graphs: false, ...opts });
}

/** Run PS through an engine; checks that every slot and block is free again. */
function run(opts: EngineOptions) {
  const e = engine(opts);
  try {
    const out = e.generate(PS.map((p, i) => ({ promptIds: p, params: { maxTokens: MAXT(i) } })));
    expect(e.stateSlots!.numUsedSlots).toBe(0);
    expect(e.stateSlots!.numFreeSlots).toBe(e.stateSlots!.numSlots);
    expect(e.blockManager.numUsedBlocks).toBe(0);
    return { out, records: e.records, engine: e };
  } finally {
    e.dispose();
  }
}

describe('GLA on the engine: the recurrent state in the state pool', () => {
  it('sizes a state pool (one slot per sequence, no KV cache) and says so in the budget', () => {
    const lines: string[] = [];
    const e = engine({ log: (l) => lines.push(l) });
    try {
      expect(e.stateCache!.layers.map((l) => l!.states[0]!.shape)).toEqual([0, 1].map(() => [8, cfg.numHeads, cfg.headKDim, cfg.headVDim]));
      expect(e.kvCache.layers).toHaveLength(0);
      expect(e.budget.numStateSlots).toBe(8);
      expect(e.budget.stateSlotBytes).toBe(2 * cfg.numHeads * cfg.headKDim * cfg.headVDim * 4);
      expect(lines.join('\n')).toMatch(/recurrent state .*: 8 slots/);
      expect(lines.join('\n')).toMatch(/KV cache: none \(no attention layers\)/);
    } finally {
      e.dispose();
    }
  });

  it('batched generation of sequences with different prompt lengths = each sequence alone', () => {
    const { out, records } = run({});
    expect(out.map((o) => o.tokenIds)).toEqual(WANT);
    expect(new Set(WANT.flat()).size, 'the continuations are not one token').toBeGreaterThan(3);
    expect(new Set(records.filter((r) => r.kind === 'decode').map((r) => r.numSeqs)).size).toBeGreaterThan(2);
  });

  it('chunked prefill (8 tokens a step) carries the state across chunks; mixed prefill + decode steps; = unchunked', () => {
    const { out, records } = run({ maxNumBatchedTokens: 8, maxNumSeqs: 3 });
    expect(out.map((o) => o.tokenIds)).toEqual(WANT);
    expect(records.some((r) => r.kind === 'mixed')).toBe(true);
    expect(records.every((r) => r.numTokens <= 8 && r.numSeqs <= 3)).toBe(true);
  });

  it('a preempted sequence is recomputed into a fresh slot and continues as an uninterrupted one', () => {
    // prompts just under a 16-position block that grow past it: with one block per sequence to spare nothing, the
    // scheduler preempts the newest (GLA's blocks hold no memory; here they only bound positions)
    const rng = new Rng(9);
    const ps = Array.from({ length: 6 }, (_, i) => Array.from({ length: 12 + i }, () => Math.floor(rng.uniform() * cfg.vocabSize)));
    const want = ps.map((p) => greedyGenerateRecurrent(reference, ctx, p, 9));
    for (const opts of [{ numKvBlocks: 6, maxModelLen: 32 }, { numKvBlocks: 7, maxModelLen: 32, maxNumBatchedTokens: 10, maxNumSeqs: 5 }]) {
      const e = engine(opts);
      try {
        const out = e.generate(ps.map((p) => ({ promptIds: p, params: { maxTokens: 9 } })));
        expect(out.map((o) => o.tokenIds)).toEqual(want);
        expect(out.reduce((a, o) => a + o.numPreemptions, 0)).toBeGreaterThan(0);
        expect(e.stateSlots!.numUsedSlots).toBe(0);
      } finally {
        e.dispose();
      }
    }
  });

  it('graph decode (emulated on the CPU): padding rows touch no slot, = eager; decode steps are not chained', () => {
    const { out, records, engine: e } = run({ graphs: new EmulatedGraphRuntime(), maxGraphBatch: 8, chainDecode: true });
    expect(out.map((o) => o.tokenIds)).toEqual(WANT);
    expect(records.some((r) => r.graph)).toBe(true);
    expect(e.runner.chainsDecode).toBe(false);
    expect(e.runner.stats.chainedSteps).toBe(0);
  });

  it('aborting requests (running, mid-prefill or waiting) frees their slots; the others are unaffected', () => {
    const e = engine({ maxNumBatchedTokens: 16, maxNumSeqs: 4 });
    try {
      const ids = PS.map((p, i) => e.addRequest(p, { maxTokens: MAXT(i) }));
      const done = new Map<number, number[]>();
      for (let s = 0; s < 3; s++) for (const f of e.step().finished) done.set(f.requestId, f.tokenIds);
      expect(e.stateSlots!.numUsedSlots).toBeGreaterThan(0);
      const dropped = [ids[1]!, ids[2]!, ids[7]!];
      for (const id of dropped) expect(e.abortRequest(id)).toBe(true);
      while (e.hasUnfinished) for (const f of e.step().finished) done.set(f.requestId, f.tokenIds);
      expect(e.stateSlots!.numUsedSlots).toBe(0);
      ids.forEach((id, i) => (dropped.includes(id) ? expect(done.has(id)).toBe(false) : expect(done.get(id)).toEqual(WANT[i])));
      // abort() after an error drops everything
      for (const p of PS.slice(0, 4)) e.addRequest(p, { maxTokens: 4 });
      e.step();
      expect(e.stateSlots!.numUsedSlots).toBeGreaterThan(0);
      e.abort();
      expect(e.stateSlots!.numUsedSlots).toBe(0);
      expect(e.hasUnfinished).toBe(false);
    } finally {
      e.dispose();
    }
  });
});
