import { Tensor, withContext } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../../test/l1-harness.js';
import { baselineRegistry } from '../../../index.js';
import { FlashAttnDecode } from './flash_attn_decode.js';
import { FlashAttnPrefill, maxSeqlen, slidingWindowOf } from './flash_attn_prefill.js';

describe('flash_attn_varlen_func interface (L1/flash_attn_prefill, L1/flash_attn_decode)', () => {
  it("window_size maps to the ops' sliding window: (w - 1, 0) keeps w keys, -1 is unbounded, a non-causal right window is refused", () => {
    expect(slidingWindowOf([-1, -1], true)).toBe(0);
    expect(slidingWindowOf([127, 0], true)).toBe(128);
    expect(slidingWindowOf([3, -1], false)).toBe(4);
    expect(slidingWindowOf([3, 2], true)).toBe(4); // causal: the right side is 0 whatever it says
    expect(() => slidingWindowOf([3, 2], false)).toThrow(/right window/);
    expect(maxSeqlen([0, 3, 10, 12])).toBe(7);
  });

  const ctx = () => ({ backend: cpuBackend(), device: 0, dtype: 'f32' as const, registry: baselineRegistry() });

  it('prefill on hand values: causal, query 0 sees key 0 only; a window (0, 0) sees only itself; a sink dilutes', () => {
    const c = ctx();
    // one sequence of 2 tokens, one head of D = 2; keys orthogonal, values distinct
    const q = Tensor.fromArray(c.backend, [1, 0, 0, 1], [2, 1, 2], 'f32');
    const k = Tensor.fromArray(c.backend, [1, 0, 0, 1], [2, 1, 2], 'f32');
    const v = Tensor.fromArray(c.backend, [3, 4, 5, 6], [2, 1, 2], 'f32');
    const cu = Tensor.fromArray(c.backend, [0, 2], [2], 'i32');
    const run = (make: () => FlashAttnPrefill, sinks: Tensor | null = null) => withContext(c, () => [...make().forward(q, k, v, cu, cu, sinks, 2, 2).toFloat64Array()]);
    const causal = run(() => new FlashAttnPrefill(1, true));
    expect(causal.slice(0, 2)).toEqual([3, 4]);
    // query 1: scores (0, 1) over keys 0, 1 -> weights (1, e) / (1 + e)
    const w1 = Math.E / (1 + Math.E);
    expect(causal[2]).toBeCloseTo(3 * (1 - w1) + 5 * w1, 6);
    expect(run(() => new FlashAttnPrefill(1, true, [0, 0]))).toEqual([3, 4, 5, 6]);
    // a sink of logit 1 beside query 0's one key of score 1: half the weight goes to the sink
    const sunk = run(() => new FlashAttnPrefill(1, true), Tensor.fromArray(c.backend, [1], [1], 'f32'));
    expect(sunk[0]).toBeCloseTo(1.5, 6);
  });

  it('decode on hand values: the query attends to its sequence through the block table, a window keeps the last keys', () => {
    const c = ctx();
    // two blocks of 16 tokens, one kv head, D = 1: block 1 holds sequence 0's 17th token
    const kc = new Array(32).fill(0);
    const vc = Array.from({ length: 32 }, (_, i) => i);
    const kCache = Tensor.fromArray(c.backend, kc, [2, 16, 1, 1], 'f32');
    const vCache = Tensor.fromArray(c.backend, vc, [2, 16, 1, 1], 'f32');
    const q = Tensor.fromArray(c.backend, [1], [1, 1, 1], 'f32');
    const cuQ = Tensor.fromArray(c.backend, [0, 1], [2], 'i32');
    const seqused = Tensor.fromArray(c.backend, [17], [1], 'i32');
    // the sequence's blocks in the order 1, 0: tokens 0..15 in block 1 (values 16..31), token 16 in block 0 (value 0)
    const table = Tensor.fromArray(c.backend, [1, 0], [1, 2], 'i32');
    const run = (make: () => FlashAttnDecode) => withContext(c, () => make().forward(q, kCache, vCache, cuQ, seqused, table, null, 1, 17).toFloat64Array()[0]!);
    // zero keys: uniform weights over 17 tokens, values 16..31 and 0
    expect(run(() => new FlashAttnDecode())).toBeCloseTo((16 + 31) * 8 / 17, 6);
    // window (1, 0): the last two tokens, values 31 and 0
    expect(run(() => new FlashAttnDecode(null, true, [1, 0]))).toBeCloseTo(15.5, 6);
  });
});
