/**
 * Random-init draws: the fixed mode reproduces the values every existing checkpoint was written with; the fan-in mode
 * scales conv / linear weights by gain / sqrt(fan_in) and their biases by torch's bound, and leaves norms and BatchNorm
 * statistics at a fresh torch model's constants.
 */
import { describe, expect, it } from 'vitest';
import { fanIn, tensorDraws } from './init-scale.js';
import { drawValues, randomTensorValues } from './random-init.js';
import type { TensorKind } from './weight-plan.js';

const t = (hfName: string, shape: number[], kind: TensorKind) => ({ hfName, shape, kind });
const plan = [
  t('conv.weight', [64, 32, 3, 3], 'matrix'),
  t('conv.bias', [64], 'bias'),
  t('bn.weight', [64], 'norm'),
  t('bn.bias', [64], 'bias'),
  t('bn.running_mean', [64], 'bias'),
  t('bn.running_var', [64], 'norm'),
  t('fc.weight', [10, 512], 'matrix'),
  t('fc.bias', [10], 'bias'),
  t('grn.weight', [1, 1, 1, 256], 'matrix'),
  t('lone_bias', [8], 'bias'),
];
const std = (v: Float64Array) => Math.sqrt(v.reduce((a, x) => a + x * x, 0) / v.length);

describe('tensorDraws', () => {
  it("fixed mode: N(0, std^2), norms 1 + N(0, std^2): randomTensorValues' values", () => {
    const draw = tensorDraws(plan, { initStd: 0.02 });
    for (const m of plan) expect([...drawValues(m, draw(m), 7)]).toEqual([...randomTensorValues(m, 0.02, 7)]);
  });

  it('fan-in mode: weights gain / sqrt(fan_in), biases within 1 / sqrt(fan_in), norms and statistics constant', () => {
    expect(fanIn([64, 32, 3, 3])).toBe(288);
    expect(fanIn([1, 1, 1, 256])).toBe(256);
    const draw = tensorDraws(plan, { initStd: 0, init: { mode: 'fan-in', gain: 1.5 } });
    const v = (name: string) => {
      const m = plan.find((p) => p.hfName === name)!;
      return drawValues(m, draw(m), 3);
    };
    expect(std(v('conv.weight')) / (1.5 / Math.sqrt(288))).toBeCloseTo(1, 1);
    expect(std(v('fc.weight')) / (1.5 / Math.sqrt(512))).toBeCloseTo(1, 1);
    expect(draw(plan[8]!)).toEqual({ normal: 1.5 / 16, mean: 0 });
    const b = v('conv.bias');
    expect(Math.max(...b.map(Math.abs))).toBeLessThanOrEqual(1 / Math.sqrt(288));
    expect(std(b)).toBeGreaterThan(0.3 / Math.sqrt(288)); // U(-a, a): std a / sqrt(3)
    expect(draw(plan[7]!)).toEqual({ uniform: 1 / Math.sqrt(512) });
    for (const [name, value] of [['bn.weight', 1], ['bn.running_var', 1], ['bn.bias', 0], ['bn.running_mean', 0], ['lone_bias', 0]] as const) expect([...new Set(v(name))]).toEqual([value]);
  });
});
