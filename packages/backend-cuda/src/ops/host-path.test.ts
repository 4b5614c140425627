/**
 * The host side of the generated ops without a GPU: tensors on a fake device (addresses, no memory), a kernel cache
 * that records each launch and packs its arguments as the runtime would (a wrong count or type throws), so the
 * argument order, the geometry struct and the grids are checked here; the numbers are checked on the GPU.
 */
import { describe, expect, it } from 'vitest';
import { Tensor } from '@fastkernels/core';
import { fake } from '../../test/ops-fake.js';
import { ElementwiseRunner } from './elementwise.js';
import type { Expr } from './expr.js';
import { GeneratedNorms } from './norm.js';
import { GeneratedReductions } from './reduce.js';

const ptrOf = (t: Tensor) => t.storage.devicePtr! + t.offset * t.itemsize;
const CHAIN3: Expr = { inputs: 3, nodes: [{ op: 'silu', args: [{ input: 0 }] }, { op: 'mul', args: [{ node: 0 }, { input: 1 }] }, { op: 'add', args: [{ node: 1 }, { input: 2 }] }] };

describe('ElementwiseRunner launches', () => {
  it('contiguous: out, inputs, n; a grid of tiles of 256 threads x 2 vectors (3 inputs); one kernel reused', () => {
    const f = fake();
    const r = new ElementwiseRunner(CHAIN3, f.cache, f.runtime);
    const [x, y, z, out] = [f.t([1000, 257]), f.t([1000, 257]), f.t([1000, 257]), f.t([1000, 257])];
    r.run(out, [x, y, z]);
    r.run(out, [x, y, z]);
    expect(f.cache.generated.size).toBe(1);
    const l = f.cache.launches[0]!;
    expect(l.entry).toBe('fk_ew_contig');
    expect(l.args).toEqual([ptrOf(out), ptrOf(x), ptrOf(y), ptrOf(z), 257000]);
    expect(l.grid).toBe(Math.ceil(257000 / 8 / 512));
    expect(r.kernels).toBe(1);
  });

  it('strided broadcast: the geometry struct holds sizes (inner in vectors) and per-operand strides', () => {
    const f = fake();
    const r = new ElementwiseRunner({ inputs: 2, nodes: [{ op: 'add', args: [{ input: 0 }, { input: 1 }] }] }, f.cache, f.runtime);
    const [x, b, out] = [f.t([64, 96]), f.t([96]), f.t([64, 96])];
    r.run(out, [x, b]);
    const l = f.cache.launches[0]!;
    expect(l.entry).toBe('fk_ew_strided');
    expect([...new Int32Array((l.args[3] as Uint8Array).buffer)]).toEqual([64, 12, 96, 8, 96, 8, 0, 8]);
    expect(l.args[4]).toBe(64 * 12);
    expect(l.source).toContain('FkV<__nv_bfloat16, 8>');
  });

  it('runtime scalars sit between the inputs and n; a transposed input takes the scalar strided path', () => {
    const f = fake();
    const r = new ElementwiseRunner({ inputs: 1, params: 1, nodes: [{ op: 'mul', args: [{ input: 0 }, { param: 0 }] }] }, f.cache, f.runtime);
    const x = f.t([40, 24], 'f32');
    const xt = x.transpose(0, 1);
    const out = f.t([24, 40], 'f32');
    r.run(out, [xt], [0.5]);
    const l = f.cache.launches[0]!;
    expect(l.entry).toBe('fk_ew_strided');
    expect(l.args.slice(0, 3)).toEqual([ptrOf(out), ptrOf(x), 0.5]);
    expect([...new Int32Array((l.args[3] as Uint8Array).buffer)]).toEqual([24, 40, 40, 1, 1, 24]);
    r.run(f.t([40, 24], 'f32'), [x], [2]);
    expect(f.cache.launches[1]!.entry).toBe('fk_ew_contig');
    expect(r.kernels).toBe(2);
  });

  it('an empty output launches nothing; a wrong input count throws', () => {
    const f = fake();
    const r = new ElementwiseRunner(CHAIN3, f.cache, f.runtime);
    r.run(f.t([0, 5]), [f.t([0, 5]), f.t([0, 5]), f.t([0, 5])]);
    expect(f.cache.launches).toHaveLength(0);
    expect(() => r.run(f.t([3]), [f.t([3])])).toThrow(/takes 3 inputs, got 1/);
  });
});

