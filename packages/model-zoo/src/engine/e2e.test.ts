import { join } from 'node:path';
import { Tensor as TensorClass, TensorParallelGroup, markNotGraphCapturable, type Tensor } from '@fastkernels/core';
import { FakePeer } from '@fastkernels/core/testing';
import { describe, expect, it } from 'vitest';
import { cpuBackend } from '../../test/l1-harness.js';
import { VocabParallelEmbedding } from '../tasks/L1/embedding/embedding.js';
import { ParallelLMHead } from '../families/dense-moe-llm/L2/parallel_embedding.js';
import { Linear } from '../tasks/L1/linear/linear.js';
import { RotaryEmbedding } from '../tasks/L1/rotary/rotary_emb.js';
import { SiluAndMul } from '../tasks/L1/activation/silu_and_mul.js';
import { baselineRegistry } from '../index.js';
import { EmulatedGraphRuntime } from './device-io.js';
import { E2eRunner, agreeOnRun, calibratedCorrectness, runToRunSpread, speedupIntervals, tokenDiscrepancies, tokensDigest, type E2eModelSource } from './e2e.js';
import { loadModel } from '../models/load-model.js';
import { isGraphCapturing } from './runner.js';
import { syntheticWorkload } from './workloads.js';

const FIXTURES = join(import.meta.dirname, '../../fixtures');

const source: E2eModelSource = {
  name: 'tiny-llama',
  family: 'dense-moe-llm',
  load: (registry) => {
    const m = loadModel(join(FIXTURES, 'tiny-llama'), { backend: cpuBackend(), registry, dtype: 'f32' });
    return { model: m.model, ctx: m.ctx, geometry: m.geometry, dispose: () => m.model.dispose() };
  },
};

const options = {
  engine: { maxModelLen: 128, maxNumSeqs: 4, maxNumBatchedTokens: 32, graphs: new EmulatedGraphRuntime() },
  throughput: syntheticWorkload({ numRequests: 6, inputLen: [3, 40], outputLen: [4, 12], seed: 0, vocabSize: 256 }),
  latency: { batchSizes: [1, 2], promptLen: 8, outputLen: 4, warmups: 1, repeats: 1 },
};

// Candidates (subclasses of the baselines, as a candidate set would export them).
class GoodLinear extends Linear {}
class WrongSiluAndMul extends SiluAndMul {
  override forward(x: Tensor): Tensor {
    return super.forward(x).fill_(1); // corrupts every MLP output
  }
}
class ThrowingRotary extends RotaryEmbedding {
  override forward(): never {
    throw new Error('illegal memory access (simulated)');
  }
}
class UncapturableEmbedding extends VocabParallelEmbedding {
  override forward(ids: Tensor): Tensor {
    if (isGraphCapturing()) throw new Error('operation not permitted when stream is capturing (simulated host sync)');
    return super.forward(ids);
  }
}

/**
 * Batch-dependent numerics, exaggerated: row b of a step's logits gets +3 on token b (a stand-in for the rounding that
 * changes with a row's batch slot on a GPU). The same order of requests gives the same tokens; another order does not.
 */
class SlotDependentLMHead extends ParallelLMHead {
  override forward(hiddenStates: Tensor): Tensor {
    const y = super.forward(hiddenStates);
    const [B, V] = y.shape as [number, number];
    const bump = new Float64Array(B * V);
    for (let b = 0; b < B; b++) bump[b * V + (b % V)] = 3;
    const t = TensorClass.fromArray(y.backend, bump, [B, V], y.dtype);
    const out = y.backend.ops.add(y, t);
    y.dispose();
    t.dispose();
    return out;
  }
}

