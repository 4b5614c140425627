/**
 * The registry's contract without a real backend: promotion and broadcasting rules, inference of the elementwise,
 * reduction, layout and norm specs on metas, and dispatch order (kernel, supports, Ops route, decomposition, error)
 * on core's host test backend.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { DTYPES, type DType } from '../dtype.js';
import { Tensor } from '../tensor.js';
import { HostTestBackend } from '../test-support/host-backend.js';
import {
  OpError, OpKernelTable, UnsupportedOpError, broadcastShapesOf, callOp1, defineOp, inferOp, listOps, meta, opRoute,
  promoteTypes, resolveChain, resultType, supportedOps, type MetaArg,
} from './index.js';
import { viewStrides } from '../shape.js';

const t = (shape: number[], dtype: DType = 'f32'): MetaArg => ({ shape, dtype });
const out = (name: string, inputs: MetaArg[], attrs?: unknown) => inferOp(name, inputs, attrs).outputs.map((m) => `${m.dtype}[${m.shape.join(',')}]`);

describe('promotion', () => {
  it('promoteTypes is symmetric and matches torch.promote_types on a table', () => {
    const ok = DTYPES.filter((d) => !d.startsWith('fp8'));
    for (const a of ok) for (const b of ok) expect(promoteTypes(a, b)).toBe(promoteTypes(b, a));
    const table: [DType, DType, DType][] = [
      ['f16', 'bf16', 'f32'], ['bf16', 'f32', 'f32'], ['f16', 'f64', 'f64'], ['i64', 'f16', 'f16'], ['u8', 'i8', 'i16'],
      ['u8', 'i32', 'i32'], ['i8', 'i16', 'i16'], ['i32', 'i64', 'i64'], ['bool', 'u8', 'u8'], ['bool', 'bf16', 'bf16'], ['bool', 'bool', 'bool'],
    ];
    for (const [a, b, r] of table) expect(promoteTypes(a, b)).toBe(r);
    expect(() => promoteTypes('fp8e4m3', 'f32')).toThrow(/fp8 types do not promote/);
  });

  it('result_type: dim tensors > 0-d tensors > scalars, by category', () => {
    expect(resultType([t([2], 'i32'), 1.5])).toBe('f32');
    expect(resultType([t([2], 'i32'), 2])).toBe('i32');
    expect(resultType([t([2], 'bool'), 2])).toBe('i64');
    expect(resultType([t([2], 'u8'), t([], 'i64')])).toBe('u8');
    expect(resultType([t([2], 'f16'), t([], 'f64')])).toBe('f16');
    expect(resultType([t([], 'f16'), t([], 'bf16')])).toBe('f32');
    expect(resultType([t([2], 'i64'), t([], 'f16')])).toBe('f16');
    expect(resultType([2, 3.5])).toBe('f32');
  });

  it('broadcasting names the op, the arguments and the dim', () => {
    expect(broadcastShapesOf('x', [[2, 1, 3], [4, 1], []])).toEqual([2, 4, 3]);
    expect(broadcastShapesOf('x', [[0, 1], [1, 5]])).toEqual([0, 5]);
    expect(() => broadcastShapesOf('mul', [[2, 3], [4]], ['input', 'other'])).toThrow('mul: shapes do not broadcast: input [2, 3], other [4] (dim -1 is 3 vs 4)');
  });
});

describe('inference of the groups (metas only)', () => {
  it('elementwise', () => {
    expect(out('add', [t([2, 1], 'bf16'), t([3], 'f16')])).toEqual(['f32[2,3]']);
    expect(out('div', [t([2], 'i32'), 2])).toEqual(['f32[2]']);
    expect(out('lt', [t([2], 'bf16'), 0.5])).toEqual(['bool[2]']);
    expect(out('where', [t([3], 'bool'), t([2, 1], 'i32'), 0.5])).toEqual(['f32[2,3]']);
    expect(out('to', [t([4])], { dtype: 'bf16' })).toEqual(['bf16[4]']);
    expect(out('exp', [t([4], 'i64')])).toEqual(['f32[4]']);
    expect(out('silu_and_mul', [t([3, 8], 'bf16')])).toEqual(['bf16[3,4]']);
    expect(() => inferOp('where', [t([3], 'f32'), t([3]), t([3])])).toThrow(/where: condition has dtype f32; expected bool dtypes/);
    expect(() => inferOp('add', [t([3]), null])).toThrow(/add: other is required/);
    expect(() => inferOp('exp', [3])).toThrow(/exp: input must be a tensor, got the number 3/);
  });

  it('elementwise_chain resolves each step with its own op', () => {
    const { steps, output } = resolveChain([t([4, 1], 'bf16'), t([5], 'bf16')], {
      steps: [
        { op: 'mul', args: [{ input: 0 }, { input: 1 }], attrs: {} },
        { op: 'gt', args: [{ step: 0 }, { value: 0 }], attrs: {} },
        { op: 'where', args: [{ step: 1 }, { step: 0 }, { value: 0.1 }], attrs: {} },
      ],
    });
    expect(steps.map((s) => `${s.out.dtype}[${s.out.shape.join(',')}]`)).toEqual(['bf16[4,5]', 'bool[4,5]', 'bf16[4,5]']);
    expect(steps.map((s) => s.operandDType)).toEqual(['f32', 'bf16', 'bf16']);
    expect(output).toBe(2);
  });

  it('reduction', () => {
    expect(out('sum', [t([2, 3, 4], 'i32')], { dim: [0, -1] })).toEqual(['i64[3]']);
    expect(out('mean', [t([2, 3], 'bf16')], { dim: 1, keepdim: true })).toEqual(['bf16[2,1]']);
    expect(out('argmax', [t([2, 3])], { dim: null, keepdim: true })).toEqual(['i64[1,1]']);
    expect(out('topk', [t([5, 7], 'f16')], { k: 3, dim: 0 })).toEqual(['f16[3,7]', 'i64[3,7]']);
    expect(out('sum', [t([])])).toEqual(['f32[]']);
    expect(() => inferOp('amax', [t([0, 2])], { dim: 0 })).toThrow(/amax: cannot reduce over a zero-size dimension/);
    expect(() => inferOp('amax', [t([2])], { dim: 0, dtype: 'f32' })).toThrow(/amax: bad arguments/);
  });

  it('layout', () => {
    expect(out('reshape', [t([2, 3, 4])], { shape: [4, -1] })).toEqual(['f32[4,6]']);
    expect(out('cat', [t([2, 3], 'bf16'), t([1, 3], 'f32'), t([0])], { dim: 0 })).toEqual(['f32[3,3]']);
    expect(out('split', [t([7, 2])], { split_size_or_sections: 3 })).toEqual(['f32[3,2]', 'f32[3,2]', 'f32[1,2]']);
    expect(out('pad', [t([1, 2, 3])], { pad: [1, 1, 1, 0], mode: 'reflect' })).toEqual(['f32[1,3,5]']);
    expect(out('interpolate', [t([1, 2, 3, 5])], { scale_factor: [2, 1.5], mode: 'bilinear' })).toEqual(['f32[1,2,6,7]']);
    expect(out('pixel_shuffle', [t([2, 8, 3, 3])], { upscale_factor: 2 })).toEqual(['f32[2,2,6,6]']);
    expect(out('embedding', [t([2, 5], 'i64'), t([10, 4], 'bf16')])).toEqual(['bf16[2,5,4]']);
    expect(() => inferOp('gather', [t([2, 3]), t([2, 3], 'f32')], { dim: 0 })).toThrow(/gather: index has dtype f32; expected i64 \| i32/);
  });

  it('views follow PyTorch computeStride', () => {
    expect(viewStrides([4, 6], [6, 1], [2, 2, 6])).toEqual([12, 6, 1]);
    expect(viewStrides([4, 6], [1, 4], [24])).toBeNull(); // a transposed matrix cannot flatten
    expect(viewStrides([2, 3], [0, 1], [2, 3, 1])).toEqual([0, 1, 1]);
    expect(viewStrides([2, 1, 3], [3, 99, 1], [6])).toEqual([1]); // size-1 dims' strides do not matter
  });

  it('norm', () => {
    expect(out('layer_norm', [t([2, 3, 4], 'bf16'), t([3, 4]), null], { normalized_shape: [3, 4] })).toEqual(['bf16[2,3,4]']);
    expect(out('rms_norm', [t([2, 8], 'f16'), t([8]), t([2, 8], 'f16')], { group_size: 4 })).toEqual(['f16[2,8]']);
    expect(out('fused_add_rms_norm', [t([2, 8]), t([2, 8]), t([8])])).toEqual(['f32[2,8]', 'f32[2,8]']);
    // trailing optional inputs may be left out (they become null)
    expect(out('layer_norm', [t([2, 3])], { normalized_shape: [3] })).toEqual(['f32[2,3]']);
    expect(inferOp('rms_norm', [t([2, 3]), t([3])]).inputs).toEqual([t([2, 3]), t([3]), null]);
    expect(() => inferOp('batch_norm', [t([2, 3])])).toThrow(/batch_norm: expected 5 inputs \(input, running_mean, running_var, weight, bias\), got 1/);
    expect(() => inferOp('group_norm', [t([2, 6, 4]), null, null], { num_groups: 4 })).toThrow(/group_norm: channels 6 of input \[2, 6, 4\] are not divisible by num_groups 4/);
  });

  it('every op of these groups is declared once, with a doc', () => {
    const names = listOps().filter((s) => ['elementwise', 'reduction', 'layout', 'norm'].includes(s.group));
    expect(names.length).toBeGreaterThan(80);
    for (const s of names) expect(s.doc.length).toBeGreaterThan(3);
    expect(() => defineOp({ name: 'add', group: 'elementwise', doc: '', inputs: [], attrs: z.object({}), infer: () => [] })).toThrow(/defined twice/);
    expect(() => defineOp({ name: 'BadName', group: 'elementwise', doc: '', inputs: [], attrs: z.object({}), infer: () => [] })).toThrow(/snake_case/);
  });
});

describe('dispatch order on a backend', () => {
  // a test-only op: kernel, supports predicate and decomposition all visible
  defineOp({
    name: 'registry_test_double',
    group: 'elementwise',
    doc: 'input * 2 (registry tests only).',
    inputs: [{ name: 'input' }],
    attrs: z.object({ big: z.boolean().default(false) }).strict(),
    infer: ([x]) => [meta((x as Tensor).shape, (x as Tensor).dtype)],
    decompose: (call) => {
      const x = call.inputs[0] as Tensor;
      const y = Tensor.empty(call.backend, x.shape, x.dtype);
      call.backend.ops.copy(y, x);
      const v = y.toFloat64Array();
      return [Tensor.fromArray(call.backend, v.map((q) => q * 2 + 1000), x.shape, x.dtype)]; // +1000 marks the route
    },
  });

  it('kernel when it supports the call, else the decomposition, else UnsupportedOpError', () => {
    const backend = new HostTestBackend('host-ops') as HostTestBackend & { opKernels?: OpKernelTable };
    const x = Tensor.fromArray(backend, [1, 2], [2], 'f32');
    expect(callOp1('registry_test_double', [x]).toFloat64Array()).toEqual(new Float64Array([1002, 1004]));
    const table = new OpKernelTable('host-ops');
    Object.assign(backend, { opKernels: table });
    table.register('registry_test_double', (call) => Tensor.fromArray(call.backend, [...(call.inputs[0] as Tensor).toFloat64Array()].map((v) => v * 2), [2], 'f32'),
      (call) => (call.attrs.big ? 'big inputs are not handled' : true));
    expect(callOp1('registry_test_double', [x]).toFloat64Array()).toEqual(new Float64Array([2, 4]));
    expect(opRoute('registry_test_double', [x])).toEqual({ via: 'kernel' });
    expect(callOp1('registry_test_double', [x], { big: true }).toFloat64Array()).toEqual(new Float64Array([1002, 1004]));
    expect(opRoute('registry_test_double', [x], { big: true })).toEqual({ via: 'decomposition' });
    expect(supportedOps(backend).find((o) => o.name === 'registry_test_double')?.via).toBe('kernel');
    // a kernel that returns the wrong shape is caught at the call
    table.register('registry_test_double', (call) => Tensor.fromArray(call.backend, [1], [1], 'f32'));
    expect(() => callOp1('registry_test_double', [x])).toThrow("registry_test_double (kernel on 'host-ops'): output 0 is f32[1], expected f32[2]");
    // no kernel, no route: a clear error; the Ops route of `to` works on any backend with copy
    expect(() => callOp1('gelu', [x])).toThrow(UnsupportedOpError);
    expect(callOp1('to', [x], { dtype: 'bf16' }).dtype).toBe('bf16');
    expect(() => callOp1('add', [x, Tensor.fromArray(new HostTestBackend('other'), [1], [1], 'f32')])).toThrow(/add: inputs live on different backends \('host-ops' and 'other'\)/);
    expect(() => callOp1('add', [x, x], { alpha: 'two' })).toThrow(OpError);
  });
});

describe('fp8', () => {
  it('elementwise math refuses fp8 tensors (cast with to first); to takes them', () => {
    expect(() => inferOp('exp', [t([2], 'fp8e4m3')])).toThrow(/exp: input has dtype fp8e4m3; expected f64 \| f32/);
    expect(() => inferOp('add', [t([2], 'fp8e4m3'), t([2], 'fp8e4m3')])).toThrow(/add: input has dtype fp8e4m3/);
    expect(out('to', [t([2], 'fp8e4m3')], { dtype: 'bf16' })).toEqual(['bf16[2]']);
  });
});
