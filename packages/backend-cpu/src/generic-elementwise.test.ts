import {
  F, OpError, UnsupportedOpError, callOp1, getOp, inferOp, opRoute, promoteTypes, resultType, roundToDType, supportedOps,
  type DType, type OpCall,
} from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { LAYOUTS, Rng, Tensor, cpu, expectClose, randn, relayout, tensor, values } from './test-helpers.js';

const FLOATS: DType[] = ['f32', 'bf16', 'f16'];
const tolOf = (d: DType) => (d === 'f32' ? 1e-6 : d === 'f16' ? 1e-3 : 8e-3);

/** Independent float64 formulas (not the registry's): a second opinion on each unary op. */
const NAIVE: Record<string, (x: number) => number> = {
  neg: (x) => -x,
  abs: (x) => (x < 0 ? -x : x),
  square: (x) => x ** 2,
  relu: (x) => Math.max(0, x),
  exp: (x) => Math.E ** x,
  sin: Math.sin,
  cos: Math.cos,
  tanh: (x) => (Math.exp(2 * x) - 1) / (Math.exp(2 * x) + 1),
  sigmoid: (x) => 1 / (1 + Math.exp(-x)),
  silu: (x) => x / (1 + Math.exp(-x)),
  quick_gelu: (x) => x / (1 + Math.exp(-1.702 * x)),
  log_sigmoid: (x) => Math.log(1 / (1 + Math.exp(-x))),
  reciprocal: (x) => 1 / x,
  softplus: (x) => Math.log(1 + Math.exp(x)),
  gelu_tanh: (x) => 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x ** 3))),
};

describe('elementwise: unary', () => {
  it('hand-computed values', () => {
    const x = tensor([-2, -0.5, 0, 0.5, 3], [5], 'f32');
    expectClose(values(F.gelu(x)), [-0.04550026, -0.15426877, 0, 0.34573123, 2.99595031], 1e-6);
    expectClose(values(F.gelu(x, { approximate: 'tanh' })), [-0.04540230, -0.15428599, 0, 0.34571401, 2.99636261], 1e-6);
    expectClose(values(F.softplus(x, { beta: 2, threshold: 4 })), [0.00907496, 0.15663084, 0.34657359, 0.65663084, 3], 1e-6);
    expectClose(values(F.relu(x)), [0, 0, 0, 0.5, 3]);
    expectClose(values(F.erf(x)), [-0.99532227, -0.52049988, 0, 0.52049988, 0.99997791], 1e-6);
    expectClose(values(F.rsqrt(tensor([4, 0.25], [2]))), [0.5, 2]);
    expectClose(values(F.logSigmoid(tensor([-200, 200], [2], 'f32'))), [-200, 0]); // stable at the tails
    expect(values(F.relu(tensor([NaN], [1])))[0]).toBeNaN();
    expect(values(F.log(tensor([0, -1], [2])))).toEqual([-Infinity, NaN]);
  });

  it('random inputs vs independent formulas, every float dtype, non-contiguous layouts', () => {
    const rng = new Rng(11);
    for (const dtype of FLOATS) {
      for (const [name, f] of Object.entries(NAIVE)) {
        const base = randn(rng, [3, 5], dtype, 2);
        for (const layout of [null, ...LAYOUTS]) {
          const x = layout ? relayout(base, layout) : base;
          const y = name === 'gelu_tanh' ? F.gelu(x, { approximate: 'tanh' }) : callOp1(name, [x]);
          expect(y.dtype).toBe(dtype);
          expect(y.shape).toEqual([3, 5]);
          const want = values(base).map((v) => roundToDType(f(v), dtype));
          expectClose(values(y), want, 1e-6, tolOf(dtype));
        }
      }
    }
  });

  it('integer inputs: math ops give f32, neg/abs/square/relu keep the dtype', () => {
    const x = tensor([-3, 0, 2], [3], 'i32');
    expect(F.exp(x).dtype).toBe('f32');
    expect(F.sigmoid(x).dtype).toBe('f32');
    expect(F.neg(x).dtype).toBe('i32');
    expect(values(F.abs(x))).toEqual([3, 0, 2]);
    expect(values(F.square(x))).toEqual([9, 0, 4]);
    expect(() => F.neg(tensor([1], [1], 'bool'))).toThrow(/neg: input has dtype bool/);
  });

  it('empty and 0-d inputs', () => {
    expect(F.exp(tensor([], [0, 3])).shape).toEqual([0, 3]);
    const s = F.sqrt(tensor([9], [], 'f32'));
    expect(s.shape).toEqual([]);
    expect(values(s)).toEqual([3]);
  });
});

