import type { CaseResult } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { declaredOutcome, expectedOutcomeLines } from './expected.js';

const row = (task: string, status: CaseResult['status']) => ({ task, case: 'c', dtype: 'f32', status }) as CaseResult;

describe('declared outcomes (`Expected: STATUS` in a candidate header comment)', () => {
  it('reads the header comment only, and only real statuses', () => {
    expect(declaredOutcome('// A wrong one.\n// Expected: INCORRECT_NUMERICAL.\nimport x from "y";\n')).toBe('INCORRECT_NUMERICAL');
    expect(declaredOutcome('/**\n * Expected: RUNTIME_ERROR ("Cannot mix BigInt")\n */\nexport class A {}\n')).toBe('RUNTIME_ERROR');
    expect(declaredOutcome('import x from "y";\n// Expected: PASSED\n')).toBeUndefined();
    expect(declaredOutcome('// Expected: FAST\n')).toBeUndefined();
    expect(declaredOutcome('export class A {}\n')).toBeUndefined();
  });

  it('the footer says which failures are on purpose, and flags a candidate that did not do what it declares', () => {
    const declared = new Map([['L1/silu_and_mul', 'INCORRECT_NUMERICAL'], ['L1/rms_norm', 'PASSED'], ['L1/embedding', 'RUNTIME_ERROR'], ['L1/softmax', 'PASSED']] as const);
    const lines = expectedOutcomeLines(new Map(declared), [
      row('L1/rms_norm', 'PASSED'), row('L1/rms_norm', 'PASSED'),
      row('L1/silu_and_mul', 'PASSED'), row('L1/silu_and_mul', 'INCORRECT_NUMERICAL'),
      row('L1/embedding', 'PASSED'),
    ]);
    expect(lines[0]).toMatch(/^declared outcomes/);
    expect(lines.slice(1)).toEqual([
      '  L1/embedding     PASSED               NOT as declared (the file says RUNTIME_ERROR)',
      '  L1/rms_norm      PASSED               as declared',
      '  L1/silu_and_mul  INCORRECT_NUMERICAL  as declared: wrong on purpose, a demonstration of this status',
    ]); // L1/softmax was not run: no line
    expect(expectedOutcomeLines(new Map(), [row('L1/rms_norm', 'PASSED')])).toEqual([]);
  });
});
