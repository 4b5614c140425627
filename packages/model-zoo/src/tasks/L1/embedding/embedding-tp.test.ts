/**
 * VocabParallelEmbedding under tensor parallelism, on the CPU in one thread: W ranks built in groups of world W whose
 * collectives are a two-pass fake (the first pass records every rank's all-reduce input, the second gives each rank
 * the sum in rank order, as HostCollectives and NCCL's ring give). The ranks' real module code runs (masked gather,
 * group all-reduce); their output must equal the replicated W = 1 output bit for bit. The ranks as threads over shared
 * memory, with the registry's L1/allreduce and a checkpoint: test/tensor-parallel.test.ts.
 */
import { Rng, Tensor, TensorParallelGroup, withTensorParallelGroup, type Collectives, type DType, type ExecutionContext } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../../test/l1-harness.js';
import { baselineRegistry } from '../../../index.js';
import type { VocabParallelEmbedding } from './embedding.js';

/** Pass 'record': remember this rank's input of call i and leave it as is. Pass 'sum': the sum of every rank's input i. */
class TwoPassCollectives implements Collectives {
  private calls = 0;
  constructor(
    readonly rank: number,
    readonly world: number,
    private readonly book: Float64Array[][],
    private readonly pass: 'record' | 'sum',
  ) {}

  allReduce(t: Tensor): Tensor {
    const i = this.calls++;
    if (this.pass === 'record') {
      (this.book[i] ??= [])[this.rank] = t.toFloat64Array();
      return t;
    }
    const parts = this.book[i]!;
    if (parts.length !== this.world || parts.some((p) => !p)) throw new Error(`all-reduce ${i}: not every rank recorded it`);
    const sum = new Float64Array(parts[0]!.length);
    for (const p of parts) for (let j = 0; j < sum.length; j++) sum[j]! += p[j]!;
    const src = Tensor.fromArray(t.backend, sum, [...t.shape], t.dtype);
    t.copy_(src);
    src.dispose();
    return t;
  }

  allGatherInto(): void {
    throw new Error('the embedding does not all-gather');
  }
}

/** Collectives that must not be called (a replicated embedding communicates nothing). */
class NoCollectives implements Collectives {
  constructor(
    readonly rank: number,
    readonly world: number,
  ) {}
  allReduce(): Tensor {
    throw new Error('a replicated embedding must not all-reduce');
  }
  allGatherInto(): void {
    throw new Error('a replicated embedding must not all-gather');
  }
}

const backend = cpuBackend();
const registry = baselineRegistry();
const ctxOf = (dtype: DType): ExecutionContext => ({ backend, device: 0, dtype, registry });

/** A rank's module (rank 0 of 1: the replicated one), its weight the rows it holds of `table` (full [V, H]). */
function build(dtype: DType, V: number, H: number, table: Float64Array, group: TensorParallelGroup): VocabParallelEmbedding {
  const m = withTensorParallelGroup(group, () => registry.createIn<VocabParallelEmbedding>(ctxOf(dtype), 'L1/embedding', V, H));
  const rows = m.numEmbeddingsPerPartition;
  const src = Tensor.fromArray(backend, table.subarray(m.vocabStartIndex * H, (m.vocabStartIndex + rows) * H), [rows, H], dtype);
  m.weight.copy_(src);
  src.dispose();
  return m;
}

/** Fresh random ids, with the first and last id of every shard of W and of the table. */
function idsFor(V: number, world: number, rng: Rng): number[] {
  const ids = Array.from({ length: 23 }, () => rng.int(0, V));
  const per = V / world;
  for (let r = 0; r < world; r++) ids.push(r * per, (r + 1) * per - 1);
  ids.push(0, V - 1, ids[3]!); // a repeat too
  return rng.permutation(ids.length).map((i) => ids[i]!);
}

