import { readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { candidatesUseTriton } from './triton-prestart.js';

const EXAMPLES = resolve(__dirname, '../../../../examples/candidates');
const filesOf = (set: string) => readdirSync(join(EXAMPLES, set, 'L1')).map((f) => join(EXAMPLES, set, 'L1', f));

describe('candidatesUseTriton', () => {
  it('finds a direct import of @fastkernels/backend-triton', () => {
    expect(candidatesUseTriton(filesOf('triton-demo'))).toBe(true);
  });
  it('follows relative re-exports (triton-rmsnorm re-exports the triton-demo RMSNorm)', () => {
    expect(candidatesUseTriton(filesOf('triton-rmsnorm'))).toBe(true);
  });
  it('is false for sets without Triton, and for missing files', () => {
    expect(candidatesUseTriton(filesOf('cpu-demo'))).toBe(false);
    expect(candidatesUseTriton([join(EXAMPLES, 'no-such-file.ts')])).toBe(false);
  });
});
