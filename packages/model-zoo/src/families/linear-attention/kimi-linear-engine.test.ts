/**
 * Kimi-Linear on the engine (CPU, f32): a hybrid stack — the MLA layer's latent rows in the paged cache,
 * the three KDA layers' q / k / v conv states and KDA state in the state pool (four states per layer, one slot per
 * sequence). Continuous batching equals each sequence generated alone (and the float64 forward for some): batched with
 * prompts of different lengths, with chunked prefill (a continuing chunk reads its states from the pool and its keys
 * from the cache), mixed prefill + decode steps, recompute preemption, (emulated) graph decode whose padding rows touch
 * no slot, and aborts; every slot and block is free again afterwards. Through e2e (candidates for L2/kimi_moe and
 * L1/fused_recurrent_kda are used and dropped) and capture (the KDA / MLA / step tasks with the options their cases read).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CaptureIndexSchema, Rng, casesFromCaptures, compareTensors, toHostArray, toleranceFor, withContext, type ExecutionContext, type Module, type Tensor } from '@fastkernels/core';
import { afterAll, describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../test/l1-harness.js';
import { captureWorkload } from '../../engine/capture.js';
import { EmulatedGraphRuntime } from '../../engine/device-io.js';
import { FusedRecurrentKDA } from '../../tasks/L1/recurrent/fused_recurrent_kda.js';
import { E2eRunner, type E2eModelSource } from '../../engine/e2e.js';
import { syntheticWorkload } from '../../engine/workloads.js';
import { LLMEngine, type EngineOptions } from '../../engine/engine.js';
import { baselineRegistry } from '../../index.js';
import { KimiMoE } from './L2/kimi_moe.js';
import type { KimiLinearForCausalLM } from './L4/kimi_linear.js';
import { initKimiParameters } from './kimi-linear-cases.js';
import { parseKimiLinearConfig } from './kimi-linear-config.js';
import { kimiLinearArchitecture } from './kimi-linear-model.js';
import { refKimiLinearGreedy } from './kimi-linear-reference.js';

const FIXTURE = join(import.meta.dirname, '../../../fixtures/tiny-kimi-linear');
const cfg = parseKimiLinearConfig(JSON.parse(readFileSync(join(FIXTURE, 'config.json'), 'utf8')));
const ctx: ExecutionContext = { backend: cpuBackend(), device: 0, dtype: 'f32', registry: baselineRegistry() };
const geometry = kimiLinearArchitecture.geometry(cfg);
const model = kimiLinearArchitecture.build(ctx, cfg) as KimiLinearForCausalLM;
initKimiParameters(model, new Rng(31));
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
    return { out, records: e.records };
  } finally {
    e.dispose();
  }
}

describe('Kimi-Linear on the engine: MLA latent rows in the paged cache, q/k/v conv + KDA states in the pool', () => {
  it('sizes both: a KV cache for the one MLA layer, a state pool with four states per KDA layer', () => {
    const lines: string[] = [];
    const e = engine({ log: (l) => lines.push(l) });
    try {
      const layers = e.stateCache!.layers;
      expect(layers[2]).toBeUndefined();
      const kda = [[8, 16, 3], [8, 16, 3], [8, 16, 3], [8, 2, 8, 8]];
      expect([0, 1, 3].map((l) => layers[l]!.states.map((s) => s.shape))).toEqual([kda, kda, kda]);
      expect(e.kvCache.layers.filter(Boolean)).toHaveLength(1);
      expect(e.kvCache.layers[2]!.kCache.shape.slice(2)).toEqual([1, 16 + 4]);
      expect(e.budget.numStateSlots).toBe(8);
      expect(e.budget.stateSlotBytes).toBe(3 * (3 * 16 * 3 + 2 * 8 * 8) * 4);
      expect(lines.join('\n')).toMatch(/recurrent state .*: 8 slots/);
    } finally {
      e.dispose();
    }
  });

  it('each sequence alone equals the float64 forward (token for token)', () => {
    const p = new Map(model.namedParameters().map(([k, t]) => [k, toHostArray(t)] as const));
    for (const i of [0, 1, 2, 5]) expect(WANT[i], `prompt ${i} (${PS[i]!.length} tokens)`).toEqual(refKimiLinearGreedy(PS[i]!, MAXT(i), p, cfg));
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

describe('Kimi-Linear through e2e and capture', () => {
  const params = new Map(model.namedParameters());
  // each run builds its model in the registry it is given (candidates apply), with the test's weights
  const load = (registry: ReturnType<typeof baselineRegistry>) => {
    const c: ExecutionContext = { ...ctx, registry };
    const m = kimiLinearArchitecture.build(c, cfg) as KimiLinearForCausalLM;
    for (const [name, t] of m.namedParameters()) t.copy_(params.get(name)!);
    return { model: m, ctx: c, geometry, dispose: () => m.dispose() };
  };
  const workload = syntheticWorkload({ numRequests: 5, inputLen: [2, 30], outputLen: [3, 8], seed: 2, vocabSize: cfg.vocabSize });

  it('e2e self-test agrees 100%; a candidate MoE that drops the shared experts and a KDA decode that forgets the state are each found and dropped', () => {
    const source: E2eModelSource = { name: 'tiny-kimi-linear', family: 'linear-attention', load };
    const options = { engine: { maxModelLen: 64, maxNumSeqs: 4, maxNumBatchedTokens: 16, graphs: false as const }, throughput: workload, latency: { batchSizes: [1, 2], promptLen: 6, outputLen: 3, warmups: 0, repeats: 1 } };
    const self = new E2eRunner(source, baselineRegistry(), options).evaluate([]);
    expect(self.record.outcome).toBe('ok');
    expect(self.record.discrepancies.every((d) => d === 0)).toBe(true);
    class NoSharedExperts extends KimiMoE {
      override forward(hiddenStates: Tensor): Tensor {
        const logits = this.gateLogits(hiddenStates);
        try {
          return this.experts.forward(hiddenStates, logits, this.eScoreCorrectionBias);
        } finally {
          logits.dispose();
        }
      }
    }
    const r = new E2eRunner(source, baselineRegistry(), options).evaluate([{ taskId: 'L2/kimi_moe', cls: NoSharedExperts }]);
    expect(r.record.drops.map((d) => d.task)).toEqual(['L2/kimi_moe']);
    // the KDA layers build their delta rule through the registry: a candidate decode that forgets the state is used, found and dropped
    class StatelessDecode extends FusedRecurrentKDA {
      override forward(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, initialState: Tensor | null = null, cuSeqlens: Tensor | null = null, ssmStateIndices: Tensor | null = null): Tensor[] {
        if (!ssmStateIndices) return super.forward(q, k, v, g, beta, null, cuSeqlens);
        // rows of a scratch pool of zeros: every decode forgets its sequence's context
        const scratch = initialState!.clone().fill_(0);
        try {
          return super.forward(q, k, v, g, beta, scratch, cuSeqlens, ssmStateIndices);
        } finally {
          scratch.dispose();
        }
      }
    }
    const kda = new E2eRunner(source, baselineRegistry(), options).evaluate([{ taskId: 'L1/fused_recurrent_kda', cls: StatelessDecode }]);
    expect(kda.record.drops.map((d) => d.task)).toEqual(['L1/fused_recurrent_kda']);
  });

  it('capture records the KDA, MLA and MoE tasks the engine calls, with the options their cases read; the captured cases build inputs and match the float64 references', () => {
    const tmp = mkdtempSync(join(tmpdir(), 'fk-kimi-linear-capture-'));
    try {
      const { path } = captureWorkload({ baseline: baselineRegistry(), workload, outDir: tmp, model: 'tiny-kimi-linear', engine: { maxModelLen: 64, maxNumSeqs: 4, maxNumBatchedTokens: 16 }, load });
      const index = CaptureIndexSchema.parse(JSON.parse(readFileSync(path, 'utf8')));
      const ids = ['L1/chunk_kda', 'L1/fused_recurrent_kda', 'L1/causal_conv1d', 'L1/rms_norm_gated', 'L2/kimi_delta_attention', 'L2/kimi_mla_attention', 'L2/kimi_moe', 'L3/kimi_linear_decoder', 'L4/kimi_linear'];
      expect(Object.keys(index.tasks)).toEqual(expect.arrayContaining(ids));
      // decodes: one-token rows from the pool's states; prefills: one sequence each (16-token steps), over the pool
      expect(index.tasks['L1/fused_recurrent_kda']!.forward.every((f) => f.dims.T === 1 && f.dims.K === cfg.kdaHeadDim && f.options?.initial_state === true)).toBe(true);
      expect(index.tasks['L1/chunk_kda']!.forward.every((f) => f.dims.B === 1 && f.dims.T! <= 16 && f.options?.initial_state === true)).toBe(true);
      expect(index.tasks['L2/kimi_delta_attention']!.forward.every((f) => f.options?.initial_state === true)).toBe(true);
      for (const id of ['L2/kimi_mla_attention', 'L3/kimi_linear_decoder', 'L4/kimi_linear']) {
        expect(index.tasks[id]!.forward.some((f) => (f.options?.decodeCtxLens as number[]).length > 0), id).toBe(true);
        expect(index.tasks[id]!.forward.some((f) => (f.options?.prefillLens as number[]).length > 0), id).toBe(true);
      }
      expect(index.tasks['L3/kimi_linear_decoder']!.forward.every((f) => typeof f.options?.residual === 'boolean')).toBe(true);
      const baseline = baselineRegistry();
      const cctx: ExecutionContext = { ...ctx, registry: baseline };
      for (const id of ['L1/chunk_kda', 'L1/fused_recurrent_kda', 'L2/kimi_delta_attention', 'L2/kimi_mla_attention', 'L2/kimi_moe', 'L3/kimi_linear_decoder', 'L4/kimi_linear']) {
        const task = baseline.task(id)!;
        const cases = casesFromCaptures(task, [{ index, resolve: (f) => join(tmp, f), path }], 2);
        expect(cases.length, id).toBeGreaterThan(0);
        for (const c of cases) {
          const rng = new Rng(5);
          const m = baseline.createIn<Module & { forward(...a: (Tensor | null)[]): Tensor | Tensor[] }>(cctx, id, ...c.init);
          task.initParameters?.(m, c, rng);
          withContext(cctx, () => {
            const inputs = task.makeInputs(c, cctx, rng);
            expect(inputs.length, `${id} ${c.name}`).toBeLessThanOrEqual(task.inputs.length); // the L1 delta rules leave the pooled form's inputs out
            const res = m.forward(...inputs);
            const got = Array.isArray(res) ? res : [res];
            const params = new Map(m.namedParameters().map(([k, t]) => [k, toHostArray(t)] as const));
            const ref = task.reference(inputs.map((t) => (t ? toHostArray(t) : null)), params, c);
            got.forEach((g, i) => expect(compareTensors(g, ref[i]!, toleranceFor(task, 'f32')).status, `${id} ${c.name} output ${i}`).toBe('PASSED'));
            for (const t of [...inputs, ...got]) t?.dispose();
          });
          m.dispose();
        }
      }
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  });
});