describe('e2e: baseline, noise, candidate runs with drop-and-retry', () => {
  it('self-test with batch-dependent numerics: the reordered noise run diverges, the baseline as candidate (same order) agrees 100%', () => {
    const slotDependent = baselineRegistry().child('slot-dependent');
    slotDependent.override('L2/parallel_embedding', SlotDependentLMHead);
    const lines: string[] = [];
    const r = new E2eRunner(source, slotDependent, { ...options, log: (l) => lines.push(l) }).evaluate([]);
    expect(r.record.noiseDiscrepancies.some((d) => d > 0)).toBe(true); // the calibration sees the batch dependence
    expect(r.record.outcome).toBe('ok');
    expect(r.record.discrepancies).toEqual([0, 0, 0, 0, 0, 0]);
    expect(r.details.calibratedC).toBe(1);
    expect(r.details.runs).toBeGreaterThanOrEqual(3); // baseline, noise, and the self-test's candidate run
    if (calibratedCorrectness(r.record.noiseDiscrepancies, r.record.noiseDiscrepancies) < 0.9) expect(lines.join('\n')).toMatch(/high noise floor/);
  });


  it('self-test (no candidates): 100% agreement, ok, speedups near 1', () => {
    const r = new E2eRunner(source, baselineRegistry(), options).evaluate([]);
    expect(r.record.outcome).toBe('ok');
    expect(r.record.discrepancies).toEqual([0, 0, 0, 0, 0, 0]);
    expect(r.record.noiseDiscrepancies).toEqual([0, 0, 0, 0, 0, 0]);
    expect(r.record.throughputSpeedup).toBeGreaterThan(0);
    expect(r.record.latencySpeedup).toBeGreaterThan(0);
    expect(r.record.drops).toEqual([]);
    expect(r.details.calibratedC).toBe(1);
  });

  it('self-test with repeats: bootstrap intervals of both speedups around the point estimates; one repeat gives none', () => {
    const r = new E2eRunner(source, baselineRegistry(), { ...options, throughputRepeats: 3, latency: { ...options.latency, repeats: 3 } }).evaluate([]);
    const { throughputSpeedup: ts, latencySpeedup: ls, throughputSpeedupCi: tci, latencySpeedupCi: lci } = r.record;
    expect(tci).toBeDefined();
    expect(lci).toBeDefined();
    expect(tci![0]).toBeLessThanOrEqual(ts!);
    expect(ts!).toBeLessThanOrEqual(tci![1]);
    expect(lci![0]).toBeLessThanOrEqual(ls!);
    expect(ls!).toBeLessThanOrEqual(lci![1]);
    expect(r.record.discrepancies.every((d) => d === 0)).toBe(true); // repeated passes keep the first pass's tokens
    const one = new E2eRunner(source, baselineRegistry(), options).evaluate([]);
    expect(one.record.throughputSpeedupCi).toBeUndefined();
    expect(one.record.latencySpeedupCi).toBeUndefined();
  });

  it('speedupIntervals: from the timed repeats of both runs; a faster candidate gets an interval above 1', () => {
    const base = { tokens: [], wallMs: 0, throughputSamplesMs: [100, 102, 98, 101], latencySamplesMs: { 1: [10, 10.2, 9.9], 32: [40, 41, 39.5] } };
    const fast = { tokens: [], wallMs: 0, throughputSamplesMs: [50, 51, 49, 50.5], latencySamplesMs: { 1: [5, 5.1, 4.9], 32: [20, 20.5, 19.8] } };
    const ci = speedupIntervals(base, fast);
    expect(ci.throughput![0]).toBeGreaterThan(1.8);
    expect(ci.throughput![1]).toBeLessThan(2.2);
    expect(ci.latency![0]).toBeGreaterThan(1.8);
    expect(ci.latency![1]).toBeLessThan(2.2);
    // one pass on a side, or a batch size timed once: no interval
    expect(speedupIntervals({ ...base, throughputSamplesMs: [100] }, fast).throughput).toBeUndefined();
    expect(speedupIntervals(base, { ...fast, latencySamplesMs: { 1: [5], 32: [20, 21] } }).latency).toBeUndefined();
  });

  it('runToRunSpread and the widened intervals: a second load of the same kernels that came out 2% apart widens both ends by 2%', () => {
    const base = { tokens: [], wallMs: 0, throughputTokS: 1000, latencyMs: { 1: 10, 32: 40 }, throughputSamplesMs: [100, 100.1, 99.9], latencySamplesMs: { 1: [10, 10.01, 9.99], 32: [40, 40.02, 39.98] } };
    const noise = { tokens: [], wallMs: 0, throughputTokS: 980, latencyMs: { 1: 10.2, 32: 40.8 } };
    const spread = runToRunSpread(base, noise);
    expect(spread.throughput).toBeCloseTo(1000 / 980, 12);
    expect(spread.latency).toBeCloseTo(1.02, 12);
    expect(runToRunSpread(base, { ...noise, throughputTokS: 1020 }).throughput).toBeCloseTo(1.02, 12); // either direction
    expect(runToRunSpread({ tokens: [], wallMs: 0 }, noise)).toEqual({ throughput: 1, latency: 1 }); // nothing timed
    // the candidate is the baseline again, 0.3% slower in its own load: the within-run interval excludes 1, the widened one holds it
    const cand = { ...base, throughputSamplesMs: base.throughputSamplesMs.map((x) => x * 1.003), latencySamplesMs: { 1: base.latencySamplesMs[1].map((x) => x * 1.003), 32: base.latencySamplesMs[32].map((x) => x * 1.003) } };
    const narrow = speedupIntervals(base, cand);
    expect(narrow.latency![1]).toBeLessThan(1);
    const wide = speedupIntervals(base, cand, spread);
    expect(wide.latency![0]).toBeCloseTo(narrow.latency![0] / 1.02, 12);
    expect(wide.latency![1]).toBeCloseTo(narrow.latency![1] * 1.02, 12);
    expect(wide.latency![0] <= 1 && 1 <= wide.latency![1]).toBe(true);
    expect(wide.throughput![0] <= 1 && 1 <= wide.throughput![1]).toBe(true);
  });

  it('drops a throwing, an uncapturable and a wrong candidate (from the error or by bisection) and deploys the rest', () => {
    const lines: string[] = [];
    const runner = new E2eRunner(source, baselineRegistry(), { ...options, log: (l) => lines.push(l), importFailures: [{ taskId: 'L1/softmax', detail: 'L1/softmax.ts: no export named Softmax' }] });
    const { record, details } = runner.evaluate([
      { taskId: 'L1/linear', cls: GoodLinear },
      { taskId: 'L1/silu_and_mul', cls: WrongSiluAndMul },
      { taskId: 'L1/rotary_emb', cls: ThrowingRotary },
      { taskId: 'L1/embedding', cls: UncapturableEmbedding },
    ]);
    expect(record.drops.map((d) => [d.task, d.category])).toEqual([
      ['L1/softmax', 'import'],
      ['L1/rotary_emb', 'runtime'],
      ['L1/embedding', 'compile'],
      ['L1/silu_and_mul', 'incorrect'],
    ]);
    expect(lines.some((l) => /dropping L1\/silu_and_mul \(incorrect, found by bisection\)/.test(l))).toBe(true);
    expect(lines.some((l) => /dropping L1\/rotary_emb \(runtime, from the error\)/.test(l))).toBe(true);
    expect(details.deployed).toEqual(['L1/linear']);
    expect(record.outcome).toBe('ok');
    expect(record.discrepancies.every((d) => d === 0)).toBe(true);
    expect(record.asIs?.outcome).toBe('crash');
    expect(record.asIs?.detail).toMatch(/^runtime: illegal memory access/);
    expect(record.requested).toEqual(['L1/linear', 'L1/silu_and_mul', 'L1/rotary_emb', 'L1/embedding', 'L1/softmax']);
  });

  it('a candidate that makes the run pass its deadline is dropped as a timeout (found by bisection)', () => {
    class SlowSiluAndMul extends SiluAndMul {
      override forward(x: Tensor): Tensor {
        const until = performance.now() + 60;
        while (performance.now() < until) {
          // a kernel that hangs (bounded here so the test ends)
        }
        return super.forward(x);
      }
    }
    const base = new E2eRunner(source, baselineRegistry(), { ...options, latency: undefined });
    const fast = base.runOnce(baselineRegistry(), false);
    expect('tokens' in fast).toBe(true);
    const runner = new E2eRunner(source, baselineRegistry(), { ...options, latency: undefined, runTimeoutMs: 1500 });
    const { record } = runner.evaluate([{ taskId: 'L1/linear', cls: GoodLinear }, { taskId: 'L1/silu_and_mul', cls: SlowSiluAndMul }]);
    expect(record.drops.map((d) => [d.task, d.category])).toEqual([['L1/silu_and_mul', 'timeout']]);
    expect(record.asIs?.outcome).toBe('timeout');
    expect(record.outcome).toBe('ok');
  });

  it('token agreement: matched prefix over the reference length, and calibrated correctness', () => {
    expect(tokenDiscrepancies([[1, 2, 3, 4], [5, 6]], [[1, 2, 9, 4], [5, 6]])).toEqual([0.5, 0]);
    expect(calibratedCorrectness([0, 0.5, 1], [0, 0])).toBeCloseTo(1 / 3);
  });
});

