import { Rng, type DType } from '@fastkernels/core';
import { afterAll, describe, it } from 'vitest';
import { setIndexChecks } from '../launch/common.js';
import { G, checkTaskOnCuda, cpu, expectClose, gpu, intsCpu, randCpu, task, taskCases, toGpu, variant } from '../../../test/spine-helpers.js';

const EXACT = { atol: 0, rtol: 0 };

function slots(T: number, capacity: number, pad: number, seed: number): number[] {
  const rng = new Rng(seed);
  const perm = rng.permutation(capacity);
  return Array.from({ length: T }, (_, t) => (t % 5 === 1 && pad-- > 0 ? -1 : perm[t]!));
}

describe('store_kvcache vs the CPU backend (exact, in place)', () => {
  for (const dtype of ['bf16', 'f16', 'f32'] as DType[]) {
    for (const [T, nKv, head, NB, bs, slotType] of [[37, 8, 128, 8, 16, 'i64'], [5, 2, 20, 3, 16, 'i32'], [9, 1, 64, 4, 8, 'i64'], [64, 8, 128, 64, 16, 'i32']] as const) {
      // rows are read before the slots are known (padding rows read, not stored)
      it(`${dtype} T=${T} nKv=${nKv} head=${head} blocks ${NB}x${bs} slots ${slotType}`, G, () => {
        const key = randCpu([T, nKv, head], dtype, T);
        const value = randCpu([T, nKv, head], dtype, T + 1);
        const kc = randCpu([NB, bs, nKv, head], dtype, T + 2);
        const vc = randCpu([NB, bs, nKv, head], dtype, T + 3);
        const sm = intsCpu(slots(T, NB * bs, 3, T), [T], slotType);
        const [gkc, gvc] = [toGpu(kc), toGpu(vc)];
        gpu().ops.storeKvcache_(toGpu(key), toGpu(value), gkc, gvc, toGpu(sm));
        cpu().ops.storeKvcache_(key, value, kc, vc, sm);
        expectClose(gkc, kc, EXACT, 'kCache');
        expectClose(gvc, vc, EXACT, 'vCache');
      });
    }
  }

  it('key/value as slices of a fused QKV output; caches as views of one [2, ...] buffer', G, () => {
    const [T, nq, nKv, head, NB, bs] = [10, 4, 2, 64, 4, 16];
    const qkv = randCpu([T, nq + 2 * nKv, head], 'bf16', 5);
    const both = randCpu([2, NB, bs, nKv, head], 'bf16', 6);
    const sm = intsCpu(slots(T, NB * bs, 2, 9), [T], 'i64');
    const gqkv = toGpu(qkv);
    const gboth = toGpu(both);
    gpu().ops.storeKvcache_(gqkv.narrow(1, nq, nKv), gqkv.narrow(1, nq + nKv, nKv), gboth.select(0, 0), gboth.select(0, 1), toGpu(sm));
    cpu().ops.storeKvcache_(qkv.narrow(1, nq, nKv), qkv.narrow(1, nq + nKv, nKv), both.select(0, 0), both.select(0, 1), sm);
    expectClose(gboth, both, EXACT, 'caches');
    // a cache with a permuted (strided) layout goes through a contiguous copy and back
    const kc = randCpu([NB, bs, head, nKv], 'f32', 7);
    const vc = randCpu([NB, bs, head, nKv], 'f32', 8);
    const k = randCpu([T, nKv, head], 'f32', 9);
    const v = randCpu([T, nKv, head], 'f32', 10);
    const [gkc, gvc] = [toGpu(kc), toGpu(vc)];
    gpu().ops.storeKvcache_(toGpu(k), toGpu(v), gkc.transpose(2, 3), gvc.transpose(2, 3), toGpu(sm));
    cpu().ops.storeKvcache_(k, v, kc.transpose(2, 3), vc.transpose(2, 3), sm);
    expectClose(gkc, kc, EXACT, 'strided kCache');
    expectClose(gvc, vc, EXACT, 'strided vCache');
  });

  it('a latent cache (MLA: one tensor as both caches, one row as key and value) is written once, as the CPU writes it', G, () => {
    for (const [dtype, T, width, NB] of [['bf16', 37, 576, 8], ['f32', 9, 20, 3], ['bf16', 64, 128, 16]] as const) {
      const row = randCpu([T, 1, width], dtype, width);
      const cache = randCpu([NB, 16, 1, width], dtype, width + 1);
      const sm = intsCpu(slots(T, NB * 16, 3, width), [T], 'i64');
      const [grow, gcache] = [toGpu(row), toGpu(cache)];
      gpu().ops.storeKvcache_(grow, grow, gcache, gcache, toGpu(sm));
      cpu().ops.storeKvcache_(row, row, cache, cache, sm);
      expectClose(gcache, cache, EXACT, `latent ${dtype} T=${T} width ${width}`);
    }
  });

  it('a slot past the cache is skipped; with index checks on it throws a RangeError', G, () => {
    const k = toGpu(randCpu([2, 1, 8], 'f32', 1));
    const kc = toGpu(randCpu([1, 4, 1, 8], 'f32', 2));
    const vc = toGpu(randCpu([1, 4, 1, 8], 'f32', 3));
    const before = kc.toFloat64Array();
    gpu().ops.storeKvcache_(k, k, kc, vc, toGpu(intsCpu([4, -1], [2], 'i64')));
    expectClose(kc, { shape: kc.shape, data: before }, EXACT, 'untouched');
    setIndexChecks(true);
    let threw = false;
    try {
      gpu().ops.storeKvcache_(k, k, kc, vc, toGpu(intsCpu([0, 4], [2], 'i64')));
    } catch (e) {
      threw = e instanceof RangeError;
    }
    setIndexChecks(false);
    if (!threw) throw new Error('expected a RangeError');
  });
  afterAll(() => setIndexChecks(false));
});

describe('L1/store_kvcache task on CUDA vs its float64 reference', () => {
  const t = task('L1/store_kvcache');
  const b = t.cases.ci[1]!;
  const extra = [
    variant(b, 'llama-decode-bf16', { dims: { T: 64, NKV: 8, D: 128, NB: 40 }, options: { pad: 7 } }),
    variant(b, 'odd-head-f16', { dtype: 'f16', dims: { T: 11, NKV: 3, D: 36, NB: 2 }, options: { pad: 1 } }),
  ];
  for (const { c, seed } of taskCases(t, extra)) it(`${c.name} (${c.dtype}) seed ${seed}`, G, () => checkTaskOnCuda(t, c, seed));
});
