/**
 * GLA on the engine (CPU, f32): continuous batching with the recurrent state in the engine's state pool equals each
 * sequence generated alone with the state carried by hand (greedyGenerateRecurrent on L4/gla, the same weights) —
 * batched with prompts of different lengths, with chunked prefill carrying the state across chunks and mixed
 * prefill + decode steps, with recompute preemption, and with (emulated) CUDA-graph decode whose padding rows touch no
 * slot; every state slot is back in the free list after the requests finish or are aborted. `e2e` and `capture` run it
 * on the same engine (a wrong recurrent-decode candidate is caught and dropped).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CaptureIndexSchema, Rng, type ExecutionContext, type Tensor } from '@fastkernels/core';
import { afterAll, describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../test/l1-harness.js';
import { PREEMPT_MAX_TOKENS, engineMaxTokens, enginePrompts, expectAbortsFreeSlots, expectPreemptionsRecompute, preemptionPrompts } from '../../../test/recurrent-engine-checks.js';
import { captureWorkload } from '../../engine/capture.js';
import { EmulatedGraphRuntime } from '../../engine/device-io.js';
import { E2eRunner, type E2eModelSource } from '../../engine/e2e.js';
import { syntheticWorkload } from '../../engine/workloads.js';
import { FusedRecurrentGLA } from '../../tasks/L1/recurrent/fused_recurrent_gla.js';
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

// prompts of assorted lengths, two longer than FLA's recurrent cut-off (64)
const PS = enginePrompts(8, 3, cfg.vocabSize);
const MAXT = engineMaxTokens;
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
    const ps = preemptionPrompts(cfg.vocabSize);
    const want = ps.map((p) => greedyGenerateRecurrent(reference, ctx, p, PREEMPT_MAX_TOKENS));
    expectPreemptionsRecompute(engine, ps, want);
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
      expectAbortsFreeSlots(e, PS, MAXT, WANT);
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

describe('GLA through e2e and capture', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'fk-gla-engine-'));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));
  // each run builds its model in the registry it is given (candidates apply), with the test's weights
  const load = (registry: ReturnType<typeof baselineRegistry>) => {
    const c: ExecutionContext = { ...ctx, registry };
    const m = GLACausalLM.create(c, cfg);
    for (const [name, t] of m.namedParameters()) t.copy_(params.get(name)!);
    return { model: m, ctx: c, geometry, dispose: () => m.dispose() };
  };
  const workload = syntheticWorkload({ numRequests: 5, inputLen: [2, 30], outputLen: [3, 8], seed: 2, vocabSize: cfg.vocabSize });

  it('e2e self-test agrees 100%; a candidate whose recurrent decode drops the state is found and dropped', () => {
    const source: E2eModelSource = { name: 'tiny-gla', family: 'linear-attention', load };
    const options = { engine: { maxModelLen: 64, maxNumSeqs: 4, maxNumBatchedTokens: 16, graphs: new EmulatedGraphRuntime() }, throughput: workload, latency: { batchSizes: [1, 2], promptLen: 6, outputLen: 3, warmups: 0, repeats: 1 } };
    const self = new E2eRunner(source, baselineRegistry(), options).evaluate([]);
    expect(self.record.outcome).toBe('ok');
    expect(self.record.discrepancies.every((d) => d === 0)).toBe(true);
    class StatelessDecode extends FusedRecurrentGLA {
      override forward(q: Tensor, k: Tensor, v: Tensor, gk: Tensor, initialState: Tensor | null = null, cuSeqlens: Tensor | null = null, idx: Tensor | null = null): Tensor[] {
        if (idx) initialState!.fill_(0); // forgets every sequence's context before each decode step
        return super.forward(q, k, v, gk, initialState, cuSeqlens, idx);
      }
    }
    const r = new E2eRunner(source, baselineRegistry(), options).evaluate([{ taskId: 'L1/fused_recurrent_gla', cls: StatelessDecode }]);
    expect(r.record.drops.map((d) => d.task)).toEqual(['L1/fused_recurrent_gla']);
  });

  it('capture records the recurrent tasks the engine calls (varlen prefill, pooled decode) and the blocks above them', () => {
    const { path } = captureWorkload({ baseline: baselineRegistry(), workload, outDir: tmp, model: 'tiny-gla', engine: { maxModelLen: 64, maxNumSeqs: 4, maxNumBatchedTokens: 16 }, load });
    const index = CaptureIndexSchema.parse(JSON.parse(readFileSync(path, 'utf8')));
    expect(Object.keys(index.tasks)).toEqual(expect.arrayContaining(['L1/chunk_gla', 'L1/fused_recurrent_gla', 'L2/gla_attention', 'L3/gla_decoder', 'L1/rms_norm_gated', 'L1/sampler']));
    // the pooled decode: B rows of one token, a state in; the varlen prefill: the step's prefill tokens as one row
    const H = cfg.numHeads;
    expect(index.tasks['L1/fused_recurrent_gla']!.forward.every((f) => f.dims.T === 1 && f.dims.H === H && f.options?.initial_state === true)).toBe(true);
    expect(index.tasks['L1/chunk_gla']!.forward.every((f) => f.dims.B === 1 && f.dims.T! <= 16)).toBe(true);
    expect(index.tasks['L2/gla_attention']!.forward.every((f) => f.options?.initial_state === true)).toBe(true);
  });
});
