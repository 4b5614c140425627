/**
 * The host side of the paged KV-cache write (storeKvcache) on a fake device: a latent cache (MLA: one tensor given as
 * both caches, one tensor as key and value) builds the key-only kernel (FK_KV_PARTS=1) with null value and vCache
 * pointers, so no row is written through two __restrict__ pointers; a K/V pair builds the kernel as before.
 */
import { Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { fakeDevice } from '../../../test/fake-device.js';
import { ptr } from '../launch/common.js';
import { pagedDecodeAttention } from '../attention/attention.js';
import { withTuning } from '../../../test/spine-helpers.js';
import { storeKvcache } from './kvcache.js';

describe('storeKvcache: K/V pairs and latent caches', () => {
  it('a K/V pair: one launch of the two-part kernel (no FK_KV_PARTS define), both caches written', () => {
    const { backend, ctx, launches } = fakeDevice();
    const k = Tensor.empty(backend, [8, 2, 64], 'bf16');
    const v = Tensor.empty(backend, [8, 2, 64], 'bf16');
    const kc = Tensor.empty(backend, [4, 16, 2, 64], 'bf16');
    const vc = Tensor.empty(backend, [4, 16, 2, 64], 'bf16');
    storeKvcache(ctx, k, v, kc, vc, Tensor.empty(backend, [8], 'i64'));
    expect(launches).toHaveLength(1);
    expect(launches[0]!.options.some((o) => o.startsWith('-DFK_KV_PARTS'))).toBe(false);
    expect(launches[0]!.args.slice(0, 4)).toEqual([k, v, kc, vc]);
    expect(launches[0]!.block).toBe(32); // 2 * 2 * 64 / 8 vectors
  });

  it('a latent cache: the key-only kernel, null value and vCache, half the threads; the next decode reads it early', () => {
    const { backend, ctx, launches } = fakeDevice();
    const B = 4;
    const row = Tensor.empty(backend, [B, 1, 128], 'bf16'); // [T, 1, kv_lora_rank + rope dims]
    const cache = Tensor.empty(backend, [64, 16, 1, 128], 'bf16');
    storeKvcache(ctx, row, row, cache, cache, Tensor.empty(backend, [B], 'i64'));
    expect(launches).toHaveLength(1);
    expect(launches[0]!.options).toContain('-DFK_KV_PARTS=1');
    expect(launches[0]!.args.slice(0, 4)).toEqual([row, 0, cache, 0]);
    expect(launches[0]!.block).toBe(32); // max(32, 128 / 8)
    // the decode over the rows (as keys and values) right after is the write's reader: early cache loads apply
    launches.length = 0;
    const q = Tensor.empty(backend, [B, 8, 128], 'bf16');
    withTuning('attention', { decodeEarlyKv: true }, () => pagedDecodeAttention(ctx, q, cache, cache, Tensor.empty(backend, [B, 4], 'i32'), Tensor.empty(backend, [B], 'i32'), 0.1, 0));
    const main = launches.find((l) => l.entry === 'fk_paged_decode_mma')!;
    expect(main.options).toContain('-DFK_EARLY_KV=1');
    expect(main.args[6]).toBe(ptr(cache));
    expect(main.args[10]).toBe(ptr(cache));
  });

  it('a view of the same memory counts as the same cache; one cache with two different sources is an error', () => {
    const { backend, ctx, launches } = fakeDevice();
    const row = Tensor.empty(backend, [3, 1, 64], 'bf16');
    const cache = Tensor.empty(backend, [2, 16, 1, 64], 'bf16');
    storeKvcache(ctx, row, row.view([3, 1, 64]), cache, cache.view([2, 16, 1, 64]), Tensor.empty(backend, [3], 'i64'));
    expect(launches[0]!.options).toContain('-DFK_KV_PARTS=1');
    const other = Tensor.empty(backend, [3, 1, 64], 'bf16');
    expect(() => storeKvcache(ctx, row, other, cache, cache, Tensor.empty(backend, [3], 'i64'))).toThrow(/one tensor \(a latent cache\) but key and value differ/);
  });
});
