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
import { F, Rng, Tensor, type DType } from '@fastkernels/core';
import { G, cpu, expectClose, gpu, intsCpu, poison, randCpu, releasing, toGpu, tolOf } from '../../../test/spine-helpers.js';
import { alignRouting, randomRouting, withNonLocal, type Alignment } from '../../../test/moe-routing.js';
import { withTuning } from '../../tuning/load.js';
import { WGMMA_TILES } from './fused-moe-wgmma-plan.js';

interface Case {
  readonly label: string;
  readonly M: number;
  readonly topK: number;
  readonly E: number;
  readonly N: number;
  readonly K: number;
  readonly mul: boolean;
  readonly nonLocal?: number;
  /** moe_align's block size (default 128) */
  readonly bs?: number;
}

const sm90a = () => gpu().runtime.properties().arch === 'sm_90a';

/** One call on both backends with the route on; `bn` forces the width. */
function check(c: Case, dtype: DType, seed: number, bn: 128 | 256): void {
  releasing((keep) => {
    const rng = new Rng(seed);
    // every expert but the first and last (zero-token experts exist); at least 128 rows an expert on average
    let al: Alignment = alignRouting(randomRouting(rng, c.M, c.E, c.topK), c.E, c.bs ?? 128);
    if (c.nonLocal !== undefined) al = withNonLocal(al, c.nonLocal);
    const hit = [...new Set(al.experts.filter((e) => e >= 0))].sort((a, b) => a - b);
    const compact = new Map(hit.map((e, i) => [e, i] as const));
    const x = keep(randCpu([c.M, c.K], dtype, seed + 1));
    const wHit = keep(randCpu([Math.max(1, hit.length), c.N, c.K], dtype, seed + 2, 1 / Math.sqrt(c.K)));
    const tw = keep(Tensor.fromArray(cpu(), Array.from({ length: c.M * c.topK }, () => 0.1 + rng.uniform()), [c.M, c.topK], 'f32'));
    const ints = (v: number[]) => keep(intsCpu(v, [v.length], 'i32'));
    const attrs = { top_k: c.topK, mul_routed_weight: c.mul };
    const cpuOut = keep(F.fusedMoeGemm(x, wHit, tw, ints(al.sorted), ints(al.experts.map((e) => (e < 0 ? -1 : compact.get(e)!))), ints([al.post]), attrs));

    const wGpu = keep(Tensor.empty(gpu(), [c.E, c.N, c.K], dtype));
    wGpu.fill_(NaN);
    const wHitGpu = keep(toGpu(wHit));
    hit.forEach((e, i) => {
      const [dst, src] = [wGpu.select(0, e), wHitGpu.select(0, i)];
      dst.copy_(src);
      dst.dispose();
      src.dispose();
    });
    const gIn = [keep(toGpu(x)), wGpu, keep(toGpu(tw)), keep(toGpu(ints(al.sorted))), keep(toGpu(ints(al.experts))), keep(toGpu(ints([al.post])))] as const;
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

const MIXTRAL = { E: 8, topK: 2, H: 4096, I: 14336 };
const QWEN3 = { topK: 8, H: 2048, I: 768 };
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
    releasing((keep) => {
      const [M, topK, E, N, K, bs] = [512, 2, 8, 512, 1024, 64];
      const rng = new Rng(19);
      const x = keep(randCpu([M, K], 'bf16', 3));
      const w = keep(randCpu([E, N, K], 'bf16', 4, 1 / Math.sqrt(K)));
      const tw = keep(Tensor.fromArray(cpu(), Array.from({ length: M * topK }, () => rng.uniform()), [M, topK], 'f32'));
      const route = (ids: number[]) => {
        const a = alignRouting(ids, E, bs);
        return [a.sorted, a.experts, [a.post]].map((v) => keep(intsCpu(v, [v.length], 'i32')));
      };
      const first = route(randomRouting(rng, M, E, topK));
      const second = route(randomRouting(rng, M, E, topK, [0, 3, 7]));
      const gIn = [keep(toGpu(x)), keep(toGpu(w)), keep(toGpu(tw)), ...first.map((t) => keep(toGpu(t)))] as [Tensor, Tensor, Tensor, Tensor, Tensor, Tensor];
      const attrs = { top_k: topK, mul_routed_weight: true };
      withTuning('moe', { fusedMoeWgmma: true }, () => {
        keep(F.fusedMoeGemm(...gIn, attrs)); // compiles before the capture
        expect(gpu().generatedOps.moe.lastWgmmaDecline).toBeNull();
        const rt = gpu().runtime;
        let out: Tensor | undefined;
        const graph = rt.capture(() => {
          out = F.fusedMoeGemm(...gIn, attrs);
        }, { poolBytes: 64 << 20 });
        try {
          for (const routing of [second, first]) {
            routing.forEach((t, i) => gIn[3 + i]!.copy_(keep(toGpu(t))));
            graph.replay();
            const want = keep(F.fusedMoeGemm(x, w, tw, routing[0]!, routing[1]!, routing[2]!, attrs));
            expectClose(out!, want, tolOf('bf16'), 'graph replay');
          }
        } finally {
          out?.dispose();
          graph.destroy();
        }
      });
    });
  });
});
