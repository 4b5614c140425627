/**
 * fk_varlen_prefill_fa3 as the FA3 route builds it (the embedded attention_fa3.cu, headers inlined as NVRTC gets it,
 * with the route's defines, fa3Defines) compiles with nvcc for sm_90a at every production specialisation: bf16 and f16,
 * head dims 64 and 128, without and with sinks (FK_SINKS=1, gpt-oss), no register spills, the kernel's body really compiled (it sits under __CUDA_ARCH_FEAT_SM90_ALL: an
 * empty body would use a handful of registers), and the kernel's shared-memory size, tile and thread counts equal to
 * what the host side launches with (prefill-fa3.ts). Skipped, saying so, where nvcc is absent.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { expectNoSpills, nvcc, nvccCubin, nvccScratch } from '../../../test/nvcc-compile.js';
import { KERNEL_SOURCES } from '../../kernel-sources.generated.js';
import { FA3_BLOCK_M, FA3_BLOCK_N, FA3_THREADS, fa3Defines, fa3SharedBytes } from './prefill-fa3.js';

const dir = nvccScratch('fk-fa3-nvcc-');

describe.skipIf(!nvcc)('attention_fa3.cu through nvcc with the FA3 route defines (sm_90a)', () => {
  const builds = [false, true].flatMap((sinks) => (['bf16', 'f16'] as const).flatMap((dtype) => [64, 128].map((D) => ({ sinks, dtype, D }))));
  for (const { sinks, dtype, D } of builds) {
    // the route's -DNAME=VALUE options as #defines ahead of the source
    const defines = fa3Defines(dtype, D, sinks).map((o) => o.slice(2).split('=') as [string, string]);
    const label = defines.map(([n, v]) => `${n}=${v}`).join(' ');
    it(label, { timeout: 180_000 }, () => {
      const source = [
        ...defines.map(([n, v]) => `#define ${n} ${v}`),
        KERNEL_SOURCES['attention_fa3.cu']!,
        `static_assert(fkfa3::FA3_SMEM_BYTES == ${fa3SharedBytes(D)}u, "fa3SharedBytes (prefill-fa3.ts)");`,
        `static_assert(fkfa3::BM == ${FA3_BLOCK_M} && fkfa3::BN == ${FA3_BLOCK_N} && fkfa3::THREADS == ${FA3_THREADS}, "FA3 tile / thread constants (prefill-fa3.ts)");`,
        `static_assert(sizeof(FkTensorMap) == 128 && alignof(FkTensorMap) == 64, "TENSOR_MAP_ARG (args.ts)");`,
        '',
      ].join('\n');
      const r = nvccCubin(join(dir, `fa3_${dtype}_${D}${sinks ? '_sinks' : ''}.cu`), source, label);
      console.log(`${label}: ${r.registers} registers, stack ${r.stackBytes}, spill stores ${r.spillStoreBytes}`);
      expectNoSpills(r, label);
      expect(r.registers, `${label}: the body compiled (registers)`).toBeGreaterThanOrEqual(128);
    });
  }
});

describe.skipIf(nvcc)('attention_fa3.cu through nvcc', () => {
  it('skipped: nvcc not found on PATH', () => {});
});
