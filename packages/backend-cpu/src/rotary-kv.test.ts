import { describe, expect, it } from 'vitest';
import { cpu, randn, Rng, tensor, values, type Tensor } from './test-helpers.js';

const ops = cpu.ops;

// The CPU op is the two ops by definition, so these tests check its wiring (argument order, the k view, clean-up on a
// bad slot): the kernel that could differ, fk_rotary_store_kv, is checked bit for bit in rotary-kv.gpu.test.ts.

/** cos | sin rows of maxPos positions (vLLM's layout), f32. */
function cosSinCache(maxPos: number, rotaryDim: number): Tensor {
  const half = rotaryDim / 2;
  const data: number[] = [];
  for (let p = 0; p < maxPos; p++) {
    const ang = Array.from({ length: half }, (_, i) => p * 10000 ** (-(2 * i) / rotaryDim));
    data.push(...ang.map(Math.cos), ...ang.map(Math.sin));
  }
  return tensor(data, [maxPos, rotaryDim], 'f32');
}

describe('rotaryStoreKvcache: rotaryEmbedding then storeKvcache_', () => {
  for (const [dtype, neox, rot] of [['f32', true, 16], ['bf16', false, 16], ['f16', true, 8]] as const) {
    it(`${dtype} ${neox ? 'neox' : 'gptj'} rotaryDim ${rot}: the same q, k and caches as the two ops, on QKV slices`, () => {
      const [T, nq, nk, head, blocks, blockSize] = [5, 4, 2, 16, 3, 4];
      const rng = new Rng(7);
      const qkv = randn(rng, [T, (nq + 2 * nk) * head], dtype);
      const q = qkv.narrow(1, 0, nq * head);
      const k = qkv.narrow(1, nq * head, nk * head);
      const v = qkv.view(T, nq + 2 * nk, head).narrow(1, nq + nk, nk);
      const positions = tensor([0, 9, 3, 31, 2], [T], 'i64');
      const slots = tensor([5, -1, 0, 11, 7], [T], 'i32');
      const cache = cosSinCache(32, rot);
      const caches = () => [randn(new Rng(3), [blocks, blockSize, nk, head], dtype), randn(new Rng(4), [blocks, blockSize, nk, head], dtype)] as const;

      const [kc, vc] = caches();
      const [fq, fk] = ops.rotaryStoreKvcache!(positions, q, k, v, cache, head, neox, kc, vc, slots)!;

      const [kc2, vc2] = caches();
      const [eq, ek] = ops.rotaryEmbedding(positions, q, k, cache, head, neox);
      ops.storeKvcache_(ek!.view(T, nk, head), v, kc2, vc2, slots);

      expect(fq.shape).toEqual(q.shape);
      expect(fk.shape).toEqual(k.shape);
      expect(values(fq)).toEqual(values(eq));
      expect(values(fk)).toEqual(values(ek!));
      expect(values(kc)).toEqual(values(kc2));
      expect(values(vc)).toEqual(values(vc2));
      // the slots were written (the check above would also pass if neither path wrote)
      expect(values(kc.select(0, 1).select(0, 1))).toEqual(values(ek!.view(T, nk, head).select(0, 0)));
      expect(values(vc.select(0, 2).select(0, 3))).toEqual(values(v.select(0, 3)));
    });
  }

  it('argument errors are the two ops\' errors', () => {
    const q = tensor(new Array(8).fill(1), [1, 8]);
    const kc = tensor(new Array(8).fill(0), [1, 2, 1, 4]);
    const cache = cosSinCache(4, 4);
    expect(() => ops.rotaryStoreKvcache!(tensor([9], [1], 'i64'), q, q.narrow(1, 0, 4), q.narrow(1, 0, 4).view(1, 1, 4), cache, 4, true, kc, kc, tensor([0], [1], 'i64'))).toThrow(/position 9/);
    expect(() => ops.rotaryStoreKvcache!(tensor([1], [1], 'i64'), q, q.narrow(1, 0, 4), q.narrow(1, 0, 4).view(1, 1, 4), cache, 4, true, kc, kc, tensor([2], [1], 'i64'))).toThrow(/slot 2/);
  });
});
