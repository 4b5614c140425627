/**
 * argmax / argmin, cumsum, var / std, sort, topk (and max / min through their decomposition) on CUDA vs the float64 CPU
 * backend through the op registry: every line class (a warp a row, a block a row, a thread a column, a copied layout),
 * ties and NaN, ±0, integer and bool inputs, empty and odd sizes, topk of long lines in stages, sorts longer than 4096.
 * Selections are compared exactly (values and indices); sums and variances with design §4's tolerance.
 */
import { Tensor, type DType } from '@fastkernels/core';
import { describe, it } from 'vitest';
import { checkOp, cpu, rand, randInts } from '../../../test/ops-helpers.js';
import { checkExact } from '../../../test/ops-exact.js';
import { G } from '../../../test/spine-helpers.js';

const GT = { ...G, timeout: 300_000 };
const FLOATS: DType[] = ['bf16', 'f16', 'f32'];
const T01 = (t: Tensor) => t.transpose(0, 1);
/** [2, 3, 4] viewed from a contiguous [3, 2, 4]: outer dims that do not merge (the copied class). */
const PERM = (t: Tensor) => t.permute([1, 0, 2]);

/** Values with NaN, ±inf, ±0 and repeats, as a [rows, D] tensor. */
function specials(rows: number, D: number, dtype: DType, seed: number): Tensor {
  const pool = [NaN, Infinity, -Infinity, 0, -0, 1, -1, 0.5, 2, -2];
  const base = rand([rows, D], 'f32', seed).toFloat64Array();
  const v = base.map((x, i) => (Math.abs(x) < 0.6 ? pool[i % pool.length]! : x));
  return Tensor.fromArray(cpu(), v, [rows, D], dtype);
}

