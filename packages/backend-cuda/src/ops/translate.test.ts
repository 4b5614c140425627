import { BINARY_OPS, UNARY_OPS, chainAttrs, resolveChain, type TensorMeta } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { exprKey, validateExpr } from './expr.js';
import { GENERATED_EXTRA_OPS } from './elementwise-kernels.js';
import { chainToExpr, singleOpExpr } from './translate.js';

const m = (shape: number[], dtype: TensorMeta['dtype']): TensorMeta => ({ shape, dtype });

describe('registry calls -> generated expressions', () => {
  it("docs/ops.md's chain: alpha becomes a multiply, the constant rounds to the opmath type, `to` rounds in the chain", () => {
    const attrs = chainAttrs.parse({
      steps: [
        { op: 'mul', args: [{ input: 0 }, { input: 1 }] },
        { op: 'gelu', args: [{ step: 0 }], attrs: { approximate: 'tanh' } },
        { op: 'add', args: [{ step: 1 }, { value: 0.1 }], attrs: { alpha: 2 } },
        { op: 'to', args: [{ step: 2 }], attrs: { dtype: 'bf16' } },
      ],
    });
    const { steps, output } = resolveChain([m([4, 8], 'bf16'), m([8], 'bf16')], attrs);
    const { expr, inputs } = chainToExpr(steps, output);
    expect(inputs).toEqual([0, 1]);
    expect(exprKey(expr)).toBe(`2:0:mul(i0,i1)[];gelu(n0)[approximate=tanh];mul(s${Math.fround(0.1)},s2)[];add(n1,n2)[];to(n3)[dtype=bf16]`);
  });

  it('only steps the output reads are emitted, and only the inputs they read become kernel inputs', () => {
    const attrs = chainAttrs.parse({
      steps: [
        { op: 'exp', args: [{ input: 2 }] },
        { op: 'neg', args: [{ input: 0 }] },
        { op: 'mul', args: [{ step: 0 }, { input: 1 }] },
      ],
    });
    const { steps, output } = resolveChain([m([3], 'f32'), m([3], 'f32'), m([3], 'f32')], attrs);
    const { expr, inputs } = chainToExpr(steps, output);
    expect(inputs).toEqual([2, 1]);
    expect(exprKey(expr)).toBe('2:0:exp(i0)[];mul(n0,i1)[]');
  });

  it('the extra ops chain with their attrs (leaky_relu slope, remainder)', () => {
    const attrs = chainAttrs.parse({
      steps: [
        { op: 'leaky_relu', args: [{ input: 0 }], attrs: { negative_slope: 0.2 } },
        { op: 'remainder', args: [{ step: 0 }, { input: 1 }] },
      ],
    });
    const { steps, output } = resolveChain([m([4, 8], 'f32'), m([8], 'f32')], attrs);
    expect(exprKey(chainToExpr(steps, output).expr)).toBe('2:0:leaky_relu(i0)[negative_slope=0.2];remainder(n0,i1)[]');
  });

  it('comparison constants round to the common dtype (bf16 == 0.1 compares with bf16(0.1))', () => {
    const attrs = chainAttrs.parse({ steps: [{ op: 'eq', args: [{ input: 0 }, { value: 0.1 }] }] });
    const { steps, output } = resolveChain([m([2], 'bf16')], attrs);
    expect(exprKey(chainToExpr(steps, output).expr)).toBe('1:0:eq(i0,s0.10009765625)[]');
  });

  it('single ops: numbers are runtime scalars, clamp drops an absent bound, div picks the rounding mode', () => {
    expect(exprKey(singleOpExpr('add', { alpha: 1 }, ['tensor', 'number']))).toBe('1:1:add(i0,p0)[]');
    expect(exprKey(singleOpExpr('sub', { alpha: 3 }, ['number', 'tensor']))).toBe('1:1:mul(i0,s3)[];sub(p0,n0)[]');
    expect(exprKey(singleOpExpr('clamp', {}, ['tensor', 'null', 'tensor']))).toBe('2:0:clamp_max(i0,i1)[]');
    expect(exprKey(singleOpExpr('clamp', {}, ['tensor', 'number', 'number']))).toBe('1:2:clamp_min(i0,p0)[];clamp_max(n0,p1)[]');
    expect(exprKey(singleOpExpr('div', { rounding_mode: 'floor' }, ['tensor', 'tensor']))).toBe('2:0:div_floor(i0,i1)[]');
    expect(exprKey(singleOpExpr('where', {}, ['tensor', 'tensor', 'number']))).toBe('2:1:where(i0,i1,p0)[]');
    expect(exprKey(singleOpExpr('masked_fill', {}, ['tensor', 'tensor', 'number']))).toBe('2:1:where(i1,p0,i0)[]');
  });
});

describe('the vocabulary', () => {
  it("every unary and binary op core declares translates to generated nodes", () => {
    for (const op of UNARY_OPS) expect(() => validateExpr(singleOpExpr(op, {}, ['tensor'])), op).not.toThrow();
    for (const op of BINARY_OPS) expect(() => validateExpr(singleOpExpr(op, {}, ['tensor', 'tensor'])), op).not.toThrow();
    for (const op of GENERATED_EXTRA_OPS) expect(() => validateExpr(singleOpExpr(op, {}, op.startsWith('logical_a') || op.startsWith('logical_o') || op === 'remainder' || op === 'fmod' ? ['tensor', 'tensor'] : ['tensor'])), op).not.toThrow();
    expect(exprKey(singleOpExpr('leaky_relu', { negative_slope: 0.2 }, ['tensor']))).toBe('1:0:leaky_relu(i0)[negative_slope=0.2]');
  });
});
