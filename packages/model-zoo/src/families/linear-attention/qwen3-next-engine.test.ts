/**
 * Qwen3-Next on the engine (CPU, f32): a hybrid stack — the gated-attention layer's K/V in the paged cache, the three
 * DeltaNet layers' conv and delta-rule states in the state pool (two states per layer, one slot per sequence). Continuous
 * batching equals each sequence generated alone (and the float64 forward for some): batched with prompts of different
 * lengths, with chunked prefill (a continuing chunk reads its states from the pool and its keys from the cache), mixed
 * prefill + decode steps, recompute preemption, (emulated) graph decode whose padding rows touch no slot, and aborts;
 * every slot and block is free again afterwards.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CaptureIndexSchema, Rng, toHostArray, type ExecutionContext, type Tensor } from '@fastkernels/core';
import { afterAll, describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../test/l1-harness.js';
import { captureWorkload } from '../../engine/capture.js';
import { EmulatedGraphRuntime } from '../../engine/device-io.js';
import { E2eRunner, type E2eModelSource } from '../../engine/e2e.js';
import { syntheticWorkload } from '../../engine/workloads.js';
import { FusedRecurrentGatedDeltaRule } from '../../tasks/L1/recurrent/fused_recurrent_gated_delta_rule.js';
import { LLMEngine, type EngineOptions } from '../../engine/engine.js';
import { baselineRegistry } from '../../index.js';
import type { Qwen3NextForCausalLM } from './L4/qwen3_next.js';
import { initQwen3NextParameters } from './qwen3-next-cases.js';
import { parseQwen3NextConfig } from './qwen3-next-config.js';
import { qwen3NextArchitecture } from './qwen3-next-model.js';
import { refQwen3NextGreedy } from './qwen3-next-reference.js';

const FIXTURE = join(import.meta.dirname, '../../../fixtures/tiny-qwen3-next');
const cfg = parseQwen3NextConfig(JSON.parse(readFileSync(join(FIXTURE, 'config.json'), 'utf8')));
const ctx: ExecutionContext = { backend: cpuBackend(), device: 0, dtype: 'f32', registry: baselineRegistry() };
const geometry = qwen3NextArchitecture.geometry(cfg);
const model = qwen3NextArchitecture.build(ctx, cfg) as Qwen3NextForCausalLM;
initQwen3NextParameters(model, new Rng(31));
afterAll(() => model.dispose());

function engine(opts: EngineOptions): LLMEngine {
  return new LLMEngine(model, ctx, geometry, { maxModelLen: 128, maxNumSeqs: 8, maxNumBatchedTokens: 256, graphs: false, ...opts });
}

/** Prompts of assorted lengths: one token, short ones, and a few longer than a 64-token chunk. */
function prompts(n: number, seed: number): number[][] {
  const rng = new Rng(seed);
  const lens = [1, 70, 5, 23, 2, 81, 12, 40, 9, 3];
  return Array.from({ length: n }, (_, i) => Array.from({ length: lens[i % lens.length]! }, () => rng.int(0, cfg.vocabSize)));
}
const PS = prompts(8, 3);
const MAXT = (i: number) => 2 + ((i * 5) % 9);
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
function run(opts: EngineOptions) {
  const e = engine(opts);
  try {
    const out = e.generate(PS.map((p, i) => ({ promptIds: p, params: { maxTokens: MAXT(i) } })));
    expect(e.stateSlots!.numUsedSlots).toBe(0);
    expect(e.blockManager.numUsedBlocks).toBe(0);
    return { out, records: e.records, engine: e };
  } finally {
    e.dispose();
  }
}