describe('elementwise: binary, broadcasting and promotion', () => {
  it('add with alpha, sub, broadcast [3,1] with [4]', () => {
    const a = tensor([1, 2, 3], [3, 1]);
    const b = tensor([10, 20, 30, 40], [4]);
    const y = F.add(a, b, { alpha: 2 });
    expect(y.shape).toEqual([3, 4]);
    expect(values(y)).toEqual([21, 41, 61, 81, 22, 42, 62, 82, 23, 43, 63, 83]);
    expect(values(F.sub(b, a, { alpha: 0.5 })).slice(0, 4)).toEqual([9.5, 19.5, 29.5, 39.5]);
    expect(values(F.sub(5, b))).toEqual([-5, -15, -25, -35]); // a scalar on the left (rsub)
  });

  it('random broadcast on odd shapes and non-contiguous views vs a naive loop', () => {
    const rng = new Rng(5);
    for (const dtype of FLOATS) {
      const a = randn(rng, [5, 1, 3], dtype);
      const b = randn(rng, [7, 1], dtype);
      const bv = relayout(b, 'transposed');
      const A = values(a);
      const B = values(b);
      for (const [name, f] of [['mul', (x: number, y: number) => x * y], ['div', (x: number, y: number) => x / y], ['maximum', Math.max], ['sub', (x: number, y: number) => x - y]] as const) {
        const y = callOp1(name, [a, bv]);
        expect(y.shape).toEqual([5, 7, 3]);
        const want: number[] = [];
        for (let i = 0; i < 5; i++) for (let j = 0; j < 7; j++) for (let k = 0; k < 3; k++) want.push(roundToDType(f(A[i * 3 + k]!, B[j]!), dtype));
        expectClose(values(y), want, 1e-6, tolOf(dtype));
      }
    }
  });

  it('type promotion follows torch.result_type', () => {
    expect(promoteTypes('bf16', 'f16')).toBe('f32');
    expect(promoteTypes('u8', 'i8')).toBe('i16');
    expect(promoteTypes('i32', 'bf16')).toBe('bf16');
    expect(promoteTypes('bool', 'i32')).toBe('i32');
    const bf = tensor([1.5], [1], 'bf16');
    const h = tensor([2.25], [1], 'f16');
    const i = tensor([3], [1], 'i32');
    expect(F.add(bf, h).dtype).toBe('f32');
    expect(values(F.add(bf, h))).toEqual([3.75]);
    expect(F.add(i, 2).dtype).toBe('i32');
    expect(F.add(i, 2.5).dtype).toBe('f32'); // a float scalar over an int tensor: the default float
    expect(F.mul(bf, 3.5).dtype).toBe('bf16'); // a scalar never widens a float tensor
    expect(F.add(bf, tensor([1], [], 'f32')).dtype).toBe('bf16'); // a 0-d tensor of the same category neither
    expect(F.add(i, tensor([1], [], 'f32')).dtype).toBe('f32'); // ... unless its category is higher
    expect(resultType([{ shape: [2], dtype: 'i64' }, { shape: [], dtype: 'f64' }])).toBe('f64');
    expect(F.add(tensor([1, 0], [2], 'bool'), tensor([1, 0], [2], 'bool')).dtype).toBe('bool');
  });

  it('div: true division gives float for ints; rounding modes keep the type', () => {
    const a = tensor([7, -7, 6], [3], 'i32');
    const q = F.div(a, 2);
    expect(q.dtype).toBe('f32');
    expect(values(q)).toEqual([3.5, -3.5, 3]);
    expect(values(F.div(a, 2, { rounding_mode: 'trunc' }))).toEqual([3, -3, 3]);
    expect(values(F.div(a, 2, { rounding_mode: 'floor' }))).toEqual([3, -4, 3]);
    expect(F.div(a, 2, { rounding_mode: 'floor' }).dtype).toBe('i32');
    expect(values(F.pow(tensor([2, 3], [2]), 3))).toEqual([8, 27]);
  });

  it('comparisons give bool; a scalar is rounded to the common dtype first (bf16 == 0.1)', () => {
    const x = tensor([0.1, 0.2, 0.3], [3], 'bf16');
    const eq = F.eq(x, 0.1);
    expect(eq.dtype).toBe('bool');
    expect(values(eq)).toEqual([1, 0, 0]);
    expect(values(F.lt(x, 0.2))).toEqual([1, 0, 0]);
    expect(values(F.ge(x, x))).toEqual([1, 1, 1]);
    expect(values(F.ne(tensor([1, NaN], [2]), tensor([1, NaN], [2])))).toEqual([0, 1]);
    expect(values(F.maximum(tensor([1, NaN], [2]), tensor([2, 0], [2])))).toEqual([2, NaN]);
    expect(values(F.minimum(tensor([1, 5], [2], 'i32'), 3))).toEqual([1, 3]);
  });

  it('errors name the op, the arguments and the shapes', () => {
    const a = tensor([1, 2, 3], [3]);
    const b = tensor([1, 2], [2]);
    expect(() => F.add(a, b)).toThrow(OpError);
    expect(() => F.add(a, b)).toThrow('add: shapes do not broadcast: input [3], other [2]');
    expect(() => callOp1('add', [a, b, a])).toThrow(/add: expected 2 inputs/);
    expect(() => callOp1('gelu', [a], { approximate: 'fast' })).toThrow(/gelu: bad arguments: approximate/);
    expect(() => callOp1('gelu', [a], { approxmate: 'tanh' })).toThrow(/gelu: bad arguments/);
    expect(() => callOp1('nope', [a])).toThrow(/nope: unknown op/);
    expect(() => F.add(2, 3 as never)).toThrow(/needs at least one tensor input/);
  });
});

