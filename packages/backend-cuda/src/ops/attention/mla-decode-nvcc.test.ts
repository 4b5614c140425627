/**
 * fk_paged_mla_decode as the route builds it (the embedded attention_mla_decode.cu, headers inlined as NVRTC gets it,
 * with mlaDecodeDefines) compiles with nvcc for sm_90a at the specialisations the route and the GPU tests launch:
 * Kimi-Linear-48B's rows (D 576, the routed value 576 and the 512 the kernel also takes, 32 heads a CTA and 16), bf16
 * and f16, and the tiny config's 20-wide rows (8-byte chunks); no register spills, no stack, and the kernel's shared
 * memory equal to what the plan launches with (mlaSharedBytes). Skipped, saying so, where nvcc is absent.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { expectNoSpills, nvcc, nvccCubin, nvccScratch } from '../../../test/nvcc-compile.js';
import { KERNEL_SOURCES } from '../../kernel-sources.generated.js';
import { mlaDecodeDefines } from './mla-decode.js';
import { mlaSharedBytes, planMlaDecode } from './mla-decode-plan.js';

const dir = nvccScratch('fk-mla-nvcc-');

interface Build {
  readonly dtype: 'bf16' | 'f16';
  readonly D: number;
  readonly DV: number;
  readonly qHeads: number;
  readonly blockSize: number;
  readonly chunkBytes: number;
}

const BUILDS: Build[] = [
  ...(['bf16', 'f16'] as const).flatMap((dtype) => [576, 512].map((DV) => ({ dtype, D: 576, DV, qHeads: 32, blockSize: 16, chunkBytes: 16 }))),
  { dtype: 'bf16', D: 576, DV: 576, qHeads: 16, blockSize: 64, chunkBytes: 16 },
  { dtype: 'bf16', D: 20, DV: 20, qHeads: 4, blockSize: 16, chunkBytes: 8 },
];

describe.skipIf(!nvcc)('attention_mla_decode.cu through nvcc with the route defines (sm_90a)', () => {
  for (const b of BUILDS) {
    const plan = planMlaDecode({ batch: 1, qHeads: b.qHeads, headDim: b.D, blockSize: b.blockSize, maxBlocks: 256, multiprocessors: 132, sharedPerBlockOptin: 227 * 1024 })!;
    const defines = mlaDecodeDefines(b.dtype, b.D, b.DV, plan, b.blockSize, b.chunkBytes).map((o) => o.slice(2).split('=') as [string, string]);
    const label = defines.map(([n, v]) => `${n}=${v}`).join(' ');
    it(label, { timeout: 180_000 }, () => {
      const source = [
        ...defines.map(([n, v]) => `#define ${n} ${v}`),
        KERNEL_SOURCES['attention_mla_decode.cu']!,
        `static_assert(fkmla::SMEM_BYTES == ${mlaSharedBytes(b.D, plan.headTiles, plan.stages)}, "mlaSharedBytes (mla-decode-plan.ts)");`,
        '',
      ].join('\n');
      const r = nvccCubin(join(dir, `mla_${b.dtype}_${b.D}_${b.DV}_${b.qHeads}.cu`), source, label);
      console.log(`${label}: ${r.registers} registers, stack ${r.stackBytes}, spill stores ${r.spillStoreBytes}, shared ${plan.sharedBytes} bytes`);
      expectNoSpills(r, label);
      expect(r.registers, `${label}: one 256-thread CTA an SM fits the register file`).toBeLessThanOrEqual(255);
    });
  }
});

describe.skipIf(nvcc)('attention_mla_decode.cu through nvcc', () => {
  it('skipped: nvcc not found on PATH', () => {});
});
