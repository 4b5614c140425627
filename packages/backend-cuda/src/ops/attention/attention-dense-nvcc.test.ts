/**
 * The dense SDPA kernel as NVRTC gets it (the embedded file with the runner's #defines) compiles for sm_90a with no
 * register spills at every head dim the plan takes, each mask kind, bf16 and f16 (ptxas -v via nvcc -cubin). Skipped,
 * saying so, where nvcc is absent. The registers and stack of each variant are printed.
 */
import { join } from 'node:path';
import { describe, it } from 'vitest';
import { expectNoSpills, nvcc, nvccCubin, nvccScratch } from '../../../test/nvcc-compile.js';
import { denseSdpaDefines, denseSdpaSource } from './dense-sdpa.js';
import { planDenseSdpa } from './plan.js';

const dir = nvccScratch('fk-sdpa-nvcc-');

// [label, dtype, D, Dv, L, mask kind, mask dtype]: every head dim of the issue, both tile plans, both warp counts
const cases: [string, string, number, number, number, number, string][] = [
  ['D 32 bool mask', 'bf16', 32, 32, 100, 1, 'f32'],
  ['D 64 f16 bias f16', 'f16', 64, 64, 100, 2, 'f16'],
  ['D 80 bias f32', 'bf16', 80, 80, 100, 2, 'f32'],
  ['D 96', 'bf16', 96, 96, 100, 0, 'f32'],
  ['D 128 bias bf16', 'bf16', 128, 128, 100, 2, 'bf16'],
  ['D 128 one warp bool', 'f16', 128, 128, 1, 1, 'f32'],
  ['D 192 bias f32', 'bf16', 192, 192, 100, 2, 'f32'],
  ['D 256 bias f32', 'f16', 256, 256, 100, 2, 'f32'],
  ['D 256 bool', 'bf16', 256, 256, 100, 1, 'f32'],
  ['D 64 Dv 256', 'bf16', 64, 256, 100, 0, 'f32'],
];

describe.skipIf(!nvcc)('attention_dense.cu through nvcc (sm_90a, no spills)', () => {
  for (const [label, dtype, D, Dv, L, maskKind, maskDType] of cases) {
    it(label, { timeout: 120_000 }, () => {
      const plan = planDenseSdpa({ batch: 1, heads: 1, L, S: 64, D, Dv });
      const src = denseSdpaSource(denseSdpaDefines(dtype, D, Dv, plan, maskKind, maskDType));
      const r = nvccCubin(join(dir, `${label.replace(/\W+/g, '_')}.cu`), src.source, label);
      console.log(`${label}: ${r.registers} registers, stack ${r.stackBytes}, spill stores ${r.spillStoreBytes}`);
      expectNoSpills(r, label);
    });
  }
});

describe.skipIf(nvcc)('attention_dense.cu through nvcc', () => {
  it('skipped: nvcc not found on PATH', () => {});
});
