/**
 * Every variant of kernels/fused_moe.cu the planner can launch (each tile configuration x bf16 / f16 x with and without
 * the routed-weight epilogue) compiles with nvcc for sm_90a, device code only (-cubin: what NVRTC produces at run time,
 * from the embedded source with the host's #defines), with no register spills or stack frame, and its shared memory
 * (the ring the plan asks for plus the static slot ids) fits an H100 / H200 CTA. Skipped where nvcc is absent.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { fusedMoeSource } from './fused-moe.js';
import { MOE_TILES, moeDefines, tileSmemBytes, type MoeDType } from './fused-moe-plan.js';

function hasNvcc(): boolean {
  try {
    execFileSync('nvcc', ['--version'], { stdio: 'pipe' });
    return true;
  } catch {
    return false;
  }
}
const nvcc = hasNvcc();
/** Shared memory a Hopper CTA may opt in to (cudaDevAttrMaxSharedMemoryPerBlockOptin on H100 / H200). */
const HOPPER_SMEM = 227 * 1024;

describe(`fused MoE kernel variants compile with nvcc for sm_90a${nvcc ? '' : ' (SKIPPED: nvcc not on PATH)'}`, () => {
  const dir = nvcc ? mkdtempSync(join(tmpdir(), 'fk-moe-')) : '';
  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });
  let i = 0;
  for (const tile of MOE_TILES) {
    for (const dtype of ['bf16', 'f16'] as MoeDType[]) {
      for (const mul of [false, true]) {
        const n = i++;
        it.skipIf(!nvcc)(`${tile.name} ${dtype}${mul ? ' +routed weight' : ''}`, () => {
          const g = fusedMoeSource(moeDefines(tile, dtype, mul));
          const file = join(dir, `moe${n}.cu`);
          writeFileSync(file, g.source);
          // ptxas -v reports registers, stack, spills and static shared memory on stderr
          const r = spawnSync('nvcc', ['-cubin', '-std=c++17', '-arch=sm_90a', '-Xptxas', '-v', file, '-o', join(dir, `moe${n}.cubin`)], { encoding: 'utf8' });
          if (r.status !== 0) throw new Error(`nvcc failed for ${tile.name} ${dtype}:\n${r.stderr}`);
          const log = `${r.stdout}${r.stderr}`;
          expect(log).toMatch(/Used \d+ registers/);
          expect(log).not.toMatch(/[1-9]\d* bytes spill/);
          expect(log).not.toMatch(/[1-9]\d* bytes stack frame/);
          const regs = Number(/Used (\d+) registers/.exec(log)![1]);
          expect(regs * 32 * tile.WM * tile.WN).toBeLessThanOrEqual(65536); // one CTA's registers fit an SM
          const staticSmem = Number(/(\d+) bytes smem/.exec(log)?.[1] ?? 0);
          expect(staticSmem + tileSmemBytes(tile)).toBeLessThanOrEqual(HOPPER_SMEM);
        }, 120_000);
      }
    }
  }
});
