/**
 * Generated reductions and softmaxes on CUDA vs the float64 CPU backend through the op registry: every layout class
 * (rows in place, columns in place, copied), a warp a row and a block a row, keepdim, all dims, empty inputs, integer
 * sums, softmax / log_softmax along the last and another dim with an output dtype.
 */
import type { DType } from '@fastkernels/core';
import { describe, it } from 'vitest';
import { G } from '../../test/spine-helpers.js';
import { checkOp, rand, randInts } from '../../test/ops-helpers.js';

/** The gpu tag, and time for NVRTC: every dtype / class of every op is a fresh kernel on a first run (no disk cache). */
const GT = { ...G, timeout: 300_000 };

const DTYPES: DType[] = ['bf16', 'f16', 'f32'];
const T = (t: import('@fastkernels/core').Tensor) => t.transpose(0, 1);

describe('sum / mean / amax / amin vs the float64 CPU backend', () => {
  for (const dtype of DTYPES) {
    for (const op of ['sum', 'mean', 'amax', 'amin'] as const) {
      it(`${op} ${dtype}: last dim, middle dim, all dims, scattered dims, keepdim, transposed, long rows`, GT, () => {
        checkOp(`${op} last dim [37, 1000]`, { op, inputs: [rand([37, 1000], dtype, 1)], attrs: { dim: -1 } });
        checkOp(`${op} last dim odd [37, 999]`, { op, inputs: [rand([37, 999], dtype, 2)], attrs: { dim: 1, keepdim: true } });
        checkOp(`${op} middle dim (columns)`, { op, inputs: [rand([4, 37, 64], dtype, 3)], attrs: { dim: 1 } });
        checkOp(`${op} first dim (columns)`, { op, inputs: [rand([37, 64], dtype, 4)], attrs: { dim: 0 } });
        checkOp(`${op} all dims`, { op, inputs: [rand([6, 7, 8], dtype, 5)], attrs: { dim: null } });
        checkOp(`${op} dims [0, 2] (copy)`, { op, inputs: [rand([6, 7, 8], dtype, 6)], attrs: { dim: [0, 2], keepdim: true } });
        checkOp(`${op} transposed input, last dim`, { op, inputs: [rand([50, 30], dtype, 7)], attrs: { dim: -1 }, views: [T] });
        checkOp(`${op} sliced rows`, { op, inputs: [rand([20, 136], dtype, 8)], attrs: { dim: -1 }, views: [(t) => t.narrow(1, 8, 128)] });
        checkOp(`${op} long rows [3, 100000] (a block a row)`, { op, inputs: [rand([3, 100000], dtype, 9)], attrs: { dim: -1 } });
      });
    }
  }

  it('full reductions of large tensors (split in two stages): sum, mean, amax of bf16 and f32, an i32 sum', GT, () => {
    for (const dtype of ['bf16', 'f32'] as DType[]) {
      for (const op of ['sum', 'mean', 'amax'] as const) checkOp(`${op} all of [512, 4096] ${dtype}`, { op, inputs: [rand([512, 4096], dtype, 11)], attrs: { dim: null } });
    }
    checkOp('i32 sum of [256, 4096]', { op: 'sum', inputs: [randInts([256, 4096], 'i32', 12)], attrs: { dim: null } });
  });

  it('empty reductions give the identity; integer sums give i64', GT, () => {
    checkOp('sum over an empty dim', { op: 'sum', inputs: [rand([3, 0], 'f32', 1)], attrs: { dim: 1 } });
    checkOp('mean over an empty dim is NaN', { op: 'mean', inputs: [rand([3, 0], 'bf16', 2)], attrs: { dim: 1 } });
    checkOp('sum of an empty output', { op: 'sum', inputs: [rand([0, 5], 'f32', 3)], attrs: { dim: 1 } });
    checkOp('i32 sum -> i64', { op: 'sum', inputs: [randInts([50, 30], 'i32', 4)], attrs: { dim: 0 } });
    checkOp('i32 amax', { op: 'amax', inputs: [randInts([50, 30], 'i32', 5)], attrs: { dim: 1 } });
    checkOp('bf16 sum to f32', { op: 'sum', inputs: [rand([50, 300], 'bf16', 6)], attrs: { dim: 1, dtype: 'f32' } });
  });
});

describe('softmax / log_softmax vs the float64 CPU backend', () => {
  for (const dtype of DTYPES) {
    it(`${dtype}: last dim (short and long rows), another dim, a transposed input`, GT, () => {
      checkOp('log_softmax [64, 1000]', { op: 'log_softmax', inputs: [rand([64, 1000], dtype, 1, { scale: 3 })], attrs: { dim: -1 } });
      checkOp('log_softmax [4, 50000]', { op: 'log_softmax', inputs: [rand([4, 50000], dtype, 2, { scale: 3 })], attrs: { dim: 1 } });
      checkOp('log_softmax odd [9, 77]', { op: 'log_softmax', inputs: [rand([9, 77], dtype, 3)], attrs: { dim: -1 } });
      checkOp('log_softmax dim 0', { op: 'log_softmax', inputs: [rand([33, 12, 5], dtype, 4)], attrs: { dim: 0 } });
      checkOp('log_softmax transposed', { op: 'log_softmax', inputs: [rand([40, 24], dtype, 5)], attrs: { dim: -1 }, views: [T] });
      checkOp('softmax to f32', { op: 'softmax', inputs: [rand([64, 1000], dtype, 6, { scale: 3 })], attrs: { dim: -1, dtype: 'f32' } });
      // in the input dtype softmax is the hand-written spine kernel (still the registered entry)
      checkOp('softmax in dtype', { op: 'softmax', inputs: [rand([16, 4096], dtype, 7, { scale: 3 })], attrs: { dim: -1 } });
    });
  }
});
