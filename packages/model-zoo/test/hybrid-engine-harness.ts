/**
 * The engine tests every hybrid (attention + recurrent) model shares: a tiny model from its fixture config, seeded
 * weights, and the same prompts run alone and through continuous batching. `hybridEngineHarness` builds the fixture
 * (model, engine factory, each prompt generated alone, the e2e / capture loader); `describeHybridEngineEquivalence`
 * registers the checks that hold for any such model: alone = the float64 forward token for token; batched, chunked,
 * preempted, graph-decoded and aborted runs = alone; every state slot and KV block free again afterwards.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Rng, toHostArray, type ExecutionContext, type HostArray, type Module, type ModuleRegistry } from '@fastkernels/core';
import { afterAll, expect, it } from 'vitest';
import { cpuBackend } from './l1-harness.js';
import { PREEMPT_MAX_TOKENS, engineMaxTokens, enginePrompts, expectAbortsFreeSlots, expectPreemptionsRecompute, preemptionPrompts } from './recurrent-engine-checks.js';
import { EmulatedGraphRuntime } from '../src/engine/device-io.js';
import { E2eRunner, type CandidateOverride, type E2eModelSource } from '../src/engine/e2e.js';
import { LLMEngine, type EngineOptions } from '../src/engine/engine.js';
import type { CausalLM } from '../src/engine/model-runner.js';
import { syntheticWorkload } from '../src/engine/workloads.js';
import type { ModelArchitecture } from '../src/models/registry.js';
import { baselineRegistry } from '../src/index.js';

export interface HybridEngineModel<C extends { readonly vocabSize: number }> {
  /** The fixture folder under packages/model-zoo/fixtures (also the e2e / capture model name): 'tiny-qwen3-next'. */
  readonly fixture: string;
  readonly architecture: ModelArchitecture<C>;
  /** Seeds the built model's parameters. */
  initParameters(model: Module, rng: Rng): void;
  /** The float64 forward: `steps` greedy tokens after `prompt` with these host parameters. */
  float64Greedy(prompt: readonly number[], steps: number, params: ReadonlyMap<string, HostArray>, cfg: C): number[];
}

/** Builds the model on the CPU (f32, seed 31) and generates each prompt alone; disposes the model after the file. */
export function hybridEngineHarness<C extends { readonly vocabSize: number }>(spec: HybridEngineModel<C>) {
  const cfg = spec.architecture.parseConfig(JSON.parse(readFileSync(join(import.meta.dirname, '../fixtures', spec.fixture, 'config.json'), 'utf8')), 'config.json');
  const ctx: ExecutionContext = { backend: cpuBackend(), device: 0, dtype: 'f32', registry: baselineRegistry() };
  const geometry = spec.architecture.geometry(cfg);
  const model = spec.architecture.build(ctx, cfg) as CausalLM;
  spec.initParameters(model, new Rng(31));
  afterAll(() => model.dispose());

  const engine = (opts: EngineOptions): LLMEngine => new LLMEngine(model, ctx, geometry, { maxModelLen: 128, maxNumSeqs: 8, maxNumBatchedTokens: 256, graphs: false, ...opts });
  const PS = enginePrompts(8, 3, cfg.vocabSize);
  const MAXT = engineMaxTokens;
  /** Each sequence alone on the engine: one sequence at a time, its prompt prefilled whole. */
  const WANT = PS.map((p, i) => {
    const e = engine({ maxNumSeqs: 1 });
    try {
      return e.generate([{ promptIds: p, params: { maxTokens: MAXT(i) } }])[0]!.tokenIds;
    } finally {
      e.dispose();
    }
  });

  /** Run PS through an engine; checks that every slot and block is free again. */
  const run = (opts: EngineOptions) => {
    const e = engine(opts);
    try {
      const out = e.generate(PS.map((p, i) => ({ promptIds: p, params: { maxTokens: MAXT(i) } })));
      expect(e.stateSlots!.numUsedSlots).toBe(0);
      expect(e.blockManager.numUsedBlocks).toBe(0);
      return { out, records: e.records };
    } finally {
      e.dispose();
    }
  };

  // each e2e / capture run builds its model in the registry it is given (candidates apply), with the test's weights
  const params = new Map(model.namedParameters());
  const load = (registry: ModuleRegistry) => {
    const c: ExecutionContext = { ...ctx, registry };
    const m = spec.architecture.build(c, cfg) as CausalLM;
    for (const [name, t] of m.namedParameters()) t.copy_(params.get(name)!);
    return { model: m, ctx: c, geometry, dispose: () => m.dispose() };
  };
  const workload = syntheticWorkload({ numRequests: 5, inputLen: [2, 30], outputLen: [3, 8], seed: 2, vocabSize: cfg.vocabSize });
  const source: E2eModelSource = { name: spec.fixture, family: 'linear-attention', load };
  const e2eOptions = { engine: { maxModelLen: 64, maxNumSeqs: 4, maxNumBatchedTokens: 16, graphs: false as const }, throughput: workload, latency: { batchSizes: [1, 2], promptLen: 6, outputLen: 3, warmups: 0, repeats: 1 } };
  /** The e2e record with these candidates over the baseline registry. */
  const e2e = (candidates: readonly CandidateOverride[]) => new E2eRunner(source, baselineRegistry(), e2eOptions).evaluate(candidates).record;
  /** The engine settings capture runs under. */
  const captureEngine = { maxModelLen: 64, maxNumSeqs: 4, maxNumBatchedTokens: 16 };

  return { spec, cfg, ctx, geometry, model, engine, PS, MAXT, WANT, run, load, workload, e2e, captureEngine };
}

