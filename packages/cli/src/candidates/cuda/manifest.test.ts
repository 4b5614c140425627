import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { UserError } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { environment } from '../../env.js';
import { planCudaCandidate, globalFunctions } from './binding.js';
import { parseCudaManifest } from './manifest.js';

const DEMO = resolve(__dirname, '../../../../../examples/candidates/cuda-demo/L1');
const task = (id: string) => environment().taskMap.get(id)!;
const FILES = { manifest: 'L1/rms_norm.cu.json', source: 'L1/rms_norm.cu' };

/** The UserError a thunk throws (fails the test when it throws something else or nothing). */
function userError(f: () => unknown): UserError {
  try {
    f();
  } catch (e) {
    if (e instanceof UserError) return e;
    throw e;
  }
  throw new Error('expected a UserError');
}

const RMS_SOURCE = `
#include <cuda_bf16.h>
extern "C" __global__ void rms_bf16(const __nv_bfloat16* x, const __nv_bfloat16* r, const __nv_bfloat16* w, __nv_bfloat16* y, __nv_bfloat16* ro, int h, float eps) {}
extern "C" __global__ void rms_f32(const float* x, const float* r, const float* w, float* y, float* ro, int h, float eps) {}
__global__ void mangled(float* y) {}
`;
const rmsManifest = (over: Record<string, unknown> = {}) => ({
  task: 'L1/rms_norm',
  outputs: { residual: { shape: ['T', 'H'], when: 'has(residual)' } },
  steps: [{ kernel: 'rms_{dtype}', grid: ['T'], block: [256], args: ['x', 'residual', 'weight', 'out.y', 'out.residual', 'H', 'eps'] }],
  ...over,
});
const plan = (m: Record<string, unknown>, source = RMS_SOURCE) => planCudaCandidate(parseCudaManifest(JSON.stringify(m), FILES.manifest), task('L1/rms_norm'), source, ['weight'], FILES);