describe('elementwise: where, clamp, to', () => {
  it('where broadcasts condition, input and other; scalars allowed', () => {
    const c = tensor([1, 0, 1], [3], 'bool');
    const x = tensor([1, 2], [2, 1], 'f32');
    const y = F.where(c, x, -1);
    expect(y.shape).toEqual([2, 3]);
    expect(values(y)).toEqual([1, -1, 1, 2, -1, 2]);
    expect(F.where(c, tensor([1, 2, 3], [3], 'i32'), 0.5).dtype).toBe('f32');
    expect(() => F.where(tensor([1], [1], 'f32'), x, 0)).toThrow(/where: condition has dtype f32/);
  });

  it('clamp: scalar and tensor bounds, one side, min > max gives max, NaN stays', () => {
    const x = tensor([-2, 0.5, 3, NaN], [4]);
    expect(values(F.clamp(x, -1, 1))).toEqual([-1, 0.5, 1, NaN]);
    expect(values(F.clamp(x, null, 0))).toEqual([-2, 0, 0, NaN]);
    expect(values(F.clamp(x, 2, 1))).toEqual([1, 1, 1, NaN]);
    expect(values(F.clamp(x, tensor([0, 1, 2, 3], [4]), null))).toEqual([0, 1, 3, NaN]);
    expect(() => F.clamp(x)).toThrow(/clamp: at least one of min and max/);
  });

  it('to: rounding, truncation, bool', () => {
    const x = tensor([1.7, -1.7, 0, 1 + 2 ** -9], [4], 'f32');
    expect(values(F.to(x, 'i32'))).toEqual([1, -1, 0, 1]);
    expect(values(F.to(x, 'bool'))).toEqual([1, 1, 0, 1]);
    expect(values(F.to(x, 'bf16'))[3]).toBe(1); // 1 + 2^-9 rounds to even
    expect(F.to(relayout(randn(new Rng(1), [3, 4]), 'stepped'), 'f16').shape).toEqual([3, 4]);
  });
});

