/**
 * fused_moe_gemm's Hopper prefill route (kernels/fused_moe_wgmma.cu, moe.fusedMoeWgmma on) on the GPU against the
 * float64 CPU op over the same values: Mixtral-8x7B's widths (w13 K 4096 on a slice of its columns, w2 K 14336 with
 * routed weights and an N tail), Qwen3-30B-A3B's (K 2048, N 1536 w13; K 768 w2) on 16 experts (all 128 at 128 rows an
 * expert would take the float64 op minutes), both widths BN 256 / 128, bf16 and f16, moe_align blocks of 128 (the tiles
 * as they are) and of 64 / 16 (packed by fk_moe_tile_map), a non-local expert's zero rows, and a CUDA graph replayed
 * over new routing (blocks of 64: the tile map inside the graph). Each call must take the wgmma route (sm_90a only: skipped elsewhere).
 * Unread experts' weights are NaN and the output starts as NaN, so a wrong expert or an unwritten slot shows.
 */
import { describe, expect, it } from 'vitest';
import { F, type DType } from '@fastkernels/core';
import { G, expectClose, gpu, poison, releasing, tolOf } from '../../../test/spine-helpers.js';
import { checkGraphReplay, fusedMoeCase, type FusedMoeShape } from '../../../test/fused-moe-gpu.js';
import { MIXTRAL, QWEN3 } from '../../../test/moe-routing.js';
import { withTuning } from '../../tuning/load.js';
import { WGMMA_TILES } from './fused-moe-wgmma-plan.js';

interface Case extends Omit<FusedMoeShape, 'bs' | 'allowed'> {
  readonly label: string;
  /** moe_align's block size (default 128) */
  readonly bs?: number;
}

const sm90a = () => gpu().runtime.properties().arch === 'sm_90a';

/** One call on both backends with the route on (test/fused-moe-gpu.ts); `bn` forces the width. */
function check(c: Case, dtype: DType, seed: number, bn: 128 | 256): void {
  releasing((keep) => {
    // every expert but the first and last (zero-token experts exist); at least 128 rows an expert on average
    const { cpuOut, gIn, attrs } = fusedMoeCase(keep, { ...c, bs: c.bs ?? 128 }, dtype, seed);
    const moe = gpu().generatedOps.moe;
    moe.wgmma.forceTile = WGMMA_TILES.find((t) => t.BN === bn);
    try {
      withTuning('moe', { fusedMoeWgmma: true }, () => {
        poison(c.M * c.topK * c.N); // a slot the kernel fails to write reads NaN
        const out = keep(F.fusedMoeGemm(...gIn, attrs));
        expect(moe.lastWgmmaDecline, `${c.label}: the wgmma route`).toBeNull();
        expect(moe.wgmma.lastPlan?.tile.BN).toBe(bn);
        expect(moe.wgmma.lastPlan?.blocksPerTile).toBe((c.bs ?? 128) < 128 ? 128 / c.bs! : 0);
        expectClose(out, cpuOut, tolOf(dtype), `${c.label} ${dtype} BN ${bn}`);
      });
    } finally {
      moe.wgmma.forceTile = undefined;
    }
  });
}

const CASES: Case[] = [
  // 1024 slots over 6 experts: ~170 rows each, blocks of 128 half-padded at each expert's end
  { label: 'Mixtral-8x7B w13 widths (K 4096, 768 of its columns), T 512', M: 512, topK: MIXTRAL.topK, E: MIXTRAL.E, N: 768, K: MIXTRAL.H, mul: false },
  { label: 'Mixtral-8x7B w2 widths (K 14336, N 264: a column tail), 1024 slots, routed weights', M: 1024, topK: 1, E: MIXTRAL.E, N: 264, K: MIXTRAL.I, mul: true },
  { label: 'Qwen3-30B-A3B w13 widths (K 2048, N 1536), 16 experts, T 256, a non-local expert', M: 256, topK: QWEN3.topK, E: 16, N: 2 * QWEN3.I, K: QWEN3.H, mul: false, nonLocal: 5 },
  { label: 'Qwen3-30B-A3B w2 widths (K 768, N 2048), 16 experts, 2048 slots, routed weights', M: 2048, topK: 1, E: 16, N: QWEN3.H, K: QWEN3.I, mul: true },
  // moe_align's blocks smaller than a tile: the engine's prefill alignment (64), and 16
  { label: 'Mixtral-8x7B w13 widths, T 512, blocks of 64', M: 512, topK: MIXTRAL.topK, E: MIXTRAL.E, N: 768, K: MIXTRAL.H, mul: false, bs: 64 },
  { label: 'Qwen3-30B-A3B w13 widths, 16 experts, T 256, blocks of 16, a non-local expert', M: 256, topK: QWEN3.topK, E: 16, N: 2 * QWEN3.I, K: QWEN3.H, mul: true, nonLocal: 9, bs: 16 },
];

describe('fused_moe_gemm on the wgmma route (moe.fusedMoeWgmma) = the float64 CPU op', () => {
  CASES.forEach((c, i) => {
    for (const bn of [256, 128] as const) it(`${c.label} (bf16, BN ${bn})`, G, (ctx) => (sm90a() ? check(c, 'bf16', 700 + 7 * i, bn) : ctx.skip()));
  });
  it(`${CASES[0]!.label} (f16, BN 256)`, G, (ctx) => (sm90a() ? check(CASES[0]!, 'f16', 790, 256) : ctx.skip()));
});

describe('the wgmma route in a CUDA graph', () => {
  it('replays over new routing written into the captured buffers (no host read of the routing)', G, (ctx) => {
    if (!sm90a()) return ctx.skip();
    const shape = { M: 512, topK: 2, E: 8, N: 512, K: 1024, bs: 64, seed: 19, secondAllowed: [0, 3, 7], poolBytes: 64 << 20 };
    withTuning('moe', { fusedMoeWgmma: true }, () =>
      releasing((keep) => checkGraphReplay(keep, shape, () => expect(gpu().generatedOps.moe.lastWgmmaDecline).toBeNull())),
    );
  });
});
