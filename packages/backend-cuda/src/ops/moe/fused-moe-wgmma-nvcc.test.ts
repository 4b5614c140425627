/**
 * The builds of kernels/fused_moe_wgmma.cu the route launches (BN 256 / 128 x bf16 / f16) and moe_tile_rows.cu (the
 * gather and the tile map) compile with nvcc for sm_90a, device code only (-cubin: what NVRTC produces at run time,
 * from the embedded source with the host's #defines), with no register spills or stack frame, and the ring the plan
 * asks for fits a Hopper CTA. Skipped where nvcc is absent.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { expectNoSpills, nvcc, nvccCubin, nvccScratch } from '../../../test/nvcc-compile.js';
import { fusedMoeWgmmaSource, moeTileRowsSource } from './fused-moe-wgmma.js';
import { WGMMA_TILES, wgmmaDefines, wgmmaSmemBytes } from './fused-moe-wgmma-plan.js';

/** Shared memory a Hopper CTA may opt in to (cudaDevAttrMaxSharedMemoryPerBlockOptin on H100 / H200). */
const HOPPER_SMEM = 227 * 1024;

describe(`fused MoE wgmma kernel builds compile with nvcc for sm_90a${nvcc ? '' : ' (SKIPPED: nvcc not on PATH)'}`, () => {
  const dir = nvccScratch('fk-moe-wg-');
  let i = 0;
  for (const tile of WGMMA_TILES) {
    for (const dtype of ['bf16', 'f16'] as const) {
      const n = i++;
      it.skipIf(!nvcc)(`BN ${tile.BN} ${dtype}`, () => {
        const label = `fused_moe_wgmma BN ${tile.BN} ${dtype}`;
        const r = nvccCubin(join(dir, `moewg${n}.cu`), fusedMoeWgmmaSource(wgmmaDefines(tile, dtype)).source, label);
        expectNoSpills(r, label);
        expect(r.staticSmemBytes + wgmmaSmemBytes(tile)).toBeLessThanOrEqual(HOPPER_SMEM);
      }, 120_000);
    }
  }
  it.skipIf(!nvcc)('moe_tile_rows.cu (fk_moe_gather_rows, fk_moe_tile_map)', () => {
    const r = nvccCubin(join(dir, 'tile-rows.cu'), moeTileRowsSource('fk_moe_tile_map').source, 'moe_tile_rows');
    expectNoSpills(r, 'moe_tile_rows');
  }, 120_000);
});
