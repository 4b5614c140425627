/**
 * fused_moe_gemm on the GPU (kernels/fused_moe.cu) against the float64 CPU op over the same values: every tile
 * configuration forced (bf16 and f16, top-k 1 / 2 / 8, K / N tails, blocks smaller than a tile, zero-token experts, a
 * non-local expert's -1 blocks), the planner's own choice at production widths (Qwen3-30B-A3B and Mixtral-8x7B decode,
 * prefill-like blocks of 64 and 128), a CUDA graph replayed over new routing written into the same device buffers, and
 * L2/fused_experts end to end on CUDA. Unread experts' weights are NaN, so a block that reads the wrong expert shows.
 */
import { describe, expect, it } from 'vitest';
import { F, ModuleRegistry, opRoute, type DType } from '@fastkernels/core';
import { baselineRegistry } from '@fastkernels/model-zoo';
import { G, checkTaskOnCuda, expectClose, gpu, intsCpu, poison, randCpu, releasing, task, toGpu, tolOf, variant } from '../../../test/spine-helpers.js';
import { QWEN3, MIXTRAL, alignRouting } from '../../../test/moe-routing.js';
import { checkGraphReplay, fusedMoeCase, type FusedMoeShape } from '../../../test/fused-moe-gpu.js';
import { MOE_TILES } from './fused-moe-plan.js';

interface Case extends FusedMoeShape {
  readonly label: string;
  /** Force this tile (else the planner's choice, checked against `expect`). */
  readonly tile?: string;
  readonly expect?: string;
}

/** One call on both backends (test/fused-moe-gpu.ts: the GPU weight holds every expert, NaN where unread). */
function check(c: Case, dtype: DType, seed: number): void {
  releasing((keep) => {
    const { cpuOut, gIn, attrs } = fusedMoeCase(keep, c, dtype, seed);
    const moe = gpu().generatedOps.moe;
    moe.forceTile = c.tile ? MOE_TILES.find((t) => t.name === c.tile) : undefined;
    try {
      expect(opRoute('fused_moe_gemm', [...gIn], attrs), `${c.label}: route`).toEqual({ via: 'kernel' });
      poison(c.M * c.topK * c.N); // a slot the kernel fails to write reads NaN
      const out = keep(F.fusedMoeGemm(...gIn, attrs));
      const want = c.tile ?? c.expect;
      if (want) expect(moe.lastPlan?.tile.name, `${c.label}: tile`).toBe(want);
      expectClose(out, cpuOut, tolOf(dtype), `${c.label} ${dtype}`);
    } finally {
      moe.forceTile = undefined;
    }
  });
}

const FORCED: Case[] = [];
for (const t of MOE_TILES) {
  const bs = Math.max(16, t.BM);
  FORCED.push(
    { label: `${t.name}: top-8 of 32, K and N tails`, tile: t.name, M: 23, topK: 8, E: 32, N: 200, K: 136, bs, mul: false },
    { label: `${t.name}: top-2 of 8, routed weights, a non-local expert`, tile: t.name, M: 150, topK: 2, E: 8, N: 96, K: 520, bs, mul: true, nonLocal: 3 },
    { label: `${t.name}: top-1, blocks of 4, odd N`, tile: t.name, M: 41, topK: 1, E: 6, N: 77, K: 64, bs: 4, mul: true },
  );
}