describe('Qwen3-Next on the engine: paged K/V for gated attention, conv + delta-rule states in the pool', () => {
  it('sizes both: a KV cache for the one attention layer, a state pool with two states per DeltaNet layer', () => {
    const lines: string[] = [];
    const e = engine({ log: (l) => lines.push(l) });
    try {
      const layers = e.stateCache!.layers;
      expect(layers[3]).toBeUndefined();
      expect(layers.slice(0, 3).map((l) => l!.states.map((s) => s.shape))).toEqual([0, 1, 2].map(() => [[8, cfg.convDim, 3], [8, 4, 8, 8]]));
      expect(e.kvCache.layers.filter(Boolean)).toHaveLength(1);
      expect(e.budget.numStateSlots).toBe(8);
      expect(e.budget.stateSlotBytes).toBe(3 * (cfg.convDim * 3 + 4 * 8 * 8) * 4);
      expect(lines.join('\n')).toMatch(/recurrent state .*: 8 slots/);
    } finally {
      e.dispose();
    }
  });

  it('each sequence alone equals the float64 forward (token for token)', () => {
    const p = new Map(model.namedParameters().map(([k, t]) => [k, toHostArray(t)] as const));
    for (const i of [0, 1, 2, 5]) expect(WANT[i], `prompt ${i} (${PS[i]!.length} tokens)`).toEqual(refQwen3NextGreedy(PS[i]!, MAXT(i), p, cfg));
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
    const rng = new Rng(9);
    const ps = Array.from({ length: 6 }, (_, i) => Array.from({ length: 12 + i }, () => rng.int(0, cfg.vocabSize)));
    const want = ps.map((p) => {
      const e = engine({ maxNumSeqs: 1, maxModelLen: 32 });
      try {
        return e.generate([{ promptIds: p, params: { maxTokens: 9 } }])[0]!.tokenIds;
      } finally {
        e.dispose();
      }
    });
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

  it('graph decode (emulated on the CPU): padding rows touch no slot, = eager', () => {
    const { out, records } = run({ graphs: new EmulatedGraphRuntime(), maxGraphBatch: 8 });
    expect(out.map((o) => o.tokenIds)).toEqual(WANT);
    expect(records.some((r) => r.graph)).toBe(true);
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
    } finally {
      e.dispose();
    }
  });
});

describe('Qwen3-Next through e2e and capture', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'fk-qwen3-next-engine-'));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));
  const params = new Map(model.namedParameters());
  // each run builds its model in the registry it is given (candidates apply), with the test's weights
  const load = (registry: ReturnType<typeof baselineRegistry>) => {
    const c: ExecutionContext = { ...ctx, registry };
    const m = qwen3NextArchitecture.build(c, cfg) as Qwen3NextForCausalLM;
    for (const [name, t] of m.namedParameters()) t.copy_(params.get(name)!);
    return { model: m, ctx: c, geometry, dispose: () => m.dispose() };
  };
  const workload = syntheticWorkload({ numRequests: 5, inputLen: [2, 30], outputLen: [3, 8], seed: 2, vocabSize: cfg.vocabSize });

  it('e2e self-test agrees 100%; a candidate whose recurrent decode drops the state is found and dropped', () => {
    const source: E2eModelSource = { name: 'tiny-qwen3-next', family: 'linear-attention', load };
    const options = { engine: { maxModelLen: 64, maxNumSeqs: 4, maxNumBatchedTokens: 16, graphs: false as const }, throughput: workload, latency: { batchSizes: [1, 2], promptLen: 6, outputLen: 3, warmups: 0, repeats: 1 } };
    const self = new E2eRunner(source, baselineRegistry(), options).evaluate([]);
    expect(self.record.outcome).toBe('ok');
    expect(self.record.discrepancies.every((d) => d === 0)).toBe(true);
    class StatelessDecode extends FusedRecurrentGatedDeltaRule {
      override forward(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, initialState: Tensor | null = null): Tensor[] {
        return super.forward(q, k, v, g, beta, initialState ? null : initialState); // forgets every sequence's context
      }
    }
    const r = new E2eRunner(source, baselineRegistry(), options).evaluate([{ taskId: 'L1/fused_recurrent_gated_delta_rule', cls: StatelessDecode }]);
    expect(r.record.drops.map((d) => d.task)).toEqual(['L1/fused_recurrent_gated_delta_rule']);
  });

  it('capture records the DeltaNet and attention tasks the engine calls, with the options their cases read', () => {
    const { path } = captureWorkload({ baseline: baselineRegistry(), workload, outDir: tmp, model: 'tiny-qwen3-next', engine: { maxModelLen: 64, maxNumSeqs: 4, maxNumBatchedTokens: 16 }, load });
    const index = CaptureIndexSchema.parse(JSON.parse(readFileSync(path, 'utf8')));
    const ids = ['L1/chunk_gated_delta_rule', 'L1/fused_recurrent_gated_delta_rule', 'L1/causal_conv1d', 'L1/gemma_rms_norm', 'L1/rms_norm_gated', 'L2/qwen3_next_gdn_attention', 'L2/qwen3_next_attention', 'L2/shared_expert_moe', 'L3/qwen3_next_decoder', 'L4/qwen3_next'];
    expect(Object.keys(index.tasks)).toEqual(expect.arrayContaining(ids));
    // decodes: one-token rows over the state pool; prefills: the step's prefill chunks packed (B = 1, cu_seqlens), always
    // over the pool (the runner zeroes a new sequence's rows), so every case carries a state
    expect(index.tasks['L1/fused_recurrent_gated_delta_rule']!.forward.every((f) => f.dims.T === 1 && f.options?.initial_state === true)).toBe(true);
    expect(index.tasks['L1/chunk_gated_delta_rule']!.forward.every((f) => f.dims.B === 1 && f.dims.T! <= 16 && f.options?.initial_state === true)).toBe(true);
    expect(index.tasks['L1/chunk_gated_delta_rule']!.forward.some((f) => f.dims.N! > 1)).toBe(true);
    expect(index.tasks['L1/causal_conv1d']!.forward.some((f) => f.dims.L === 1 && f.dims.B! > 1)).toBe(true);
    expect(index.tasks['L3/qwen3_next_decoder']!.forward.some((f) => (f.options?.decodeCtxLens as number[]).length > 0)).toBe(true);
  });
});
