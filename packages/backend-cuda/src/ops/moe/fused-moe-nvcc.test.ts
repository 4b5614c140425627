/**
 * Every variant of kernels/fused_moe.cu the planner can launch (each tile configuration x bf16 / f16 x with and without
 * the routed-weight epilogue) compiles with nvcc for sm_90a, device code only (-cubin: what NVRTC produces at run time,
 * from the embedded source with the host's #defines), with no register spills or stack frame, and its shared memory
 * (the ring the plan asks for plus the static slot ids) fits an H100 / H200 CTA. Skipped where nvcc is absent.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { expectNoSpills, nvcc, nvccCubin, nvccScratch } from '../../../test/nvcc-compile.js';
import { fusedMoeSource } from './fused-moe.js';
import { MOE_TILES, moeDefines, tileSmemBytes, type MoeDType } from './fused-moe-plan.js';

/** Shared memory a Hopper CTA may opt in to (cudaDevAttrMaxSharedMemoryPerBlockOptin on H100 / H200). */
const HOPPER_SMEM = 227 * 1024;

describe(`fused MoE kernel variants compile with nvcc for sm_90a${nvcc ? '' : ' (SKIPPED: nvcc not on PATH)'}`, () => {
  const dir = nvccScratch('fk-moe-');
  let i = 0;
  for (const tile of MOE_TILES) {
    for (const dtype of ['bf16', 'f16'] as MoeDType[]) {
      for (const mul of [false, true]) {
        const n = i++;
        it.skipIf(!nvcc)(`${tile.name} ${dtype}${mul ? ' +routed weight' : ''}`, () => {
          const label = `${tile.name} ${dtype}`;
          const r = nvccCubin(join(dir, `moe${n}.cu`), fusedMoeSource(moeDefines(tile, dtype, mul)).source, label);
          expectNoSpills(r, label);
          expect(r.registers * 32 * tile.WM * tile.WN).toBeLessThanOrEqual(65536); // one CTA's registers fit an SM
          expect(r.staticSmemBytes + tileSmemBytes(tile)).toBeLessThanOrEqual(HOPPER_SMEM);
        }, 120_000);
      }
    }
  }
});
