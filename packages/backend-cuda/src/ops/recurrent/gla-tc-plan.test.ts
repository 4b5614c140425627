/**
 * The tensor-core chunk_gla's plans and route without a GPU: the tile at GLA-2.7B's 4096-token prefill (one wave of 80
 * CTAs) and at many sequences, the shared memory the kernel's layout takes, what it declines (and that the CUDA-core
 * kernel then runs), the knob, and the two launches a call makes on a fake sm_90 device: their grids, and the
 * workspaces the prep kernel writes being the ones the walk reads.
 */
import { callOp, opRoute } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { prepAndWalk, recurrentDevice as device } from '../../../test/tc-chunk-checks.js';
import { withTuning } from '../../tuning/load.js';
import { addr } from '../elementwise.js';
import { glaTcDecline, glaTcMainShared, glaTcPrepShared, planGlaTc } from './gla-tc-plan.js';

const GLA = { H: 5, K: 256, V: 512 };

describe('planGlaTc', () => {
  it('GLA-2.7B, one 4096-token sequence: BV 32 (80 CTAs, one wave; BV 16 would be two), 8 warps as 2 x 4, 64 chunk slots', () => {
    const p = planGlaTc({ N: 1, T: 4096, ...GLA, varlen: false }, 132);
    expect([p.bv, p.wm, p.wk, p.threads, p.ks, p.ncMax, p.slots]).toEqual([32, 2, 4, 256, 64, 64, 64]);
    expect(p.mainGrid).toEqual([16, 5, 1]);
    expect(p.prepGrid).toEqual([64, 5, 1]);
    // Qg, Kd hi + lo [64][264] once; two stages of A hi + lo [64][72], v [64][40] (bf16) and the decay [256] (f32);
    // o partials [4][64][36]
    expect(p.mainSharedBytes).toBe(4 * 64 * 264 * 2 + 2 * ((2 * 64 * 72 + 64 * 40) * 2 + 256 * 4) + 4 * 64 * 36 * 4);
    expect(p.mainSharedBytes).toBe(221_184);
    expect(p.prepSharedBytes).toBe(glaTcPrepShared(64));
    expect(p.prepSharedBytes).toBeLessThan(227 * 1024 / 2); // two prep CTAs an SM
  });

  it('no tile fits a wave (64 packed sequences): the widest, BV 64; varlen slots floor(T / 64) + N', () => {
    const p = planGlaTc({ N: 64, T: 8192, ...GLA, varlen: true }, 132);
    expect([p.bv, p.wm, p.wk, p.slots]).toEqual([64, 4, 2, 128 + 64]);
    expect(p.mainSharedBytes).toBe(glaTcMainShared(256, 64, 2));
    expect(p.mainSharedBytes).toBeLessThanOrEqual(227 * 1024);
  });

  it('recurrent.chunkGlaTileColumns forces the tile where V takes it, else the plan stands', () => {
    const s = { N: 1, T: 4096, ...GLA, varlen: false };
    expect(planGlaTc(s, 132, 64).mainGrid).toEqual([8, 5, 1]);
    expect(planGlaTc(s, 132, 16).bv).toBe(16);
    expect(planGlaTc({ ...s, V: 48 }, 132, 32).bv).toBe(16);
    expect(planGlaTc(s, 132, 0).bv).toBe(32);
  });

  it('a small grid takes the narrowest tile; K whose k16 steps do not split eight ways takes fewer warps across K', () => {
    expect(planGlaTc({ N: 1, T: 100, H: 1, K: 256, V: 512, varlen: false }, 132).bv).toBe(16);
    const p = planGlaTc({ N: 1, T: 100, H: 1, K: 48, V: 16, varlen: false }, 132);
    expect([p.bv, p.wk, p.threads, p.ks]).toEqual([16, 1, 32, 16]);
  });

  it('declines, naming why: the knob, pre-Ampere, f32, K not a multiple of 16 or past 256, V not a multiple of 16', () => {
    const base = { dtype: 'bf16', N: 1, T: 4096, ...GLA, smMajor: 9, enabled: true };
    expect(glaTcDecline(base)).toBeNull();
    expect(glaTcDecline({ ...base, dtype: 'f16', smMajor: 8 })).toBeNull();
    expect(glaTcDecline({ ...base, enabled: false })).toMatch(/recurrent.chunkGlaTensorCore is off/);
    expect(glaTcDecline({ ...base, smMajor: 7 })).toMatch(/sm_80/);
    expect(glaTcDecline({ ...base, smMajor: undefined })).toMatch(/unknown/);
    expect(glaTcDecline({ ...base, dtype: 'f32' })).toMatch(/bf16 and f16/);
    expect(glaTcDecline({ ...base, K: 8 })).toMatch(/key head dim 8/);
    expect(glaTcDecline({ ...base, K: 512 })).toMatch(/up to 256/);
    expect(glaTcDecline({ ...base, V: 12 })).toMatch(/value head dim 12/);
  });

  it("declines where the device's shared memory opt-in is below a tile's (A100 163 KiB, sm_86 / sm_89 99 KiB: the launch would throw)", () => {
    const base = { dtype: 'bf16', N: 1, T: 4096, ...GLA, smMajor: 8, enabled: true };
    const sm80 = 163 * 1024;
    expect(glaTcDecline({ ...base, sharedPerBlockOptin: 227 * 1024 })).toBeNull();
    expect(glaTcDecline({ ...base, sharedPerBlockOptin: sm80 })).toMatch(/shared memory: \d+ bytes \(walk\).*allows 166912/);
    // K 128: every tile's walk fits 163 KiB (the widest, BV 64, takes 160768 bytes), not 99 KiB
    expect(glaTcDecline({ ...base, K: 128, V: 128, sharedPerBlockOptin: sm80 })).toBeNull();
    expect(glaTcDecline({ ...base, K: 128, V: 128, sharedPerBlockOptin: 99 * 1024 })).toMatch(/allows 101376/);
    for (const bv of [16, 32, 64]) expect(planGlaTc({ N: 1, T: 4096, H: 1, K: 128, V: 128, varlen: false }, 132, bv).mainSharedBytes).toBeLessThanOrEqual(sm80);
  });
});

