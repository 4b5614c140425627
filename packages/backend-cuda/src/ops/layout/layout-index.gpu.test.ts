/**
 * gather / index_select / scatter / scatter_add / pad / interpolate / flip / tril / triu / one_hot on CUDA vs the float64
 * CPU backend through the op registry: i32 and i64 indices, transposed / broadcast / channels-last inputs, empty and odd
 * sizes, every pad and interpolation mode. Selections and copies are compared exactly; sums and interpolations with
 * design §4's tolerance.
 */
import { Tensor, type DType } from '@fastkernels/core';
import { describe, it } from 'vitest';
import { checkOp, cpu, rand, randInts } from '../../../test/ops-helpers.js';
import { checkExact } from '../../../test/ops-exact.js';
import { G } from '../../../test/spine-helpers.js';

const GT = { ...G, timeout: 300_000 };
const DTYPES: DType[] = ['bf16', 'f16', 'f32'];
const T01 = (t: Tensor) => t.transpose(0, 1);

/** Along `dim` of `shape`, each line a distinct random selection of `take` positions out of `size` (no duplicates). */
function distinct(shape: number[], dim: number, size: number, dtype: DType, seed: number): Tensor {
  const n = shape.reduce((a, b) => a * b, 1);
  const inner = shape.slice(dim + 1).reduce((a, b) => a * b, 1);
  const take = shape[dim]!;
  const out = new Array<number>(n);
  let s = seed >>> 0;
  const next = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 4294967296);
  for (let o = 0; o < n / (take * inner); o++) {
    for (let i = 0; i < inner; i++) {
      const perm = [...Array(size).keys()];
      for (let k = size - 1; k > 0; k--) {
        const j = Math.floor(next() * (k + 1));
        [perm[k], perm[j]] = [perm[j]!, perm[k]!];
      }
      for (let k = 0; k < take; k++) out[(o * take + k) * inner + i] = perm[k]!;
    }
  }
  return Tensor.fromArray(cpu(), out, shape, dtype);
}

describe('gather / index_select vs the float64 CPU backend', () => {
  for (const dtype of [...DTYPES, 'i64'] as DType[]) {
    const r = (shape: number[], seed: number) => (dtype === 'i64' ? randInts(shape, 'i64', seed) : rand(shape, dtype, seed));
    it(`gather ${dtype}: each dim, a smaller index, i32 ids, transposed and broadcast inputs, empty`, GT, () => {
      checkExact('gather dim 1', { op: 'gather', inputs: [r([5, 6, 7], 1), randInts([5, 3, 7], 'i64', 2, 0, 6)], attrs: { dim: 1 } });
      checkExact('gather dim 0 (index smaller off dim)', { op: 'gather', inputs: [r([8, 9], 3), randInts([20, 4], 'i64', 4, 0, 8)], attrs: { dim: 0 } });
      checkExact('gather dim -1 i32', { op: 'gather', inputs: [r([16, 1000], 5), randInts([16, 50], 'i32', 6, 0, 1000)], attrs: { dim: -1 } });
      checkExact('gather transposed input', { op: 'gather', inputs: [r([30, 20], 7), randInts([20, 40], 'i64', 8, 0, 30)], attrs: { dim: 1 }, views: [T01] });
      checkExact('gather broadcast input', { op: 'gather', inputs: [r([1, 12], 9), randInts([6, 5], 'i64', 10, 0, 12)], attrs: { dim: 1 }, views: [(t) => t.expand([6, 12])] });
      checkExact('gather transposed index', { op: 'gather', inputs: [r([10, 10], 11), randInts([10, 7], 'i64', 12, 0, 10)], attrs: { dim: 0 }, views: [undefined, T01] });
      checkExact('gather empty index', { op: 'gather', inputs: [r([4, 5], 13), randInts([4, 0], 'i64', 14, 0, 5)], attrs: { dim: 1 } });
    });
    it(`index_select ${dtype}: rows of a table, a middle dim, a transposed table, i32 ids, empty, 0-d`, GT, () => {
      checkExact('index_select rows', { op: 'index_select', inputs: [r([100, 64], 1), randInts([33], 'i64', 2, 0, 100)], attrs: { dim: 0 } });
      checkExact('index_select middle dim i32', { op: 'index_select', inputs: [r([4, 50, 6], 3), randInts([17], 'i32', 4, 0, 50)], attrs: { dim: 1 } });
      checkExact('index_select transposed table', { op: 'index_select', inputs: [r([64, 100], 5), randInts([9], 'i64', 6, 0, 100)], attrs: { dim: 0 }, views: [T01] });
      checkExact('index_select last dim', { op: 'index_select', inputs: [r([8, 20], 7), randInts([30], 'i64', 8, 0, 20)], attrs: { dim: -1 } });
      checkExact('index_select empty', { op: 'index_select', inputs: [r([8, 20], 9), randInts([0], 'i64', 10, 0, 20)], attrs: { dim: 0 } });
      checkExact('index_select 0-d index', { op: 'index_select', inputs: [r([8, 20], 11), Tensor.fromArray(cpu(), [3], [], 'i64')], attrs: { dim: 0 } });
    });
  }
});

