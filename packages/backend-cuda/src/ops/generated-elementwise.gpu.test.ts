/**
 * Every generated elementwise op on CUDA vs the float64 CPU backend through the op registry: bf16 / f16 / f32, odd
 * sizes, transposed / sliced / broadcast / misaligned views, empty tensors, Python-number operands, mixed dtypes, the
 * fused chain. Each case also checks that CUDA ran its generated kernel (not a decomposition).
 */
import { BINARY_OPS, Tensor, UNARY_OPS, hasOp, type DType } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { G, gpu } from '../../test/spine-helpers.js';
import { checkOp, rand, randInts } from '../../test/ops-helpers.js';
import { GENERATED_EXTRA_OPS } from './elementwise-kernels.js';

/** The gpu tag, and time for NVRTC: every dtype / class of every op is a fresh kernel on a first run (no disk cache). */
const GT = { ...G, timeout: 300_000 };

const DTYPES: DType[] = ['bf16', 'f16', 'f32'];
const POSITIVE = new Set(['log', 'sqrt', 'rsqrt', 'reciprocal']);
const ATTRS: Record<string, unknown> = { gelu: { approximate: 'tanh' } };
const T: (t: Tensor) => Tensor = (t) => t.transpose(0, 1);

describe('generated unary ops vs the float64 CPU backend', () => {
  for (const dtype of DTYPES) {
    it(`every unary op, ${dtype}: odd contiguous, transposed, sliced, misaligned, empty`, GT, () => {
      UNARY_OPS.forEach((op, k) => {
        const positive = POSITIVE.has(op);
        const seed = 100 + k;
        const attrs = ATTRS[op];
        checkOp(`${op} [7, 333]`, { op, inputs: [rand([7, 333], dtype, seed, { positive, scale: 2 })], attrs });
        checkOp(`${op} transposed`, { op, inputs: [rand([333, 7], dtype, seed + 1, { positive })], attrs, views: [T] });
        checkOp(`${op} sliced rows`, { op, inputs: [rand([16, 130], dtype, seed + 2, { positive })], attrs, views: [(t) => t.narrow(1, 3, 100)] });
        checkOp(`${op} misaligned start`, { op, inputs: [rand([4099], dtype, seed + 3, { positive })], attrs, views: [(t) => t.narrow(0, 1, 4097)] });
        checkOp(`${op} empty`, { op, inputs: [rand([0, 5], dtype, seed + 4)], attrs });
      });
    });
  }

  it('gelu erf and softplus with beta / threshold', GT, () => {
    for (const dtype of DTYPES) {
      checkOp('gelu erf', { op: 'gelu', inputs: [rand([33, 65], dtype, 1, { scale: 3 })], attrs: { approximate: 'none' } });
      checkOp('softplus beta 2 threshold 5', { op: 'softplus', inputs: [rand([33, 65], dtype, 2, { scale: 4 })], attrs: { beta: 2, threshold: 5 } });
    }
  });

  it('a large contiguous tensor with a tail (vectors, unrolled tiles, n % 8 elements)', GT, () => {
    checkOp('silu 1M+5', { op: 'silu', inputs: [rand([8 * 4096 * 32 + 5], 'bf16', 3)] });
  });
});

describe('the activations and math core declares with decompositions, on generated kernels', () => {
  const binary = new Set(['logical_and', 'logical_or', 'remainder', 'fmod']);
  const attrs: Record<string, unknown> = { leaky_relu: { negative_slope: 0.2 }, elu: { alpha: 0.5 } };
  for (const dtype of DTYPES) {
    it(`${dtype}: every one core declares, contiguous and transposed`, GT, () => {
      GENERATED_EXTRA_OPS.filter((op) => hasOp(op)).forEach((op, k) => {
        const s = 300 + 10 * k;
        const inputs = binary.has(op) ? [rand([31, 77], dtype, s, { scale: 4 }), rand([31, 77], dtype, s + 1, { positive: true })] : [rand([31, 77], dtype, s, { scale: 4 })];
        checkOp(`${op}`, { op, inputs, attrs: attrs[op] });
        checkOp(`${op} transposed`, { op, inputs, attrs: attrs[op], views: inputs.map(() => T) });
      });
    });
  }
});

