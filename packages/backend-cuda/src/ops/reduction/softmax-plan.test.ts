import { describe, expect, it } from 'vitest';
import { oneReadPlan, softmaxPlan } from './softmax.js';
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

// The one-read kernel (fk_softmax_smem): rows longer than softmax.oneReadMinRowBytes, a cluster a row whose CTAs keep
// their slices in shared memory. H100 / H200: sm_90, 227 KiB of shared memory a block (232448 bytes opt-in).
describe('softmaxPlan (CPU): the one-read kernel for long rows', () => {
  const SMS = 132;
  const H100 = { sharedPerBlock: 232448, major: 9 };
  const base = { ...cudaTuning().softmax, longRowVectors: 8, clusterMaxRows: 0, clusterSize: 8, oneReadMinRowBytes: 131072, oneReadSliceBytes: 32768 };
  /** fk_softmax_smem's shared memory: the slice of `per` vectors (to 16 bytes), a (max, sum) a warp, the CTA's pair. */
  const smemOf = (per: number, vecBytes: number, threads: number) => Math.ceil((per * vecBytes) / 16) * 16 + (2 * (threads / 32) + 2) * 4;
  const plan = (rows: number, D: number, itemsize: number, vec: number, tuning = base, dev = H100) =>
    softmaxPlan(rows, D / vec, itemsize, SMS, tuning, { vecBytes: vec * itemsize, ...dev });

  it('the ops bench case, log_softmax [256, 128256] bf16: 8 CTAs of 256 threads, 32064-byte slices', () => {
    expect(plan(256, 128256, 2, 8)).toEqual({ entry: 'fk_softmax_smem', grid: 2048, cluster: 8, threads: 256, npt: 4, smem: 32064 + 72 });
    // 7 CTAs an SM: 7 x (32136 + the 1 KiB reserved a block) <= 228 KiB
    expect(7 * (32136 + 1024)).toBeLessThanOrEqual(228 * 1024);
  });
  it('the threshold: rows of more than oneReadMinRowBytes; at or below it, the kernels from before', () => {
    expect(plan(256, 65536, 2, 8).entry).toBe('fk_softmax'); // 128 KiB: one block keeps it in registers (8 vectors x 1024)
    expect(plan(256, 65544, 2, 8)).toMatchObject({ entry: 'fk_softmax_smem', cluster: 8, smem: smemOf(1025, 16, 160) });
    expect(plan(256, 32768, 4, 4).entry).toBe('fk_softmax'); // f32 at 128 KiB
    expect(plan(256, 32772, 4, 4)).toMatchObject({ entry: 'fk_softmax_smem', cluster: 8 });
    expect(plan(256, 128256, 2, 8, { ...base, oneReadMinRowBytes: 0 }).entry).toBe('fk_softmax'); // 0: off
    expect(plan(256, 128256, 2, 8, { ...base, oneReadMinRowBytes: 256512 }).entry).toBe('fk_softmax'); // not more
  });
  it('the cluster: the fewest CTAs (2, 4, 8) whose slices are at most oneReadSliceBytes, else 8', () => {
    expect(plan(256, 128256, 2, 8, { ...base, oneReadSliceBytes: 131072 })).toMatchObject({ cluster: 2, grid: 512, smem: smemOf(8016, 16, 1024), threads: 1024 });
    expect(plan(256, 128256, 2, 8, { ...base, oneReadSliceBytes: 65536 })).toMatchObject({ cluster: 4, smem: smemOf(4008, 16, 512), threads: 512 });
    expect(plan(256, 128256, 2, 8, { ...base, oneReadSliceBytes: 16384 })).toMatchObject({ cluster: 8, smem: smemOf(2004, 16, 256) });
  });
  it('capacity: up to 8 slices of a CTA\'s shared memory (less the merge scratch); longer rows keep the two-read kernels', () => {
    // 256k elements: f32 1 MiB (8 x 128 KiB), bf16 512 KiB
    expect(plan(256, 262144, 4, 4)).toMatchObject({ entry: 'fk_softmax_smem', cluster: 8, smem: 131072 + 264, threads: 1024 });
    expect(plan(256, 262144, 2, 8)).toMatchObject({ entry: 'fk_softmax_smem', cluster: 8, smem: 65536 + 136, threads: 512 });
    const per = Math.floor((232448 - 264) / 16); // the most 16-byte vectors a CTA of 1024 threads holds: 14511
    expect(plan(256, 8 * per * 4, 4, 4)).toMatchObject({ entry: 'fk_softmax_smem', smem: 232440 }); // 464352 f32
    expect(plan(256, 8 * per * 4 + 4, 4, 4).entry).toBe('fk_softmax');
    expect(plan(256, 500000, 4, 4).entry).toBe('fk_softmax'); // 2 MB
  });
  it('odd lengths: scalar vectors (the slice in elements), an uneven last slice', () => {
    expect(plan(3, 131071, 2, 1)).toMatchObject({ entry: 'fk_softmax_smem', cluster: 8, smem: smemOf(16384, 2, 1024) });
    expect(plan(300, 40001, 4, 1)).toMatchObject({ entry: 'fk_softmax_smem', cluster: 8, smem: smemOf(5001, 4, 640), threads: 640 });
  });
  it('below sm_90, or without the device: the kernels from before', () => {
    expect(plan(256, 128256, 2, 8, base, { ...H100, major: 8 }).entry).toBe('fk_softmax');
    expect(softmaxPlan(256, 16032, 2, SMS, base).entry).toBe('fk_softmax');
  });
  it('fewer rows than SMs: the register cluster while its registers hold the slice, else the one-read kernel', () => {
    expect(plan(32, 128256, 2, 8)).toMatchObject({ entry: 'fk_softmax_cluster', cluster: 8, smem: 0 });
    expect(plan(4, 131072, 4, 4)).toMatchObject({ entry: 'fk_softmax_cluster', threads: 1024 }); // 4096 vectors a CTA: all kept
    expect(plan(4, 131076, 4, 4)).toMatchObject({ entry: 'fk_softmax_smem', cluster: 8, smem: smemOf(4097, 16, 544) }); // one more vector a CTA
    expect(plan(4, 262144, 4, 4)).toMatchObject({ entry: 'fk_softmax_smem', cluster: 8, smem: 131072 + 264 });
    expect(plan(4, 262144, 4, 4, { ...base, oneReadMinRowBytes: 0 })).toMatchObject({ entry: 'fk_softmax_cluster' }); // off: as before
  });
  it('oneReadPlan alone: null where it does not apply', () => {
    expect(oneReadPlan(1, 100, base, { vecBytes: 16, ...H100 })).toBeNull();
    expect(oneReadPlan(2 ** 29, 16032, base, { vecBytes: 16, ...H100 })).toBeNull(); // grid over 2^31 - 1
  });
  it.skipIf(process.env.FASTKERNELS_TUNING !== undefined)('defaults: the one-read kernel above 128 KiB a row, 32 KiB slices', () => {
    expect(cudaTuning().softmax.oneReadMinRowBytes).toBe(131072);
    expect(cudaTuning().softmax.oneReadSliceBytes).toBe(32768);
  });
});
