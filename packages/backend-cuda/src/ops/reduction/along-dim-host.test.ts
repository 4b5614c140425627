/**
 * The registry glue and launches of argmax / argmin, cumsum, sort and topk on a fake device (no GPU): callOp reaches
 * the line kernels with core's attrs, the argument order matches each kernel's signature (the fake packs them), layouts
 * the kernels cannot walk are copied first, long topk lines run in stages, and what is not supported is declined.
 */
import { callOp, callOp1, opRoute } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { fake } from '../../../test/ops-fake.js';
import { registerGeneratedKernels } from '../register.js';

const ptrOf = (t: { storage: { devicePtr?: number }; offset: number; itemsize: number }) => t.storage.devicePtr! + t.offset * t.itemsize;

function device() {
  const f = fake();
  registerGeneratedKernels(f.backend.opKernels!, f.runtime, f.cache);
  return f;
}

describe('argmax / argmin / cumsum on the line kernels', () => {
  it('argmax over the last dim: (out, x, lines, inner, D, sO, sD, sI), a warp a row', () => {
    const f = device();
    const x = f.t([37, 1000]);
    expect(opRoute('argmax', [x], { dim: -1 })).toEqual({ via: 'kernel' });
    const out = callOp1('argmax', [x], { dim: -1, keepdim: true });
    expect(out.shape).toEqual([37, 1]);
    expect(out.dtype).toBe('i64');
    const l = f.cache.launches[0]!;
    expect(l).toMatchObject({ entry: 'fk_argmax', args: [ptrOf(out), ptrOf(x), 37, 1, 1000, 1000, 1, 0], block: 256 });
    expect(l.source).toContain('__nv_bfloat16');
  });

  it('argmin over a middle dim in place (a thread a column); over all dims of a transposed input through a copy', () => {
    const f = device();
    const x = f.t([64, 50, 4096], 'f32');
    callOp1('argmin', [x], { dim: 1 });
    expect(f.cache.launches[0]).toMatchObject({ entry: 'fk_argmin', args: [expect.any(Number), ptrOf(x), 64 * 4096, 4096, 50, 50 * 4096, 4096, 1], block: 256 });
    expect(f.cache.launches[0]!.source).toContain('1 threads a line');
    const y = f.t([40, 30]).transpose(0, 1);
    expect(callOp1('argmax', [y]).shape).toEqual([]);
    expect(f.copies).toHaveLength(1);
    expect(f.cache.launches[1]!.args.slice(1, 5)).toEqual([ptrOf(f.copies[0]![0]), 1, 1, 1200]);
  });

  it('max / min (values and indices) decompose into argmax + gather, both kernels', () => {
    const f = device();
    const [v, i] = callOp('max', [f.t([8, 33])], { dim: 1 });
    expect(v!.shape).toEqual([8]);
    expect(i!.dtype).toBe('i64');
    expect(f.cache.launches.map((l) => l.entry)).toEqual(['fk_argmax', 'fk_gather']);
  });

  it('cumsum: ints give i64 (long long accumulation), bf16 accumulates in float, a long row takes a block', () => {
    const f = device();
    const n = f.t([10, 300], 'i32');
    expect(callOp1('cumsum', [n], { dim: 1 }).dtype).toBe('i64');
    expect(f.cache.launches[0]!.source).toContain('typedef long long fk_acc;');
    const x = f.t([4, 50000]);
    const y = callOp1('cumsum', [x], { dim: -1 });
    expect(y.dtype).toBe('bf16');
    expect(f.cache.launches[1]).toMatchObject({ entry: 'fk_cumsum', args: [ptrOf(y), ptrOf(x), 4, 1, 50000, 50000, 1, 0], block: 1024, grid: 4 });
    expect(f.cache.launches[1]!.source).toContain('typedef float fk_acc;');
    expect(callOp1('cumsum', [f.t([6, 7], 'f32')], { dim: 0, dtype: 'bf16' }).dtype).toBe('bf16');
    expect(f.cache.launches[2]!.source).toContain('fk_ld_bf16(fk_st_bf16(fk_ld_f32(');
  });

  it('var / std: one Welford pass over rows or columns in place, scattered dims through a copy; denominator N - correction', () => {
    const f = device();
    const x = f.t([8, 64]);
    expect(opRoute('var', [x], { dim: 1 })).toEqual({ via: 'kernel' });
    const v = callOp1('var', [x], { dim: 1, correction: 0 });
    expect(f.cache.launches[0]).toMatchObject({ entry: 'fk_var', args: [ptrOf(v), ptrOf(x), 8, 1, 64, 64, 1, 0, 64] });
    const y = f.t([4, 37, 64], 'f32');
    callOp1('std', [y], { dim: 1, keepdim: true });
    expect(f.cache.launches[1]).toMatchObject({ entry: 'fk_std', args: [expect.any(Number), ptrOf(y), 256, 64, 37, 37 * 64, 64, 1, 36] });
    expect(f.cache.launches[1]!.source).toContain('sqrtf(v)');
    callOp1('var', [f.t([6, 7, 8])], { dim: [0, 2] });
    expect(f.copies).toHaveLength(1);
    expect(f.cache.launches[2]!.args.slice(2, 9)).toEqual([7, 1, 48, 48, 1, 0, 47]);
  });
});