describe('scatter / scatter_add vs the float64 CPU backend', () => {
  for (const dtype of [...DTYPES, 'f64', 'i32', 'i64'] as DType[]) {
    const isInt = dtype.startsWith('i');
    const r = (shape: number[], seed: number) => (isInt ? randInts(shape, dtype, seed) : rand(shape, dtype, seed));
    const cmp = isInt ? checkExact : checkOp;
    it(`scatter_add ${dtype}: duplicates accumulate; dims 0 and 1; a larger src; i32 ids; transposed input`, GT, () => {
      cmp('scatter_add dim 1', { op: 'scatter_add', inputs: [r([6, 10], 1), randInts([6, 40], 'i64', 2, 0, 10), r([6, 40], 3)], attrs: { dim: 1 } });
      cmp('scatter_add dim 0, larger src', { op: 'scatter_add', inputs: [r([5, 8], 4), randInts([30, 6], 'i32', 5, 0, 5), r([40, 8], 6)], attrs: { dim: 0 } });
      cmp('scatter_add transposed input', { op: 'scatter_add', inputs: [r([12, 9], 7), randInts([9, 20], 'i64', 8, 0, 12), r([9, 20], 9)], attrs: { dim: 1 }, views: [T01] });
      cmp('scatter_add 3-D dim 2', { op: 'scatter_add', inputs: [r([3, 4, 50], 10), randInts([3, 4, 200], 'i64', 11, 0, 50), r([3, 4, 200], 12)], attrs: { dim: 2 } });
    });
    it(`scatter ${dtype}: distinct indices from src, a scalar, reduce add`, GT, () => {
      checkExact('scatter src dim 1', { op: 'scatter', inputs: [r([6, 10], 13), distinct([6, 7], 1, 10, 'i64', 14), r([6, 7], 15)], attrs: { dim: 1 } });
      checkExact('scatter src dim 0 i32', { op: 'scatter', inputs: [r([9, 5], 16), distinct([4, 5], 0, 9, 'i32', 17), r([6, 5], 18)], attrs: { dim: 0 } });
      checkExact('scatter value', { op: 'scatter', inputs: [r([6, 10], 19), randInts([6, 4], 'i64', 20, 0, 10), isInt ? 7 : 0.3], attrs: { dim: 1 } });
      cmp('scatter reduce add', { op: 'scatter', inputs: [r([6, 10], 21), randInts([6, 30], 'i64', 22, 0, 10), r([6, 30], 23)], attrs: { dim: 1, reduce: 'add' } });
      cmp('scatter reduce add of a value', { op: 'scatter', inputs: [r([6, 10], 24), randInts([6, 30], 'i64', 25, 0, 10), 2], attrs: { dim: 1, reduce: 'add' } });
    });
  }
  it('scatter_add of many duplicates in bf16 accumulates in f32 (one rounding)', GT, () => {
    checkOp('scatter_add 4000 into 3 bf16', { op: 'scatter_add', inputs: [rand([2, 3], 'bf16', 1), randInts([2, 4000], 'i64', 2, 0, 3), rand([2, 4000], 'bf16', 3)], attrs: { dim: 1 } });
  });
});

