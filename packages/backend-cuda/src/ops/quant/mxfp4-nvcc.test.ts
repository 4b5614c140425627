/** mxfp4_dequant's generated kernel, per output dtype, compiles with nvcc for sm_90a with no spills and no stack frame. Skipped where nvcc is absent. */
import { join } from 'node:path';
import { describe, it } from 'vitest';
import { expectNoSpills, nvcc, nvccCubin, nvccScratch } from '../../../test/nvcc-compile.js';
import { mxfp4DequantSource } from './mxfp4-source.js';

describe(`mxfp4_dequant compiles with nvcc for sm_90a${nvcc ? '' : ' (SKIPPED: nvcc not on PATH)'}`, () => {
  const dir = nvccScratch('fk-mxfp4-');
  for (const dtype of ['f32', 'f16', 'bf16'] as const) {
    it.skipIf(!nvcc)(`to ${dtype}`, () => {
      expectNoSpills(nvccCubin(join(dir, `mxfp4-${dtype}.cu`), mxfp4DequantSource(dtype).source, dtype), dtype);
    }, 120_000);
  }
});
