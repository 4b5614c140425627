/** Launch planning of the fused MoE GEMM: tiles by rows per expert, the live-blocks bound, grids, declines. */
import { describe, expect, it } from 'vitest';
import { Rng } from '@fastkernels/core';
import { fake } from '../../../test/ops-fake.js';
import { MIXTRAL, QWEN3, alignRouting, moeShape, randomRouting } from '../../../test/moe-routing.js';
import { fusedMoeDecline } from './fused-moe.js';
import { MOE_TILES, chooseTile, liveBlocksBound, planFusedMoe, tileSmemBytes } from './fused-moe-plan.js';

const SMS = 132;

describe('fused MoE plan', () => {
  it('decode (vLLM BLOCK_M 16 x BLOCK_N 64): Qwen3-30B-A3B at T = 1 launches a CTA per hit expert and column tile', () => {
    const w13 = planFusedMoe(moeShape(1, QWEN3.topK, QWEN3.E, 2 * QWEN3.I, QWEN3.H, 16), SMS);
    expect(w13.tile.name).toBe('decode');
    expect([w13.mTiles, w13.nTiles, w13.grid, w13.rowsPerCta]).toEqual([8, 24, 192, 16]); // 8 experts, not 121 blocks
    const w2 = planFusedMoe(moeShape(8, 1, QWEN3.E, QWEN3.H, QWEN3.I, 16), SMS);
    expect([w2.tile.name, w2.grid]).toEqual(['decode', 8 * 32]);
  });

  it("Mixtral's w2 at T = 1 narrows to 32 columns so every SM streams weights; its w13 keeps 64", () => {
    expect(planFusedMoe(moeShape(2, 1, MIXTRAL.E, MIXTRAL.H, MIXTRAL.I, 16), SMS)).toMatchObject({ tile: { name: 'decode-n32' }, grid: 2 * 128 });
    expect(planFusedMoe(moeShape(1, MIXTRAL.topK, MIXTRAL.E, 2 * MIXTRAL.I, MIXTRAL.H, 16), SMS)).toMatchObject({ tile: { name: 'decode' }, grid: 2 * 448 });
  });

  it('tiles grow with the rows per expert, within the alignment block', () => {
    expect(chooseTile(moeShape(48, 2, 8, 4096, 512, 16), SMS).name).toBe('decode-n128'); // 12 rows an expert, BM 16 (bs 16)
    expect(chooseTile(moeShape(32, 2, 8, 4096, 512, 16), SMS).name).toBe('decode'); // 8 rows an expert: vLLM's BLOCK_N 64
    expect(chooseTile(moeShape(4096, 2, 8, 2 * 14336, 4096, 64), SMS).name).toBe('m64'); // bs 64 caps BM
    expect(chooseTile(moeShape(4096, 2, 8, 2 * 14336, 4096, 128), SMS).name).toBe('m128');
    expect(chooseTile(moeShape(256, 1, 8, 512, 512, 64), SMS).name).toBe('m32'); // 32 rows an expert
    expect(chooseTile(moeShape(512, 1, 8, 512, 512, 64), SMS).name).toBe('m64');
    expect(chooseTile(moeShape(512, 1, 8, 512, 512, 4), SMS).name).toMatch(/^decode/); // blocks of 4: one block a CTA
  });

  it('a CTA takes rows of one block: the largest divisor of the block size within the tile', () => {
    const t16 = MOE_TILES.find((t) => t.name === 'decode')!;
    expect(planFusedMoe(moeShape(5, 2, 6, 20, 16, 3), SMS, t16).rowsPerCta).toBe(3);
    expect(planFusedMoe(moeShape(5, 2, 6, 20, 16, 24), SMS, t16).rowsPerCta).toBe(12);
    expect(planFusedMoe(moeShape(5, 2, 6, 20, 16, 64), SMS, t16)).toMatchObject({ rowsPerCta: 16, blockSize: 64 });
    const m64 = MOE_TILES.find((t) => t.name === 'm64')!;
    expect(planFusedMoe(moeShape(100, 2, 4, 64, 64, 128), SMS, m64).rowsPerCta).toBe(64);
  });

  it('the live-blocks bound holds for every moe_align layout, and is reached', () => {
    const rng = new Rng(7);
    for (let trial = 0; trial < 200; trial++) {
      const E = rng.int(1, 40), topK = rng.int(1, Math.min(E, 8) + 1), M = rng.int(1, 60), bs = [1, 3, 4, 16, 64][rng.int(0, 5)]!;
      const a = alignRouting(randomRouting(rng, M, E, topK, Array.from({ length: E }, (_, i) => i)), E, bs);
      const s = moeShape(M, topK, E, 8, 8, bs);
      expect(a.sorted.length).toBe(s.P);
      const bound = liveBlocksBound(M * topK, E, bs, s.NB);
      expect(a.post / bs).toBeLessThanOrEqual(bound);
      // and the plan's row tiles cover them
      const p = planFusedMoe(s, SMS);
      expect(p.mTiles * p.rowsPerCta).toBeGreaterThanOrEqual(a.post);
    }
    // every expert hit with 1 + a multiple of bs slots: the bound is tight
    const ids = [0, 1, 2, 2, 2, 2, 2];
    const a = alignRouting(ids, 3, 4);
    expect(a.post / 4).toBe(liveBlocksBound(ids.length, 3, 4, Math.ceil((7 + 3 * 3) / 4)));
  });

  it('every tile fits a Hopper CTA, and the grid is empty when nothing is routed', () => {
    for (const t of MOE_TILES) {
      expect(tileSmemBytes(t)).toBeLessThanOrEqual(227 * 1024 - 1024);
      expect(t.BM % (16 * t.WM) + t.BN % (16 * t.WN)).toBe(0);
    }
    expect(planFusedMoe({ M: 0, topK: 2, E: 8, N: 64, K: 64, P: 0, NB: 0 }, SMS).grid).toBe(0);
  });

  it('declines f32, K not a multiple of 8 and unaligned weight rows, with the reason', () => {
    const f = fake();
    const plan = () => planFusedMoe(moeShape(4, 2, 8, 64, 64, 16), SMS);
    const s = moeShape(4, 2, 8, 64, 64, 16);
    expect(fusedMoeDecline(f.t([4, 64], 'f32'), f.t([8, 64, 64], 'f32'), s, plan)).toMatch(/dtype f32: the tensor-core kernel takes bf16 and f16/);
    expect(fusedMoeDecline(f.t([4, 60]), f.t([8, 64, 60]), { ...s, K: 60 }, plan)).toMatch(/K = 60 is not a multiple of 8/);
    const w = f.t([8, 64, 72]);
    const cut = w.narrow(2, 1, 64); // rows start 2 bytes in
    expect(fusedMoeDecline(f.t([4, 64]), cut, s, plan)).toMatch(/weight rows are not contiguous and 16-byte aligned/);
    expect(fusedMoeDecline(f.t([4, 64]), w.narrow(2, 8, 64), s, plan)).toBeNull(); // 16 bytes in: read in place
  });
});