describe('elementwise_chain', () => {
  const steps = [
    { op: 'mul', args: [{ input: 0 }, { input: 1 }] },
    { op: 'gelu', args: [{ step: 0 }], attrs: { approximate: 'tanh' } },
    { op: 'add', args: [{ step: 1 }, { value: 0.5 }], attrs: { alpha: 2 } },
  ];

  it('equals the ops one by one (float64, one rounding) and its decomposition', () => {
    const rng = new Rng(3);
    for (const dtype of FLOATS) {
      const a = randn(rng, [4, 5], dtype);
      const b = relayout(randn(rng, [5], dtype), 'stepped');
      const y = F.elementwiseChain([a, b], { steps });
      expect(y.dtype).toBe(dtype);
      expect(y.shape).toEqual([4, 5]);
      const A = values(a);
      const B = values(b);
      const want = A.map((v, i) => roundToDType(NAIVE.gelu_tanh!(v * B[i % 5]!) + 2 * 0.5, dtype));
      expectClose(values(y), want, 1e-6, tolOf(dtype));
      // the decomposition (what a backend without the fused kernel runs)
      const spec = getOp('elementwise_chain');
      const info = inferOp('elementwise_chain', [a, b], { steps });
      const call: OpCall = { op: spec, backend: cpu, inputs: [a, b], attrs: info.attrs as Record<string, unknown>, outputs: info.outputs };
      const [d] = spec.decompose!(call);
      expect(d!.dtype).toBe(dtype);
      expectClose(values(d!), want, 1e-6, tolOf(dtype));
    }
  });

  it('to steps round; comparisons and where chain; output picks a step', () => {
    const x = tensor([1 + 2 ** -9, -3, 2], [3], 'f32');
    const y = F.elementwiseChain([x], {
      steps: [
        { op: 'to', args: [{ input: 0 }], attrs: { dtype: 'bf16' } },
        { op: 'sub', args: [{ input: 0 }, { step: 0 }] },
        { op: 'gt', args: [{ input: 0 }, { value: 0 }] },
        { op: 'where', args: [{ step: 2 }, { step: 1 }, { value: -1 }] },
        { op: 'clamp', args: [{ step: 3 }, null, { value: 0 }] },
      ],
      output: 3,
    });
    expect(y.dtype).toBe('f32');
    expect(values(y)).toEqual([2 ** -9, -1, 0]);
  });

  it('validates the expression', () => {
    const x = tensor([1], [1]);
    expect(() => F.elementwiseChain([x], { steps: [{ op: 'matmul', args: [{ input: 0 }] }] })).toThrow(/not a chainable elementwise op/);
    expect(() => F.elementwiseChain([x], { steps: [{ op: 'exp', args: [{ step: 0 }] }] })).toThrow(/not earlier/);
    expect(() => F.elementwiseChain([x], { steps: [{ op: 'exp', args: [{ input: 3 }] }] })).toThrow(/input 3 is not a tensor input/);
    expect(() => F.elementwiseChain([x], { steps: [{ op: 'add', args: [{ input: 0 }] }] })).toThrow(/takes 2 operands, got 1/);
    expect(() => F.elementwiseChain([x], { steps: [{ op: 'gelu', args: [{ input: 0 }], attrs: { approximate: 'x' } }] })).toThrow(/bad attrs/);
    expect(() => F.elementwiseChain([x, tensor([1, 2], [2])], { steps: [{ op: 'add', args: [{ input: 0 }, { input: 1 }] }, { op: 'add', args: [{ step: 0 }, tensor([1, 2, 3], [3]) as never] }] })).toThrow();
  });
});

describe('registry', () => {
  it('the cpu backend has a kernel for every declared elementwise / reduction op', () => {
    const ops = supportedOps(cpu);
    for (const name of ['gelu', 'add', 'where', 'clamp', 'to', 'elementwise_chain', 'softmax', 'topk']) {
      expect(ops.find((o) => o.name === name)?.via).toBe('kernel');
    }
    expect(opRoute('add', [tensor([1], [1]), 1])).toEqual({ via: 'kernel' });
  });

  it('a backend without kernels runs ops through Ops (add, to) or fails with UnsupportedOpError', () => {
    const bare = Object.create(cpu) as typeof cpu; // the same backend without its kernel table
    Object.defineProperty(bare, 'opKernels', { value: undefined });
    const x = new Tensor({ storage: bare.allocate(8, 0), dtype: 'f32', shape: [2] });
    x.storage.release();
    bare.write(x.storage, 0, new Uint8Array(new Float32Array([1, 2]).buffer));
    expect(values(F.add(x, x))).toEqual([2, 4]);
    expect(values(F.to(x, 'i32'))).toEqual([1, 2]);
    expect(() => F.gelu(x)).toThrow(UnsupportedOpError);
    expect(() => F.gelu(x)).toThrow("op 'gelu' is not supported on backend 'cpu': backend 'cpu' registers no kernel for it");
  });
});