/** A stand-in for an out-of-process (PyTorch worker) candidate: right when run eagerly, a broken graph if captured. */
class OutOfProcessEmbedding extends VocabParallelEmbedding {
  override forward(ids: Tensor): Tensor {
    if (isGraphCapturing()) throw new Error('captured a call that runs in another process (simulated)');
    return super.forward(ids);
  }
}
markNotGraphCapturable(OutOfProcessEmbedding, 'a PyTorch candidate (simulated)');

describe('e2e and CUDA-graph decode: candidates that cannot be captured', () => {
  it('a candidate marked not capturable: every run decodes eagerly (baseline included), it is deployed, and the record says why', () => {
    const graphs = new EmulatedGraphRuntime();
    const lines: string[] = [];
    const runner = new E2eRunner(source, baselineRegistry(), { ...options, engine: { ...options.engine, graphs }, log: (l) => lines.push(l) });
    const { record, details } = runner.evaluate([{ taskId: 'L1/linear', cls: GoodLinear }, { taskId: 'L1/embedding', cls: OutOfProcessEmbedding }]);
    expect(graphs.captures).toBe(0); // not in the baseline's run either: both sides eager
    expect(graphs.replays).toBe(0);
    expect(record.drops).toEqual([]);
    expect(details.deployed).toEqual(['L1/linear', 'L1/embedding']);
    expect(record.outcome).toBe('ok');
    expect(record.discrepancies.every((d) => d === 0)).toBe(true);
    expect(record.graphs).toBe(false);
    expect(record.graphsReason).toBe('L1/embedding: a PyTorch candidate (simulated): not capturable');
    expect(lines.filter((l) => /CUDA graphs off in every run, baseline included/.test(l))).toHaveLength(1);
  });

  it('capturable candidates (TypeScript, or unmarked) keep graph decode, and the record has no graphs field', () => {
    const graphs = new EmulatedGraphRuntime();
    const { record } = new E2eRunner(source, baselineRegistry(), { ...options, engine: { ...options.engine, graphs } }).evaluate([{ taskId: 'L1/linear', cls: GoodLinear }]);
    expect(graphs.captures).toBeGreaterThan(0);
    expect(graphs.replays).toBeGreaterThan(0);
    expect(record.outcome).toBe('ok');
    expect(record.graphs).toBeUndefined();
    expect(record.graphsReason).toBeUndefined();
  });

  it('nothing to turn off: --no-graphs, or a backend without graphs, leaves the record without the field', () => {
    const set = [{ taskId: 'L1/embedding', cls: OutOfProcessEmbedding }];
    const noGraphs = new E2eRunner(source, baselineRegistry(), { ...options, latency: undefined, engine: { ...options.engine, graphs: false } }).evaluate(set);
    const cpuOnly = new E2eRunner(source, baselineRegistry(), { ...options, latency: undefined, engine: { ...options.engine, graphs: true } }).evaluate(set);
    for (const { record } of [noGraphs, cpuOnly]) {
      expect(record.outcome).toBe('ok');
      expect(record.drops).toEqual([]);
      expect(record.graphs).toBeUndefined();
    }
  });
});

