/**
 * The registry glue and launches of gather / index_select / scatter / scatter_add / pad / interpolate on a fake device
 * (no GPU): the geometry struct each kernel reads (sizes, strides, pads, scales), the copies scatter makes (input into
 * the f32 accumulation buffer and back for 16-bit floats), and the calls left to core's strided-copy routes.
 */
import { Tensor, callOp1, opRoute } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { fake } from '../../../test/ops-fake.js';
import { registerGeneratedKernels } from '../register.js';

const ptrOf = (t: Tensor) => t.storage.devicePtr! + t.offset * t.itemsize;
const i64s = (u: unknown) => [...new BigInt64Array((u as Uint8Array).slice().buffer)].map(Number);
const f64s = (u: unknown, from: number) => [...new Float64Array((u as Uint8Array).slice().buffer)].slice(from);

function device() {
  const f = fake();
  registerGeneratedKernels(f.backend.opKernels!, f.runtime, f.cache);
  return f;
}

describe('gather / index_select', () => {
  it('gather: output sizes, x strides with 0 on the dim, index strides; the dim size and stride as arguments', () => {
    const f = device();
    const x = f.t([5, 6, 7]);
    const idx = f.t([5, 3, 7], 'i64');
    const out = callOp1('gather', [x, idx], { dim: 1 });
    const l = f.cache.launches[0]!;
    expect(l.entry).toBe('fk_gather');
    expect(l.args.slice(0, 6)).toEqual([ptrOf(out), ptrOf(x), ptrOf(idx), 105, 6, 7]);
    expect(i64s(l.args[6])).toEqual([5, 3, 7, 42, 0, 1, 21, 7, 1]);
    expect(l.source).toContain('unsigned short');
  });

  it('index_select of rows from a transposed table: the 1-D index strided on the dim, 0 elsewhere; i32 ids', () => {
    const f = device();
    const w = f.t([64, 100], 'f32').transpose(0, 1);
    const ids = f.t([9], 'i32');
    const out = callOp1('index_select', [w, ids], { dim: 0 });
    expect(out.shape).toEqual([9, 64]);
    const l = f.cache.launches[0]!;
    expect(l.args.slice(3, 6)).toEqual([9 * 64, 100, 1]);
    expect(i64s(l.args[6])).toEqual([9, 64, 0, 100, 1, 0]);
    expect(l.source).toContain('const int* __restrict__ idx');
  });
});

describe('scatter / scatter_add', () => {
  it('scatter_add of bf16 accumulates in f32: input copied in, atomics, copied back', () => {
    const f = device();
    const x = f.t([4, 10]);
    const idx = f.t([4, 6], 'i64');
    const src = f.t([4, 6]);
    const out = callOp1('scatter_add', [x, idx, src], { dim: 1 });
    expect(out.dtype).toBe('bf16');
    expect(f.copies.map(([d, s]) => [d.dtype, s.dtype])).toEqual([['f32', 'bf16'], ['bf16', 'f32']]);
    expect(f.copies[0]![1]).toBe(x);
    expect(f.copies[1]![0]).toBe(out);
    const l = f.cache.launches[0]!;
    expect(l.entry).toBe('fk_scatter');
    expect(l.args.slice(0, 7)).toEqual([ptrOf(f.copies[0]![0]), ptrOf(src), ptrOf(idx), 24, 10, 1, 0]);
    expect(i64s(l.args[7])).toEqual([4, 6, 10, 0, 6, 1, 6, 1]);
    expect(l.source).toContain('atomicAdd(&out[oo + j * dimStride], fk_ld_bf16(src[so]))');
  });

  it('scatter of a scalar into f32 writes in place of a copy; the scalar rounds to the dtype; multiply is declined', () => {
    const f = device();
    const x = f.t([3, 5], 'f32');
    callOp1('scatter', [x, f.t([2, 5], 'i64'), 0.1], { dim: 0 });
    expect(f.copies).toHaveLength(1);
    expect(f.cache.launches[0]!.args[6]).toBe(Math.fround(0.1));
    expect(f.cache.launches[0]!.source).toContain('fk_st_f32(fk_c(value))');
    expect(opRoute('scatter', [x, f.t([2, 5], 'i64'), 2], { dim: 0, reduce: 'multiply' })).toEqual({ unsupported: "scatter reduce='multiply' has no atomic kernel" });
  });
});