describe('argmax / argmin vs the float64 CPU backend', () => {
  for (const dtype of [...FLOATS, 'f64', 'i32', 'i64'] as DType[]) {
    const r = (shape: number[], seed: number) => (dtype.startsWith('i') ? randInts(shape, dtype, seed, -5, 5) : rand(shape, dtype, seed));
    for (const op of ['argmax', 'argmin'] as const) {
      it(`${op} ${dtype}: rows, columns, long rows, all dims, keepdim, transposed, permuted, ties`, GT, () => {
        checkExact(`${op} last dim [37, 1000]`, { op, inputs: [r([37, 1000], 1)], attrs: { dim: -1 } });
        checkExact(`${op} odd [9, 77] keepdim`, { op, inputs: [r([9, 77], 2)], attrs: { dim: 1, keepdim: true } });
        checkExact(`${op} middle dim [50, 40, 512] (a thread a column)`, { op, inputs: [r([50, 40, 512], 3)], attrs: { dim: 1 } });
        checkExact(`${op} dim 0 [33, 12]`, { op, inputs: [r([33, 12], 4)], attrs: { dim: 0 } });
        checkExact(`${op} long rows [3, 100000]`, { op, inputs: [r([3, 100000], 5)], attrs: { dim: -1 } });
        checkExact(`${op} all dims`, { op, inputs: [r([6, 7, 8], 6)], attrs: { dim: null } });
        checkExact(`${op} all dims keepdim`, { op, inputs: [r([6, 7], 7)], attrs: { dim: null, keepdim: true } });
        checkExact(`${op} transposed`, { op, inputs: [r([50, 30], 8)], attrs: { dim: -1 }, views: [T01] });
        checkExact(`${op} permuted (copied)`, { op, inputs: [r([3, 2, 40], 9)], attrs: { dim: 2 }, views: [PERM] });
        checkExact(`${op} one element a line`, { op, inputs: [r([5, 1], 10)], attrs: { dim: 1 } });
      });
    }
  }

  it('NaN wins (the first NaN), ±0 tie, constant rows give index 0; bool; a 0-d input', GT, () => {
    for (const dtype of FLOATS) {
      for (const op of ['argmax', 'argmin'] as const) {
        checkExact(`${op} specials ${dtype}`, { op, inputs: [specials(16, 300, dtype, 11)], attrs: { dim: 1 } });
        checkExact(`${op} specials ${dtype} dim 0`, { op, inputs: [specials(300, 16, dtype, 12)], attrs: { dim: 0 } });
        checkExact(`${op} constant rows ${dtype}`, { op, inputs: [Tensor.fromArray(cpu(), new Array(4 * 2000).fill(1.5), [4, 2000], dtype)], attrs: { dim: 1 } });
      }
    }
    checkExact('argmax bool', { op: 'argmax', inputs: [randInts([20, 64], 'bool', 13, 0, 2)], attrs: { dim: 1 } });
    checkExact('argmin 0-d', { op: 'argmin', inputs: [Tensor.fromArray(cpu(), [3], [], 'f32')], attrs: { dim: null } });
  });

  it('var of an empty dim is NaN; of one element with correction 1 is NaN; f64', GT, () => {
    checkExact('var over an empty dim', { op: 'var', inputs: [rand([3, 0], 'f32', 30)], attrs: { dim: 1 } });
    checkExact('var of one element', { op: 'var', inputs: [rand([4, 1], 'bf16', 31)], attrs: { dim: 1 } });
    checkOp('var f64', { op: 'var', inputs: [rand([20, 300], 'f64', 32)], attrs: { dim: 1 } });
  });

  it('max / min (values and indices) through argmax + gather; var and std (Welford) over rows, columns, scattered dims', GT, () => {
    checkExact('max bf16 dim 1', { op: 'max', inputs: [rand([30, 500], 'bf16', 14)], attrs: { dim: 1 }, via: 'any' });
    checkExact('min f32 dim 0 keepdim', { op: 'min', inputs: [rand([30, 50], 'f32', 15)], attrs: { dim: 0, keepdim: true }, via: 'any' });
    for (const dtype of FLOATS) {
      checkOp(`var ${dtype} last dim`, { op: 'var', inputs: [rand([37, 1000], dtype, 16, { scale: 3 })], attrs: { dim: -1 } });
      checkOp(`var ${dtype} long rows`, { op: 'var', inputs: [rand([3, 100000], dtype, 19)], attrs: { dim: -1 } });
      checkOp(`var ${dtype} dims [0, 2] correction 0 keepdim`, { op: 'var', inputs: [rand([6, 7, 8], dtype, 17)], attrs: { dim: [0, 2], correction: 0, keepdim: true } });
      checkOp(`var ${dtype} middle dim (columns)`, { op: 'var', inputs: [rand([50, 40, 512], dtype, 20)], attrs: { dim: 1 } });
      checkOp(`var ${dtype} spatial dims of NCHW`, { op: 'var', inputs: [rand([2, 8, 9, 10], dtype, 21)], attrs: { dim: [2, 3] } });
      checkOp(`var ${dtype} transposed`, { op: 'var', inputs: [rand([50, 30], dtype, 22)], attrs: { dim: 1 }, views: [T01] });
      checkOp(`std ${dtype} all`, { op: 'std', inputs: [rand([64, 64], dtype, 18)], attrs: { dim: null } });
      checkOp(`std ${dtype} correction 2`, { op: 'std', inputs: [rand([10, 33], dtype, 23)], attrs: { dim: 1, correction: 2 } });
    }
  });
});

