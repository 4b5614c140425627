/** defineL1OpTask: what it derives from the op spec, and the errors for a task that does not fit its op. */
import { hostArray } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { LayerNorm } from '../layers/norm.js';
import { defineL1OpTask, type L1OpTaskInit } from './define-op-task.js';
import { FAMILIES, familiesOf } from './families.js';
import { geluReference, geluTask } from './L1/activation/gelu.js';
import { groupNormReference, groupNormTask } from './L1/norm/group_norm.js';
import { layerNormReference, layerNormTask } from './L1/norm/layer_norm.js';

const base: L1OpTaskInit = {
  id: 'L1/test_norm',
  className: 'LayerNorm',
  mirrors: 'torch.nn.LayerNorm',
  description: 'test',
  architectures: ['flux', 'llama'],
  baseline: LayerNorm,
  init: [{ name: 'normalizedShape', type: 'int' }, { name: 'eps', type: 'float', optional: true }, { name: 'elementwiseAffine', type: 'bool', optional: true }, { name: 'bias', type: 'bool', optional: true }],
  forward: { input: { shape: ['T', 'H'] } },
  params: { weight: { shape: ['H'] }, bias: { shape: ['H'] } },
  attrs: (c) => ({ normalized_shape: [c.dims.H!] }),
  cases: { ci: [{ name: 'a', dtype: 'f32', dims: { T: 2, H: 4 }, init: [4] }], production: [{ name: 'b', dtype: 'bf16', dims: { T: 8, H: 16 }, init: [16] }] },
  reference: () => [],
};

describe('defineL1OpTask', () => {
  it("derives inputs and outputs from the op (names, order, optionality), the families from the architectures, and a work count", () => {
    const t = defineL1OpTask('layer_norm', base);
    expect(t.inputs).toEqual([{ name: 'input', dtype: 'act', shape: ['T', 'H'], optional: false }]);
    expect(t.outputs).toEqual([{ name: 'out', dtype: 'act', shape: ['T', 'H'], optional: false }]);
    expect(t.family).toEqual([FAMILIES.llm, FAMILIES.vision]);
    // f32 [2, 4]: read input 32 B + weight and bias 16 B each, write 32 B
    expect(t.work(t.cases.ci[0]!)).toEqual({ bytes: 32 + 16 + 16 + 32, flops: 8 });
    expect(t.opBinding.op).toBe('layer_norm');
  });

  it('refuses a binding that does not fit the op, naming the task, the case and the shapes', () => {
    expect(() => defineL1OpTask('layer_norm', { ...base, params: { weight: { shape: ['H'] }, scale: { shape: ['H'] } } })).toThrow(/task L1\/test_norm: op layer_norm has no input 'scale' \(its inputs: input, weight, bias\)/);
    expect(() => defineL1OpTask('layer_norm', { ...base, forward: {} })).toThrow(/op layer_norm's input 'input' is neither a forward argument nor a parameter/);
    expect(() => defineL1OpTask('layer_norm', { ...base, outputs: [{ shape: ['T'] }] })).toThrow(/case 'a': op layer_norm infers output 'out' f32\[2, 4\], the task declares f32\[2\]/);
    expect(() => defineL1OpTask('layer_norm', { ...base, params: { weight: { shape: ['T'] } } })).toThrow(/case 'a': op layer_norm rejects the declared shapes: layer_norm: weight/);
    expect(() => defineL1OpTask('no_such_op', base)).toThrow(/no_such_op/);
    expect(() => familiesOf(['llama', 'nope'])).toThrow(/unknown architecture 'nope'/);
  });
});

describe('references of the op tasks, by hand', () => {
  it('layer_norm: x = [1, 2, 3, 4] -> (x - 2.5) / sqrt(1.25 + eps) * w + b', () => {
    const y = layerNormReference(hostArray([1, 4], [1, 2, 3, 4]), 4, hostArray([4], [1, 2, 1, 1]), hostArray([4], [0, 0, 0, 1]), 0.75);
    // var = (2.25 + 0.25 + 0.25 + 2.25) / 4 = 1.25; + 0.75 = 2 -> 1 / sqrt(2)
    const s = 1 / Math.SQRT2;
    [-1.5 * s, 2 * -0.5 * s, 0.5 * s, 1.5 * s + 1].forEach((w, i) => expect(y.data[i]).toBeCloseTo(w, 14));
    expect(layerNormTask.family).toHaveLength(8);
  });

  it('group_norm: two groups of one channel each, 2 elements per plane, per-channel affine', () => {
    // N 1, C 2, plane 2: channel 0 [1, 3] (mean 2, var 1), channel 1 [0, 4] (mean 2, var 4); eps 0
    const y = groupNormReference(hostArray([1, 2, 2], [1, 3, 0, 4]), 2, hostArray([2], [2, 1]), hostArray([2], [0, 5]), 0);
    expect([...y.data]).toEqual([-2, 2, 4, 6]);
    // one group over both channels: mean 2, var (1 + 1 + 4 + 4) / 4 = 2.5
    const one = groupNormReference(hostArray([1, 2, 2], [1, 3, 0, 4]), 1, null, null, 0);
    [-1, 1, -2, 2].forEach((v, i) => expect(one.data[i]).toBeCloseTo(v / Math.sqrt(2.5), 14));
    expect(groupNormTask.family).toEqual([FAMILIES.linearAttn, FAMILIES.vision, FAMILIES.robotics]);
  });

  it('gelu: Phi(1) = 0.8413447460685429, the tanh form 0.8411919906082768', () => {
    expect(geluReference(hostArray([2], [1, 0]), 'none').data[0]).toBeCloseTo(0.8413447460685429, 14);
    expect(geluReference(hostArray([1], [1]), 'tanh').data[0]).toBeCloseTo(0.8411919906082768, 14);
    expect(geluTask.family).not.toContain(FAMILIES.llm);
  });
});
