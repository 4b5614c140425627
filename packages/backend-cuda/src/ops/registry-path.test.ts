/**
 * The registry glue of the generated ops on a fake device: callOp reaches our kernels with the attrs core parses
 * (names, defaults), our kernels return what infer promised (callOp checks shape and dtype), Python numbers become
 * runtime scalars rounded as PyTorch rounds them, and a repeated prepared call compiles nothing new.
 */
import { callOp1, opRoute, prepareOp } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { fake } from '../../test/ops-fake.js';
import { registerGeneratedKernels } from './register.js';

function device() {
  const f = fake();
  registerGeneratedKernels(f.backend.opKernels!, f.runtime, f.cache);
  return f;
}

describe('registry calls on the generated kernels', () => {
  it('unary / binary ops with attrs and Python numbers; the scalar rounds to bf16 for a comparison', () => {
    const f = device();
    const x = f.t([33, 65]);
    expect(opRoute('gelu', [x], { approximate: 'tanh' })).toEqual({ via: 'kernel' });
    expect(callOp1('gelu', [x], { approximate: 'tanh' }).shape).toEqual([33, 65]);
    expect(f.cache.launches[0]!.source).toContain('tanhf(float(0.7978845608028654)');
    const y = callOp1('add', [x, 0.1]);
    expect(y.dtype).toBe('bf16');
    expect(f.cache.launches[1]!.args[2]).toBe(Math.fround(0.1)); // arithmetic: the opmath (f32) value
    const c = callOp1('gt', [x, 0.1]);
    expect(c.dtype).toBe('bool');
    expect(f.cache.launches[2]!.args[2]).toBe(0.10009765625); // comparison: bf16(0.1)
  });

  it('where, clamp with an absent bound, to; mixed dtypes promote to f32', () => {
    const f = device();
    const x = f.t([12, 40]);
    const m = f.t([40], 'bool');
    expect(callOp1('where', [m, x, 0]).dtype).toBe('bf16');
    expect(callOp1('clamp', [x, 0, null]).shape).toEqual([12, 40]);
    expect(f.cache.launches[1]!.source).toContain('fmaxf(x0, float(p0))');
    expect(callOp1('to', [x], { dtype: 'f32' }).dtype).toBe('f32');
    expect(callOp1('mul', [x, f.t([40], 'f16')]).dtype).toBe('f32');
  });

  it('a channels-last input gives a channels-last output in one flat pass (silu, a residual add), as PyTorch', () => {
    const f = device();
    const clOf = () => f.t([2, 40, 40, 64], 'f16').permute(0, 3, 1, 2); // [N, C, H, W] over NHWC memory
    const a = clOf();
    const y = callOp1('silu', [a]);
    expect(y.shape).toEqual([2, 64, 40, 40]);
    expect(y.strides).toEqual([40 * 40 * 64, 1, 40 * 64, 64]);
    expect(f.cache.launches[0]!.entry).toBe('fk_ew_contig');
    const z = callOp1('add', [y, clOf()]);
    expect(z.strides).toEqual(y.strides);
    expect(f.cache.launches[1]!.entry).toBe('fk_ew_contig');
    // a row-major input stays row-major
    expect(callOp1('silu', [f.t([2, 64, 40, 40], 'f16')]).strides).toEqual([64 * 1600, 1600, 40, 1]);
  });

  it('elementwise_chain: one kernel; a prepared call launches again without generating anything', () => {
    const f = device();
    const attrs = { steps: [{ op: 'silu', args: [{ input: 0 }] }, { op: 'mul', args: [{ step: 0 }, { input: 1 }] }, { op: 'add', args: [{ step: 1 }, { input: 2 }] }] };
    const ins = [f.t([64, 256]), f.t([256]), f.t([64, 256])];
    const run = prepareOp('elementwise_chain', attrs);
    run(ins);
    const generated = f.cache.generated.size;
    run(ins);
    expect(f.cache.generated.size).toBe(generated);
    expect(f.cache.launches).toHaveLength(2);
    expect(f.cache.launches[0]!.entry).toBe('fk_ew_strided');
  });

  it('reductions, softmaxes and norms with their registry attrs', () => {
    const f = device();
    const x = f.t([6, 7, 8]);
    expect(callOp1('sum', [x], { dim: [0, 2], keepdim: true }).shape).toEqual([1, 7, 1]);
    expect(callOp1('mean', [x], { dim: null }).shape).toEqual([]);
    expect(callOp1('amax', [x], { dim: 1 }).shape).toEqual([6, 8]);
    expect(callOp1('log_softmax', [x], { dim: -1 }).dtype).toBe('bf16');
    expect(callOp1('softmax', [x], { dim: 1, dtype: 'f32' }).dtype).toBe('f32');
    const h = f.t([4, 1024]);
    expect(callOp1('layer_norm', [h, f.t([1024]), f.t([1024])], { normalized_shape: [1024] }).shape).toEqual([4, 1024]);
    const g = f.t([2, 64, 5, 5], 'f16');
    expect(callOp1('group_norm', [g, null, null], { num_groups: 8 }).dtype).toBe('f16');
    const entries = f.cache.launches.map((l) => l.entry);
    expect(entries).toEqual(expect.arrayContaining(['fk_row_reduce', 'fk_row_log_softmax', 'fk_row_softmax', 'fk_layer_norm', 'fk_group_norm']));
  });

  it('f64 norms take the decomposition; fp8 casts fall back to the converting copy', () => {
    const f = device();
    expect(opRoute('layer_norm', [f.t([4, 8], 'f64'), null, null], { normalized_shape: [8] })).toEqual({ via: 'decomposition' });
    expect(opRoute('to', [f.t([4, 8])], { dtype: 'fp8e4m3' })).toEqual({ via: 'ops' });
  });
});
