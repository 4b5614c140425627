import { Tensor, type DType } from '@fastkernels/core';
import { afterAll, describe, it } from 'vitest';
import { setIndexChecks } from '../launch/common.js';
import { G, checkTaskOnCuda, cpu, expectClose, gpu, intsCpu, poison, randCpu, task, taskCases, toGpu, variant } from '../../../test/spine-helpers.js';

const EXACT = { atol: 0, rtol: 0 };

describe('embedding vs the CPU backend (exact copies)', () => {
  for (const dtype of ['bf16', 'f16', 'f32'] as DType[]) {
    for (const [T, V, H, idType] of [[37, 1000, 4096, 'i64'], [5, 7, 100, 'i32'], [64, 129, 33, 'i64'], [3, 11, 1, 'i32']] as const) {
      it(`${dtype} T=${T} V=${V} H=${H} ids ${idType}`, G, () => {
        const ids = intsCpu(Array.from({ length: T }, (_, i) => (i * 7919 + 3) % V), [T], idType);
        const w = randCpu([V, H], dtype, V + H);
        poison(T * H);
        expectClose(gpu().ops.embedding(toGpu(ids), toGpu(w)), cpu().ops.embedding(ids, w), EXACT, 'embedding');
      });
    }
  }

  it('2-D ids, a row-strided (sliced) table, a transposed (copied) table', G, () => {
    const ids = intsCpu([0, 3, 9, 9, 1, 4], [2, 3], 'i32');
    const wide = randCpu([10, 96], 'bf16', 1);
    const w = wide.narrow(1, 8, 64);
    const out = gpu().ops.embedding(toGpu(ids), toGpu(wide).narrow(1, 8, 64));
    if (out.shape.join() !== '2,3,64') throw new Error(`shape ${out.shape}`);
    expectClose(out, cpu().ops.embedding(ids, w), EXACT, 'sliced table');
    const wt = randCpu([48, 10], 'f32', 2);
    expectClose(gpu().ops.embedding(toGpu(ids), toGpu(wt).transpose(0, 1)), cpu().ops.embedding(ids, wt.transpose(0, 1)), EXACT, 'transposed table');
  });

  it('out-of-range ids: zero rows without checks; a RangeError with FASTKERNELS_CHECK_INDICES / setIndexChecks(true)', G, () => {
    const w = toGpu(randCpu([8, 16], 'f32', 3));
    const out = gpu().ops.embedding(toGpu(intsCpu([1, 8, -1], [3], 'i64')), w);
    const v = out.toFloat64Array();
    if (v.slice(16).some((x) => x !== 0)) throw new Error('rows of out-of-range ids should be zero');
    setIndexChecks(true);
    let threw = false;
    try {
      gpu().ops.embedding(toGpu(intsCpu([1, 8], [2], 'i64')), w);
    } catch (e) {
      threw = e instanceof RangeError;
    }
    if (!threw) throw new Error('expected a RangeError with index checks on');
    gpu().ops.embedding(toGpu(intsCpu([1, 7], [2], 'i64')), w); // the flag was reset
    setIndexChecks(false);
    if (Tensor.empty(gpu(), [0], 'i64').numel !== 0) throw new Error('unreachable');
  });
  it('embeddingMasked: a vocabulary shard, ids of other shards give zero rows (never an error, index checks on or off)', G, () => {
    for (const dtype of ['bf16', 'f32'] as DType[]) {
      for (const idType of ['i64', 'i32'] as const) {
        const V = 96;
        const full = randCpu([V, 72], dtype, 5);
        for (const [start, rows] of [[0, 24], [24, 24], [72, 24], [48, 48]] as const) {
          const shard = full.narrow(0, start, rows).clone();
          const ids = intsCpu([0, 23, 24, 47, 48, 71, 72, 95, 5, 60, 30, 90, 24], [13], idType);
          const want = cpu().ops.embeddingMasked(ids, shard, start);
          expectClose(gpu().ops.embeddingMasked(toGpu(ids), toGpu(shard), start), want, EXACT, `embeddingMasked ${dtype} ${idType} start ${start}`);
          setIndexChecks(true);
          expectClose(gpu().ops.embeddingMasked(toGpu(ids), toGpu(shard), start), want, EXACT, 'embeddingMasked with index checks');
          setIndexChecks(false);
        }
      }
    }
  });
  afterAll(() => setIndexChecks(false));
});

describe('L1/embedding task on CUDA vs its float64 reference', () => {
  const t = task('L1/embedding');
  const b = t.cases.ci[1]!;
  const extra = [
    variant(b, 'odd-H-f16', { dtype: 'f16', dims: { T: 21, V: 300, H: 75 }, init: [300, 75] }),
    variant(b, 'llama-bf16', { dims: { T: 32, V: 4096, H: 4096 }, init: [4096, 4096] }),
  ];
  for (const { c, seed } of taskCases(t, extra)) it(`${c.name} (${c.dtype}) seed ${seed}`, G, () => checkTaskOnCuda(t, c, seed));
});
