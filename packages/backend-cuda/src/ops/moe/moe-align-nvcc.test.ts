/**
 * kernels/moe_align.cu as the launcher generates it (i32 and i64 topk_ids) compiles with nvcc for sm_90a, device code only
 * (-cubin: what NVRTC produces at run time), with no register spills or stack frame, and 1024 threads' registers fit an
 * SM. Skipped where nvcc is absent.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { expectNoSpills, nvcc, nvccCubin, nvccScratch } from '../../../test/nvcc-compile.js';
import { moeAlignSource } from './moe-align.js';
import { MOE_ALIGN_THREADS } from './moe-align-plan.js';

describe(`moe_align compiles with nvcc for sm_90a${nvcc ? '' : ' (SKIPPED: nvcc not on PATH)'}`, () => {
  const dir = nvccScratch('fk-moe-align-');
  for (const index of ['i32', 'i64'] as const) {
    it.skipIf(!nvcc)(`topk_ids ${index}`, () => {
      const r = nvccCubin(join(dir, `align-${index}.cu`), moeAlignSource(index).source, index);
      expectNoSpills(r, index);
      expect(r.registers * MOE_ALIGN_THREADS).toBeLessThanOrEqual(65536);
    }, 120_000);
  }
});
