/** conv2d_act (core/src/ops/conv.ts) on the cpu backend: its decomposition = conv2d then the activation op. */
import { describe, expect, it } from 'vitest';
import { F, OpError, opRoute, type Tensor } from '@fastkernels/core';
import { silu } from './math.js';
import { randn, relayout, Rng, values } from './test-helpers.js';

type Case = { name: string; x: number[]; w: number[]; bias: boolean; stride: number; padding: number; groups: number; dilation?: number };
const CASES: Case[] = [
  { name: '3x3 s1 + bias', x: [2, 6, 7, 8], w: [8, 6, 3, 3], bias: true, stride: 1, padding: 1, groups: 1 },
  { name: '3x3 s2 (YOLO downsample)', x: [2, 4, 9, 10], w: [6, 4, 3, 3], bias: true, stride: 2, padding: 1, groups: 1 },
  { name: '1x1 no bias', x: [1, 5, 4, 6], w: [7, 5, 1, 1], bias: false, stride: 1, padding: 0, groups: 1 },
  { name: 'depthwise 3x3 s2', x: [2, 8, 9, 9], w: [8, 1, 3, 3], bias: true, stride: 2, padding: 1, groups: 8 },
  { name: 'grouped 3x3 dilated', x: [1, 6, 8, 8], w: [9, 2, 3, 3], bias: true, stride: 1, padding: 2, groups: 3, dilation: 2 },
];

function operands(c: Case, dtype: 'f64' | 'f32' | 'bf16', seed: number): [Tensor, Tensor, Tensor | null] {
  const rng = new Rng(seed);
  return [randn(rng, c.x, dtype), randn(rng, c.w, dtype, 0.3), c.bias ? randn(rng, [c.w[0]!], dtype) : null];
}

describe('conv2d_act', () => {
  it('runs through its decomposition on the cpu backend', () => {
    const [x, w, b] = operands(CASES[0]!, 'f32', 1);
    expect(opRoute('conv2d_act', [x, w, b], { padding: 1, activation: 'silu' })).toEqual({ via: 'decomposition' });
  });

  for (const c of CASES) {
    for (const dtype of ['f64', 'f32', 'bf16'] as const) {
      it(`${c.name} ${dtype}: silu / relu (conv2d then the activation, bit for bit)`, () => {
        const [x, w, b] = operands(c, dtype, 7);
        const opts = { stride: c.stride, padding: c.padding, groups: c.groups, dilation: c.dilation ?? 1 };
        const conv = F.conv2d(x, w, b, opts);
        for (const activation of ['silu', 'relu'] as const) {
          const fused = F.conv2dAct(x, w, b, { ...opts, activation });
          const want = activation === 'silu' ? F.silu(conv) : F.relu(conv);
          expect(fused.shape).toEqual(conv.shape);
          expect(fused.dtype).toBe(dtype);
          expect(values(fused)).toEqual(values(want));
          if (dtype === 'f64' && activation === 'silu') {
            // and against the scalar SiLU of the conv's float64 values (the decomposition is not tested against itself only)
            const ref = values(conv).map(silu);
            values(fused).forEach((v, i) => expect(v).toBeCloseTo(ref[i]!, 12));
          }
          fused.dispose();
          want.dispose();
        }
        conv.dispose();
      });
    }
  }

  it('takes any input strides (a transposed view gives the same result)', () => {
    const [x, w, b] = operands(CASES[3]!, 'f32', 3);
    const opts = { stride: 2, padding: 1, groups: 8, activation: 'silu' as const };
    expect(values(F.conv2dAct(relayout(x, 'transposed'), w, b, opts))).toEqual(values(F.conv2dAct(x, w, b, opts)));
  });

  it('shape and attr errors name conv2d_act', () => {
    const [x, w] = operands(CASES[0]!, 'f32', 5);
    const bad = randn(new Rng(1), [3], 'f32');
    expect(() => F.conv2dAct(x, w, bad, { padding: 1, activation: 'silu' })).toThrow(OpError);
    expect(() => F.conv2dAct(x, w, bad, { padding: 1, activation: 'silu' })).toThrow(/conv2d_act: bias \[3\] must be \[8\]/);
    expect(() => F.conv2dAct(x, w, null, { padding: 1, activation: 'gelu' as 'silu' })).toThrow(/activation/);
  });
});