const PRODUCTION: Case[] = [
  { label: 'Qwen3-30B-A3B w13, T = 1', M: 1, topK: QWEN3.topK, E: QWEN3.E, N: 2 * QWEN3.I, K: QWEN3.H, bs: 16, mul: false, expect: 'decode' },
  // 10 of the 128 experts: all 128 hit would draw 400M float64 weight values on the host (185 s on the GPU host)
  { label: 'Qwen3-30B-A3B w13, T = 16 (10 experts hit)', M: 16, topK: QWEN3.topK, E: QWEN3.E, N: 2 * QWEN3.I, K: QWEN3.H, bs: 16, mul: false, allowed: [2, 11, 23, 40, 57, 64, 88, 101, 115, 127] },
  { label: 'Qwen3-30B-A3B w2, T = 1', M: 8, topK: 1, E: QWEN3.E, N: QWEN3.H, K: QWEN3.I, bs: 16, mul: true, expect: 'decode' },
  { label: 'Mixtral-8x7B w2, T = 1', M: 2, topK: 1, E: MIXTRAL.E, N: MIXTRAL.H, K: MIXTRAL.I, bs: 16, mul: true, expect: 'decode-n32' },
  { label: 'prefill-like, blocks of 64 (Qwen3 widths, 8 experts)', M: 256, topK: 2, E: 8, N: 2 * QWEN3.I, K: QWEN3.H, bs: 64, mul: false, expect: 'm64' },
  { label: 'prefill-like, blocks of 128', M: 512, topK: 2, E: 8, N: 512, K: 1024, bs: 128, mul: true, expect: 'm128' },
];

describe('fused_moe_gemm on CUDA = the float64 CPU op', () => {
  FORCED.forEach((c, i) => {
    for (const dtype of ['bf16', 'f16'] as DType[]) it(`${c.label} (${dtype})`, G, () => check(c, dtype, 100 + 7 * i));
  });
  PRODUCTION.forEach((c, i) => it(`${c.label} (bf16): planned tile`, G, () => check(c, 'bf16', 500 + i)));

  it('f32 and misaligned weights decline to the decomposition', G, () => {
    releasing((keep) => {
      const al = alignRouting([1, 2], 4, 4);
      const r = [al.sorted, al.experts, [al.post]].map((v) => keep(toGpu(keep(intsCpu(v, [v.length], 'i32')))));
      const x = keep(toGpu(keep(randCpu([2, 16], 'f32', 1))));
      const w = keep(toGpu(keep(randCpu([4, 8, 16], 'f32', 2))));
      expect(opRoute('fused_moe_gemm', [x, w, null, ...r], { top_k: 1 })).toMatchObject({ via: 'decomposition' });
    });
  });
});

describe('fused_moe_gemm in a CUDA graph', () => {
  it('replays over new routing written into the captured buffers (no host read of the routing)', G, () => {
    releasing((keep) => checkGraphReplay(keep, { M: 6, topK: 2, E: 16, N: 128, K: 256, bs: 16, seed: 9, secondAllowed: [0, 5, 15], poolBytes: 8 << 20 }));
  });
});

describe('L2/fused_experts on CUDA (moe_align, the fused GEMMs, silu_and_mul, moe_sum) = its float64 reference', () => {
  const registry: ModuleRegistry = baselineRegistry();
  const t = task('L2/fused_experts');
  const base = t.cases.ci[0]!;
  const cases = [
    ...t.cases.ci.filter((c) => c.dtype !== 'f32'),
    variant(base, 'top8-of-64-decode-bf16', { dtype: 'bf16', dims: { T: 1, H: 512, I: 384, GU: 768, E: 64, K: 8 }, init: [64, 8, 'silu', 16] }),
    variant(base, 'top8-of-64-T16-f16', { dtype: 'f16', dims: { T: 16, H: 512, I: 384, GU: 768, E: 64, K: 8 }, init: [64, 8, 'silu', 16] }),
    variant(base, 'top2-of-8-T200-blocks64-bf16', { dtype: 'bf16', dims: { T: 200, H: 256, I: 512, GU: 1024, E: 8, K: 2 }, init: [8, 2, 'silu', 64] }),
    variant(base, 'top1-of-4-bf16', { dtype: 'bf16', dims: { T: 9, H: 128, I: 64, GU: 128, E: 4, K: 1 }, init: [4, 1, 'silu', 16] }),
  ];
  for (const c of cases) it(`${c.name} (${c.dtype})`, G, () => checkTaskOnCuda(t, c, 21, registry));
});