describe('pad (reflect / replicate / circular) vs the float64 CPU backend', () => {
  for (const dtype of [...DTYPES, 'i64'] as DType[]) {
    const r = (shape: number[], seed: number) => (dtype === 'i64' ? randInts(shape, 'i64', seed) : rand(shape, dtype, seed));
    for (const mode of ['reflect', 'replicate', 'circular'] as const) {
      it(`${mode} ${dtype}: 1, 2 and 3 padded dims, zero pads, transposed input`, GT, () => {
        checkExact(`${mode} 1-D pad of [2, 3, 10]`, { op: 'pad', inputs: [r([2, 3, 10], 1)], attrs: { pad: [3, 2], mode } });
        checkExact(`${mode} 2-D pad of [2, 3, 8, 9]`, { op: 'pad', inputs: [r([2, 3, 8, 9], 2)], attrs: { pad: [1, 2, 3, 4], mode } });
        checkExact(`${mode} 3-D pad of [1, 2, 5, 6, 7]`, { op: 'pad', inputs: [r([1, 2, 5, 6, 7], 3)], attrs: { pad: [1, 1, 2, 0, 0, 3], mode } });
        checkExact(`${mode} zero pads`, { op: 'pad', inputs: [r([4, 5], 4)], attrs: { pad: [0, 0], mode } });
        checkExact(`${mode} transposed`, { op: 'pad', inputs: [r([2, 9, 12], 5)], attrs: { pad: [2, 1, 1, 3], mode }, views: [(t) => t.transpose(1, 2)] });
      });
    }
  }
  it('constant pad still takes the strided-copy route (value, negative pads crop)', GT, () => {
    checkExact('constant pad', { op: 'pad', inputs: [rand([3, 4, 5], 'bf16', 1)], attrs: { pad: [1, -1, 2, 0], mode: 'constant', value: 0.5 }, via: 'ops' });
  });
});

describe('interpolate vs the float64 CPU backend', () => {
  /** NCHW values of an NHWC (channels-last) tensor. */
  const CL = (t: Tensor) => t.permute([0, 3, 1, 2]);
  for (const dtype of DTYPES) {
    it(`nearest / nearest-exact ${dtype}: scale 2, odd sizes, a scale_factor, 1-D and 3-D, channels-last`, GT, () => {
      checkExact('nearest x2', { op: 'interpolate', inputs: [rand([2, 3, 10, 16], dtype, 1)], attrs: { scale_factor: 2, mode: 'nearest' } });
      checkExact('nearest odd sizes', { op: 'interpolate', inputs: [rand([2, 3, 10, 16], dtype, 2)], attrs: { size: [7, 23], mode: 'nearest' } });
      checkExact('nearest scale 1.7', { op: 'interpolate', inputs: [rand([1, 2, 9, 11], dtype, 3)], attrs: { scale_factor: 1.7, mode: 'nearest' } });
      checkExact('nearest-exact odd sizes', { op: 'interpolate', inputs: [rand([2, 3, 10, 16], dtype, 4)], attrs: { size: [7, 23], mode: 'nearest-exact' } });
      checkExact('nearest 1-D', { op: 'interpolate', inputs: [rand([2, 3, 10], dtype, 5)], attrs: { size: 25, mode: 'nearest' } });
      checkExact('nearest 3-D', { op: 'interpolate', inputs: [rand([1, 2, 4, 5, 6], dtype, 6)], attrs: { scale_factor: [2, 1.5, 0.5], mode: 'nearest' } });
      checkExact('nearest channels-last', { op: 'interpolate', inputs: [rand([2, 10, 16, 3], dtype, 7)], attrs: { scale_factor: 2, mode: 'nearest' }, views: [CL] });
    });
    it(`linear modes ${dtype}: bilinear with and without align_corners, linear, trilinear, bicubic, channels-last`, GT, () => {
      for (const align_corners of [false, true]) {
        checkOp(`bilinear up ac=${align_corners}`, { op: 'interpolate', inputs: [rand([2, 3, 10, 16], dtype, 8)], attrs: { size: [25, 31], mode: 'bilinear', align_corners } });
        checkOp(`bilinear down ac=${align_corners}`, { op: 'interpolate', inputs: [rand([2, 3, 20, 16], dtype, 9)], attrs: { size: [7, 5], mode: 'bilinear', align_corners } });
        checkOp(`bicubic ac=${align_corners}`, { op: 'interpolate', inputs: [rand([1, 2, 9, 11], dtype, 10)], attrs: { size: [20, 17], mode: 'bicubic', align_corners } });
        checkOp(`linear ac=${align_corners}`, { op: 'interpolate', inputs: [rand([2, 3, 10], dtype, 11)], attrs: { size: 27, mode: 'linear', align_corners } });
        checkOp(`trilinear ac=${align_corners}`, { op: 'interpolate', inputs: [rand([1, 2, 4, 5, 6], dtype, 12)], attrs: { size: [7, 9, 3], mode: 'trilinear', align_corners } });
      }
      checkOp('bilinear scale_factor 2', { op: 'interpolate', inputs: [rand([2, 3, 10, 16], dtype, 13)], attrs: { scale_factor: 2, mode: 'bilinear' } });
      checkOp('bilinear channels-last', { op: 'interpolate', inputs: [rand([2, 10, 16, 3], dtype, 14)], attrs: { size: [21, 9], mode: 'bilinear' }, views: [CL] });
      checkOp('bilinear to one pixel ac', { op: 'interpolate', inputs: [rand([1, 2, 5, 5], dtype, 15)], attrs: { size: [1, 1], mode: 'bilinear', align_corners: true } });
    });
  }
  it('f64 bilinear and an empty batch', GT, () => {
    checkOp('bilinear f64', { op: 'interpolate', inputs: [rand([1, 2, 6, 7], 'f64', 1)], attrs: { size: [11, 13], mode: 'bilinear' } });
    checkOp('empty batch', { op: 'interpolate', inputs: [rand([0, 2, 6, 7], 'f32', 2)], attrs: { size: [11, 13], mode: 'bilinear' } });
  });
});

