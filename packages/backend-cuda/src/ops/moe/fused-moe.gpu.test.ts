/**
 * fused_moe_gemm on the GPU (kernels/fused_moe.cu) against the float64 CPU op over the same values: every tile
 * configuration forced (bf16 and f16, top-k 1 / 2 / 8, K / N tails, blocks smaller than a tile, zero-token experts, a
 * non-local expert's -1 blocks), the planner's own choice at production widths (Qwen3-30B-A3B and Mixtral-8x7B decode,
 * prefill-like blocks of 64 and 128), a CUDA graph replayed over new routing written into the same device buffers, and
 * L2/fused_experts end to end on CUDA. Unread experts' weights are NaN, so a block that reads the wrong expert shows.
 */
import { describe, expect, it } from 'vitest';
import { F, ModuleRegistry, Rng, Tensor, opRoute, type DType } from '@fastkernels/core';
import { baselineRegistry } from '@fastkernels/model-zoo';
import { G, checkTaskOnCuda, cpu, expectClose, gpu, intsCpu, poison, randCpu, releasing, task, toGpu, tolOf, variant } from '../../../test/spine-helpers.js';
import { alignRouting, randomRouting, withNonLocal, type Alignment } from '../../../test/moe-routing.js';
import { MOE_TILES } from './fused-moe-plan.js';

interface Case {
  readonly label: string;
  readonly M: number;
  readonly topK: number;
  readonly E: number;
  readonly N: number;
  readonly K: number;
  readonly bs: number;
  readonly mul: boolean;
  /** Force this tile (else the planner's choice, checked against `expect`). */
  readonly tile?: string;
  readonly expect?: string;
  readonly nonLocal?: number;
  /** Route only to these experts (the planner never reads the routing; fewer hit experts draw fewer host weights). */
  readonly allowed?: readonly number[];
}

/** One call on both backends. The GPU weight holds every expert (NaN where unread); the CPU one only the hit experts. */
function check(c: Case, dtype: DType, seed: number): void {
  releasing((keep) => {
    const rng = new Rng(seed);
    const ids = randomRouting(rng, c.M, c.E, c.topK, c.allowed);
    let al: Alignment = alignRouting(ids, c.E, c.bs);
    if (c.nonLocal !== undefined) al = withNonLocal(al, c.nonLocal);
    const hit = [...new Set(al.experts.filter((e) => e >= 0))].sort((a, b) => a - b);
    const compact = new Map(hit.map((e, i) => [e, i] as const));
    const x = keep(randCpu([c.M, c.K], dtype, seed + 1));
    const wHit = keep(randCpu([Math.max(1, hit.length), c.N, c.K], dtype, seed + 2, 1 / Math.sqrt(c.K)));
    const tw = keep(Tensor.fromArray(cpu(), Array.from({ length: c.M * c.topK }, () => 0.1 + rng.uniform()), [c.M, c.topK], 'f32'));
    const ints = (v: number[]) => keep(intsCpu(v, [v.length], 'i32'));
    const cpuOut = keep(
      F.fusedMoeGemm(x, wHit, tw, ints(al.sorted), ints(al.experts.map((e) => (e < 0 ? -1 : compact.get(e)!))), ints([al.post]), { top_k: c.topK, mul_routed_weight: c.mul }),
    );

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
    moe.forceTile = c.tile ? MOE_TILES.find((t) => t.name === c.tile) : undefined;
    try {
      expect(opRoute('fused_moe_gemm', [...gIn], { top_k: c.topK, mul_routed_weight: c.mul }), `${c.label}: route`).toEqual({ via: 'kernel' });
      poison(c.M * c.topK * c.N); // a slot the kernel fails to write reads NaN
      const out = keep(F.fusedMoeGemm(...gIn, { top_k: c.topK, mul_routed_weight: c.mul }));
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

const QWEN3 = { E: 128, topK: 8, H: 2048, I: 768 };
const MIXTRAL = { E: 8, H: 4096, I: 14336 };
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
    releasing((keep) => {
      const [M, topK, E, N, K, bs] = [6, 2, 16, 128, 256, 16];
      const rng = new Rng(9);
      const x = keep(randCpu([M, K], 'bf16', 3));
      const w = keep(randCpu([E, N, K], 'bf16', 4, 1 / Math.sqrt(K)));
      const tw = keep(Tensor.fromArray(cpu(), Array.from({ length: M * topK }, () => rng.uniform()), [M, topK], 'f32'));
      const route = (ids: number[]) => {
        const a = alignRouting(ids, E, bs);
        return [a.sorted, a.experts, [a.post]].map((v) => keep(intsCpu(v, [v.length], 'i32')));
      };
      const first = route(randomRouting(rng, M, E, topK));
      const second = route(randomRouting(rng, M, E, topK, [0, 5, 15]));
      const gIn = [keep(toGpu(x)), keep(toGpu(w)), keep(toGpu(tw)), ...first.map((t) => keep(toGpu(t)))];
      const attrs = { top_k: topK, mul_routed_weight: true };
      keep(F.fusedMoeGemm(...(gIn as [Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]), attrs)); // compiles before the capture
      const rt = gpu().runtime;
      let out: Tensor | undefined;
      const graph = rt.capture(() => {
        out = F.fusedMoeGemm(...(gIn as [Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]), attrs);
      }, { poolBytes: 8 << 20 });
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