describe('e2e under tensor parallelism: the ranks agree on every run', () => {
  const on = { backend: cpuBackend(), device: 0 };
  const ok = { tokens: [[1, 2, 3], [4]], wallMs: 1 };
  // what a peer contributes: [code, -code, blamed index + 1, digest, -digest]
  const peer = (code: number, blamed: number, digest: number) => new TensorParallelGroup(0, 2, new FakePeer([code, -code, blamed, digest, -digest]));

  it('the same outcome and tokens: the run stands; the blamed task is the one any rank blamed', () => {
    const d = tokensDigest(ok.tokens);
    expect(tokensDigest([[1, 2], [3, 4]])).not.toBe(tokensDigest([[1, 2, 3], [4]]));
    expect(agreeOnRun(peer(0, 0, d), on, ok, new Set())).toBe(ok);
    const failure = { category: 'runtime' as const, error: new Error('boom') };
    expect(agreeOnRun(peer(1, 2, 0), on, failure, new Set(['L1/b', 'L1/a']))).toEqual({ ...failure, blamed: 'L1/b' });
  });

  it('a failure on one rank only, or different tokens: the group run is broken (an error, not a verdict)', () => {
    expect(() => agreeOnRun(peer(1, 0, 0), on, ok, new Set())).toThrow(/the ranks disagree on the outcome of a run \(ok on one rank, runtime on another; here: ok\)/);
    expect(() => agreeOnRun(peer(0, 0, 12345), on, ok, new Set())).toThrow(/generated different tokens/);
  });
});
