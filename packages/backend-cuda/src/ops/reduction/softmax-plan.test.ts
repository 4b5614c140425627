import { describe, expect, it } from 'vitest';
import { softmaxPlan } from './softmax.js';
import { cudaTuning } from '../../tuning/load.js';

// The threads (so which vectors a thread folds: the result bits) must stay what they were before the register-light
// builds; only FK_NPT moves. H200: 132 SMs. bf16 rows of 128256 are 16032 16-byte vectors; f32 32064.
describe('softmaxPlan (CPU): launch choices', () => {
  const SMS = 132;
  const on = { ...cudaTuning().softmax, longRowVectors: 8, clusterMaxRows: 0, clusterSize: 8 };
  const off = { ...on, longRowVectors: 4 };
  const cases: [string, number, number, number, Partial<ReturnType<typeof softmaxPlan>>, Partial<ReturnType<typeof softmaxPlan>>][] = [
    // name, rows, vectors, itemsize, at 8 vectors, before (4)
    ['logits B1 bf16', 1, 16032, 2, { entry: 'fk_softmax_cluster', grid: 8, threads: 512, npt: 4 }, {}],
    ['logits B32 bf16', 32, 16032, 2, { entry: 'fk_softmax_cluster', grid: 256, threads: 512, npt: 4 }, {}],
    ['logits B131 bf16', 131, 16032, 2, { entry: 'fk_softmax_cluster', grid: 1048, threads: 512 }, {}],
    ['logits B256 bf16', 256, 16032, 2, { entry: 'fk_softmax', grid: 256, threads: 1024, npt: 8 }, { npt: 4 }],
    ['logits B132 f16', 132, 16032, 2, { entry: 'fk_softmax', grid: 132, threads: 1024, npt: 8 }, { npt: 4 }],
    ['logits B32 f32', 32, 32064, 4, { entry: 'fk_softmax_cluster', grid: 256, threads: 1024, npt: 4 }, {}],
    ['logits B256 f32: 4 vectors (2 blocks of 1024 an SM)', 256, 32064, 4, { entry: 'fk_softmax', grid: 256, threads: 1024, npt: 4 }, {}],
    ['attention scores 1024 x 4096 bf16', 1024, 512, 2, { entry: 'fk_softmax', grid: 1024, threads: 128, npt: 4 }, {}],
    ['4096 vectors: all in registers at 4', 256, 4096, 2, { entry: 'fk_softmax', threads: 1024, npt: 4 }, {}],
    ['4097 vectors', 256, 4097, 2, { entry: 'fk_softmax', threads: 1024, npt: 8 }, { npt: 4 }],
    ['2048 vectors: below the cluster threshold', 1, 2048, 2, { entry: 'fk_softmax', grid: 1, threads: 512, npt: 4 }, {}],
    ['2049 vectors, B1', 1, 2049, 2, { entry: 'fk_softmax_cluster', grid: 8, threads: 96 }, {}],
    ['odd row 40001 f32 (scalar)', 3, 40001, 4, { entry: 'fk_softmax_cluster', grid: 24, threads: 1024, npt: 4 }, {}],
  ];
  for (const [name, rows, nv, size, want, before] of cases) {
    it(name, () => {
      const p = softmaxPlan(rows, nv, size, SMS, on);
      expect(p).toMatchObject(want);
      const q = softmaxPlan(rows, nv, size, SMS, off);
      expect(q).toMatchObject({ ...want, ...before });
      expect([q.entry, q.grid, q.threads]).toEqual([p.entry, p.grid, p.threads]); // the bits' layout: same either way
    });
  }
  it('clusterMaxRows moves the path threshold (B256 on the cluster path for the A/B)', () => {
    expect(softmaxPlan(256, 16032, 2, SMS, { ...on, clusterMaxRows: 256 })).toMatchObject({ entry: 'fk_softmax_cluster', grid: 2048, threads: 512, npt: 4 });
    expect(softmaxPlan(257, 16032, 2, SMS, { ...on, clusterMaxRows: 256 }).entry).toBe('fk_softmax');
    expect(softmaxPlan(32, 16032, 2, SMS, { ...on, clusterMaxRows: 16 }).entry).toBe('fk_softmax');
    expect(softmaxPlan(132, 16032, 2, SMS, on).entry).toBe('fk_softmax');
  });
  it('entry, grid and threads are the formula before the register-light builds (rows x vectors sweep)', () => {
    const roundUp = (a: number, b: number) => Math.ceil(a / b) * b;
    const before = (rows: number, nv: number) => {
      if (nv > 2048 && rows < SMS && rows * 8 <= 2 ** 31 - 1) return ['fk_softmax_cluster', rows * 8, Math.min(1024, Math.max(32, roundUp(Math.ceil(Math.ceil(nv / 8) / 4), 32)))];
      return ['fk_softmax', rows, Math.min(1024, Math.max(32, roundUp(Math.ceil(nv / 4), 32)))];
    };
    for (const rows of [1, 2, 31, 32, 131, 132, 256, 1024])
      for (const nv of [1, 6, 257, 512, 2048, 2049, 4096, 4097, 5001, 16032, 32064, 40001, 131072])
        for (const size of [2, 4]) {
          const p = softmaxPlan(rows, nv, size, SMS, on);
          expect([p.entry, p.grid, p.threads], `${rows} x ${nv}`).toEqual(before(rows, nv));
        }
  });
  it('clusterSize: CTAs a row on the cluster path, their threads from the slice (capped at 1024)', () => {
    expect(softmaxPlan(32, 16032, 2, SMS, on)).toMatchObject({ entry: 'fk_softmax_cluster', grid: 256, cluster: 8, threads: 512 });
    expect(softmaxPlan(32, 16032, 2, SMS, { ...on, clusterSize: 4 })).toMatchObject({ entry: 'fk_softmax_cluster', grid: 128, cluster: 4, threads: 1024 });
    expect(softmaxPlan(32, 16032, 2, SMS, { ...on, clusterSize: 2 })).toMatchObject({ entry: 'fk_softmax_cluster', grid: 64, cluster: 2, threads: 1024 });
    expect(softmaxPlan(256, 16032, 2, SMS, { ...on, clusterSize: 4 })).toMatchObject({ entry: 'fk_softmax', cluster: 0 });
  });
  it.skipIf(process.env.FASTKERNELS_TUNING !== undefined)('defaults: 8 vectors for long 16-bit rows, cluster below the SM count', () => {
    expect(cudaTuning().softmax.longRowVectors).toBe(8);
    expect(cudaTuning().softmax.clusterMaxRows).toBe(0);
    expect(cudaTuning().softmax.clusterSize).toBe(8);
  });
});
