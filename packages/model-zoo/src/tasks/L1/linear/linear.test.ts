import { ModuleRegistry, Tensor, hostArray, withContext } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cpuBackend, describeTaskContract } from '../../../../test/l1-harness.js';
import { Linear, MergedColumnParallelLinear, linearReference, linearTask } from './linear.js';

describe('linearReference', () => {
  it('computes x W^T + b by hand', () => {
    const x = hostArray([2, 2], [1, 2, -1, 3]);
    const w = hostArray([3, 2], [1, 0, 0, 1, 1, 1]); // rows: e0, e1, e0 + e1
    const b = hostArray([3], [0.5, -1, 0]);
    const y = linearReference(x, w, b);
    expect(y.shape).toEqual([2, 3]);
    expect([...y.data]).toEqual([1.5, 1, 3, -0.5, 2, 2]);
    expect([...linearReference(x, w, null).data]).toEqual([1, 2, 3, -1, 3, 2]);
  });

  it('uses the transposed weight (y[m, n] = sum_k x[m, k] W[n, k])', () => {
    // x = [1, 10], W = [[2, 3]] -> 1*2 + 10*3 = 32 (x W would need W [2, 1])
    expect([...linearReference(hostArray([1, 2], [1, 10]), hostArray([1, 2], [2, 3]), null).data]).toEqual([32]);
    expect(() => linearReference(hostArray([1, 3]), hostArray([1, 2]), null)).toThrow(/K/);
  });
});

describe('linear task', () => {
  it('work: x + W (+ b) + y bytes, 2 T N K flops', () => {
    expect(linearTask.work(linearTask.cases.ci[0]!)).toEqual({ bytes: (5 * 64 + 48 * 64 + 5 * 48) * 4, flops: 2 * 5 * 48 * 64 });
    const biased = linearTask.cases.ci[1]!; // bf16 T=7 K=96 N=80 with bias
    expect(linearTask.work(biased)).toEqual({ bytes: (7 * 96 + 80 * 96 + 80 + 7 * 80) * 2, flops: 2 * 7 * 80 * 96 + 7 * 80 });
    const qkv = linearTask.cases.production.find((c) => c.name === 'llama3-8b-qkv-T4096')!;
    expect(linearTask.work(qkv).flops).toBe(2 * 4096 * 6144 * 4096);
  });

  it('production covers the Llama-3-8B projections at T = 1, 32, 4096', () => {
    const shapes = new Set(linearTask.cases.production.map((c) => `${c.dims.K}x${c.dims.N}@${c.dims.T}`));
    for (const [k, n] of [[4096, 6144], [4096, 4096], [4096, 28672], [14336, 4096]]) {
      for (const t of [1, 32, 4096]) expect(shapes.has(`${k}x${n}@${t}`), `${k}x${n}@${t}`).toBe(true);
    }
  });

  it.skipIf(!cpuBackend())('Linear registers weight [N, K] and bias only when asked', () => {
    const registry = new ModuleRegistry();
    const ctx = { backend: cpuBackend()!, device: 0, dtype: 'f32' as const, registry };
    withContext(ctx, () => {
      expect(new Linear(8, 4).namedParameters().map(([k, t]) => [k, [...t.shape]])).toEqual([['weight', [4, 8]]]);
      expect(new Linear(8, 4, true).namedParameters().map(([k, t]) => [k, [...t.shape]])).toEqual([
        ['weight', [4, 8]],
        ['bias', [4]],
      ]);
    });
  });

  it.skipIf(!cpuBackend())('MergedColumnParallelLinear concatenates the parts row-wise and returns the merged output', () => {
    const backend = cpuBackend()!;
    const registry = new ModuleRegistry();
    const ctx = { backend, device: 0, dtype: 'f32' as const, registry };
    withContext(ctx, () => {
      const m = new MergedColumnParallelLinear(2, [2, 1], false);
      expect(m.outputSize).toBe(3);
      expect(m.outputSizes).toEqual([2, 1]);
      expect(m.shardOffset(1)).toBe(2);
      // gate part rows [[1, 0], [0, 1]] then the up part's row [[1, 1]]; x = [3, 4] -> [3, 4 | 7]
      m.weight.copy_(Tensor.fromArray(backend, [1, 0, 0, 1, 1, 1], [3, 2], 'f32'));
      const y = m.forward(Tensor.fromArray(backend, [3, 4], [1, 2], 'f32'));
      expect([...y.toFloat64Array()]).toEqual([3, 4, 7]);
      expect(() => new MergedColumnParallelLinear(2, [], false)).toThrow(/outputSizes/);
    });
  });
});

describeTaskContract(linearTask, cpuBackend);
