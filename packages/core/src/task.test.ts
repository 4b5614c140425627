import { describe, expect, it } from 'vitest';
import { Module } from './module.js';
import { DEFAULT_TOLERANCE, TaskCaseSchema, defineTask, resolveSpecShape, specDType, toleranceFor, type TaskBehaviour, type TaskMetaInput } from './task.js';

class RMSNorm extends Module {
  forward(): null {
    return null;
  }
}

const behaviour: TaskBehaviour = { baseline: RMSNorm, makeInputs: () => [], reference: () => [], work: () => ({ bytes: 1, flops: 2 }) };

function meta(over: Record<string, unknown> = {}): TaskMetaInput {
  return {
    id: 'L1/rms_norm',
    level: 1,
    className: 'RMSNorm',
    family: ['dense-moe-llm'],
    architectures: ['LlamaForCausalLM'],
    mirrors: 'vllm.model_executor.layers.layernorm.RMSNorm',
    description: 'RMS norm',
    init: [{ name: 'hidden_size', type: 'int' }, { name: 'eps', type: 'float', optional: true, default: 1e-6 }],
    inputs: [{ name: 'x', dtype: 'act', shape: ['T', 'H'] }, { name: 'residual', dtype: 'act', shape: ['T', 'H'], optional: true }],
    outputs: [{ name: 'y', dtype: 'act', shape: ['T', 'H'] }],
    cases: {
      ci: [{ name: 'small', dtype: 'bf16', dims: { T: 4, H: 64 }, init: [64] }],
      production: [{ name: 'llama8b', dtype: 'bf16', dims: { T: 128, H: 4096 }, init: [4096], count: 12 }],
    },
    ...over,
  } as TaskMetaInput;
}

describe('defineTask', () => {
  it('accepts valid metadata, applies defaults and derives the stem', () => {
    const t = defineTask(meta(), behaviour);
    expect(t.id).toBe('L1/rms_norm');
    expect(t.stem).toBe('rms_norm');
    expect(t.baseline).toBe(RMSNorm);
    expect(t.tolerance).toEqual({});
    expect(t.imports).toEqual([]);
    expect(t.init[0]!.optional).toBe(false);
    expect(t.inputs[1]!.optional).toBe(true);
    expect(t.cases.ci[0]!.options).toEqual({});
    expect(t.cases.ci[0]!.count).toBe(1);
    expect(t.cases.production[0]!.count).toBe(12);
    expect(t.work(t.cases.ci[0]!)).toEqual({ bytes: 1, flops: 2 });
  });

  const bad: [string, Record<string, unknown>, RegExp][] = [
    ['lowercase level prefix', { id: 'l1/rms_norm' }, /^task l1\/rms_norm: id: task ids look like L1\/rms_norm$/],
    ['no slash', { id: 'L1rms' }, /^task L1rms: id: /],
    ['upper-case stem', { id: 'L1/RmsNorm' }, /: id: task ids look like/],
    ['level 5 id', { id: 'L5/x', level: 5 }, /: id: /],
    ['level out of range', { level: 0 }, /^task L1\/rms_norm: level: /],
    ['fractional level', { level: 1.5 }, /: level: /],
    ['lower-case class name', { className: 'rmsNorm' }, /^task L1\/rms_norm: className: /],
    ['class name with a dot', { className: 'RMS.Norm' }, /: className: /],
    ['empty family', { family: [] }, /: family: /],
    ['no outputs', { outputs: [] }, /: outputs: /],
    ['bad init param name', { init: [{ name: '1x', type: 'int' }] }, /: init\.0\.name: /],
    ['bad init param type', { init: [{ name: 'x', type: 'long' }] }, /: init\.0\.type: /],
    ['bad input dtype', { inputs: [{ name: 'x', dtype: 'float32', shape: ['T'] }] }, /: inputs\.0\.dtype: /],
    ['negative fixed dim', { inputs: [{ name: 'x', dtype: 'act', shape: [-1] }] }, /: inputs\.0\.shape\.0: /],
    ['bad case dtype', { cases: { ci: [{ name: 'c', dtype: 'fp32', dims: {}, init: [] }], production: [{ name: 'p', dtype: 'f32', dims: {}, init: [] }] } }, /: cases\.ci\.0\.dtype: /],
    ['no production cases', { cases: { ci: [{ name: 'c', dtype: 'f32', dims: {}, init: [] }], production: [] } }, /: cases\.production: /],
    ['negative tolerance', { tolerance: { bf16: { atol: -1, rtol: 0 } } }, /: tolerance\.bf16\.atol: /],
    ['tolerance for an unknown dtype', { tolerance: { float: { atol: 1, rtol: 0 } } }, /: tolerance/],
    ['missing id', { id: undefined }, /^task \?: id: /],
  ];
  it.each(bad)('rejects %s with the field path', (_name, over, message) => {
    expect(() => defineTask(meta(over), behaviour)).toThrow(message);
  });

  it('rejects a level that does not match the id', () => {
    expect(() => defineTask(meta({ level: 2 }), behaviour)).toThrow('task L1/rms_norm: level 2 does not match its id');
  });

  it('accepts every level L1..L4', () => {
    for (const level of [1, 2, 3, 4]) expect(defineTask(meta({ id: `L${level}/x_${level}`, level }), behaviour).level).toBe(level);
  });
});

describe('task helpers', () => {
  const t = defineTask(meta({ tolerance: { bf16: { atol: 0.05, rtol: 0.02 } } }), behaviour);
  const c = TaskCaseSchema.parse({ name: 'c', dtype: 'f16', dims: { T: 3, H: 8 }, init: [8] });

  it('specDType resolves act to the case dtype', () => {
    expect(specDType(t.inputs[0]!, c)).toBe('f16');
    expect(specDType({ name: 'ids', dtype: 'i64', shape: ['T'], optional: false }, c)).toBe('i64');
  });

  it('resolveSpecShape substitutes dims and names a missing one', () => {
    expect(resolveSpecShape(t.inputs[0]!, c)).toEqual([3, 8]);
    expect(resolveSpecShape({ name: 'w', dtype: 'act', shape: ['H', 2], optional: false }, c)).toEqual([8, 2]);
    expect(() => resolveSpecShape({ name: 'w', dtype: 'act', shape: ['V'], optional: false }, c)).toThrow("case 'c' has no dim 'V' (needed by w)");
  });

  it('toleranceFor uses overrides, else the defaults', () => {
    expect(toleranceFor(t, 'bf16')).toEqual({ atol: 0.05, rtol: 0.02 });
    expect(toleranceFor(t, 'f16')).toEqual({ atol: 1e-2, rtol: 1e-2 });
  });

  it('DEFAULT_TOLERANCE follows the design (fp32 1e-5/1e-3, half 1e-2, fp8 0.125, ints exact)', () => {
    expect(DEFAULT_TOLERANCE.f32).toEqual({ atol: 1e-5, rtol: 1e-3 });
    expect(DEFAULT_TOLERANCE.f16).toEqual({ atol: 1e-2, rtol: 1e-2 });
    expect(DEFAULT_TOLERANCE.bf16).toEqual({ atol: 1e-2, rtol: 1e-2 });
    expect(DEFAULT_TOLERANCE.fp8e4m3).toEqual({ atol: 0.125, rtol: 0.125 });
    expect(DEFAULT_TOLERANCE.fp8e5m2).toEqual({ atol: 0.125, rtol: 0.125 });
    for (const d of ['i64', 'i32', 'i16', 'i8', 'u8', 'bool'] as const) expect(DEFAULT_TOLERANCE[d]).toEqual({ atol: 0, rtol: 0 });
  });
});