describe('gated activations (the Llama surface as group members)', () => {
  it('silu_and_mul / gelu_and_mul: the Ops route, the decomposition and a naive loop agree', () => {
    const rng = new Rng(21);
    for (const dtype of FLOATS) {
      const x = randn(rng, [3, 10], dtype);
      const X = values(x);
      const wantS: number[] = [];
      const wantG: number[] = [];
      for (let r = 0; r < 3; r++) for (let i = 0; i < 5; i++) {
        wantS.push(roundToDType(NAIVE.silu!(X[r * 10 + i]!) * X[r * 10 + 5 + i]!, dtype));
        wantG.push(roundToDType(NAIVE.gelu_tanh!(X[r * 10 + i]!) * X[r * 10 + 5 + i]!, dtype));
      }
      expect(opRoute('silu_and_mul', [x])).toEqual({ via: 'ops' });
      expectClose(values(F.siluAndMul(relayout(x, 'transposed'))), wantS, 1e-6, tolOf(dtype));
      expectClose(values(F.geluAndMul(x, { approximate: 'tanh' })), wantG, 1e-6, tolOf(dtype));
      for (const [name, attrs, want] of [['silu_and_mul', {}, wantS], ['gelu_and_mul', { approximate: 'tanh' }, wantG]] as const) {
        const info = inferOp(name, [x], attrs);
        const [d] = info.spec.decompose!({ op: info.spec, backend: cpu, inputs: [x], attrs: info.attrs as Record<string, unknown>, outputs: info.outputs });
        expect(d!.shape).toEqual([3, 5]);
        expectClose(values(d!), want, 1e-6, tolOf(dtype));
      }
    }
    expect(() => F.siluAndMul(tensor([1, 2, 3], [3]))).toThrow(/silu_and_mul: input \[3\] needs an even last dim/);
  });
});

describe('operands convert to the common dtype first, as PyTorch', () => {
  it('an integer tensor meeting an f16 tensor rounds to f16 before the add; exp of i64 goes through f32', () => {
    const big = tensor([2049, 4097], [2], 'i64');
    const h = tensor([0, 0], [2], 'f16');
    expect(values(F.add(big, h))).toEqual([2048, 4096]); // torch: 2049 -> f16 2048
    expect(F.exp(tensor([0], [1], 'i64')).dtype).toBe('f32');
    expect(values(F.mul(tensor([2 ** 24 + 1], [1], 'i64'), 1.0000001))).toEqual([Math.fround(Math.fround(2 ** 24 + 1) * Math.fround(1.0000001))]);
  });
});

