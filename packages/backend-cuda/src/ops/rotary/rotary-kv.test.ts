import { Tensor, type DType } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { parseSignature } from '../../args.js';
import { KERNEL_SOURCES } from '../../kernel-sources.generated.js';
import { cpu, withTuning } from '../../../test/spine-helpers.js';
import type { SpineContext } from '../launch/context.js';
import { rotaryStoreKvcache } from './rotary-kv.js';
import { cudaTuning } from '../../tuning/load.js';

/**
 * The host side of the fused rotary + KV-cache write (CPU: what is decided before any device memory is touched). The
 * kernel itself is checked against the two unfused launches in rotary-kv.gpu.test.ts.
 */
const NO_DEVICE = {} as SpineContext; // a declining or throwing call never reaches the device

function args(o: { dtype?: DType; cacheDType?: DType; valueDType?: DType; headSize?: number; kCacheT?: boolean; slots?: number } = {}) {
  const [T, nq, nk, head] = [2, 4, 2, 8];
  const dt = o.dtype ?? 'bf16';
  const t = (shape: number[], dtype: DType = dt) => Tensor.zeros(cpu(), shape, dtype);
  const kCache = o.kCacheT ? t([3, 4, head, nk], o.cacheDType).transpose(2, 3) : t([3, 4, nk, head], o.cacheDType);
  return [
    Tensor.fromArray(cpu(), [0, 1], [T], 'i64'),
    t([T, nq * head]),
    t([T, nk * head]),
    t([T, nk, head], o.valueDType),
    t([16, head]),
    o.headSize ?? head,
    true,
    kCache,
    t([3, 4, nk, head], o.cacheDType),
    Tensor.fromArray(cpu(), new Array(o.slots ?? T).fill(0), [o.slots ?? T], 'i64'),
  ] as const;
}

describe('rotaryStoreKvcache (CUDA host side): when it declines, what it rejects', () => {
  it('is on by default (run 12; no FASTKERNELS_TUNING); switched off, it declines before any check', () => {
    if (process.env.FASTKERNELS_TUNING === undefined) expect(cudaTuning().rotary.fuseKvStore).toBe(true);
    withTuning('rotary', { fuseKvStore: false }, () => {
      expect(rotaryStoreKvcache(NO_DEVICE, ...args())).toBeNull();
      expect(rotaryStoreKvcache(NO_DEVICE, ...args({ headSize: 3 }))).toBeNull();
    });
  });

  it('declines where storeKvcache_ would convert or copy: caches or value of another dtype, a strided cache head dim', () => {
    withTuning('rotary', { fuseKvStore: true }, () => {
      expect(rotaryStoreKvcache(NO_DEVICE, ...args({ cacheDType: 'f32' }))).toBeNull();
      expect(rotaryStoreKvcache(NO_DEVICE, ...args({ valueDType: 'f32' }))).toBeNull();
      expect(rotaryStoreKvcache(NO_DEVICE, ...args({ kCacheT: true }))).toBeNull();
    });
  });

  it('bad arguments throw as rotaryEmbedding / storeKvcache_ do, naming the op', () => {
    withTuning('rotary', { fuseKvStore: true }, () => {
      expect(() => rotaryStoreKvcache(NO_DEVICE, ...args({ headSize: 3 }))).toThrow(/rotaryStoreKvcache: rotaryDim 8 must be even and <= headSize 3/);
      expect(() => rotaryStoreKvcache(NO_DEVICE, ...args({ slots: 3 }))).toThrow(/rotaryStoreKvcache: slotMapping has 3 entries for 2 tokens/);
      expect(() => rotaryStoreKvcache(NO_DEVICE, ...args({ dtype: 'f64' }))).toThrow(/rotaryStoreKvcache: cosSinCache has dtype f64/);
    });
  });

  it('fk_rotary_store_kv is embedded with the launch signature ops/rotary/rotary-kv.ts passes (29 arguments)', () => {
    const p = 'ptr';
    expect(parseSignature(KERNEL_SOURCES['rotary.cu']!, 'fk_rotary_store_kv')).toEqual([
      p, p, 'i64', 'i32', // q out, in, token stride, heads
      p, p, 'i64', 'i32', // k
      p, 'i64', 'i64', // value, token and head strides
      p, 'i64', 'i64', 'i64', // kCache, block / offset / head strides
      p, 'i64', 'i64', 'i64', // vCache
      p, 'i32', 'i64', // slots, blockSize, capacity
      p, p, 'i32', 'i64', 'i32', 'i32', p, // positions, cos / sin cache, T, maxPos, headSize, rot, flag
    ]);
    // fk_rotary's own signature is untouched by the fused kernel beside it
    expect(parseSignature(KERNEL_SOURCES['rotary.cu']!, 'fk_rotary')).toEqual([p, p, 'i64', 'i32', p, p, 'i64', 'i32', p, p, 'i32', 'i64', 'i32', 'i32', p]);
  });
});