function forward(m: VocabParallelEmbedding, dtype: DType, ids: number[]): { values: number[]; dtype: DType; shape: number[] } {
  const t = Tensor.fromArray(backend, ids, [ids.length], 'i64');
  const y = m.forward(t);
  const out = { values: [...y.toFloat64Array()], dtype: y.dtype, shape: [...y.shape] };
  y.dispose();
  t.dispose();
  return out;
}

describe('VocabParallelEmbedding at W > 1 (vocabulary split, masked gather + all-reduce) equals W = 1 bit for bit', () => {
  const V = 96;
  const H = 40;
  for (const dtype of ['f32', 'bf16'] as DType[]) {
    for (const world of [2, 4]) {
      it(`${dtype}, W = ${world}`, () => {
        const rng = new Rng(1000 * world + (dtype === 'f32' ? 1 : 2));
        const table = rng.fillNormal(V * H, 1);
        const ids = idsFor(V, world, rng);
        const single = build(dtype, V, H, table, TensorParallelGroup.single());
        expect(single.vocabParallel).toBe(false);
        const expected = forward(single, dtype, ids);
        expect(expected.shape).toEqual([ids.length, H]);
        expect(expected.values.some((v) => v !== 0)).toBe(true);

        const book: Float64Array[][] = [];
        const ranks = (pass: 'record' | 'sum') =>
          Array.from({ length: world }, (_, r) => build(dtype, V, H, table, new TensorParallelGroup(r, world, new TwoPassCollectives(r, world, book, pass))));
        // pass 1: every rank's partial (its rows, zeros elsewhere)
        const recording = ranks('record');
        for (const [r, m] of recording.entries()) {
          expect(m.vocabParallel).toBe(true);
          expect([...m.weight.shape]).toEqual([V / world, H]);
          expect(m.vocabStartIndex).toBe((r * V) / world);
          const partial = forward(m, dtype, ids).values;
          ids.forEach((id, t) => {
            const mine = id >= m.vocabStartIndex && id < m.vocabStartIndex + V / world;
            const row = partial.slice(t * H, (t + 1) * H);
            expect(row, `rank ${r} id ${id}`).toEqual(mine ? expected.values.slice(t * H, (t + 1) * H) : new Array<number>(H).fill(0));
          });
          m.dispose();
        }
        expect(book).toHaveLength(1); // one all-reduce per forward
        // pass 2: every rank's all-reduced output
        for (const m of ranks('sum')) {
          const y = forward(m, dtype, ids);
          expect(y.dtype).toBe(dtype);
          expect(y.shape).toEqual(expected.shape);
          expect(y.values).toEqual(expected.values);
          m.dispose();
        }
        single.dispose();
      });
    }
  }

  it('a vocabulary W does not divide stays replicated: the whole table, no collective, the W = 1 output', () => {
    const V2 = 102; // 102 = 2 * 51: split over 2 ranks, not over 4
    const rng = new Rng(7);
    const table = rng.fillNormal(V2 * H, 1);
    const ids = [0, 50, 51, 101, ...Array.from({ length: 9 }, () => rng.int(0, V2))];
    const single = build('f32', V2, H, table, TensorParallelGroup.single());
    const expected = forward(single, 'f32', ids);
    for (let r = 0; r < 4; r++) {
      const m = build('f32', V2, H, table, new TensorParallelGroup(r, 4, new NoCollectives(r, 4)));
      expect(m.vocabParallel).toBe(false);
      expect(m.vocabStartIndex).toBe(0);
      expect([...m.weight.shape]).toEqual([V2, H]);
      expect(forward(m, 'f32', ids).values).toEqual(expected.values);
      m.dispose();
    }
    const split = build('f32', V2, H, table, new TensorParallelGroup(1, 2, new NoCollectives(1, 2)));
    expect([split.vocabParallel, [...split.weight.shape], split.vocabStartIndex]).toEqual([true, [51, H], 51]);
    split.dispose();
    single.dispose();
  });
});
