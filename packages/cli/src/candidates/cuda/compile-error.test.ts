import { describe, expect, it } from 'vitest';
import { compileErrorToUserError, logErrors } from './compile-error.js';

// NVRTC's log for a program named kernel.cu whose line 3 uses an undeclared name and whose header misses a ';'
// (nvrtcGetProgramLog, CUDA 13: the same front end as nvcc, program name then (line)).
const LOG = [
  'fk_helpers.cuh(2): error: expected a ";"',
  '  __device__ float twice(float v) { return 2 * v }',
  '                                              ^',
  '',
  'kernel.cu(3): warning #177-D: variable "unused" was declared but never referenced',
  'kernel.cu(4): error: identifier "undefined_name" is undefined',
  '    y[i] = undefined_name * x[i];',
  '           ^',
  '',
  'kernel.cu(5): error #20: identifier "z" is undefined',
  '',
  '3 errors detected in the compilation of "kernel.cu".',
  '',
].join('\n');
const SOURCE = ['#include "fk_helpers.cuh"', 'extern "C" __global__ void k(float* y, const float* x) {', '  int unused; int i = threadIdx.x;', '  y[i] = undefined_name * x[i];', '  z = 1;', '}'].join('\n');
const HEADER = '#pragma once\n  __device__ float twice(float v) { return 2 * v }\n';

describe('NVRTC compile logs as candidate errors', () => {
  it('lists the errors (not the warnings) with file, line and message', () => {
    expect(logErrors(LOG)).toEqual([
      { file: 'fk_helpers.cuh', line: 2, message: 'expected a ";"' },
      { file: 'kernel.cu', line: 4, message: 'identifier "undefined_name" is undefined' },
      { file: 'kernel.cu', line: 5, message: 'identifier "z" is undefined' },
    ]);
  });

  it("names the candidate's own file and line, quotes the line, and counts the rest", () => {
    const e = compileErrorToUserError(LOG, { programName: 'kernel.cu', display: 'my-set/L1/relu.cu', source: SOURCE, headers: { 'fk_helpers.cuh': ['my-set/L1/fk_helpers.cuh', HEADER] } });
    expect(e.details.file).toBe('my-set/L1/fk_helpers.cuh');
    expect(e.message).toBe(
      'does not compile: my-set/L1/fk_helpers.cuh:2: expected a ";"\n' +
        '  > 2 |   __device__ float twice(float v) { return 2 * v }\n' +
        '  (and 2 more errors: my-set/L1/relu.cu:4: identifier "undefined_name" is undefined; my-set/L1/relu.cu:5: identifier "z" is undefined)',
    );
    expect(e.details.fix).toMatch(/fix the error at that line.*nvcc -std=c\+\+17 -gencode=arch=compute_90a,code=sm_90a -c/);
  });

  it('maps the program name to the .cu when the log names it with a path (nvcc)', () => {
    const log = 'examples/x/L1/relu.cu(4): error: identifier "undefined_name" is undefined\n';
    const e = compileErrorToUserError(log, { programName: 'relu.cu', display: 'set/L1/relu.cu', source: SOURCE });
    expect(e.message).toBe('does not compile: set/L1/relu.cu:4: identifier "undefined_name" is undefined\n  > 4 |   y[i] = undefined_name * x[i];');
  });

  it('a log without file:line (a ptxas or linker failure) is shown as it is', () => {
    const e = compileErrorToUserError('ptxas fatal   : Unresolved extern function \'foo\'\n', { programName: 'k.cu', display: 'set/L1/k.cu', source: '' });
    expect(e.describe()).toMatch(/^set\/L1\/k\.cu: does not compile \(NVRTC gave no file:line\):\n  ptxas fatal   : Unresolved extern function 'foo'\nfix: check it offline with `nvcc/);
  });
});
