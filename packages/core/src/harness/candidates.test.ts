import { describe, expect, it } from 'vitest';
import { UserError } from '../errors.js';
import { Module } from '../module.js';
import { defineTask } from '../task.js';
import { formatForward, isHelperName, nearest, parseCandidatePath, unknownTaskError, validateCandidateExports, type CandidateFile } from './candidates.js';

const task = defineTask(
  {
    id: 'L1/rms_norm', level: 1, className: 'RMSNorm', family: ['f'], architectures: ['a'], mirrors: 'x.y.RMSNorm', description: '',
    init: [{ name: 'hiddenSize', type: 'int' }, { name: 'eps', type: 'float', optional: true, default: 1e-6 }],
    inputs: [{ name: 'x', dtype: 'act', shape: ['T', 'H'] }, { name: 'residual', dtype: 'act', shape: ['T', 'H'], optional: true }],
    outputs: [{ name: 'y', dtype: 'act', shape: ['T', 'H'] }],
    cases: { ci: [{ name: 'c', dtype: 'f32', dims: { T: 1, H: 1 }, init: [1] }], production: [{ name: 'p', dtype: 'f32', dims: { T: 1, H: 1 }, init: [1] }] },
  },
  { baseline: class extends Module { forward() { return null; } }, makeInputs: () => [], reference: () => [], work: () => ({ bytes: 0, flops: 0 }) },
);
const file: CandidateFile = { path: '/x/L1/rms_norm.ts', relPath: 'set/L1/rms_norm.ts', level: 1, stem: 'rms_norm', taskId: 'L1/rms_norm' };

function fails(exports: Record<string, unknown>): UserError {
  try {
    validateCandidateExports(file, task, exports);
  } catch (e) {
    expect(e).toBeInstanceOf(UserError);
    return e as UserError;
  }
  throw new Error('expected a UserError');
}

describe('candidate paths', () => {
  it('parses L<k>/<stem>.ts|.js and skips helpers', () => {
    expect(parseCandidatePath('L1/rms_norm.ts')).toEqual({ level: 1, stem: 'rms_norm' });
    expect(parseCandidatePath('L2/llama_mlp.mjs')).toEqual({ level: 2, stem: 'llama_mlp' });
    expect(parseCandidatePath('L1/RMSNorm.ts')).toBeUndefined();
    expect(parseCandidatePath('rms_norm.ts')).toBeUndefined();
    expect(parseCandidatePath('L1/x.d.ts')).toBeUndefined();
    expect(isHelperName('_util.ts')).toBe(true);
    expect(isHelperName('rms_norm.ts')).toBe(false);
  });

  it('suggests the nearest task id', () => {
    expect(nearest('L1/rms_nrom', ['L1/rms_norm', 'L1/softmax'])).toBe('L1/rms_norm');
    expect(nearest('completely_else', ['L1/rms_norm'])).toBeUndefined();
    expect(unknownTaskError({ ...file, relPath: 'set/L1/rms_nrom.ts', taskId: 'L1/rms_nrom', stem: 'rms_nrom' }, ['L1/rms_norm']).describe()).toMatch(/rename it to L1\/rms_norm\.ts/);
  });
});

describe('validateCandidateExports', () => {
  it('accepts the right class, with defaults or with every parameter spelled out', () => {
    class A extends Module {
      constructor(_h: number, _eps = 1e-6) { super(); }
      forward(_x: unknown, _r?: unknown) { return null; }
    }
    class B extends Module {
      constructor(_h: number, _eps: number) { super(); }
      forward(_x: unknown) { return null; }
    }
    class C extends Module {
      constructor(...args: unknown[]) { super(); void args; }
      forward(...args: unknown[]) { return args; }
    }
    for (const cls of [A, B, C]) expect(validateCandidateExports(file, task, { RMSNorm: cls })).toBe(cls);
  });

  it('names the file, the class and the fix for each way of being wrong', () => {
    expect(fails({ RmsNorm: class {} }).describe()).toMatch(/^set\/L1\/rms_norm\.ts: no export named 'RMSNorm' \(it exports RmsNorm\)\nfix: export the candidate as/);
    expect(fails({ RMSNorm: 3 }).message).toMatch(/is a number, not a class/);
    expect(fails({ RMSNorm: class { forward() {} } }).message).toMatch(/does not extend Module/);
    expect(fails({ RMSNorm: class extends Module { constructor(_a: number, _b: number, _c: number) { super(); } forward() { return 1; } } }).message).toMatch(/constructor takes 3 required parameters, the baseline takes 1 to 2: RMSNorm\(hiddenSize, eps\?\)/);
    expect(fails({ RMSNorm: class extends Module { constructor() { super(); } forward() { return 1; } } }).message).toMatch(/constructor takes 0 required parameters/);
    expect(fails({ RMSNorm: class extends Module { constructor(_h: number) { super(); } forward(_a: 1, _b: 2, _c: 3) { return 1; } } }).message).toMatch(/forward takes 3 parameters, the task passes 2/);
  });
});

describe('validateCandidateExports: host inputs (the sampler\'s hint)', () => {
  const hinted = defineTask(
    { ...task, id: 'L1/rms_norm', hostInputs: [{ name: 'hint', doc: 'what the host knows' }] },
    { baseline: task.baseline, makeInputs: () => [], reference: () => [], work: () => ({ bytes: 0, flops: 0 }), hostArgs: () => [{}] },
  );
  it('a forward may declare the host input after the tensors, or leave it out; the signature shows it optional', () => {
    class WithHint extends Module {
      constructor(_h: number) { super(); }
      forward(_x: unknown, _r: unknown, _hint: unknown) { return null; }
    }
    class WithoutHint extends Module {
      constructor(_h: number) { super(); }
      forward(_x: unknown) { return null; }
    }
    for (const cls of [WithHint, WithoutHint]) expect(validateCandidateExports(file, hinted, { RMSNorm: cls })).toBe(cls);
    expect(() => validateCandidateExports(file, task, { RMSNorm: WithHint })).toThrow(/forward takes 3 parameters, the task passes 2/);
    expect(formatForward(hinted)).toBe('forward(x, residual?, hint?)');
  });
});