describe('more activations and math (kernels and decompositions)', () => {
  const decomposed = (name: string, inputs: (Tensor | number)[], attrs: Record<string, unknown> = {}) => {
    const info = inferOp(name, inputs, attrs);
    return info.spec.decompose!({ op: info.spec, backend: cpu, inputs, attrs: info.attrs as Record<string, unknown>, outputs: info.outputs })[0]!;
  };

  it('hand values', () => {
    const x = tensor([-3.5, -1, -0.25, 0, 0.5, 2.5, NaN], [7]);
    expectClose(values(F.leakyRelu(x, 0.1)).slice(0, 6), [-0.35, -0.1, -0.025, 0, 0.5, 2.5]);
    expectClose(values(F.elu(x)).slice(0, 6), [Math.expm1(-3.5), Math.expm1(-1), Math.expm1(-0.25), 0, 0.5, 2.5]);
    expectClose(values(F.hardsigmoid(x)).slice(0, 6), [0, 2 / 6, 2.75 / 6, 0.5, 3.5 / 6, 5.5 / 6]);
    expectClose(values(F.hardswish(x)).slice(0, 6), [-0, -2 / 6, (-0.25 * 2.75) / 6, 0, (0.5 * 3.5) / 6, (2.5 * 5.5) / 6]);
    expect(values(F.floor(x)).slice(0, 6)).toEqual([-4, -1, -1, 0, 0, 2]);
    expect(values(F.ceil(x)).slice(0, 6)).toEqual([-3, -1, -0, 0, 1, 3]);
    expect(values(F.trunc(x)).slice(0, 6)).toEqual([-3, -1, -0, 0, 0, 2]);
    expect(values(F.sign(x))).toEqual([-1, -1, -1, 0, 1, 1, 0]);
    expect(values(F.logicalNot(x))).toEqual([0, 0, 0, 1, 0, 0, 0]);
    expect(values(F.logicalAnd(x, tensor([1, 0, 1, 1, 1, 0, 1], [7], 'bool')))).toEqual([1, 0, 1, 0, 1, 0, 1]);
    expect(values(F.logicalOr(x, 0))).toEqual([1, 1, 1, 0, 1, 1, 1]);
    expect(values(F.remainder(tensor([5, -5, 5, -5], [4], 'i32'), tensor([3, 3, -3, -3], [4], 'i32')))).toEqual([2, 1, -1, -2]);
    expect(values(F.fmod(tensor([5, -5, 5, -5], [4], 'i32'), tensor([3, 3, -3, -3], [4], 'i32')))).toEqual([2, -2, 2, -2]);
    expectClose(values(F.log1p(tensor([1e-10], [1], 'f64'))), [1e-10 - 5e-21], 0, 1e-15); // log(1 + 1e-10) would lose 7 digits
    expect(F.floor(tensor([1, 2], [2], 'i32')).dtype).toBe('i32');
    expect(F.mish(tensor([1], [1], 'i32')).dtype).toBe('f32');
  });

  it('the decompositions agree with the kernels on random non-contiguous inputs, every float dtype', () => {
    const rng = new Rng(41);
    for (const dtype of FLOATS) {
      const x = relayout(randn(rng, [4, 6], dtype, 3), 'transposed');
      const y = randn(rng, [6], dtype, 2);
      for (const [name, attrs] of [['leaky_relu', { negative_slope: 0.2 }], ['elu', { alpha: 0.7 }], ['hardsigmoid', {}], ['hardswish', {}], ['mish', {}],
        ['expm1', {}], ['floor', {}], ['ceil', {}], ['trunc', {}], ['sign', {}], ['logical_not', {}]] as const) {
        const k = callOp1(name, [x], attrs);
        const d = decomposed(name, [x], attrs);
        expect(d.dtype).toBe(k.dtype);
        expectClose(values(d), values(k), 1e-6, tolOf(dtype));
      }
      for (const name of ['remainder', 'fmod', 'logical_and', 'logical_or']) {
        const k = callOp1(name, [x, y]);
        const d = decomposed(name, [x, y]);
        expect(d.dtype).toBe(k.dtype);
        expectClose(values(d), values(k), 1e-5, 2 * tolOf(dtype));
      }
    }
  });
});

describe('the extra ops chain', () => {
  it('leaky_relu / remainder / sign steps in elementwise_chain equal the ops one by one', () => {
    const rng = new Rng(60);
    const a = randn(rng, [3, 4], 'f32', 3);
    const b = randn(rng, [4], 'f32', 2);
    const y = F.elementwiseChain([a, b], {
      steps: [
        { op: 'leaky_relu', args: [{ input: 0 }], attrs: { negative_slope: 0.2 } },
        { op: 'remainder', args: [{ step: 0 }, { input: 1 }] },
        { op: 'sign', args: [{ input: 0 }] },
        { op: 'mul', args: [{ step: 1 }, { step: 2 }] },
      ],
    });
    const one = F.mul(F.remainder(F.leakyRelu(a, 0.2), b), F.sign(a));
    expectClose(values(y), values(one), 1e-6, 1e-6);
  });
});