describe('sort / topk on the segmented bitonic sort', () => {
  it('sort of rows: one block a row, P = the next power of two, P * (key + index) bytes of shared memory', () => {
    const f = device();
    const x = f.t([16, 1000]);
    const [v, i] = callOp('sort', [x], { dim: -1, descending: true });
    const l = f.cache.launches[0]!;
    expect(l).toMatchObject({ entry: 'fk_sort_segments', args: [ptrOf(v!), ptrOf(i!), ptrOf(x), 0, 1, 1000, 1000, 1, 0, 1000, 1000, 1, 1024], grid: 16, block: 512 });
    expect(l.source).toContain('~fk_key');
  });

  it('topk along dim 0 reads the columns in place (inner lines)', () => {
    const f = device();
    const x = f.t([300, 7], 'f32');
    const [v] = callOp('topk', [x], { k: 3, dim: 0, largest: false });
    expect(v!.shape).toEqual([3, 7]);
    expect(f.cache.launches[0]!.args.slice(4, 13)).toEqual([7, 300, 0, 7, 1, 3, 300, 1, 512]);
    expect(f.cache.launches[0]!.source).not.toContain('~fk_key');
  });

  it('topk of a vocabulary row in two stages: 32 segments of 4096 keep 50 each, then the 1600 candidates', () => {
    const f = device();
    const x = f.t([2, 128256], 'f32');
    const [v, i] = callOp('topk', [x], { k: 50 });
    expect(v!.shape).toEqual([2, 50]);
    const [a, b] = f.cache.launches;
    expect(a!.args.slice(2, 13)).toEqual([ptrOf(x), 0, 1, 128256, 128256, 1, 0, 50, 4096, 32, 4096]);
    expect(a!.grid).toBe(64);
    expect(b!.args.slice(0, 4)).toEqual([ptrOf(v!), ptrOf(i!), a!.args[0], a!.args[1]]);
    expect(b!.args.slice(4, 13)).toEqual([1, 1600, 1600, 1, 1, 50, 1600, 1, 2048]);
  });

  it('a sort longer than 4096 runs the global-memory network: init, chunk-local passes and global steps, out', () => {
    const f = device();
    const x = f.t([2, 9000], 'f32');
    const [v, i] = callOp('sort', [x], { dim: 1, descending: true });
    const entries = f.cache.launches.map((l) => l.entry);
    // P = 16384: chunks sorted (2..4096), stage 8192 (j 4096, local), stage 16384 (j 8192, 4096, local)
    expect(entries).toEqual(['fk_lsort_init', 'fk_lsort_local', 'fk_lsort_global', 'fk_lsort_local', 'fk_lsort_global', 'fk_lsort_global', 'fk_lsort_local', 'fk_lsort_out']);
    const ls = f.cache.launches;
    expect(ls[0]!.args.slice(2)).toEqual([ptrOf(x), 2, 1, 9000, 9000, 1, 0, 16384]);
    expect(ls[1]).toMatchObject({ args: [ls[0]!.args[0], ls[0]!.args[1], 16384, 2, 4096], grid: 8, block: 1024 });
    expect(ls[5]!.args.slice(2)).toEqual([2, 16384, 16384, 4096]);
    expect(ls[7]!.args).toEqual([ptrOf(v!), ptrOf(i!), ptrOf(x), ls[0]!.args[1], 2, 1, 9000, 1, 0, 16384, 9000]);
    expect(ls[0]!.source).toContain('~fk_key');
    // topk with k > 2048 of a long line takes it too; beyond 2^24 elements a line it is declined
    expect(opRoute('topk', [f.t([2, 9000])], { k: 3000 })).toEqual({ via: 'kernel' });
    expect(opRoute('topk', [f.t([2, 9000])], { k: 2048 })).toEqual({ via: 'kernel' });
    expect(opRoute('sort', [f.t([1, 2 ** 24 + 1], 'u8')], {})).toEqual({ unsupported: expect.stringMatching(/at most 16777216/) });
  });
});