describe('flip, tril / triu, one_hot vs the float64 CPU backend', () => {
  for (const dtype of ['bf16', 'f32', 'i64', 'bool'] as DType[]) {
    const r = (shape: number[], seed: number) => (dtype === 'i64' || dtype === 'bool' ? randInts(shape, dtype, seed, 0, dtype === 'bool' ? 2 : 50) : rand(shape, dtype, seed));
    it(`${dtype}: flip of one and several dims, transposed; tril / triu with diagonals, batched, transposed`, GT, () => {
      checkExact('flip last dim', { op: 'flip', inputs: [r([4, 33], 1)], attrs: { dims: [-1] } });
      checkExact('flip dims 0 and 2', { op: 'flip', inputs: [r([3, 4, 5], 2)], attrs: { dims: [0, 2] } });
      checkExact('flip transposed', { op: 'flip', inputs: [r([6, 9], 3)], attrs: { dims: [0] }, views: [T01] });
      for (const diagonal of [0, 1, -2]) {
        checkExact(`tril ${diagonal}`, { op: 'tril', inputs: [r([2, 7, 9], 4)], attrs: { diagonal } });
        checkExact(`triu ${diagonal}`, { op: 'triu', inputs: [r([2, 7, 9], 5)], attrs: { diagonal } });
      }
      checkExact('tril transposed', { op: 'tril', inputs: [r([9, 7], 6)], attrs: {}, views: [T01] });
    });
  }
  it('one_hot of i64 / i32 classes, 0-d and empty inputs', GT, () => {
    checkExact('one_hot i64', { op: 'one_hot', inputs: [randInts([5, 7], 'i64', 1, 0, 10)], attrs: { num_classes: 10 } });
    checkExact('one_hot i32 transposed', { op: 'one_hot', inputs: [randInts([5, 7], 'i32', 2, 0, 4)], attrs: { num_classes: 4 }, views: [T01] });
    checkExact('one_hot 0-d', { op: 'one_hot', inputs: [Tensor.fromArray(cpu(), [2], [], 'i64')], attrs: { num_classes: 3 } });
    checkExact('one_hot empty', { op: 'one_hot', inputs: [randInts([0], 'i64', 3, 0, 3)], attrs: { num_classes: 3 } });
  });
});
