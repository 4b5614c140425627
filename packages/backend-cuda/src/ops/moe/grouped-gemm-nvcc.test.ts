/**
 * Every grouped_gemm variant the launcher can generate (dtype x routing x index type x bias x weight layout), and every
 * mxfp4_grouped_gemm variant (dtype x routing x index type x bias), compiles with nvcc for sm_90a, device code only
 * (-cubin, as NVRTC builds it), with no spills and no stack frame. Skipped where nvcc is absent.
 */
import { join } from 'node:path';
import { describe, it } from 'vitest';
import { expectNoSpills, nvcc, nvccCubin, nvccScratch } from '../../../test/nvcc-compile.js';
import { groupedGemmSource, mxfp4GroupedGemmSource, type GroupedGemmVariant } from './grouped-gemm-source.js';

const variants: GroupedGemmVariant[] = [];
for (const dtype of ['f32', 'f16', 'bf16'] as const)
  for (const routing of ['ids', 'offsets'] as const)
    for (const index of ['i32', 'i64'] as const)
      for (const bias of [false, true])
        for (const layout of ['k-contiguous', 'n-contiguous'] as const) variants.push({ dtype, routing, index, bias, layout });

const compiles = (file: string, source: string, label: string) => expectNoSpills(nvccCubin(file, source, label), label);

describe(`grouped_gemm variants compile with nvcc for sm_90a${nvcc ? '' : ' (SKIPPED: nvcc not on PATH)'}`, () => {
  const dir = nvccScratch('fk-grouped-gemm-');
  // one nvcc run per dtype over its 16 variants keeps the file fast; each variant is a file of its own
  for (const dtype of ['f32', 'f16', 'bf16'] as const) {
    it.skipIf(!nvcc)(`${dtype}: 16 grouped_gemm + 8 mxfp4_grouped_gemm variants, no spills`, () => {
      for (const [n, v] of variants.filter((x) => x.dtype === dtype).entries()) compiles(join(dir, `gg-${dtype}-${n}.cu`), groupedGemmSource(v).source, JSON.stringify(v));
      // the MXFP4 form: the variants without a layout (k-contiguous rows of blocks)
      for (const [n, v] of variants.filter((x) => x.dtype === dtype && x.layout === 'k-contiguous').entries()) {
        compiles(join(dir, `mx-${dtype}-${n}.cu`), mxfp4GroupedGemmSource({ dtype: v.dtype, routing: v.routing, index: v.index, bias: v.bias }).source, `mxfp4 ${JSON.stringify(v)}`);
      }
    }, 300_000);
  }
});