describe('pad and interpolate', () => {
  it('reflect pad of the last two dims: out sizes, in sizes, strides, left pads (0 on unpadded dims)', () => {
    const f = device();
    const x = f.t([2, 3, 8, 9]);
    const out = callOp1('pad', [x], { pad: [1, 2, 3, 4], mode: 'reflect' });
    expect(out.shape).toEqual([2, 3, 15, 12]);
    const l = f.cache.launches[0]!;
    expect(l.entry).toBe('fk_pad');
    expect(l.args.slice(0, 3)).toEqual([ptrOf(out), ptrOf(x), 2 * 3 * 15 * 12]);
    expect(i64s(l.args[3])).toEqual([2, 3, 15, 12, 2, 3, 8, 9, 216, 72, 9, 1, 0, 0, 3, 1]);
  });

  it('constant pad stays on the fill + strided copy route', () => {
    const f = device();
    expect(opRoute('pad', [f.t([4, 4])], { pad: [1, 1], mode: 'constant' })).toEqual({ via: 'ops' });
  });

  it('bilinear of an NCHW input: C, out and in sizes, the four strides, the two scales', () => {
    const f = device();
    const x = f.t([2, 3, 10, 16]);
    const out = callOp1('interpolate', [x], { size: [20, 24], mode: 'bilinear', align_corners: false });
    expect(out.shape).toEqual([2, 3, 20, 24]);
    const l = f.cache.launches[0]!;
    expect(l.entry).toBe('fk_interpolate');
    expect(l.args[2]).toBe(2 * 3 * 20 * 24);
    expect(i64s(l.args[3]).slice(0, 9)).toEqual([3, 20, 24, 10, 16, 480, 160, 16, 1]);
    expect(f64s(l.args[3], 9)).toEqual([0.5, 16 / 24]);
  });

  it('nearest with a scale_factor: the float32 of 1 / scale', () => {
    const f = device();
    callOp1('interpolate', [f.t([1, 2, 5, 5], 'f32')], { scale_factor: 3, mode: 'nearest' });
    expect(f64s(f.cache.launches[0]!.args[3], 9)).toEqual([Math.fround(1 / 3), Math.fround(1 / 3)]);
  });
});

describe('flip, tril / triu, one_hot', () => {
  it('flip: sizes, strides, a flag per flipped dim', () => {
    const f = device();
    const x = f.t([3, 4, 5]);
    const out = callOp1('flip', [x], { dims: [0, -1] });
    const l = f.cache.launches[0]!;
    expect(l.entry).toBe('fk_flip');
    expect(l.args.slice(0, 3)).toEqual([ptrOf(out), ptrOf(x), 60]);
    expect(i64s(l.args[3])).toEqual([3, 4, 5, 20, 5, 1, 1, 0, 1]);
  });

  it('tril / triu of a batch of matrices: the diagonal as an argument; one_hot of i64 classes', () => {
    const f = device();
    const x = f.t([2, 6, 7], 'f32');
    callOp1('triu', [x], { diagonal: 1 });
    expect(f.cache.launches[0]).toMatchObject({ entry: 'fk_triangle', args: [expect.any(Number), ptrOf(x), 84, 1, expect.any(Uint8Array)] });
    expect(f.cache.launches[0]!.source).toContain('col - row >= diagonal');
    const ids = f.t([4, 3], 'i64');
    const oh = callOp1('one_hot', [ids], { num_classes: 10 });
    expect(oh.shape).toEqual([4, 3, 10]);
    expect(f.cache.launches[1]).toMatchObject({ entry: 'fk_one_hot', args: [ptrOf(oh), ptrOf(ids), 120, 10, expect.any(Uint8Array)] });
  });
});