describe('generated binary ops vs the float64 CPU backend', () => {
  for (const dtype of DTYPES) {
    it(`every binary op, ${dtype}: same shape, bias broadcast, outer broadcast, transposed, Python scalars`, GT, () => {
      BINARY_OPS.forEach((op, k) => {
        const positive = op === 'pow';
        const s = 200 + 10 * k;
        checkOp(`${op} same shape`, { op, inputs: [rand([31, 77], dtype, s, { positive }), rand([31, 77], dtype, s + 1)] });
        checkOp(`${op} [64, 96] by [96]`, { op, inputs: [rand([64, 96], dtype, s + 2, { positive }), rand([96], dtype, s + 3)] });
        checkOp(`${op} [64, 1] by [1, 96]`, { op, inputs: [rand([64, 1], dtype, s + 4, { positive }), rand([1, 96], dtype, s + 5)] });
        checkOp(`${op} [8, 1, 40] by [3, 1]`, { op, inputs: [rand([8, 1, 40], dtype, s + 6, { positive }), rand([3, 1], dtype, s + 7)] });
        checkOp(`${op} transposed by contiguous`, { op, inputs: [rand([40, 24], dtype, s + 8, { positive }), rand([24, 40], dtype, s + 9)], views: [T] });
        checkOp(`${op} tensor, 0.75`, { op, inputs: [rand([5, 6, 7], dtype, s + 10, { positive }), 0.75] });
        checkOp(`${op} 2, tensor`, { op, inputs: [2, rand([5, 6, 7], dtype, s + 11)] });
      });
    });
  }

  it('add / sub with alpha, div rounding modes, mixed dtypes promote (bf16 + f32 -> f32, bf16 + f16 -> f32)', GT, () => {
    checkOp('add alpha', { op: 'add', inputs: [rand([9, 17], 'bf16', 1), rand([17], 'bf16', 2)], attrs: { alpha: -0.5 } });
    checkOp('sub alpha', { op: 'sub', inputs: [rand([9, 17], 'f32', 3), 3], attrs: { alpha: 2 } });
    checkOp('div floor', { op: 'div', inputs: [rand([9, 17], 'f32', 4, { scale: 10 }), rand([9, 17], 'f32', 5, { positive: true })], attrs: { rounding_mode: 'floor' } });
    checkOp('div trunc', { op: 'div', inputs: [rand([9, 17], 'f32', 6, { scale: 10 }), rand([17], 'f32', 7, { positive: true })], attrs: { rounding_mode: 'trunc' } });
    checkOp('bf16 + f32', { op: 'add', inputs: [rand([9, 17], 'bf16', 8), rand([9, 17], 'f32', 9)] });
    checkOp('bf16 * f16', { op: 'mul', inputs: [rand([9, 17], 'bf16', 10), rand([17], 'f16', 11)] });
  });

  it('integers: i32 arithmetic stays i32, int / float compares give bool, integer division floors', GT, () => {
    checkOp('i32 add', { op: 'add', inputs: [randInts([50, 30], 'i32', 1), randInts([30], 'i32', 2)] });
    checkOp('i32 mul scalar', { op: 'mul', inputs: [randInts([50, 30], 'i32', 3), 3] });
    checkOp('i32 > f32', { op: 'gt', inputs: [randInts([50, 30], 'i32', 4, -3, 3), rand([50, 30], 'f32', 5, { scale: 3 })] });
    checkOp('i64 floor div', { op: 'div', inputs: [randInts([50, 30], 'i64', 6), randInts([30], 'i64', 7, 1, 9)], attrs: { rounding_mode: 'floor' } });
  });
});

