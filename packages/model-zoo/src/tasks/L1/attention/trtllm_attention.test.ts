import { Tensor, withContext } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../../test/l1-harness.js';
import { baselineRegistry } from '../../../index.js';
import { StoreKVCacheHND } from '../kvcache/store_kvcache_hnd.js';
import { TRTLLMDecode } from './flashinfer_decode.js';
import { TRTLLMPrefill, pagedKeySlots } from './flashinfer_prefill.js';
import { nhdHalfReference, slidingWindowOfLeft } from './trtllm-kv-layout.js';

describe('FlashInfer trtllm-gen tasks (L1/flashinfer_decode, L1/flashinfer_prefill, L1/store_kvcache_hnd)', () => {
  it('HND re-indexing, key slots through the block table, window_left', () => {
    // 1 page, K | V, 2 heads, 2 tokens, D = 1: HND values 0..7
    const kv = { shape: [1, 2, 2, 2, 1], data: Float64Array.from([0, 1, 2, 3, 4, 5, 6, 7]) };
    expect([...nhdHalfReference(kv, 0).data]).toEqual([0, 2, 1, 3]); // [token, head]
    expect([...nhdHalfReference(kv, 1).data]).toEqual([4, 6, 5, 7]);
    // sequence 0: 3 keys on pages (5, 2) of 2 tokens; sequence 1: 1 key on page 7
    expect(pagedKeySlots([5, 2, 7, 0], 2, [0, 3, 4], 2)).toEqual([10, 11, 4, 14]);
    expect(slidingWindowOfLeft(-1)).toBe(0);
    expect(slidingWindowOfLeft(127)).toBe(128);
  });

  it('a key stored with StoreKVCacheHND is what both trtllm kernels attend to (one key: its value, times bmm2_scale)', () => {
    const ctx = { backend: cpuBackend(), device: 0, dtype: 'f32' as const, registry: baselineRegistry() };
    const [NB, H, S, D] = [3, 2, 16, 4];
    const kv = Tensor.zeros(ctx.backend, [NB, 2, H, S, D], 'f32');
    const key = Tensor.fromArray(ctx.backend, [1, 1, 1, 1, 2, 2, 2, 2], [1, H, D], 'f32');
    const value = Tensor.fromArray(ctx.backend, [1, 2, 3, 4, 5, 6, 7, 8], [1, H, D], 'f32');
    const slot = Tensor.fromArray(ctx.backend, [2 * S], [1], 'i64'); // page 2, offset 0
    const table = Tensor.fromArray(ctx.backend, [2], [1, 1], 'i32');
    const one = Tensor.fromArray(ctx.backend, [1], [1], 'i32');
    const cu = Tensor.fromArray(ctx.backend, [0, 1], [2], 'i32');
    const q = Tensor.fromArray(ctx.backend, Array.from({ length: 2 * D }, (_, i) => i), [1, H, D], 'f32');
    withContext(ctx, () => {
      const [kc, vc] = [kv.select(1, 0), kv.select(1, 1)];
      new StoreKVCacheHND().forward(key, value, kc, vc, slot);
      const decoded = new TRTLLMDecode(0.5, 2).forward(q, kv, table, one, null, 1).toFloat64Array();
      expect([...decoded]).toEqual([2, 4, 6, 8, 10, 12, 14, 16]);
      const prefilled = new TRTLLMPrefill(0.5, 2).forward(q, kv, table, one, cu, cu, null, 1, 1).toFloat64Array();
      expect([...prefilled]).toEqual([...decoded]);
    });
  });
});