export type HybridEngineHarness<C extends { readonly vocabSize: number }> = ReturnType<typeof hybridEngineHarness<C>>;

/** The checks every hybrid model passes on the engine; call inside a describe. */
export function describeHybridEngineEquivalence<C extends { readonly vocabSize: number }>(h: HybridEngineHarness<C>): void {
  const { cfg, model, engine, PS, MAXT, WANT, run } = h;

  it('each sequence alone equals the float64 forward (token for token)', () => {
    const p = new Map(model.namedParameters().map(([k, t]) => [k, toHostArray(t)] as const));
    for (const i of [0, 1, 2, 5]) expect(WANT[i], `prompt ${i} (${PS[i]!.length} tokens)`).toEqual(h.spec.float64Greedy(PS[i]!, MAXT(i), p, cfg));
    expect(new Set(WANT.flat()).size, 'the continuations are not one token').toBeGreaterThan(3);
  });

  it('batched generation of sequences with different prompt lengths = each sequence alone', () => {
    const { out, records } = run({});
    expect(out.map((o) => o.tokenIds)).toEqual(WANT);
    expect(new Set(records.filter((r) => r.kind === 'decode').map((r) => r.numSeqs)).size).toBeGreaterThan(2);
  });

  it('chunked prefill (8 tokens a step) carries states and keys across chunks; mixed prefill + decode steps; = alone', () => {
    const { out, records } = run({ maxNumBatchedTokens: 8, maxNumSeqs: 3 });
    expect(out.map((o) => o.tokenIds)).toEqual(WANT);
    expect(records.some((r) => r.kind === 'mixed')).toBe(true);
    expect(records.every((r) => r.numTokens <= 8 && r.numSeqs <= 3)).toBe(true);
  });

  it('a preempted sequence is recomputed into a fresh slot and continues as an uninterrupted one', () => {
    const ps = preemptionPrompts(cfg.vocabSize);
    const want = ps.map((p) => {
      const e = engine({ maxNumSeqs: 1, maxModelLen: 32 });
      try {
        return e.generate([{ promptIds: p, params: { maxTokens: PREEMPT_MAX_TOKENS } }])[0]!.tokenIds;
      } finally {
        e.dispose();
      }
    });
    expectPreemptionsRecompute(engine, ps, want);
  });

  it('graph decode (emulated on the CPU): padding rows touch no slot, = eager', () => {
    const { out, records } = run({ graphs: new EmulatedGraphRuntime(), maxGraphBatch: 8 });
    expect(out.map((o) => o.tokenIds)).toEqual(WANT);
    expect(records.some((r) => r.graph)).toBe(true);
  });

  it('aborting requests (running, mid-prefill or waiting) frees their slots; the others are unaffected', () => {
    const e = engine({ maxNumBatchedTokens: 16, maxNumSeqs: 4 });
    try {
      expectAbortsFreeSlots(e, PS, MAXT, WANT);
    } finally {
      e.dispose();
    }
  });
}

/** e2e's self-test agrees 100% (every discrepancy zero). */
export function expectE2eSelfTestAgrees<C extends { readonly vocabSize: number }>(h: HybridEngineHarness<C>): void {
  const self = h.e2e([]);
  expect(self.outcome).toBe('ok');
  expect(self.discrepancies.every((d) => d === 0)).toBe(true);
}

/** A wrong candidate for `taskId` is used by e2e, found and dropped (and nothing else is). */
export function expectE2eDrops<C extends { readonly vocabSize: number }>(h: HybridEngineHarness<C>, candidate: CandidateOverride): void {
  expect(h.e2e([candidate]).drops.map((d) => d.task)).toEqual([candidate.taskId]);
}