describe('where, clamp, to', () => {
  it('where with a broadcast condition and a scalar branch; clamp with scalar / tensor / absent bounds; casts', GT, () => {
    for (const dtype of DTYPES) {
      const x = rand([12, 40], dtype, 1);
      const c = rand([40], 'f32', 2);
      const mask = Tensor.fromArray(c.backend, c.toFloat64Array().map((v) => (v > 0 ? 1 : 0)), [40], 'bool');
      checkOp(`where ${dtype}`, { op: 'where', inputs: [mask, x, rand([12, 1], dtype, 3)] });
      checkOp(`where scalar ${dtype}`, { op: 'where', inputs: [mask, x, 0] });
      checkOp(`masked_fill ${dtype}`, { op: 'masked_fill', inputs: [x, mask, -1e4] });
      checkOp(`clamp scalars ${dtype}`, { op: 'clamp', inputs: [x, -0.5, 0.25] });
      checkOp(`clamp min only ${dtype}`, { op: 'clamp', inputs: [x, 0, null] });
      checkOp(`clamp tensors ${dtype}`, { op: 'clamp', inputs: [x, rand([40], dtype, 4, { scale: 0.3 }), rand([12, 1], dtype, 5, { positive: true })] });
      for (const to of ['f32', 'bf16', 'f16', 'i32', 'bool'] as DType[]) {
        checkOp(`to ${dtype} -> ${to}`, { op: 'to', inputs: [rand([12, 40], dtype, 6, { scale: 20 })], attrs: { dtype: to }, views: [T] });
      }
      c.dispose();
      mask.dispose();
      x.dispose();
    }
  });
});

describe('elementwise_chain: one generated kernel for the whole expression', () => {
  const chain3 = { steps: [{ op: 'silu', args: [{ input: 0 }] }, { op: 'mul', args: [{ step: 0 }, { input: 1 }] }, { op: 'add', args: [{ step: 1 }, { input: 2 }] }] };
  for (const dtype of DTYPES) {
    it(`silu(x) * y + z, ${dtype}: contiguous, broadcast, strided`, GT, () => {
      const before = gpu().generatedOps.cache.size;
      checkOp('contiguous', { op: 'elementwise_chain', inputs: [rand([1000, 257], dtype, 1), rand([1000, 257], dtype, 2), rand([1000, 257], dtype, 3)], attrs: chain3 });
      expect(gpu().generatedOps.cache.size - before).toBe(1); // one kernel for the three ops
      checkOp('y broadcast over rows', { op: 'elementwise_chain', inputs: [rand([64, 256], dtype, 4), rand([256], dtype, 5), rand([64, 256], dtype, 6)], attrs: chain3 });
      checkOp('x transposed, z [64, 1]', { op: 'elementwise_chain', inputs: [rand([96, 64], dtype, 7), rand([64, 96], dtype, 8), rand([64, 1], dtype, 9)], attrs: chain3, views: [T] });
    });
  }

  it("docs/ops.md's chain (alpha, a constant, a rounding `to`) and a chain whose output is not the last step", GT, () => {
    const doc = {
      steps: [
        { op: 'mul', args: [{ input: 0 }, { input: 1 }] },
        { op: 'gelu', args: [{ step: 0 }], attrs: { approximate: 'tanh' } },
        { op: 'add', args: [{ step: 1 }, { value: 0.5 }], attrs: { alpha: 2 } },
        { op: 'to', args: [{ step: 2 }], attrs: { dtype: 'bf16' } },
      ],
    };
    checkOp('doc chain', { op: 'elementwise_chain', inputs: [rand([33, 48], 'f32', 1), rand([48], 'f32', 2)], attrs: doc });
    const extra = {
      steps: [
        { op: 'hardswish', args: [{ input: 0 }] },
        { op: 'leaky_relu', args: [{ input: 1 }], attrs: { negative_slope: 0.2 } },
        { op: 'mul', args: [{ step: 0 }, { step: 1 }] },
        { op: 'clamp', args: [{ step: 2 }, { value: -1 }, null] },
      ],
    };
    checkOp('chain of extra ops', { op: 'elementwise_chain', inputs: [rand([33, 48], 'bf16', 5, { scale: 3 }), rand([48], 'bf16', 6)], attrs: extra });
    const early = { steps: [{ op: 'exp', args: [{ input: 0 }] }, { op: 'neg', args: [{ input: 1 }] }], output: 0 };
    checkOp('output step 0', { op: 'elementwise_chain', inputs: [rand([5, 6], 'bf16', 3), rand([6], 'bf16', 4)], attrs: early });
  });
});