describe('reduction and norm launches', () => {
  it('rows in place, columns in place, scattered dims through a contiguous copy', () => {
    const f = fake();
    const red = new GeneratedReductions(f.cache, f.runtime);
    const x = f.t([37, 1000]);
    red.reduce('sum', x, [1], f.t([37]));
    expect(f.cache.launches[0]).toMatchObject({ entry: 'fk_row_reduce', args: [expect.any(Number), ptrOf(x), 37, 1000, 1000, 1] });
    const y = f.t([4, 37, 64], 'f32');
    red.reduce('mean', y, [1], f.t([4, 64], 'f32'));
    // 4 x 16 vectors: narrow tiles of 8 x 32 threads (planColumns), one pass
    expect(f.cache.launches[1]).toMatchObject({ entry: 'fk_col_reduce', args: [expect.any(Number), ptrOf(y), 4, 37, 64, 37 * 64, 64, 37, 37], grid: 8, block: 8 * 32 });
    expect(f.cache.launches[1]!.source).toContain('threadIdx.x % 8,');
    red.reduce('amax', f.t([6, 7, 8]), [0, 2], f.t([7]));
    expect(f.copies).toHaveLength(1);
    expect(f.cache.launches[2]).toMatchObject({ entry: 'fk_row_reduce', args: [expect.any(Number), ptrOf(f.copies[0]![0]), 7, 48, 48, 1] });
  });

  it('a full reduction of a large tensor is split in two stages: 512 partial rows in f32, then their sum times 1 / N', () => {
    const f = fake();
    const red = new GeneratedReductions(f.cache, f.runtime);
    const x = f.t([4096, 4096]);
    const out = f.t([]);
    red.reduce('mean', x, [0, 1], out);
    const [a, b] = f.cache.launches;
    expect(a).toMatchObject({ entry: 'fk_row_reduce', args: [expect.any(Number), ptrOf(x), 512, 32768, 32768, 1] });
    expect(a!.source).toContain('float fk_st_f32');
    expect(b).toMatchObject({ entry: 'fk_row_reduce', args: [ptrOf(out), a!.args[0], 1, 512, 512, 1 / (4096 * 4096)] });
    expect(b!.source).toContain('acc * fk_acc(post)');
  });

  it('a column reduction with too few tiles is split along R: [S, n] f32 partials, then their mean over the true R', () => {
    const f = fake();
    const red = new GeneratedReductions(f.cache, f.runtime);
    const x = f.t([8192, 8192]);
    const out = f.t([8192]);
    red.reduce('mean', x, [0], out);
    const [a, b] = f.cache.launches;
    expect(a).toMatchObject({ entry: 'fk_col_reduce', grid: [32, 64], block: 256, args: [expect.any(Number), ptrOf(x), 1, 8192, 8192, 0, 8192, 128, 8192] });
    expect(a!.source).toContain('float fk_st_f32');
    expect(a!.source).toContain('sum over the middle dim');
    // stage 2 never cut: [64, 8192] f32 partials in one pass of 256 CTAs of 8 x 32
    expect(b).toMatchObject({ entry: 'fk_col_reduce', grid: 256, block: 256, args: [ptrOf(out), a!.args[0], 1, 64, 8192, 0, 8192, 64, 8192] });
    expect(b!.source).toContain('threadIdx.x % 8,');
    expect(b!.source).toContain('v / fk_acc(div)');
    // an i32 sum: f64 partials, i64 out; a misaligned view reads scalars
    const xi = f.t([4, 4096, 1024], 'i32');
    red.reduce('sum', xi, [1], f.t([4, 1024], 'i64'));
    expect(f.cache.launches[2]!.source).toContain('double fk_st_f64');
    expect(f.cache.launches[3]!.source).toContain('long long fk_st_i64');
    const v = f.t([4096, 1025]).narrow(1, 1, 1024);
    red.reduce('sum', v, [0], f.t([1024]));
    expect(f.cache.launches[4]!.source).toContain('vec 1,');
  });

  it('a mean over tokens and a channels-last global pool: one launch over outer x inner on narrow tiles, no partials', () => {
    const f = fake();
    const red = new GeneratedReductions(f.cache, f.runtime);
    const tokens = f.t([64, 512, 1024]);
    const pooled = f.t([64, 1024]);
    red.reduce('mean', tokens, [1], pooled);
    expect(f.cache.launches).toHaveLength(1);
    expect(f.cache.launches[0]).toMatchObject({ entry: 'fk_col_reduce', grid: 1024, block: 256, args: [ptrOf(pooled), ptrOf(tokens), 64, 512, 1024, 512 * 1024, 1024, 512, 512] });
    const map = f.t([32, 12, 12, 1024], 'f16');
    const pool = f.t([32, 1024], 'f16');
    red.reduce('mean', map, [1, 2], pool);
    expect(f.cache.launches).toHaveLength(2);
    expect(f.cache.launches[1]).toMatchObject({ entry: 'fk_col_reduce', grid: 512, block: 256, args: [ptrOf(pool), ptrOf(map), 32, 144, 1024, 144 * 1024, 1024, 144, 144] });
    for (const l of f.cache.launches) expect(l.source).toContain('threadIdx.x % 8,');
  });

  it('log_softmax over the last dim: out, x, rows, D, row stride; a block a row for vocab rows', () => {
    const f = fake();
    const red = new GeneratedReductions(f.cache, f.runtime);
    const x = f.t([4, 128256]);
    const out = red.softmax(x, 1, 'bf16', true);
    const l = f.cache.launches[0]!;
    expect(l).toMatchObject({ entry: 'fk_row_log_softmax', args: [ptrOf(out), ptrOf(x), 4, 128256, 128256], grid: 4 });
    expect(l.block).toBe(1024);
  });

  it('layer_norm FLUX and group_norm YOLO: argument order (y, x, w, b, rows, L, stride, eps, G, cpg, hw)', () => {
    const f = fake();
    const norms = new GeneratedNorms(f.cache, f.runtime);
    const [x, w, b] = [f.t([4096, 3072]), f.t([3072]), f.t([3072])];
    const y = norms.layerNorm(x, 1, w, b, 1e-6);
    expect(f.cache.launches[0]).toMatchObject({ entry: 'fk_layer_norm', args: [ptrOf(y), ptrOf(x), ptrOf(w), ptrOf(b), 4096, 3072, 3072, 1e-6, 1, 1, 1], block: 96, grid: 4096 });
    const g = f.t([8, 256, 80, 80], 'f16');
    const gy = norms.groupNorm(g, 32, f.t([256], 'f16'), null, 1e-5);
    expect(f.cache.launches[1]).toMatchObject({ entry: 'fk_group_norm', args: [ptrOf(gy), ptrOf(g), expect.any(Number), 0, 256, 51200, 51200, 1e-5, 32, 8, 6400], block: 1024 });
    expect(f.cache.launches[1]!.source).toContain('cBase + (j * 8) / int(hw)');
  });
});