describe('the chunk_gla route on a fake sm_90 device', () => {
  it('bf16 at GLA-2.7B heads: the prep launch, then the walk, reading the workspaces the prep wrote', () => {
    const f = device();
    const T = 200;
    const [q, k, g] = [0, 1, 2].map(() => f.t([1, T, 5, 256]));
    const v = f.t([1, T, 5, 512]);
    const ins = [q!, k!, v, g!, null, null, null];
    expect(opRoute('chunk_gla', ins, { output_final_state: true })).toEqual({ via: 'kernel' });
    const [o, fin] = callOp('chunk_gla', ins, { output_final_state: true });
    expect(f.cache.launches.map((l) => l.entry)).toEqual(['fk_gla_chunk_prep', 'fk_gla_chunk_tc']);
    const [prep, walk] = prepAndWalk(f);
    const p = planGlaTc({ N: 1, T, ...GLA, varlen: false }, 132);
    expect([prep.grid, prep.block, walk.grid, walk.block]).toEqual([p.prepGrid, 256, p.mainGrid, p.threads]);
    expect(prep.source).toContain('#define FK_T __nv_bfloat16');
    expect(walk.source).toContain(`#define FK_BV ${p.bv}`);
    const a = prep.args as number[];
    const b = walk.args as number[];
    expect(a.slice(0, 3)).toEqual([addr(q!), addr(k!), addr(g!)]);
    expect(a.slice(13, 17)).toEqual([T, 5, 1, p.ncMax]);
    // Qg, Kd, A, decay: written by the prep, read by the walk
    expect(b.slice(5, 9)).toEqual(a.slice(18, 22));
    expect(new Set(a.slice(18, 22)).size).toBe(4);
    expect([b[0], b[1], b[9], b[11]]).toEqual([addr(o!), addr(v), 0, addr(fin!)]);
  });

  it('f32, a 12-wide value head, or the knob off: the CUDA-core fk_gla_chunk, one launch', () => {
    const run = (dtype: 'f32' | 'bf16', V: number) => {
      const f = device();
      const q = f.t([1, 70, 2, 64], dtype);
      callOp('chunk_gla', [q, f.t([1, 70, 2, 64], dtype), f.t([1, 70, 2, V], dtype), f.t([1, 70, 2, 64], dtype), null, null, null], {});
      return f.cache.launches.map((l) => l.entry);
    };
    expect(run('f32', 64)).toEqual(['fk_gla_chunk']);
    expect(run('bf16', 12)).toEqual(['fk_gla_chunk']);
    expect(run('bf16', 64)).toEqual(['fk_gla_chunk_prep', 'fk_gla_chunk_tc']);
    withTuning('recurrent', { chunkGlaTensorCore: false }, () => expect(run('bf16', 64)).toEqual(['fk_gla_chunk']));
  });

  it("an sm_86 device (99 KiB of shared memory a block) at GLA-2.7B heads: the CUDA-core fk_gla_chunk, not a launch that throws", () => {
    const f = device({ major: 8, sharedPerBlockOptin: 99 * 1024 });
    const T = 70;
    callOp('chunk_gla', [f.t([1, T, 5, 256]), f.t([1, T, 5, 256]), f.t([1, T, 5, 512]), f.t([1, T, 5, 256]), null, null, null], {});
    expect(f.cache.launches.map((l) => l.entry)).toEqual(['fk_gla_chunk']);
  });

  it('packed sequences over a pool: cu_seqlens and the indices reach both launches; slots floor(T / 64) + N', () => {
    const f = device();
    const T = 300;
    const cu = f.t([4], 'i32'); // [0, 100, 100, 300] on a device: the host never reads it
    const idx = f.t([3], 'i64');
    const pool = f.t([4, 2, 64, 64], 'f32');
    callOp('chunk_gla', [f.t([1, T, 2, 64]), f.t([1, T, 2, 64]), f.t([1, T, 2, 64]), f.t([1, T, 2, 64]), pool, cu, idx], {});
    const [prep, walk] = prepAndWalk(f);
    expect(prep.grid).toEqual([Math.floor(T / 64) + 3, 2, 1]);
    expect(walk.source).toContain('#define FK_SI_T long long');
    expect((prep.args as number[])[12]).toBe(addr(cu));
    const b = walk.args as number[];
    expect([b[9], b[10], b[11], b[12], b[13], b[14]]).toEqual([addr(pool), pool.strides[0], addr(pool), pool.strides[0], addr(cu), addr(idx)]);
  });
});
