import { hostArray } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cpuBackend, describeTaskContract, runCase } from '../../../../test/l1-harness.js';
import { VocabParallelEmbedding, embeddingReference, embeddingTask } from './embedding.js';

describe('embeddingReference', () => {
  it('gathers rows by hand', () => {
    const w = hostArray([3, 2], [0, 1, 2, 3, 4, 5]);
    const y = embeddingReference(hostArray([3], [2, 0, 2]), w);
    expect(y.shape).toEqual([3, 2]);
    expect([...y.data]).toEqual([4, 5, 0, 1, 4, 5]);
  });

  it('keeps the ids shape and rejects ids outside the vocabulary', () => {
    const w = hostArray([3, 2], [0, 1, 2, 3, 4, 5]);
    expect(embeddingReference(hostArray([2, 2], [0, 1, 2, 0]), w).shape).toEqual([2, 2, 2]);
    expect(() => embeddingReference(hostArray([1], [3]), w)).toThrow(/outside/);
    expect(() => embeddingReference(hostArray([1], [-1]), w)).toThrow(/outside/);
  });
});

describe('embedding task', () => {
  it('work: ids (8 bytes each) + rows read + rows written, no flops', () => {
    expect(embeddingTask.work(embeddingTask.cases.ci[0]!)).toEqual({ bytes: 9 * 8 + 2 * 9 * 64 * 4, flops: 0 });
    const prefill = embeddingTask.cases.production.find((c) => c.dims.T === 4096)!;
    expect(embeddingTask.work(prefill).bytes).toBe(4096 * 8 + 2 * 4096 * 4096 * 2);
  });

  it('VocabParallelEmbedding(numEmbeddings, embeddingDim) has weight [V, H]', () => {
    expect(VocabParallelEmbedding.length).toBe(2);
  });

  it.skipIf(!cpuBackend())('makeInputs draws i64 ids within the vocabulary, including both ends', () => {
    const c = embeddingTask.cases.ci[2]!;
    const run = runCase(embeddingTask, c, cpuBackend()!, 5);
    const ids = run.inputs[0]!;
    expect(ids.dtype).toBe('i64');
    const v = [...ids.toFloat64Array()];
    expect(v.every((id) => Number.isInteger(id) && id >= 0 && id < c.dims.V!)).toBe(true);
    expect(v).toContain(0);
    expect(v).toContain(c.dims.V! - 1);
    expect(run.module.stateDict().get('weight')!.shape).toEqual([c.dims.V, c.dims.H]);
  });
});

describeTaskContract(embeddingTask, cpuBackend);
