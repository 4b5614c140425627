/**
 * Generated reductions and softmaxes on CUDA vs the float64 CPU backend through the op registry: every layout class
 * (rows in place, columns in place, copied), a warp a row and a block a row, keepdim, all dims, empty inputs, integer
 * sums, column reductions split along R (odd inner, strided outer, misaligned, NaN, bit-identical reruns) and in one pass
 * on narrow tiles over outer x inner (a mean over tokens, channels-last pools), softmax / log_softmax along the last and
 * another dim with an output dtype.
 */
import { Tensor, callOp1, type DType } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { G, gpu } from '../../test/spine-helpers.js';
import { checkOp, cpu, rand, randInts } from '../../test/ops-helpers.js';

/** The gpu tag, and time for NVRTC: every dtype / class of every op is a fresh kernel on a first run (no disk cache). */
const GT = { ...G, timeout: 300_000 };

const DTYPES: DType[] = ['bf16', 'f16', 'f32'];
const T = (t: Tensor) => t.transpose(0, 1);
/** [A, B, C] viewed [B, A, :32] (the permuted view released: the narrowed one holds the storage). */
const permutedNarrow = (t: Tensor) => {
  const p = t.permute([1, 0, 2]);
  const v = p.narrow(2, 0, 32);
  p.dispose();
  return v;
};

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

  it('column reductions split along R (too few tiles to fill the device): stage-1 partials, stage 2 in order', GT, () => {
    checkOp('mean dim 0 of [8192, 8192] bf16 (the ops bench row)', { op: 'mean', inputs: [rand([8192, 8192], 'bf16', 21)], attrs: { dim: 0 } });
    checkOp('sum dim 1 of [4, 4096, 1024] bf16', { op: 'sum', inputs: [rand([4, 4096, 1024], 'bf16', 22)], attrs: { dim: 1 } });
    checkOp('channels-last pooling: mean over dims 1, 2 of [8, 7, 7, 2048] bf16 (unsplit)', { op: 'mean', inputs: [rand([8, 7, 7, 2048], 'bf16', 23)], attrs: { dim: [1, 2] } });
    checkOp('channels-last pooling: mean over dims 1, 2 of [2, 32, 32, 512] f16 (split)', { op: 'mean', inputs: [rand([2, 32, 32, 512], 'f16', 24)], attrs: { dim: [1, 2], keepdim: true } });
    checkOp('i32 sum dim 1 of [2, 3000, 12] -> i64 (f64 partials)', { op: 'sum', inputs: [randInts([2, 3000, 12], 'i32', 25)], attrs: { dim: 1 } });
    checkOp('odd inner 3: amin dim 1 of [3, 5000, 3] f32 (scalar loads)', { op: 'amin', inputs: [rand([3, 5000, 3], 'f32', 26)], attrs: { dim: 1 } });
    checkOp('sum dim 0 of [20000, 7] f32 (inner 7)', { op: 'sum', inputs: [rand([20000, 7], 'f32', 27)], attrs: { dim: 0 } });
    // outer stride 40 < R stride 160 (a permuted, narrowed view), and a view one element off 16-byte alignment
    checkOp('non-contiguous outer stride: sum dim 1 of [3000, 4, 40] viewed [4, 3000, 32]', { op: 'sum', inputs: [rand([3000, 4, 40], 'bf16', 28)], attrs: { dim: 1 }, views: [permutedNarrow] });
    checkOp('misaligned view: mean dim 0 of [4000, 34] narrowed to [:, 1:33] bf16', { op: 'mean', inputs: [rand([4000, 34], 'bf16', 29)], attrs: { dim: 0 }, views: [(t) => t.narrow(1, 1, 32)] });
    checkOp('mean dim 0 of [4096, 1024] f32 (vec 4, split)', { op: 'mean', inputs: [rand([4096, 1024], 'f32', 30)], attrs: { dim: 0 } });
  });

  it('outer x inner columns in one pass on narrow tiles (planColumns): a mean over tokens, channels-last global pools', GT, () => {
    // the ops bench rows: 1024 and 512 CTAs of 8 x 32 threads (before: 32 x 8 tiles split along R, two launches)
    checkOp('mean dim 1 of [64, 512, 1024] bf16 (mean-tokens)', { op: 'mean', inputs: [rand([64, 512, 1024], 'bf16', 51)], attrs: { dim: 1 } });
    checkOp('mean over H, W of NHWC [32, 12, 12, 1024] f16 (mean-pool)', { op: 'mean', inputs: [rand([32, 12, 12, 1024], 'f16', 52)], attrs: { dim: [1, 2] } });
    checkOp('mean dim 1 of [32, 144, 1024] bf16, keepdim', { op: 'mean', inputs: [rand([32, 144, 1024], 'bf16', 53)], attrs: { dim: 1, keepdim: true } });
    checkOp('mean dim 1 of [64, 512, 1024] f32 (16 x 16 tiles)', { op: 'mean', inputs: [rand([64, 512, 1024], 'f32', 54)], attrs: { dim: 1 } });
    checkOp('sum dim 1 of [8, 196, 2048] bf16 -> f32 (was split)', { op: 'sum', inputs: [rand([8, 196, 2048], 'bf16', 55)], attrs: { dim: 1, dtype: 'f32' } });
    checkOp('odd: amax dim 1 of [3, 50, 72] f32, the last narrow tile part-full', { op: 'amax', inputs: [rand([3, 50, 72], 'f32', 56)], attrs: { dim: 1 } });
    checkOp('odd: mean dim 1 of [40, 100, 1000] bf16 (125 vectors a row in 16 tiles of 8)', { op: 'mean', inputs: [rand([40, 100, 1000], 'bf16', 57)], attrs: { dim: 1 } });
  });

  it('column amax / amin keep NaN through both stages', GT, () => {
    const d = rand([6000, 64], 'f32', 31).toFloat64Array();
    for (const i of [5 * 64 + 3, 4321 * 64 + 3, 5999 * 64 + 40, 100 * 64 + 63]) d[i] = NaN;
    for (const op of ['amax', 'amin'] as const) {
      const x = Tensor.fromArray(cpu(), d, [6000, 64], 'f32');
      checkOp(`${op} dim 0 of [6000, 64] f32 with NaNs`, { op, inputs: [x], attrs: { dim: 0 } });
      x.dispose();
    }
  });

  it('column reductions are deterministic: two runs give the same bits (split and unsplit; f32 out, no rounding hides a change)', GT, () => {
    for (const [shape, dims, dtype] of [[[8192, 8192], [0], 'bf16'], [[4, 4096, 1024], [1], 'f32'], [[8, 7, 7, 2048], [1, 2], 'bf16'], [[32, 12, 12, 1024], [1, 2], 'f16']] as const) {
      const c = rand(shape, dtype, 41);
      const g = c.to(gpu());
      const a = callOp1('sum', [g], { dim: [...dims], dtype: 'f32' });
      const b = callOp1('sum', [g], { dim: [...dims], dtype: 'f32' });
      expect(Array.from(b.toFloat64Array()), `${shape.join('x')} ${dtype}`).toEqual(Array.from(a.toFloat64Array()));
      for (const t of [c, g, a, b]) t.dispose();
    }
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
