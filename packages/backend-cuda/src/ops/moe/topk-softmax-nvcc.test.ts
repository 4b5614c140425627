/**
 * kernels/moe_topk_softmax.cu as the launcher specialises it compiles with nvcc for sm_90a, device code only (-cubin:
 * what NVRTC produces at run time), with no register spills or stack frame: the catalog's routers (Mixtral E 8 top-2,
 * gpt-oss E 32 top-4 / E 128 top-4, Qwen3-MoE E 128 top-8, Qwen3-Next E 512 top-10, Kimi-Linear-like E 256 top-8) in
 * f32 / bf16 / f16, and the plan's limits (E 512, k 32). Skipped where nvcc is absent.
 */
import { join } from 'node:path';
import { describe, it } from 'vitest';
import { expectNoSpills, nvcc, nvccCubin, nvccScratch } from '../../../test/nvcc-compile.js';
import { topkSoftmaxSource } from './topk-softmax.js';
import { TOPK_SOFTMAX_MAX_EXPERTS, TOPK_SOFTMAX_MAX_K, planTopkSoftmax } from './topk-softmax-plan.js';

const CASES = [
  { E: 8, k: 2, dtype: 'bf16' },
  { E: 8, k: 2, dtype: 'f32' },
  { E: 32, k: 4, dtype: 'bf16' },
  { E: 128, k: 4, dtype: 'f16' },
  { E: 128, k: 8, dtype: 'bf16' },
  { E: 128, k: 8, dtype: 'f32' },
  { E: 256, k: 8, dtype: 'bf16' },
  { E: 512, k: 10, dtype: 'bf16' },
  { E: TOPK_SOFTMAX_MAX_EXPERTS, k: TOPK_SOFTMAX_MAX_K, dtype: 'f32' },
  { E: 6, k: 6, dtype: 'f16' },
] as const;

describe(`moe_topk_softmax compiles with nvcc for sm_90a${nvcc ? '' : ' (SKIPPED: nvcc not on PATH)'}`, () => {
  const dir = nvccScratch('fk-topk-softmax-');
  CASES.forEach((c, i) => {
    it.skipIf(!nvcc)(`E ${c.E} top-${c.k} ${c.dtype}`, () => {
      const plan = planTopkSoftmax(1, c.E, c.k);
      if (typeof plan === 'string') throw new Error(plan);
      const label = `E ${c.E} k ${c.k} ${c.dtype}`;
      const r = nvccCubin(join(dir, `topk-${i}.cu`), topkSoftmaxSource({ dtype: c.dtype, experts: c.E, k: c.k, lanes: plan.lanes }).source, label);
      expectNoSpills(r, label);
    }, 120_000);
  });
});
