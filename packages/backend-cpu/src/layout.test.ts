import { F, OpError, callOp, callOp1, inferOp, stridesLikeChannelsLast, supportedOps, viewStrides, type DType } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { LAYOUTS, Rng, cpu, expectClose, randn, relayout, tensor, values } from './test-helpers.js';

const FLOATS: DType[] = ['f32', 'bf16', 'f16'];
const arange = (n: number, shape: number[], dtype: DType = 'f32') => tensor(Array.from({ length: n }, (_, i) => i), shape, dtype);

describe('views', () => {
  it('view / reshape share storage when the strides allow it, reshape copies otherwise', () => {
    const x = arange(24, [2, 3, 4]);
    const v = F.view(x, [6, -1]);
    expect(v.shape).toEqual([6, 4]);
    expect(v.storage).toBe(x.storage);
    const t = F.transpose(x, 0, 1); // [3, 2, 4], strides [4, 12, 1]
    expect(F.view(t, [3, 2, 2, 2]).storage).toBe(x.storage); // splitting the contiguous last dim is a view
    expect(() => F.view(t, [6, 4])).toThrow(/view: size \[6, 4\] is not compatible with the input's strides/);
    const r = F.reshape(t, [6, 4]);
    expect(r.storage).not.toBe(x.storage);
    expect(values(r).slice(0, 8)).toEqual([0, 1, 2, 3, 12, 13, 14, 15]);
    expect(viewStrides([2, 3], [3, 1], [3, 2])).toEqual([2, 1]);
    expect(viewStrides([3, 2], [1, 3], [6])).toBeNull();
    expect(() => F.reshape(x, [5, -1])).toThrow(/reshape: shape \[5, -1\] is invalid for an input of 24 elements/);
    expect(F.flatten(x, 1).shape).toEqual([2, 12]);
    expect(F.flatten(tensor([3], [])).shape).toEqual([1]);
  });

  it('permute, transpose, unsqueeze, squeeze, expand, narrow, slice, select', () => {
    const x = arange(6, [2, 3]);
    expect(values(F.permute(x, [1, 0]))).toEqual([0, 3, 1, 4, 2, 5]);
    expect(() => F.permute(x, [0, 0])).toThrow(/permute: dims \[0, 0\] is not a permutation/);
    expect(F.unsqueeze(x, -1).shape).toEqual([2, 3, 1]);
    expect(F.squeeze(arange(3, [1, 3, 1])).shape).toEqual([3]);
    expect(F.squeeze(arange(3, [1, 3, 1]), 0).shape).toEqual([3, 1]);
    expect(F.squeeze(arange(3, [1, 3, 1]), 1).shape).toEqual([1, 3, 1]); // not size 1: left alone
    const e = F.expand(tensor([1, 2], [2, 1]), [3, -1, 4]);
    expect(e.shape).toEqual([3, 2, 4]);
    expect(e.strides).toEqual([0, 1, 0]);
    expect(() => F.expand(x, [4, 3])).toThrow(/expand: input \[2, 3\] cannot be expanded to \[4, 3\]/);
    expect(values(F.narrow(x, 1, -2, 2))).toEqual([1, 2, 4, 5]);
    expect(() => F.narrow(x, 1, 2, 2)).toThrow(/narrow: start 2 \+ length 2 exceeds dim 1 of size 3/);
    expect(values(F.slice(arange(10, [10]), 0, 1, -1, 3))).toEqual([1, 4, 7]);
    expect(F.slice(arange(10, [10]), 0, 20, 30).shape).toEqual([0]);
    expect(values(F.select(x, 1, -1))).toEqual([2, 5]);
    expect(() => F.select(x, 0, 2)).toThrow(/select: index 2 is out of range for dim 0 of size 2/);
  });

  it('split / chunk return views of PyTorch sizes', () => {
    const x = arange(10, [10]);
    expect(F.split(x, 4).map((t) => values(t))).toEqual([[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]);
    expect(F.split(x, [3, 7]).map((t) => t.shape[0])).toEqual([3, 7]);
    expect(() => F.split(x, [3, 3])).toThrow(/split: split sizes \[3, 3\] must be non-negative and sum to the dim size 10/);
    expect(F.chunk(arange(6, [6]), 4).map((t) => t.shape[0])).toEqual([2, 2, 2]); // fewer chunks, as torch
    expect(F.chunk(arange(5, [5]), 2).map((t) => values(t))).toEqual([[0, 1, 2], [3, 4]]);
    const c = arange(6, [2, 3]);
    const last = F.chunk(c, 3, 1)[2]!;
    expect(last.storage).toBe(c.storage);
    expect(values(last)).toEqual([2, 5]);
  });
});

describe('copies: contiguous, cat, stack, repeat', () => {
  it('contiguous returns the input view when already contiguous, else a copy', () => {
    const x = arange(6, [2, 3]);
    expect(F.contiguous(x).storage).toBe(x.storage);
    const t = F.contiguous(F.transpose(x, 0, 1));
    expect(t.isContiguous()).toBe(true);
    expect(values(t)).toEqual([0, 3, 1, 4, 2, 5]);
    expect(supportedOps(cpu).find((o) => o.name === 'contiguous')?.via).toBe('ops');
  });

  it('cat along each dim, promotion, legacy empty 1-D inputs, non-contiguous inputs', () => {
    const a = arange(6, [2, 3]);
    const b = tensor([6, 7, 8], [1, 3], 'bf16');
    const c = F.cat([a, b]);
    expect(c.shape).toEqual([3, 3]);
    expect(c.dtype).toBe('f32');
    expect(values(c)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8]);
    const d = F.cat([relayout(a, 'transposed'), arange(2, [2, 1])], -1);
    expect(values(d)).toEqual([0, 1, 2, 0, 3, 4, 5, 1]);
    expect(F.cat([a, tensor([], [0])]).shape).toEqual([2, 3]);
    expect(F.cat([tensor([], [0, 3]), a]).shape).toEqual([2, 3]);
    expect(() => F.cat([a, arange(4, [2, 2])])).toThrow(/cat: sizes of tensors must match except in dim 0: \[2, 3\], \[2, 2\]/);
    expect(() => F.cat([])).toThrow(/cat/);
  });

  it('stack on a new dim', () => {
    const a = tensor([1, 2], [2]);
    const b = tensor([3, 4], [2], 'i32');
    expect(values(F.stack([a, b]))).toEqual([1, 2, 3, 4]);
    const s = F.stack([a, b], -1);
    expect(s.shape).toEqual([2, 2]);
    expect(values(s)).toEqual([1, 3, 2, 4]);
    expect(() => F.stack([a, tensor([1], [1])])).toThrow(/stack: expects each tensor to be equal size/);
  });

  it('repeat tiles and adds leading dims; expand + contiguous agrees', () => {
    const x = tensor([1, 2, 3, 4], [2, 2]);
    const r = F.repeat(x, [2, 1, 2]);
    expect(r.shape).toEqual([2, 2, 4]);
    expect(values(r)).toEqual([1, 2, 1, 2, 3, 4, 3, 4, 1, 2, 1, 2, 3, 4, 3, 4]);
    expect(values(F.repeat(relayout(x, 'transposed'), [1, 2]))).toEqual([1, 2, 1, 2, 3, 4, 3, 4]);
    expect(F.repeat(x, [0, 1]).shape).toEqual([0, 2]);
    expect(() => F.repeat(x, [2])).toThrow(/repeat: repeats \[2\] has fewer dims than input \[2, 2\]/);
  });
});

describe('pad', () => {
  const x = arange(6, [1, 2, 3]);
  it('constant (value, negative crop), reflect, replicate, circular: hand values', () => {
    expect(values(F.pad(x, [1, 0], 'constant', 9))).toEqual([9, 0, 1, 2, 9, 3, 4, 5]);
    expect(values(F.pad(x, [0, 0, 1, 0]))).toEqual([0, 0, 0, 0, 1, 2, 3, 4, 5]);
    expect(values(F.pad(x, [-1, 1]))).toEqual([1, 2, 0, 4, 5, 0]);
    expect(values(F.pad(x, [2, 1], 'reflect'))).toEqual([2, 1, 0, 1, 2, 1, 5, 4, 3, 4, 5, 4]);
    expect(values(F.pad(x, [1, 2], 'replicate'))).toEqual([0, 0, 1, 2, 2, 2, 3, 3, 4, 5, 5, 5]);
    expect(values(F.pad(x, [1, 1], 'circular'))).toEqual([2, 0, 1, 2, 0, 5, 3, 4, 5, 3]);
    expect(values(F.pad(x, [0, 0, 1, 1], 'reflect'))).toEqual([3, 4, 5, 0, 1, 2, 3, 4, 5, 0, 1, 2]);
    expect(() => F.pad(x, [3, 0], 'reflect')).toThrow(/pad: reflect padding \(3, 0\) must be non-negative and less than the size 3/);
    expect(() => F.pad(x, [1])).toThrow(/pad: pad \[1\] must have an even length/);
  });

  it('the cpu kernel and the generic constant route agree on random non-contiguous inputs', () => {
    const rng = new Rng(1);
    for (const dtype of FLOATS) {
      const base = randn(rng, [3, 4, 5], dtype);
      for (const layout of LAYOUTS) {
        const v = relayout(base, layout);
        const k = F.pad(v, [2, -1, 1, 3], 'constant', 0.5);
        const info = inferOp('pad', [v], { pad: [2, -1, 1, 3], value: 0.5 });
        const generic = info.spec.viaOps!(cpu.ops, { op: info.spec, backend: cpu, inputs: [v], attrs: info.attrs, outputs: info.outputs })!;
        expect(values(generic[0]!)).toEqual(values(k));
        expect(k.shape).toEqual([3, 8, 6]);
        const X = values(base);
        const want: number[] = [];
        for (let i = 0; i < 3; i++) for (let j = 0; j < 8; j++) for (let l = 0; l < 6; l++) {
          const sj = j - 1;
          const sl = l - 2;
          want.push(sj >= 0 && sj < 4 && sl >= 0 && sl < 4 ? X[i * 20 + sj * 5 + sl]! : 0.5);
        }
        expect(values(k)).toEqual(want);
      }
    }
  });
});

describe('gather / index_select / scatter / scatter_add / one_hot / embedding', () => {
  it('gather along dims with hand values; out-of-range index errors', () => {
    const x = tensor([1, 2, 3, 4], [2, 2]);
    const idx = tensor([0, 0, 1, 0], [2, 2], 'i64');
    expect(values(F.gather(x, 1, idx))).toEqual([1, 1, 4, 3]);
    expect(values(F.gather(x, 0, tensor([1, 0], [1, 2], 'i32')))).toEqual([3, 2]);
    expect(() => F.gather(x, 1, tensor([2], [1, 1], 'i64'))).toThrow(/gather: index 2 is out of bounds for dim 1 with size 2/);
    expect(() => F.gather(x, 1, tensor([0], [1], 'i64'))).toThrow(/gather: index \[1\] must have the same number of dims as input \[2, 2\]/);
    expect(() => F.gather(x, 1, tensor([0], [1, 1], 'f32'))).toThrow(/gather: index has dtype f32/);
  });

  it('gather on a random non-contiguous input vs a naive loop', () => {
    const rng = new Rng(3);
    const base = randn(rng, [4, 5, 3], 'bf16');
    const X = values(base);
    const I = Array.from({ length: 4 * 2 * 3 }, () => rng.int(0, 5));
    const y = F.gather(relayout(base, 'stepped'), 1, tensor(I, [4, 2, 3], 'i64'));
    const want: number[] = [];
    for (let i = 0; i < 4; i++) for (let j = 0; j < 2; j++) for (let k = 0; k < 3; k++) want.push(X[i * 15 + I[i * 6 + j * 3 + k]! * 3 + k]!);
    expect(values(y)).toEqual(want);
  });

  it('index_select', () => {
    const x = arange(12, [3, 4], 'f16');
    expect(values(F.indexSelect(x, 0, tensor([2, 0, 2], [3], 'i64')))).toEqual([8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11]);
    expect(values(F.indexSelect(relayout(x, 'transposed'), -1, tensor([1], [1], 'i32')))).toEqual([1, 5, 9]);
    expect(F.indexSelect(x, 1, tensor([], [0], 'i64')).shape).toEqual([3, 0]);
    expect(() => F.indexSelect(x, 0, tensor([3], [1], 'i64'))).toThrow(/index_select: index 3 is out of bounds for dim 0 with size 3/);
    expect(() => F.indexSelect(x, 0, tensor([0, 1], [1, 2], 'i64'))).toThrow(/index_select: index must be 1-D or 0-d/);
  });

  it('scatter (src, value, reduce) and scatter_add (duplicates accumulate)', () => {
    const x = tensor([0, 0, 0, 0, 0, 0], [2, 3]);
    const idx = tensor([2, 0, 1, 1], [2, 2], 'i64');
    const src = tensor([1, 2, 3, 4, 5, 6], [2, 3]);
    expect(values(F.scatter(x, 1, idx, src))).toEqual([2, 0, 1, 0, 5, 0]); // row 1 writes index 1 twice: the last (5) wins
    expect(values(F.scatter(x, 1, idx, 7))).toEqual([7, 0, 7, 0, 7, 0]);
    expect(values(F.scatterAdd(x, 1, idx, src))).toEqual([2, 0, 1, 0, 9, 0]);
    expect(values(F.scatter(tensor([1, 1, 1, 1, 1, 1], [2, 3]), 0, tensor([1, 1, 0], [1, 3], 'i64'), src, { reduce: 'add' }))).toEqual([1, 1, 4, 2, 3, 1]);
    expect(values(F.scatter(tensor([2, 2, 2, 2, 2, 2], [2, 3]), 0, tensor([1, 1, 0], [1, 3], 'i64'), src, { reduce: 'multiply' }))).toEqual([2, 2, 6, 2, 4, 2]);
    expect(() => F.scatterAdd(x, 1, tensor([0, 0, 0, 0], [1, 4], 'i64'), src)).toThrow(/scatter_add: index \[1, 4\] is larger than src \[2, 3\] in dim 1/);
    expect(() => F.scatterAdd(x, 0, tensor([0, 0, 0, 0], [1, 4], 'i64'), arange(8, [2, 4]))).toThrow(/scatter_add: index \[1, 4\] is larger than input \[2, 3\] in dim 1/);
  });

  it('scatter_add on a random non-contiguous input vs a naive loop', () => {
    const rng = new Rng(8);
    const base = randn(rng, [6, 4], 'f32');
    const src = randn(rng, [3, 4], 'f32');
    const I = Array.from({ length: 12 }, () => rng.int(0, 6));
    const y = F.scatterAdd(relayout(base, 'transposed'), 0, tensor(I, [3, 4], 'i32'), relayout(src, 'narrowed'));
    const want = values(base);
    const S = values(src);
    for (let i = 0; i < 3; i++) for (let j = 0; j < 4; j++) want[I[i * 4 + j]! * 4 + j]! += S[i * 4 + j]!;
    expectClose(values(y), want.map((v) => Math.fround(v)), 1e-6, 1e-6);
  });

  it('one_hot and embedding', () => {
    const o = F.oneHot(tensor([0, 2, 1], [3], 'i64'));
    expect(o.shape).toEqual([3, 3]);
    expect(o.dtype).toBe('i64');
    expect(values(o)).toEqual([1, 0, 0, 0, 0, 1, 0, 1, 0]);
    expect(F.oneHot(tensor([1], [1, 1], 'i32'), 4).shape).toEqual([1, 1, 4]);
    expect(() => F.oneHot(tensor([4], [1], 'i64'), 4)).toThrow(/one_hot: class value 4 is outside \[0, num_classes = 4\)/);
    const w = arange(6, [3, 2], 'bf16');
    const e = F.embedding(tensor([2, 0], [1, 2], 'i64'), w);
    expect(e.shape).toEqual([1, 2, 2]);
    expect(values(e)).toEqual([4, 5, 0, 1]);
    // a shard holding rows [2, 5) of the table: other ids give zero rows; the Ops route and the decomposition agree
    const shard = arange(6, [3, 2], 'bf16');
    const ids = tensor([1, 2, 4, 5, 3], [5], 'i64');
    const m = F.embeddingMasked(ids, shard, 2);
    expect(values(m)).toEqual([0, 0, 0, 1, 4, 5, 0, 0, 2, 3]);
    const info = inferOp('embedding_masked', [ids, shard], { start: 2 });
    const [d] = info.spec.decompose!({ op: info.spec, backend: cpu, inputs: [ids, shard], attrs: info.attrs as Record<string, unknown>, outputs: info.outputs });
    expect(d!.dtype).toBe('bf16');
    expect(values(d!)).toEqual(values(m));
  });
});

describe('interpolate, pixel_shuffle', () => {
  it('nearest (and the out = 2 in shortcut), nearest-exact', () => {
    const x = tensor([1, 2, 3], [1, 1, 3]);
    expect(values(F.interpolate(x, { scale_factor: 2 }))).toEqual([1, 1, 2, 2, 3, 3]);
    expect(values(F.interpolate(x, { size: 5 }))).toEqual([1, 1, 2, 2, 3]); // floor(i * 0.6)
    expect(values(F.interpolate(x, { size: 5, mode: 'nearest-exact' }))).toEqual([1, 1, 2, 3, 3]); // floor((i + .5) * .6)
    expect(values(F.interpolate(x, { size: 2 }))).toEqual([1, 2]);
    const img = tensor([1, 2, 3, 4], [1, 1, 2, 2]);
    expect(values(F.interpolate(img, { scale_factor: [1, 2] }))).toEqual([1, 1, 2, 2, 3, 3, 4, 4]);
    // scale 1.7 on 3 -> 5 outputs: the mapping uses 1 / 1.7 unless recompute_scale_factor (then 3 / 5)
    const r = tensor([1, 2, 3], [1, 1, 3]);
    expect(values(F.interpolate(r, { scale_factor: 1.7 }))).toEqual([1, 1, 2, 2, 3]); // floor(i / 1.7)
    expect(values(F.interpolate(r, { scale_factor: 1.7, recompute_scale_factor: true }))).toEqual([1, 1, 2, 2, 3]);
    const l = tensor([0, 10], [1, 1, 2]);
    // 2 -> 3 outputs; output 1 maps to 1.5 / 1.7 - 0.5 (given scale) or 1.5 * 2 / 3 - 0.5 = 0.5 (recomputed)
    expectClose(values(F.interpolate(l, { scale_factor: 1.7, mode: 'linear' })), [0, 10 * (1.5 / 1.7 - 0.5), 10 * (2.5 / 1.7 - 0.5)]);
    expectClose(values(F.interpolate(l, { scale_factor: 1.7, mode: 'linear', recompute_scale_factor: true })), [0, 5, 10]);
  });

  it('a channels-last input gives a channels-last output (as PyTorch), the same values as the contiguous input', () => {
    const x = arange(2 * 3 * 4 * 5, [2, 3, 4, 5]);
    const clBase = F.contiguous(x.permute([0, 2, 3, 1])); // [N, H, W, C] in memory
    const cl = clBase.permute([0, 3, 1, 2]);
    for (const attrs of [{ scale_factor: 2 }, { size: [7, 9], mode: 'bilinear' as const }]) {
      const want = F.interpolate(x, attrs);
      const got = F.interpolate(cl, attrs);
      expect(want.isContiguous()).toBe(true);
      expect(stridesLikeChannelsLast(got.shape, got.strides) && !got.isContiguous()).toBe(true);
      expect(got.strides).toEqual([got.shape[1]! * got.shape[2]! * got.shape[3]!, 1, got.shape[1]! * got.shape[3]!, got.shape[1]!]);
      expect(values(got)).toEqual(values(want));
    }
  });

  it('bilinear with and without align_corners: hand values', () => {
    const img = tensor([1, 2, 3, 4], [1, 1, 2, 2]);
    const a = F.interpolate(img, { size: [3, 3], mode: 'bilinear', align_corners: true });
    expectClose(values(a), [1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4]);
    const b = F.interpolate(img, { scale_factor: 2, mode: 'bilinear', align_corners: false });
    expect(b.shape).toEqual([1, 1, 4, 4]);
    // rows/cols source coords: -0.25->0, 0.25, 0.75, 1.25->clamped to 1
    expectClose(values(b).slice(0, 4), [1, 1.25, 1.75, 2]);
    expectClose(values(b).slice(4, 8), [1.5, 1.75, 2.25, 2.5]);
    const l = F.interpolate(tensor([0, 10], [1, 1, 2]), { size: 5, mode: 'linear', align_corners: true });
    expectClose(values(l), [0, 2.5, 5, 7.5, 10]);
    expect(() => F.interpolate(img, { size: 3, mode: 'linear' })).toThrow(/interpolate: mode 'linear' needs 3-D input/);
    expect(() => F.interpolate(img, { size: 3, align_corners: true })).toThrow(/align_corners only applies to the linear modes/);
    expect(() => F.interpolate(img, { size: 3, scale_factor: 2 })).toThrow(/give exactly one of size and scale_factor/);
  });

  it('bilinear on random channels vs a naive formula, non-contiguous, bf16', () => {
    const rng = new Rng(12);
    const base = randn(rng, [2, 3, 4, 5], 'bf16');
    const X = values(base);
    const y = F.interpolate(relayout(base, 'transposed'), { size: [7, 3], mode: 'bilinear' });
    expect(y.shape).toEqual([2, 3, 7, 3]);
    const src = (o: number, inS: number, outS: number) => Math.max((o + 0.5) * (inS / outS) - 0.5, 0);
    const want: number[] = [];
    for (let p = 0; p < 6; p++) for (let i = 0; i < 7; i++) for (let j = 0; j < 3; j++) {
      const sy = src(i, 4, 7);
      const sx = src(j, 5, 3);
      const y0 = Math.floor(sy), x0 = Math.floor(sx);
      const y1 = Math.min(y0 + 1, 3), x1 = Math.min(x0 + 1, 4);
      const ly = sy - y0, lx = sx - x0;
      const g = (yy: number, xx: number) => X[p * 20 + yy * 5 + xx]!;
      want.push((1 - ly) * ((1 - lx) * g(y0, x0) + lx * g(y0, x1)) + ly * ((1 - lx) * g(y1, x0) + lx * g(y1, x1)));
    }
    expectClose(values(y), want, 1e-2, 8e-3);
  });

  it('pixel_shuffle / pixel_unshuffle: hand layout, inverse of each other', () => {
    const x = arange(8, [1, 4, 1, 2]);
    const s = F.pixelShuffle(x, 2);
    expect(s.shape).toEqual([1, 1, 2, 4]);
    // out[0, h*2+i, w*2+j] = in[i*2+j, h, w]
    expect(values(s)).toEqual([0, 2, 1, 3, 4, 6, 5, 7]);
    expect(values(F.pixelUnshuffle(s, 2))).toEqual(values(x));
    const rng = new Rng(4);
    const r = randn(rng, [2, 9, 2, 3], 'f16');
    expect(values(F.pixelUnshuffle(F.pixelShuffle(relayout(r, 'transposed'), 3), 3))).toEqual(values(r));
    const one = arange(4, [4, 1, 1]);
    expect(F.pixelShuffle(one, 1).storage).not.toBe(one.storage); // a new tensor, as torch
    expect(() => F.pixelShuffle(arange(6, [1, 6, 1, 1]), 2)).toThrow(/pixel_shuffle: channels 6 of input \[1, 6, 1, 1\] must be divisible by upscale_factor\^2 = 4/);
  });
});

describe('errors are OpErrors naming the op', () => {
  it('bad dims and attrs', () => {
    const x = arange(6, [2, 3]);
    expect(() => callOp('split', [x], { split_size_or_sections: 2, dim: 5 })).toThrow(OpError);
    expect(() => callOp1('cat', [x], { dim: 2 })).toThrow(/cat: dim=2 is out of range for a tensor of rank 2/);
    expect(() => callOp1('narrow', [x], { dim: 0, start: 0 })).toThrow(/narrow: bad arguments: length/);
  });
});

describe('flip / roll / tril / triu / masked_fill', () => {
  it('hand values', () => {
    const x = arange(6, [2, 3]);
    expect(values(F.flip(x, [1]))).toEqual([2, 1, 0, 5, 4, 3]);
    expect(values(F.flip(x, [0, -1]))).toEqual([5, 4, 3, 2, 1, 0]);
    expect(() => F.flip(x, [1, -1])).toThrow(/flip: dims \[1, -1\] names a dim twice/);
    expect(values(F.roll(x, 1, 1))).toEqual([2, 0, 1, 5, 3, 4]);
    expect(values(F.roll(x, [-1, 1], [1, 0]))).toEqual([4, 5, 3, 1, 2, 0]);
    expect(values(F.roll(x, 2))).toEqual([4, 5, 0, 1, 2, 3]); // flattened
    expect(values(F.roll(x, 3, 1))).toEqual(values(x)); // a full turn is a copy
    expect(F.roll(x, 3, 1).storage).not.toBe(x.storage);
    expect(() => F.roll(x, [1, 2], 0)).toThrow(/roll: shifts \[1,2\] and dims 0 must have the same length/);
    const m = arange(9, [3, 3], 'bf16');
    expect(values(F.tril(m))).toEqual([0, 0, 0, 3, 4, 0, 6, 7, 8]);
    expect(values(F.triu(m, 1))).toEqual([0, 1, 2, 0, 0, 5, 0, 0, 0]);
    expect(values(F.tril(arange(6, [1, 2, 3]), -1))).toEqual([0, 0, 0, 3, 0, 0]);
    expect(() => F.tril(arange(3, [3]))).toThrow(/tril: input must have at least 2 dims/);
    const mask = tensor([1, 0, 1], [3], 'bool');
    const f = F.maskedFill(x, mask, -1.5);
    expect(f.dtype).toBe('f32');
    expect(values(f)).toEqual([-1.5, 1, -1.5, -1.5, 4, -1.5]);
    const fi = F.maskedFill(tensor([1, 2, 3], [3], 'i32'), mask, 7.9);
    expect(fi.dtype).toBe('i32'); // keeps the input dtype
    expect(values(fi)).toEqual([7, 2, 7]);
    expect(() => F.maskedFill(tensor([1, 2, 3], [3]), tensor([1, 0, 1, 1, 0, 1], [2, 3], 'bool'), 0)).toThrow(/masked_fill: mask \[2, 3\] must broadcast to the input's shape \[3\]/);
  });

  it('random non-contiguous inputs vs a naive loop', () => {
    const rng = new Rng(30);
    const base = randn(rng, [4, 5], 'f16');
    const X = values(base);
    const v = relayout(base, 'transposed');
    const flipped: number[] = [];
    const rolled: number[] = [];
    const tri: number[] = [];
    for (let i = 0; i < 4; i++) for (let j = 0; j < 5; j++) {
      flipped.push(X[(3 - i) * 5 + j]!);
      rolled.push(X[i * 5 + ((j - 2 + 5) % 5)]!);
      tri.push(j - i <= 1 ? X[i * 5 + j]! : 0);
    }
    expect(values(F.flip(v, [0]))).toEqual(flipped);
    expect(values(F.roll(v, 2, -1))).toEqual(rolled);
    expect(values(F.tril(v, 1))).toEqual(tri);
  });
});

describe('interpolate bicubic', () => {
  /** Keys' cubic kernel with a = -0.75 as a function of the distance. */
  const W = (d: number) => {
    const x = Math.abs(d);
    const a = -0.75;
    return x <= 1 ? (a + 2) * x ** 3 - (a + 3) * x ** 2 + 1 : x < 2 ? a * x ** 3 - 5 * a * x ** 2 + 8 * a * x - 4 * a : 0;
  };
  const cubic1d = (row: number[], outSize: number, alignCorners: boolean) => {
    const n = row.length;
    const sc = alignCorners ? (outSize > 1 ? (n - 1) / (outSize - 1) : 0) : n / outSize;
    return Array.from({ length: outSize }, (_, o) => {
      const src = alignCorners ? sc * o : sc * (o + 0.5) - 0.5;
      const f = Math.floor(src);
      let v = 0;
      for (let k = f - 1; k <= f + 2; k++) v += W(src - k) * row[Math.min(Math.max(k, 0), n - 1)]!;
      return v;
    });
  };

  it('1-D rows vs Keys\' kernel; identity at equal size with align_corners; constants stay constant', () => {
    const row = [1, 4, 2, 8, 5];
    for (const ac of [false, true]) {
      const y = F.interpolate(tensor(row, [1, 1, 1, 5]), { size: [1, 9], mode: 'bicubic', align_corners: ac });
      expectClose(values(y), cubic1d(row, 9, ac), 1e-6, 1e-6);
    }
    expectClose(values(F.interpolate(tensor(row, [1, 1, 1, 5]), { size: [1, 5], mode: 'bicubic', align_corners: true })), row, 1e-6);
    expectClose(values(F.interpolate(tensor([3, 3, 3, 3], [1, 1, 2, 2]), { scale_factor: 3, mode: 'bicubic' })), new Array(36).fill(3), 1e-6);
    expect(() => F.interpolate(tensor([1, 2], [1, 1, 2]), { size: 4, mode: 'bicubic' })).toThrow(/interpolate: mode 'bicubic' needs 4-D input/);
  });

  it('2-D on a random transposed view = separable rows then columns', () => {
    const rng = new Rng(50);
    const base = randn(rng, [1, 2, 4, 5], 'f32');
    const X = values(base);
    const y = F.interpolate(relayout(base, 'transposed'), { size: [6, 7], mode: 'bicubic' });
    for (let c = 0; c < 2; c++) {
      const rows = [0, 1, 2, 3].map((i) => cubic1d(X.slice(c * 20 + i * 5, c * 20 + i * 5 + 5), 7, false));
      const want: number[] = [];
      const cols = [...Array(7).keys()].map((j) => cubic1d(rows.map((r) => r[j]!), 6, false));
      for (let i = 0; i < 6; i++) for (let j = 0; j < 7; j++) want.push(cols[j]![i]!);
      expectClose(values(y).slice(c * 42, c * 42 + 42), want.map((v) => Math.fround(v)), 1e-5, 1e-5);
    }
  });
});
