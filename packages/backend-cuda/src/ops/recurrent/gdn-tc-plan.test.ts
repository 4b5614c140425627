/**
 * The tensor-core chunk_gated_delta_rule's plans and route without a GPU: the tile at Qwen3-Next's 4096-token prefill
 * (one wave of 128 CTAs) and at many sequences, the shared memory the kernel's layout takes, what it declines (and that
 * the CUDA-core kernel then runs: chunk_kda, f32, K past 128, the knob off), and the two launches a call makes on a fake
 * sm_90 device: their grids, and the workspaces the prep kernel writes being the ones the walk reads.
 */
import { callOp, opRoute } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { prepAndWalk, recurrentDevice as device } from '../../../test/tc-chunk-checks.js';
import { withTuning } from '../../tuning/load.js';
import { addr } from '../elementwise.js';
import { gdnTcDecline, gdnTcMainShared, gdnTcPrepShared, planGdnTc } from './gdn-tc-plan.js';

/** Qwen3-Next's gated DeltaNet heads. */
const QN = { H: 16, HV: 32, K: 128, V: 128 };

describe('planGdnTc', () => {
  it("Qwen3-Next, one 4096-token sequence: BV 32 (128 CTAs, one wave; BV 16 would be 256), 8 warps as 2 x 4, 64 chunk slots", () => {
    const p = planGdnTc({ N: 1, T: 4096, ...QN, varlen: false }, 132);
    expect([p.bv, p.wm, p.wk, p.threads, p.ncMax, p.slots]).toEqual([32, 2, 4, 256, 64, 64]);
    expect(p.mainGrid).toEqual([4, 32, 1]);
    expect(p.prepGrid).toEqual([64, 32, 1]);
    // q, W hi + lo, k [64][136]; Aqk hi + lo [64][72]; U, V', V'd hi + lo [64][40] (bf16); G, norms [2][64], partials [4][64][36] (f32)
    expect(p.mainSharedBytes).toBe((4 * 64 * 136 + 2 * 64 * 72 + 6 * 64 * 40) * 2 + 6 * 64 * 4 + 4 * 64 * 36 * 4);
    expect(p.mainSharedBytes).toBeLessThanOrEqual(227 * 1024);
    // k [64][136]; the q region max(q, Tw / Tu hi + lo [64][72]); v [64][136]; A, T [64][68], G, beta, norms [64]
    expect(p.prepSharedBytes).toBe(64 * 136 * 2 + 4 * 64 * 72 * 2 + 64 * 136 * 2 + 2 * 64 * 68 * 4 + 4 * 64 * 4);
    expect(p.prepSharedBytes).toBeLessThan((227 * 1024) / 2); // two prep CTAs an SM
  });

  it('no tile fits a wave (64 packed sequences): the widest, BV 64; varlen slots floor(T / 64) + N', () => {
    const p = planGdnTc({ N: 64, T: 8192, ...QN, varlen: true }, 132);
    expect([p.bv, p.wm, p.wk, p.slots]).toEqual([64, 4, 2, 128 + 64]);
    expect(p.mainSharedBytes).toBe(gdnTcMainShared(128, 64, 2));
    expect(p.prepSharedBytes).toBe(gdnTcPrepShared(128, 128));
  });

  it('recurrent.chunkDeltaTileColumns forces the tile where V and the shared memory take it, else the plan stands', () => {
    const s = { N: 1, T: 4096, ...QN, varlen: false };
    expect(planGdnTc(s, 132, undefined, 64).mainGrid).toEqual([2, 32, 1]);
    expect(planGdnTc(s, 132, undefined, 16).bv).toBe(16);
    expect(planGdnTc({ ...s, V: 48 }, 132, undefined, 32).bv).toBe(16);
    expect(planGdnTc(s, 132, 163 * 1024, 64).bv).toBe(32); // BV 64 past A100's shared memory
    expect(planGdnTc(s, 132, undefined, 0).bv).toBe(32);
  });

  it('a small grid takes the narrowest tile; K whose k16 steps do not split eight ways takes fewer warps across K', () => {
    expect(planGdnTc({ N: 1, T: 100, H: 1, HV: 2, K: 128, V: 128, varlen: false }, 132).bv).toBe(16);
    const p = planGdnTc({ N: 1, T: 100, H: 1, HV: 1, K: 48, V: 16, varlen: false }, 132);
    expect([p.bv, p.wk, p.threads]).toEqual([16, 1, 32]);
  });

  it("the device's shared-memory opt-in: A100 (163 KiB) keeps BV 32 for Qwen3-Next, and BV 32 where BV 64 would not fit; sm_86 (99 KiB) declines", () => {
    const a100 = 163 * 1024;
    const base = { op: 'chunk_gated_delta_rule', dtypes: ['bf16', 'f32', 'bf16'] as [string, string, string], N: 1, T: 4096, ...QN, smMajor: 8, enabled: true };
    expect(gdnTcDecline({ ...base, sharedPerBlockOptin: a100 })).toBeNull();
    expect(planGdnTc({ N: 1, T: 4096, ...QN, varlen: false }, 108, a100).bv).toBe(32);
    expect(gdnTcMainShared(128, 64, 2)).toBeGreaterThan(a100);
    expect(planGdnTc({ N: 64, T: 8192, ...QN, varlen: true }, 108, a100).bv).toBe(32); // 227 KiB: BV 64
    expect(gdnTcDecline({ ...base, sharedPerBlockOptin: 99 * 1024 })).toMatch(/shared memory within the device's 101376 bytes/);
    expect(gdnTcDecline({ ...base, K: 256, sharedPerBlockOptin: a100 })).toMatch(/no state tile fits/);
  });

  it('declines, naming why: chunk_kda, the knob, pre-Ampere, f32, f64 gates, K not a multiple of 16 or past 256, V not a multiple of 16', () => {
    const base = { op: 'chunk_gated_delta_rule', dtypes: ['bf16', 'f32', 'bf16'] as [string, string, string], N: 1, T: 4096, ...QN, smMajor: 9, enabled: true };
    expect(gdnTcDecline(base)).toBeNull();
    expect(gdnTcDecline({ ...base, dtypes: ['f16', 'f16', 'f16'], smMajor: 8 })).toBeNull();
    expect(gdnTcDecline({ ...base, op: 'chunk_kda' })).toMatch(/chunk_kda: a decay a key channel/);
    expect(gdnTcDecline({ ...base, enabled: false })).toMatch(/recurrent.chunkDeltaTensorCore is off/);
    expect(gdnTcDecline({ ...base, smMajor: 7 })).toMatch(/sm_80/);
    expect(gdnTcDecline({ ...base, smMajor: undefined })).toMatch(/unknown/);
    expect(gdnTcDecline({ ...base, dtypes: ['f32', 'f32', 'f32'] })).toMatch(/bf16 and f16/);
    expect(gdnTcDecline({ ...base, dtypes: ['bf16', 'f64', 'bf16'] })).toMatch(/gates/);
    expect(gdnTcDecline({ ...base, K: 72 })).toMatch(/key head dim 72/);
    expect(gdnTcDecline({ ...base, K: 192 })).toBeNull(); // BV 32, 4 warps across K of 48 columns
    expect(gdnTcDecline({ ...base, K: 256 })).toBeNull();
    expect(planGdnTc({ N: 64, T: 8192, ...QN, K: 256, varlen: true }, 132).bv).toBe(32); // BV 64 does not fit at K 256
    expect(gdnTcDecline({ ...base, K: 272 })).toMatch(/up to 256/);
    expect(gdnTcDecline({ ...base, V: 12 })).toMatch(/value head dim 12/);
    expect(gdnTcDecline({ ...base, HV: 24, H: 16 })).toMatch(/multiple of q \/ k heads/);
  });
});

describe('the chunk_gated_delta_rule route on a fake sm_90 device', () => {  const attrs = { output_final_state: true, use_qk_l2norm_in_kernel: true };

  it("bf16 at Qwen3-Next's heads (f32 g): the prep launch, then the walk, reading the workspaces the prep wrote", () => {
    const f = device();
    const T = 200;
    const [q, k] = [0, 1].map(() => f.t([1, T, 16, 128]));
    const v = f.t([1, T, 32, 128]);
    const g = f.t([1, T, 32], 'f32');
    const beta = f.t([1, T, 32]);
    const ins = [q!, k!, v, g, beta, null, null, null];
    expect(opRoute('chunk_gated_delta_rule', ins, attrs)).toEqual({ via: 'kernel' });
    const [o, fin] = callOp('chunk_gated_delta_rule', ins, attrs);
    expect(f.cache.launches.map((l) => l.entry)).toEqual(['fk_gdn_chunk_prep', 'fk_gdn_chunk_tc']);
    const [prep, walk] = prepAndWalk(f);
    const p = planGdnTc({ N: 1, T, ...QN, varlen: false }, 132);
    expect([prep.grid, prep.block, walk.grid, walk.block]).toEqual([p.prepGrid, 256, p.mainGrid, p.threads]);
    expect(prep.source).toContain('#define FK_T __nv_bfloat16');
    expect(prep.source).toContain('#define FK_TG float');
    expect(prep.source).toContain('#define FK_L2 1');
    expect(walk.source).toContain(`#define FK_BV ${p.bv}`);
    const a = prep.args as number[];
    const b = walk.args as number[];
    expect(a.slice(0, 5)).toEqual([addr(q!), addr(k!), addr(v), addr(g), addr(beta)]);
    expect(a.slice(21, 26)).toEqual([T, 16, 32, 1, p.ncMax]);
    // W, U, Aqk, G, the norms: written by the prep, read by the walk; q and k read in place by both
    expect(b.slice(9, 14)).toEqual(a.slice(27, 32));
    expect(new Set(a.slice(27, 32)).size).toBe(5);
    expect(b.slice(0, 9)).toEqual([addr(o!), addr(q!), addr(k!), ...a.slice(5, 11)]);
    expect([b[14], b[16]]).toEqual([0, addr(fin!)]);
  });

  it('f32, V 24, chunk_kda, or the knob off: the CUDA-core chunked kernel, one launch', () => {
    const run = (op: 'chunk_gated_delta_rule' | 'chunk_kda', dtype: 'f32' | 'bf16', K: number, V = 64) => {
      const f = device();
      const g = op === 'chunk_kda' ? f.t([1, 70, 4, K], 'f32') : f.t([1, 70, 4], 'f32');
      callOp(op, [f.t([1, 70, 2, K], dtype), f.t([1, 70, 2, K], dtype), f.t([1, 70, 4, V], dtype), g, f.t([1, 70, 4], dtype), null, null, null], {});
      return f.cache.launches.map((l) => l.entry);
    };
    expect(run('chunk_gated_delta_rule', 'f32', 64)).toEqual(['fk_gdn_chunk']);
    expect(run('chunk_gated_delta_rule', 'bf16', 64, 24)).toEqual(['fk_gdn_chunk']);
    expect(run('chunk_kda', 'bf16', 64)).toEqual(['fk_kda_chunk']);
    expect(run('chunk_gated_delta_rule', 'bf16', 64)).toEqual(['fk_gdn_chunk_prep', 'fk_gdn_chunk_tc']);
    withTuning('recurrent', { chunkDeltaTensorCore: false }, () => expect(run('chunk_gated_delta_rule', 'bf16', 64)).toEqual(['fk_gdn_chunk']));
    const tile = (columns: number) => {
      const f = device();
      callOp('chunk_gated_delta_rule', [f.t([1, 70, 2, 64]), f.t([1, 70, 2, 64]), f.t([1, 70, 4, 64]), f.t([1, 70, 4], 'f32'), f.t([1, 70, 4]), null, null, null], {});
      return withTuning('recurrent', { chunkDeltaTileColumns: columns }, () => {
        const g = device();
        callOp('chunk_gated_delta_rule', [g.t([1, 70, 2, 64]), g.t([1, 70, 2, 64]), g.t([1, 70, 4, 64]), g.t([1, 70, 4], 'f32'), g.t([1, 70, 4]), null, null, null], {});
        return [f.cache.launches[1]!.grid, g.cache.launches[1]!.grid];
      });
    };
    expect(tile(64)).toEqual([[4, 4, 1], [1, 4, 1]]); // the plan's BV 16 (16 CTAs fit a wave), then the knob's 64
  });

  it('an sm_86 device (99 KiB of shared memory a block): the CUDA-core fk_gdn_chunk, one launch', () => {
    const f = device({ multiprocessors: 84, major: 8, sharedPerBlockOptin: 99 * 1024 });
    const T = 100;
    callOp('chunk_gated_delta_rule', [f.t([1, T, 16, 128]), f.t([1, T, 16, 128]), f.t([1, T, 32, 128]), f.t([1, T, 32], 'f32'), f.t([1, T, 32]), null, null, null], attrs);
    expect(f.cache.launches.map((l) => l.entry)).toEqual(['fk_gdn_chunk']);
  });

  it('packed sequences over a pool: cu_seqlens and the indices reach both launches; slots floor(T / 64) + N', () => {
    const f = device();
    const T = 300;
    const cu = f.t([4], 'i32'); // [0, 100, 100, 300] on a device: the host never reads it
    const idx = f.t([3], 'i64');
    const pool = f.t([4, 4, 64, 64], 'f32');
    callOp('chunk_gated_delta_rule', [f.t([1, T, 2, 64]), f.t([1, T, 2, 64]), f.t([1, T, 4, 64]), f.t([1, T, 4], 'f32'), f.t([1, T, 4]), pool, cu, idx], {});
    const [prep, walk] = prepAndWalk(f);
    expect(prep.grid).toEqual([Math.floor(T / 64) + 3, 4, 1]);
    expect(walk.source).toContain('#define FK_SI_T long long');
    expect((prep.args as number[])[20]).toBe(addr(cu));
    const b = walk.args as number[];
    expect(b.slice(14, 20)).toEqual([addr(pool), pool.strides[0], addr(pool), pool.strides[0], addr(cu), addr(idx)]);
  });
});
