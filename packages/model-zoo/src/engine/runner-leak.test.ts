// Leak checks of the engine's step paths on the CPU backend, whose memoryStats() counts live storages (the CUDA
// backend only warns, once, when the GC finds a storage that was never released, and only once the event loop turns:
// at the end of a synchronous bench). Runs 6, 7, 9 and 10 of bench/h200-serve.sh warned of 65667072 bytes = bf16 logits
// [256, 128256]. Those runs report "CUDA graphs 3.25 GiB", twice the 1.625 GiB pool estimated for bucket 256: the
// first capture ran out of its graph pool and was retried. When it runs out at logits.to('f32') of bucket 256, only
// the bf16 logits are live, and the error skipped decodeBody's dispose of them. The first test replays that on the CPU.
import { join } from 'node:path';
import { CpuBackend } from '@fastkernels/backend-cpu';
import type { AllocateOptions } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { Sampler } from '../tasks/L1/sampling/sampler.js';
import { baselineRegistry } from '../index.js';
import { EmulatedGraphRuntime } from './device-io.js';
import { LLMEngine } from './engine.js';
import { loadModel } from '../models/load-model.js';
import { formatGraphPool } from './memory.js';

const FIXTURES = join(import.meta.dirname, '../../fixtures');
const V = 256; // tiny-llama's vocabulary

/** A CPU backend whose allocations can be made to fail, as the CUDA allocator's do when a graph pool runs out. */
class FailingBackend extends CpuBackend {
  failAllocation: ((bytes: number) => boolean) | null = null;
  readonly thrown: string[] = [];
  override allocate(byteLength: number, device: number, options?: AllocateOptions) {
    if (this.failAllocation?.(byteLength)) {
      this.failAllocation = null;
      const e = new Error(`graph pool exhausted during capture: ${byteLength} bytes requested (simulated)`);
      this.thrown.push(e.stack ?? '');
      throw e;
    }
    return super.allocate(byteLength, device, options);
  }
}

/** Graph emulation whose first capture runs out of pool at the float32 logits of the bucket (as on the H200). */
class ExhaustingGraphRuntime extends EmulatedGraphRuntime {
  readonly pools: number[] = [];
  constructor(private readonly backend: FailingBackend) {
    super();
  }
  override createPool(bytes: number): unknown {
    this.pools.push(bytes);
    return super.createPool(bytes);
  }
  override capture(fn: () => void) {
    // the first bucket captured is the largest (4 rows): fail its float32 logits [4, V]
    if (this.pools.length === 1 && this.captures === 0) this.backend.failAllocation = (bytes) => bytes === 4 * V * 4;
    try {
      return super.capture(fn);
    } finally {
      this.backend.failAllocation = null;
    }
  }
}

describe('engine steps release what they allocate', () => {
  it('a decode-graph capture that runs out of pool (retried with a bigger one) leaks no logits', () => {
    const backend = new FailingBackend();
    const m = loadModel(join(FIXTURES, 'tiny-llama'), { backend, registry: baselineRegistry(), dtype: 'bf16' });
    const graphs = new ExhaustingGraphRuntime(backend);
    const weights = backend.memoryStats().liveStorages;
    const engine = new LLMEngine(m.model, m.ctx, m.geometry, { maxModelLen: 128, maxNumSeqs: 4, maxNumBatchedTokens: 32, numKvBlocks: 32, graphs });
    try {
      expect(backend.thrown.length).toBe(1);
      expect(backend.thrown[0]).toMatch(/Tensor\.to[\s\S]*decodeBody/); // the bf16 logits were live, as on the H200
      expect(graphs.pools.length).toBe(2); // the first pool ran out, the second (doubled) held every bucket
      // the start-up log's calibration data: the estimate, and that it took a second, doubled pool
      expect(engine.runner.graphPoolStats).toMatchObject({ estimateBytes: graphs.pools[0], attempts: 2 });
      expect(formatGraphPool(engine.runner.graphPoolStats)).toMatch(/^; graph pool estimate [\d.]+ (MiB|GiB) was short \(2 attempts\)$/);
      expect(formatGraphPool({ estimateBytes: 2 ** 30, attempts: 1, peakBytes: 1.5 * 2 ** 30 })).toBe('; graph pool estimate 1.00 GiB, one capture used at most 1.50 GiB');
      expect(formatGraphPool({ estimateBytes: 2 ** 30, attempts: 1 })).toBe('');
      expect(engine.runner.graphBuckets).toEqual([1, 2, 4]);
      const out = engine.generate([{ promptIds: [3, 1, 4, 1, 5], params: { maxTokens: 4, ignoreEos: true } }, { promptIds: [9, 2, 6], params: { maxTokens: 3, ignoreEos: true } }]);
      expect(out.map((o) => o.tokenIds.length)).toEqual([4, 3]);
    } finally {
      engine.dispose();
    }
    expect(backend.memoryStats().liveStorages).toBe(weights);
    m.model.dispose();
    expect(backend.memoryStats()).toMatchObject({ liveStorages: 0, liveBytes: 0 });
  });

  it('an eager step (prefill) whose sampler throws leaks no logits, and the engine serves on', () => {
    let fail = false;
    class FlakySampler extends Sampler {
      override forward(...args: Parameters<Sampler['forward']>) {
        if (fail) {
          fail = false;
          throw new Error('sampler failed (simulated)');
        }
        return super.forward(...args);
      }
    }
    const registry = baselineRegistry().child('flaky-sampler');
    registry.override('L1/sampler', FlakySampler);
    for (const dtype of ['f32', 'bf16'] as const) {
      const backend = new CpuBackend();
      const m = loadModel(join(FIXTURES, 'tiny-llama'), { backend, registry, dtype });
      const weights = backend.memoryStats().liveStorages;
      const engine = new LLMEngine(m.model, m.ctx, m.geometry, { maxModelLen: 128, maxNumSeqs: 4, maxNumBatchedTokens: 32, numKvBlocks: 32, graphs: false });
      try {
        const req = [{ promptIds: [3, 1, 4, 1, 5], params: { maxTokens: 3, ignoreEos: true } }];
        const ref = engine.generate(req)[0]!.tokenIds;
        fail = true;
        expect(() => engine.generate(req)).toThrow(/sampler failed/);
        expect(engine.hasUnfinished).toBe(false); // the step aborted its requests
        expect(engine.generate(req)[0]!.tokenIds).toEqual(ref);
      } finally {
        engine.dispose();
      }
      expect(backend.memoryStats().liveStorages, dtype).toBe(weights);
      m.model.dispose();
      expect(backend.memoryStats().liveStorages, dtype).toBe(0);
    }
  });
});