describe('CUDA candidate manifests: validation', () => {
  it('names the file, the field and a fix for each kind of bad manifest', () => {
    const cases: [unknown, RegExp, RegExp][] = [
      [{ ...rmsManifest(), task: 'rms_norm' }, /^task: a task id like L1\/rms_norm/, /give task a valid value/],
      [{ ...rmsManifest(), stepz: [] }, /unrecognized key.*stepz/i, /remove or rename 'stepz' \(the keys: \$comment, task, source/],
      [{ ...rmsManifest(), steps: [] }, /^steps: /, /give steps a valid value/],
      [rmsManifest({ steps: [{ kernel: 'rms_{dtype}', grid: ['T'], args: [] }] }), /^steps\[0\]/, /a step is either a kernel launch \{kernel, grid, block, args/],
      [rmsManifest({ dtypes: ['bf17'] }), /^dtypes\[0\]: /, /give dtypes\[0\] a valid value/],
      [rmsManifest({ fallback: 'torch' }), /^fallback: /, /give fallback a valid value/],
      [rmsManifest({ outputs: { residual: { shape: ['T'], when: 'has(residual)', dtpye: 'f32' } } }), /^outputs\.residual: .*dtpye/i, /remove or rename 'dtpye' \(the keys: shape, dtype, when, zero\)/],
    ];
    for (const [m, message, fix] of cases) {
      const e = userError(() => parseCudaManifest(JSON.stringify(m), FILES.manifest));
      expect(e.details.file).toBe('L1/rms_norm.cu.json');
      expect(e.message).toMatch(message);
      expect(e.details.fix).toMatch(fix);
    }
    expect(userError(() => parseCudaManifest('{"task": ', 'L1/x.cu.json')).describe()).toMatch(/^L1\/x\.cu\.json: is not JSON: .*\nfix: write the binding as a JSON object/);
  });

  it('checks the manifest against the task and the source, naming the field', () => {
    const bad: [Record<string, unknown>, RegExp, RegExp][] = [
      [rmsManifest({ task: 'L1/l2_norm' }), /^task: says L1\/l2_norm, but the file is the candidate for L1\/rms_norm/, /set "task": "L1\/rms_norm"/],
      [rmsManifest({ steps: [{ kernel: 'rms_{dtype}x', grid: ['T'], block: [256], args: [] }] }), /^steps\[0\]\.kernel: no __global__ function 'rms_f32x' in L1\/rms_norm\.cu \(for dtype f32\) \(it defines: rms_bf16, rms_f32, mangled\)/, /did you mean rms_f32\?/],
      [rmsManifest({ dtypes: ['f32'], steps: [{ kernel: 'mangled', grid: ['T'], block: [256], args: ['out.y'] }] }), /'mangled' is not declared extern "C"/, /extern "C" __global__ void mangled/],
      [rmsManifest({ steps: [{ kernel: 'rms_{dtype}', grid: ['T'], block: [256], args: ['x', 'residual', 'weight', 'out.y', 'H', 'eps'] }] }), /^steps\[0\]\.args: rms_f32 takes 7 parameters \(ptr, ptr, ptr, ptr, ptr, i32, f32\), args lists 6/, /one arg per kernel parameter/],
      [rmsManifest({ steps: [{ kernel: 'rms_{dtype}', grid: ['T'], block: [256], args: ['x', 'residual', 'bias', 'out.y', 'out.residual', 'H', 'eps'] }] }), /^steps\[0\]\.args\[2\]: parameter 2 is a pointer, but "bias" names no tensor/, /inputs x, residual; parameters weight; outputs out\.y, out\.residual/],
      [rmsManifest({ steps: [{ kernel: 'rms_{dtype}', grid: ['T'], block: [256], args: ['x', 'residual', 'weight', 'out.y', 'out.residual', 'x', 'eps'] }] }), /^steps\[0\]\.args\[5\]: parameter 5 is a scalar \(i32\), but 'x' is a tensor/, /numel\(x\)/],
      [rmsManifest({ steps: [{ kernel: 'rms_{dtype}', grid: ['cdiv(T, BLOCK)'], block: [256], args: ['x', 'residual', 'weight', 'out.y', 'out.residual', 'H', 'eps'] }] }), /^steps\[0\]\.grid\[0\]: "cdiv\(T, BLOCK\)" unknown name 'BLOCK'/, /let names/],
      [rmsManifest({ outputs: {} }), /^outputs\.residual: the task's output 'residual' is optional: say when the call produces it/, /"when": "has\(\.\.\.\)"/],
      [rmsManifest({ outputs: { residual: { shape: ['T', 'H'] } } }), /^outputs\.residual\.when: .*optional/, /"when", e\.g\. "has\(residual\)"/],
      [rmsManifest({ outputs: { z: { shape: ['T'] } } }), /^outputs\.z: L1\/rms_norm has no output 'z'/, /its outputs: y, residual/],
      [rmsManifest({ let: { T: '2' } }), /^let\.T: 'T' is already defined/, /another name/],
      [rmsManifest({ steps: [{ op: 'F.rms_norm', args: ['x'], out: 'tmp' }] }), /^steps\[0\]\.op: F has no function 'rms_norm'/, /did you mean F\.rmsNorm\?/],
      [rmsManifest({ returns: ['out.z'] }), /^returns\[0\]: 'out\.z' names no tensor/, /out\.y, out\.residual/],
    ];
    for (const [m, message, fix] of bad) {
      const e = userError(() => plan(m));
      expect(e.details.file, JSON.stringify(m)).toBe('L1/rms_norm.cu.json');
      expect(e.message).toMatch(message);
      expect(e.details.fix).toMatch(fix);
      expect(e.details.field).toBe(e.message.split(':')[0]);
    }
  });

  it('resolves a binding: the entry per dtype, each argument as a tensor or a typed expression, the outputs', () => {
    const p = plan(rmsManifest({ dtypes: ['bf16', 'f32'], let: { ROWS: 'T * 1' }, scratch: { sums: { shape: ['ROWS'], dtype: 'f32', zero: true } } }));
    const k = p.steps[0]!;
    expect(k.kind).toBe('kernel');
    if (k.kind !== 'kernel') return;
    expect([...k.entries]).toEqual([['bf16', 'rms_bf16'], ['f32', 'rms_f32']]);
    expect(k.args.map((a) => ('tensor' in a ? a.tensor : 'type' in a ? a.type : 'null'))).toEqual(['x', 'residual', 'weight', 'out.y', 'out.residual', 'i32', 'f32']);
    expect(p.outputs.map((o) => [o.ref, o.when !== undefined])).toEqual([['out.y', false], ['out.residual', true]]);
    expect(p.scratch.map((s) => [s.ref, s.dtype, s.zero])).toEqual([['sums', 'f32', true]]);
    expect(p.dims).toEqual(['T', 'H']);
    expect(p.fallback).toBe('error');
  });

  it('binds every demo manifest to its task and source', () => {
    for (const stem of ['l2_norm', 'relu', 'rms_norm', 'silu_and_mul']) {
      const text = readFileSync(join(DEMO, `${stem}.cu.json`), 'utf8');
      const source = readFileSync(join(DEMO, `${stem}.cu`), 'utf8');
      const params = stem === 'rms_norm' ? ['weight'] : [];
      const p = planCudaCandidate(parseCudaManifest(text, `L1/${stem}.cu.json`), task(`L1/${stem}`), source, params, { manifest: `L1/${stem}.cu.json`, source: `L1/${stem}.cu` });
      expect(p.steps.length).toBeGreaterThan(0);
    }
  });

  it('finds __global__ functions whatever their qualifiers, not those in comments', () => {
    const src = '// __global__ void commented(int)\nextern "C" __global__ void __launch_bounds__(256) a(int n) {}\ntemplate <int N> __global__ void b(float* x) {}\n/* __global__ void c() */';
    expect(globalFunctions(src)).toEqual(['a', 'b']);
  });
});
