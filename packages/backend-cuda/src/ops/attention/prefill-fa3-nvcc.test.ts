/**
 * fk_varlen_prefill_fa3 as the FA3 route builds it (the embedded attention_fa3.cu, headers inlined as NVRTC gets it,
 * with the route's -DFK_T / -DFK_D) compiles with nvcc for sm_90a at every production specialisation: bf16 and f16, head
 * dims 64 and 128, no register spills, the kernel's body really compiled (it sits under __CUDA_ARCH_FEAT_SM90_ALL: an
 * empty body would use a handful of registers), and the kernel's shared-memory size, tile and thread counts equal to
 * what the host side launches with (prefill-fa3.ts). Skipped, saying so, where nvcc is absent.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { expectNoSpills, nvcc, nvccCubin, nvccScratch } from '../../../test/nvcc-compile.js';
import { KERNEL_SOURCES } from '../../kernel-sources.generated.js';
import { FA3_BLOCK_M, FA3_BLOCK_N, FA3_THREADS, fa3SharedBytes } from './prefill-fa3.js';

const dir = nvccScratch('fk-fa3-nvcc-');
const CTYPES = { bf16: '__nv_bfloat16', f16: '__half' } as const;

describe.skipIf(!nvcc)('attention_fa3.cu through nvcc with the FA3 route defines (sm_90a)', () => {
  for (const dtype of ['bf16', 'f16'] as const) {
    for (const D of [64, 128]) {
      const label = `FK_T=${CTYPES[dtype]} FK_D=${D}`;
      it(label, { timeout: 180_000 }, () => {
        const source = [
          `#define FK_T ${CTYPES[dtype]}`,
          `#define FK_D ${D}`,
          KERNEL_SOURCES['attention_fa3.cu']!,
          `static_assert(fkfa3::FA3_SMEM_BYTES == ${fa3SharedBytes(D)}u, "fa3SharedBytes (prefill-fa3.ts)");`,
          `static_assert(fkfa3::BM == ${FA3_BLOCK_M} && fkfa3::BN == ${FA3_BLOCK_N} && fkfa3::THREADS == ${FA3_THREADS}, "FA3 tile / thread constants (prefill-fa3.ts)");`,
          `static_assert(sizeof(FkTensorMap) == 128 && alignof(FkTensorMap) == 64, "TENSOR_MAP_ARG (args.ts)");`,
          '',
        ].join('\n');
        const r = nvccCubin(join(dir, `fa3_${dtype}_${D}.cu`), source, label);
        console.log(`${label}: ${r.registers} registers, stack ${r.stackBytes}, spill stores ${r.spillStoreBytes}`);
        expectNoSpills(r, label);
        expect(r.registers, `${label}: the body compiled (registers)`).toBeGreaterThanOrEqual(128);
      });
    }
  }
});

describe.skipIf(nvcc)('attention_fa3.cu through nvcc', () => {
  it('skipped: nvcc not found on PATH', () => {});
});
