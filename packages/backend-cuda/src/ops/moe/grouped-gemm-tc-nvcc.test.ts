/**
 * Every variant of the tensor-core grouped GEMM the planner can launch (kernels/grouped_gemm_tc.cu: each tile x bf16 /
 * f16 x weights k-contiguous / n-contiguous / MXFP4 x bias or not) and of its routing kernel (grouped_gemm_route.cu: ids / offsets x i32 /
 * i64) compiles with nvcc for sm_90a from the embedded source with the host's #defines (-cubin, what NVRTC builds), with
 * no spills or stack frame; a GEMM CTA's registers let two CTAs share an SM, and its shared memory (the plan's ring
 * plus the static row ids) fits two CTAs in an H100 / H200 SM. Skipped where nvcc is absent.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { expectNoSpills, nvcc, nvccCubin, nvccScratch } from '../../../test/nvcc-compile.js';
import { groupedTcRouteSource, groupedTcSource } from './grouped-gemm-tc.js';
import { GROUPED_TC_TILES, groupedTcDefines, groupedTcRouteDefines, planGroupedTc, type GroupedTcDType, type GroupedTcFormat } from './grouped-gemm-tc-plan.js';

/** Shared memory an H100 / H200 SM has for CTAs (228 KiB), less the 1 KiB the driver reserves a CTA. */
const SM_SMEM = 228 * 1024;
const RESERVED = 1024;

describe(`tensor-core grouped GEMM variants compile with nvcc for sm_90a${nvcc ? '' : ' (SKIPPED: nvcc not on PATH)'}`, () => {
  const dir = nvccScratch('fk-grouped-tc-');
  let n = 0;
  for (const tile of GROUPED_TC_TILES) {
    for (const format of ['k-contiguous', 'n-contiguous', 'mxfp4'] as GroupedTcFormat[]) {
      const k = n++;
      // one test a tile and weight format over dtype x bias (4 files)
      it.skipIf(!nvcc)(`${tile.name} ${format}: bf16 / f16, bias or not`, () => {
        const plan = planGroupedTc({ T: 4096, N: 5760, K: 2880, E: 32, format }, tile);
        for (const dtype of ['bf16', 'f16'] as GroupedTcDType[]) {
          for (const bias of [false, true]) {
            const label = `${tile.name} ${format} ${dtype}${bias ? ' +bias' : ''}`;
            const r = nvccCubin(join(dir, `tc${k}-${dtype}-${bias}.cu`), groupedTcSource(groupedTcDefines(plan, dtype, format, bias)).source, label);
            expectNoSpills(r, label);
            expect(r.registers * plan.threads * 2, `${label}: registers of two CTAs`).toBeLessThanOrEqual(65536);
            expect(2 * (r.staticSmemBytes + plan.smemBytes + RESERVED), `${label}: shared memory of two CTAs`).toBeLessThanOrEqual(SM_SMEM);
          }
        }
      }, 120_000);
    }
  }
  it.skipIf(!nvcc)('routing kernel: ids / offsets x i32 / i64', () => {
    for (const byIds of [true, false]) {
      for (const index of ['i32', 'i64'] as const) {
        const label = `route ${byIds ? 'ids' : 'offsets'} ${index}`;
        expectNoSpills(nvccCubin(join(dir, `route-${byIds}-${index}.cu`), groupedTcRouteSource(groupedTcRouteDefines(index, byIds)).source, label), label);
      }
    }
  }, 120_000);
});
