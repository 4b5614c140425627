/**
 * Which kernel grouped_gemm / mxfp4_grouped_gemm take on CUDA (grouped-gemm.ts, mxfp4-grouped-gemm.ts) and what the
 * tensor-core path launches, on a fake device (test/ops-fake.ts: no GPU, each launch recorded and its arguments packed):
 * up to GROUPED_GEMM_EAGER_ROWS rows the GEMV kernel; past them at bf16 / f16 the routing kernel then the tensor-core
 * GEMM (grid, #defines, scratch and shape arguments from the plan), a transposed weight view on the n-contiguous
 * variant; past them at f32 (or an n-contiguous weight with N % 8 != 0) a decline that names both reasons.
 */
import { inferOp, type OpCall, type Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { fake } from '../../../test/ops-fake.js';
import { GroupedGemm } from './grouped-gemm.js';
import { Mxfp4GroupedGemm } from './mxfp4-grouped-gemm.js';
import { GROUPED_TC_ROUTE_THREADS, planGroupedTc } from './grouped-gemm-tc-plan.js';

function callOf(f: ReturnType<typeof fake>, op: string, inputs: (Tensor | null)[]): OpCall {
  const { spec, attrs, outputs } = inferOp(op, inputs, {});
  return { op: spec, backend: f.backend, inputs, attrs, outputs } as unknown as OpCall;
}

describe('grouped_gemm on CUDA: the kernel by rows and dtype (fake device)', () => {
  it('64 rows: the GEMV kernel; 100 rows at bf16: routing then tensor-core GEMM over the planned grid', () => {
    const f = fake();
    const gg = new GroupedGemm(f.cache, f.runtime);
    const w = f.t([8, 40, 64]);
    for (const T of [64, 100]) {
      const call = callOf(f, 'grouped_gemm', [f.t([T, 64]), w, null, f.t([T], 'i64'), f.t([8, 40])]);
      expect(gg.supports(call)).toBe(true);
      gg.run(call);
    }
    expect(f.cache.launches.map((l) => l.entry)).toEqual(['fk_grouped_gemm', 'fk_grouped_gemm_route', 'fk_grouped_gemm_tc']);
    const [, route, gemm] = f.cache.launches as [unknown, (typeof f.cache.launches)[0], (typeof f.cache.launches)[0]];
    const plan = planGroupedTc({ T: 100, N: 40, K: 64, E: 8, format: 'k-contiguous' });
    expect([route.grid, route.block]).toEqual([1, GROUPED_TC_ROUTE_THREADS]);
    expect(route.source).toMatch(/#define FK_IDX long long\n#define FK_ROUTE_IDS 1\n/);
    expect(route.args.slice(3)).toEqual([100, 8, plan.tile.BM, plan.slots]);
    expect([gemm.grid, gemm.block]).toEqual([plan.grid, 256]);
    expect(gemm.source).toMatch(/#define FK_MXFP4 0\n#define FK_NCONTIG 0\n#define FK_BIAS 1\n/);
    // perm and tiles: the routing kernel's outputs are the GEMM's inputs
    expect(gemm.args[4]).toBe(route.args[1]);
    expect(gemm.args[5]).toBe(route.args[2]);
    expect(gemm.args.slice(7, 13)).toEqual([40, 64, 8, plan.slots, plan.nTiles, plan.tile.groupM]);
  });

  it("a transposed weight view (HF's [E, K, N]): the n-contiguous variant, k's stride passed; N % 8 != 0 declines", () => {
    const f = fake();
    const gg = new GroupedGemm(f.cache, f.runtime);
    const call = callOf(f, 'grouped_gemm', [f.t([100, 64]), f.t([8, 64, 40]).transpose(1, 2), null, f.t([100], 'i32'), null]);
    expect(gg.supports(call)).toBe(true);
    gg.run(call);
    const gemm = f.cache.launches[1]!;
    expect(gemm.source).toMatch(/#define FK_MXFP4 0\n#define FK_NCONTIG 1\n/);
    expect(gemm.args.slice(13)).toEqual([64, 64 * 40, 40, 0]); // x row stride, expert stride, k's stride, no bias
    const odd = gg.supports(callOf(f, 'grouped_gemm', [f.t([100, 64]), f.t([8, 64, 36]).transpose(1, 2), null, f.t([100], 'i32'), null]));
    expect(odd).toMatch(/100 rows outside a graph capture.*N = 36 is not a multiple of 8/);
  });

  it('past the eager rows at f32 declines with both reasons', () => {
    const f = fake();
    const gg = new GroupedGemm(f.cache, f.runtime);
    const f32 = gg.supports(callOf(f, 'grouped_gemm', [f.t([100, 64], 'f32'), f.t([8, 40, 64], 'f32'), null, f.t([100], 'i32'), null]));
    expect(f32).toMatch(/100 rows outside a graph capture.*dtype f32: the tensor-core kernel takes bf16 and f16/);
    expect(f.cache.launches).toEqual([]);
  });
});

describe('mxfp4_grouped_gemm on CUDA: the kernel by rows and dtype (fake device)', () => {
  it('past the eager rows at f16: the tensor-core GEMM with MXFP4 weights; at f32 a decline', () => {
    const f = fake();
    const mx = new Mxfp4GroupedGemm(f.cache, f.runtime);
    const [blocks, scales] = [f.t([4, 48, 2, 16], 'u8'), f.t([4, 48, 2], 'u8')];
    const call = callOf(f, 'mxfp4_grouped_gemm', [f.t([200, 64], 'f16'), blocks, scales, f.t([5], 'i32'), null, null]);
    expect(mx.supports(call)).toBe(true);
    mx.run(call);
    expect(f.cache.launches.map((l) => l.entry)).toEqual(['fk_grouped_gemm_route', 'fk_grouped_gemm_tc']);
    const [route, gemm] = f.cache.launches as [(typeof f.cache.launches)[0], (typeof f.cache.launches)[0]];
    expect(route.source).toMatch(/#define FK_IDX int\n#define FK_ROUTE_IDS 0\n/);
    expect(gemm.source).toMatch(/#define FK_T __half\n[\s\S]*#define FK_MXFP4 1\n#define FK_NCONTIG 0\n#define FK_BIAS 0\n/);
    expect(gemm.args[2]).toBe(blocks);
    expect(gemm.args[3]).toBe(scales);
    const f32 = mx.supports(callOf(f, 'mxfp4_grouped_gemm', [f.t([200, 64], 'f32'), blocks, scales, f.t([5], 'i32'), null, null]));
    expect(f32).toMatch(/200 rows outside a graph capture.*dtype f32/);
  });
});
