import type { Status } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { aggregateOps, compositionDelta, compositionDeltas, summarizeKernels } from './kernel-aggregate.js';
import type { KernelCase } from './kernel-input.js';

const c = (task: string, status: Status, speedup: number | null, kase = 'c0'): KernelCase => ({ task, case: kase, status, speedup });

describe('kernel-level aggregation', () => {
  it('an op is correct only when every case passed; its speedup is the geomean over cases', () => {
    const ops = aggregateOps([
      c('L1/a', 'PASSED', 2, 'c0'), c('L1/a', 'PASSED', 8, 'c1'),
      c('L1/b', 'PASSED', 3, 'c0'), c('L1/b', 'INCORRECT_NUMERICAL', 3, 'c1'),
    ]);
    expect(ops.find((o) => o.task === 'L1/a')).toMatchObject({ correct: true, speedup: 4, winner: true, cases: 2 });
    expect(ops.find((o) => o.task === 'L1/b')).toMatchObject({ correct: false, winner: false });
  });

  it('level summary: benched, correct, geomean over correct ops, fast_1 / fast_2 strictly above p', () => {
    const k = summarizeKernels([
      c('L1/a', 'PASSED', 4), c('L1/b', 'PASSED', 1), c('L1/c', 'PASSED', 2), c('L1/d', 'RUNTIME_ERROR', null),
      c('L2/x', 'PASSED', 0.5), c('L2/y', 'SKIPPED', null),
    ]);
    expect(k.levels.L1).toMatchObject({ benched: 4, correct: 3, fast_1: 2, fast_2: 1, winners: 3 });
    expect(k.levels.L1!.geomean).toBeCloseTo(2, 12);
    // An op all of whose cases were SKIPPED is not benched; a slower correct op is correct but no winner.
    expect(k.levels.L2).toMatchObject({ benched: 1, correct: 1, winners: 0, fast_1: 0 });
    expect(k.overall).toMatchObject({ benched: 5, correct: 4 });
  });

  it('the winner gate is speedup >= 1.0 exactly; an unchanged baseline (1.0x) is a winner only at the gate', () => {
    const ops = aggregateOps([c('L1/a', 'PASSED', 1), c('L1/b', 'PASSED', 0.999999)]);
    expect(ops.map((o) => o.winner)).toEqual([true, false]);
    expect(aggregateOps([c('L1/a', 'PASSED', 1)], 1.0001)[0]!.winner).toBe(false);
  });

  it('a level with no correct op has a null geomean', () => {
    expect(summarizeKernels([c('L3/z', 'INCORRECT_SHAPE', 5)]).levels.L3!.geomean).toBeNull();
  });

  it('composition: ratio of geomeans paired over ops correct in both modes, broke = from-winners that fail', () => {
    const ind = aggregateOps([c('L2/a', 'PASSED', 2), c('L2/b', 'PASSED', 4), c('L2/c', 'PASSED', 1.5), c('L2/d', 'INCORRECT_NUMERICAL', 9), c('L1/r', 'PASSED', 3)]);
    const comp = aggregateOps([c('L2/a', 'PASSED', 1), c('L2/b', 'PASSED', 4), c('L2/c', 'RUNTIME_ERROR', null), c('L2/d', 'PASSED', 9), c('L1/r', 'PASSED', 3)]);
    const d = compositionDelta(ind, comp, 2);
    expect(d.n).toBe(2);
    expect(d.from).toBeCloseTo(Math.sqrt(8), 12);
    expect(d.to).toBeCloseTo(2, 12);
    expect(d.ratio).toBeCloseTo(2 / Math.sqrt(8), 12);
    expect(d.broke).toBe(1); // c won independently and fails composed; d was never a winner
    const all = compositionDeltas({ ind, comp });
    expect(Object.keys(all)).toEqual(['ind_to_comp_L2']);
    expect(compositionDelta(ind, [], 2)).toEqual({ n: 0, from: null, to: null, ratio: null, broke: 3 });
  });
});