describe('cumsum vs the float64 CPU backend', () => {
  for (const dtype of [...FLOATS, 'f64'] as DType[]) {
    it(`${dtype}: last, middle and first dim, long rows, transposed, permuted, empty`, GT, () => {
      checkOp('cumsum last dim [37, 1000]', { op: 'cumsum', inputs: [rand([37, 1000], dtype, 1)], attrs: { dim: -1 } });
      checkOp('cumsum odd [9, 77]', { op: 'cumsum', inputs: [rand([9, 77], dtype, 2)], attrs: { dim: 1 } });
      checkOp('cumsum middle dim [50, 40, 512]', { op: 'cumsum', inputs: [rand([50, 40, 512], dtype, 3)], attrs: { dim: 1 } });
      checkOp('cumsum dim 0 [33, 12]', { op: 'cumsum', inputs: [rand([33, 12], dtype, 4)], attrs: { dim: 0 } });
      checkOp('cumsum long rows [3, 50000] (positive)', { op: 'cumsum', inputs: [rand([3, 50000], dtype, 5, { positive: true })], attrs: { dim: -1 } });
      checkOp('cumsum transposed', { op: 'cumsum', inputs: [rand([50, 30], dtype, 6)], attrs: { dim: 1 }, views: [T01] });
      checkOp('cumsum permuted', { op: 'cumsum', inputs: [rand([3, 2, 40], dtype, 7)], attrs: { dim: 2 }, views: [PERM] });
      checkOp('cumsum empty line', { op: 'cumsum', inputs: [rand([3, 0], dtype, 8)], attrs: { dim: 1 } });
      checkOp('cumsum no lines', { op: 'cumsum', inputs: [rand([0, 5], dtype, 9)], attrs: { dim: 1 } });
    });
  }

  it('integers and bool give i64 (exact); dtype casts first; a 0-d input', GT, () => {
    checkExact('cumsum i32 -> i64', { op: 'cumsum', inputs: [randInts([20, 3000], 'i32', 10)], attrs: { dim: 1 } });
    checkExact('cumsum i64 dim 0', { op: 'cumsum', inputs: [randInts([300, 20], 'i64', 11)], attrs: { dim: 0 } });
    checkExact('cumsum bool -> i64', { op: 'cumsum', inputs: [randInts([20, 300], 'bool', 12, 0, 2)], attrs: { dim: 1 } });
    checkOp('cumsum bf16 to f32', { op: 'cumsum', inputs: [rand([20, 300], 'bf16', 13)], attrs: { dim: 1, dtype: 'f32' } });
    checkOp('cumsum f32 to bf16 (rounded first)', { op: 'cumsum', inputs: [rand([20, 300], 'f32', 14)], attrs: { dim: 1, dtype: 'bf16' } });
    checkOp('cumsum i32 to f32', { op: 'cumsum', inputs: [randInts([20, 300], 'i32', 15)], attrs: { dim: 1, dtype: 'f32' } });
    checkOp('cumsum 0-d', { op: 'cumsum', inputs: [Tensor.fromArray(cpu(), [2.5], [], 'f32')], attrs: { dim: 0 } });
  });
});

