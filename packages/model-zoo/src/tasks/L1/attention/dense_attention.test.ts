import { Rng, Tensor, toHostArray, withContext } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../../test/l1-harness.js';
import { baselineRegistry } from '../../../index.js';
import { DenseAttention, denseAttentionReference } from './dense_attention.js';

describe('L1/dense_attention', () => {
  it('the reference on hand values: one key masked out leaves the other value; no visible key gives zeros', () => {
    const q = { shape: [1, 1, 1, 2], data: Float64Array.from([1, 0]) };
    const k = { shape: [1, 1, 2, 2], data: Float64Array.from([1, 0, 0, 1]) };
    const v = { shape: [1, 1, 2, 2], data: Float64Array.from([3, 4, 5, 6]) };
    expect([...denseAttentionReference(q, k, v, { shape: [1, 1, 1, 2], data: Float64Array.from([0, 1]) }, false, null).data]).toEqual([5, 6]);
    expect([...denseAttentionReference(q, k, v, { shape: [1, 1, 1, 2], data: Float64Array.from([0, 0]) }, false, null).data]).toEqual([0, 0]);
    // two equal scores: the mean of the values
    const even = denseAttentionReference({ shape: [1, 1, 1, 2], data: Float64Array.from([0, 0]) }, k, v, null, false, null);
    expect([...even.data]).toEqual([4, 5]);
  });

  it('causal (no mask): the module matches the reference, query i sees keys 0..i', () => {
    const ctx = { backend: cpuBackend(), device: 0, dtype: 'f32' as const, registry: baselineRegistry() };
    const rng = new Rng(4);
    const shape = [2, 3, 5, 8];
    const [q, k, v] = [0, 1, 2].map(() => Tensor.fromArray(ctx.backend, rng.fillNormal(240, 1), shape, 'f32'));
    const out = withContext(ctx, () => new DenseAttention(true).forward(q!, k!, v!));
    const ref = denseAttentionReference(toHostArray(q!), toHostArray(k!), toHostArray(v!), null, true, null);
    out.toFloat64Array().forEach((x, i) => expect(x).toBeCloseTo(ref.data[i]!, 5));
    // row 0 of each head attends only key 0: its output is value row 0
    for (let e = 0; e < 8; e++) expect(out.toFloat64Array()[e]).toBeCloseTo(v!.toFloat64Array()[e]!, 6);
  });
});