describe('sort / topk vs the float64 CPU backend (stable, NaN the largest)', () => {
  for (const dtype of [...FLOATS, 'f64', 'i32', 'i64', 'u8'] as DType[]) {
    const r = (shape: number[], seed: number) => (dtype.startsWith('i') || dtype === 'u8' ? randInts(shape, dtype, seed, dtype === 'u8' ? 0 : -20, 20) : rand(shape, dtype, seed));
    it(`sort ${dtype}: lengths 1 to 4096, both directions, dim 0, transposed, permuted`, GT, () => {
      for (const D of [1, 5, 33, 1000, 4096]) {
        for (const descending of [false, true]) checkExact(`sort [7, ${D}] desc ${descending}`, { op: 'sort', inputs: [r([7, D], D)], attrs: { dim: -1, descending } });
      }
      checkExact('sort dim 0', { op: 'sort', inputs: [r([300, 9], 1)], attrs: { dim: 0 } });
      checkExact('sort transposed', { op: 'sort', inputs: [r([50, 30], 2)], attrs: { dim: 1, descending: true }, views: [T01] });
      checkExact('sort permuted', { op: 'sort', inputs: [r([3, 2, 40], 3)], attrs: { dim: 2 }, views: [PERM] });
      checkExact('sort many short rows', { op: 'sort', inputs: [r([5000, 16], 4)], attrs: { dim: 1 } });
      checkExact('sort empty', { op: 'sort', inputs: [r([3, 0], 5)], attrs: { dim: 1 } });
    });
    it(`topk ${dtype}: small k, largest / smallest, dim 0, k = 0 and k = D`, GT, () => {
      checkExact('topk 5 of 1000', { op: 'topk', inputs: [r([16, 1000], 6)], attrs: { k: 5 } });
      checkExact('topk 7 smallest of 77', { op: 'topk', inputs: [r([9, 77], 7)], attrs: { k: 7, largest: false } });
      checkExact('topk dim 0', { op: 'topk', inputs: [r([300, 9], 8)], attrs: { k: 4, dim: 0 } });
      checkExact('topk k = 0', { op: 'topk', inputs: [r([4, 10], 9)], attrs: { k: 0 } });
      checkExact('topk k = D', { op: 'topk', inputs: [r([4, 10], 10)], attrs: { k: 10, largest: false } });
    });
  }

  it('NaN, ±inf, ±0 and repeats: NaN last ascending, first descending; ties in index order', GT, () => {
    for (const dtype of [...FLOATS, 'f64'] as DType[]) {
      for (const descending of [false, true]) checkExact(`sort specials ${dtype} desc ${descending}`, { op: 'sort', inputs: [specials(8, 600, dtype, 20)], attrs: { dim: 1, descending } });
      checkExact(`topk specials ${dtype}`, { op: 'topk', inputs: [specials(8, 600, dtype, 21)], attrs: { k: 40 } });
      checkExact(`topk smallest specials ${dtype}`, { op: 'topk', inputs: [specials(8, 600, dtype, 22)], attrs: { k: 40, largest: false } });
    }
  });

  it('topk of long lines in stages: vocabulary rows (bf16 ties across segments), 300000 with k = 2000, specials', GT, () => {
    for (const dtype of ['bf16', 'f32'] as DType[]) {
      checkExact(`topk 50 of [3, 128256] ${dtype}`, { op: 'topk', inputs: [rand([3, 128256], dtype, 30)], attrs: { k: 50 } });
      checkExact(`topk 1 of [2, 128256] ${dtype}`, { op: 'topk', inputs: [rand([2, 128256], dtype, 31)], attrs: { k: 1, largest: false } });
    }
    checkExact('topk 2000 of [1, 300000] f32', { op: 'topk', inputs: [rand([1, 300000], 'f32', 32)], attrs: { k: 2000 } });
    checkExact('topk 64 of 5000 constant rows bf16', { op: 'topk', inputs: [Tensor.fromArray(cpu(), new Array(2 * 5000).fill(1), [2, 5000], 'bf16')], attrs: { k: 64 } });
    checkExact('topk 30 of specials [4, 9001] f16', { op: 'topk', inputs: [specials(4, 9001, 'f16', 33)], attrs: { k: 30 } });
    checkExact('topk 30 smallest of specials [4, 9001] f32', { op: 'topk', inputs: [specials(4, 9001, 'f32', 34)], attrs: { k: 30, largest: false } });
    checkExact('topk 8 along dim 0 of [9000, 3] (columns, staged)', { op: 'topk', inputs: [rand([9000, 3], 'f32', 35)], attrs: { k: 8, dim: 0 } });
  });

  it('lines longer than 4096 on the global-memory sort: both directions, specials, columns, large k, a vocabulary row', GT, () => {
    for (const dtype of ['bf16', 'f32', 'i64'] as DType[]) {
      const x = dtype === 'i64' ? randInts([3, 9001], 'i64', 40, -100, 100) : rand([3, 9001], dtype, 40);
      for (const descending of [false, true]) checkExact(`sort [3, 9001] ${dtype} desc ${descending}`, { op: 'sort', inputs: [x], attrs: { dim: 1, descending } });
    }
    checkExact('sort specials [2, 20000] f16', { op: 'sort', inputs: [specials(2, 20000, 'f16', 41)], attrs: { dim: 1, descending: true } });
    checkExact('sort specials [2, 20000] f64', { op: 'sort', inputs: [specials(2, 20000, 'f64', 42)], attrs: { dim: 1 } });
    checkExact('sort along dim 0 of [5000, 3] (columns)', { op: 'sort', inputs: [rand([5000, 3], 'f32', 43)], attrs: { dim: 0 } });
    checkExact('topk 3000 of [2, 9000] bf16', { op: 'topk', inputs: [rand([2, 9000], 'bf16', 44)], attrs: { k: 3000 } });
    checkExact('sort a vocabulary row [2, 128256] bf16 descending', { op: 'sort', inputs: [rand([2, 128256], 'bf16', 45)], attrs: { dim: -1, descending: true } });
  });
});
