/**
 * The Hopper MoE prefill route (fused-moe-wgmma-plan.ts, fused-moe-wgmma.ts) on the CPU: its plans and tensor maps at
 * Mixtral-8x7B / Qwen3-30B-A3B prefill, every decline (the knob, the device, dtype, block size, rows an expert,
 * alignment), and the launches fused_moe_gemm makes on a fake sm_90a device: gather + GEMM with the knob on, the
 * mma.sync kernel with it off or where the route declines.
 */
import { OpKernelTable, callOp, type Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { fake } from '../../../test/ops-fake.js';
import { MIXTRAL, QWEN3, moeShape } from '../../../test/moe-routing.js';
import { TENSOR_MAP_SWIZZLE, type TensorMapSpec } from '../../tensor-map.js';
import type { CudaRuntime } from '../../runtime.js';
import { withTuning } from '../../tuning/load.js';
import type { MoeShape } from './fused-moe-plan.js';
import {
  GATHER_THREADS, WGMMA_GROUP_M, WGMMA_THREADS, fusedMoeWgmmaDecline, planFusedMoeWgmma, sortedTensorMapSpec, weightTensorMapSpec, wgmmaSmemBytes,
  type WgmmaCall,
} from './fused-moe-wgmma-plan.js';
import { TILE_MAP_THREADS } from './fused-moe-wgmma.js';
import { registerMoeKernels } from './register.js';

const SMS = 132;
const OK_CALL: WgmmaCall = { arch: 'sm_90a', dtype: 'bf16', weightAddress: 1 << 20, weightStrides: [0, 0, 1], aRowsAligned: true, sharedPerBlockOptin: 232448, tensorMapsUnavailable: null };
const ON = { fusedMoeWgmma: true };
/** A call on a packed [E, N, K] weight. */
const packed = (s: MoeShape, over: Partial<WgmmaCall> = {}): WgmmaCall => ({ ...OK_CALL, weightStrides: [s.N * s.K, s.K, 1], ...over });

describe('fused MoE wgmma plan', () => {
  it("Mixtral-8x7B's w13 at T 4096, bs 128: 128-row tiles over the live blocks x 112 tiles of 256 columns", () => {
    const s = moeShape(4096, MIXTRAL.topK, MIXTRAL.E, 2 * MIXTRAL.I, MIXTRAL.H, 128);
    const p = planFusedMoeWgmma(s, SMS);
    // live blocks: (8192 slots + 8 x 127) / 128 = 71
    expect([p.tile.BN, p.tile.stages, p.mTiles, p.nTiles, p.grid, p.sortedRows]).toEqual([256, 4, 71, 112, 71 * 112, 71 * 128]);
    expect(p.smemBytes).toBe(4 * (16384 + 32768) + 64 + 1024);
    expect(fusedMoeWgmmaDecline(s, packed(s), ON, SMS)).toBeNull();
    const w2 = moeShape(4096 * 2, 1, MIXTRAL.E, MIXTRAL.H, MIXTRAL.I, 128);
    expect(planFusedMoeWgmma(w2, SMS)).toMatchObject({ tile: { BN: 256 }, nTiles: 16 });
    expect(fusedMoeWgmmaDecline(w2, packed(w2), ON, SMS)).toBeNull();
  });

  it('blocks of 64 (the engine\'s prefill alignment): two blocks a tile, the bound on the packed tiles', () => {
    // Mixtral w13 T 4096 bs 64: live blocks min(136, (8192 + 8 x 63) / 64 = 135) = 135; tiles <= (135 + 8 x 1) / 2 = 71
    const p = planFusedMoeWgmma(moeShape(4096, MIXTRAL.topK, MIXTRAL.E, 2 * MIXTRAL.I, MIXTRAL.H, 64), SMS);
    expect([p.blockSize, p.blocksPerTile, p.mTiles, p.sortedRows]).toEqual([64, 2, 71, 71 * 128]);
    // Qwen3 w13 T 4096 bs 16: live (32768 + 128 x 15) / 16 = 2168; tiles <= (2168 + 128 x 7) / 8 = 383
    const q = planFusedMoeWgmma(moeShape(4096, QWEN3.topK, QWEN3.E, 2 * QWEN3.I, QWEN3.H, 16), SMS);
    expect([q.blocksPerTile, q.mTiles]).toEqual([8, 383]);
    expect(planFusedMoeWgmma(moeShape(4096, 2, 8, 512, 512, 128), SMS).blocksPerTile).toBe(0);
  });

  it("Qwen3-30B-A3B at T 4096 (256 rows an expert): w13's 6 tiles of 256 columns; BN 128 where 256 leaves SMs idle", () => {
    const w13 = moeShape(4096, QWEN3.topK, QWEN3.E, 2 * QWEN3.I, QWEN3.H, 128);
    const p = planFusedMoeWgmma(w13, SMS);
    expect([p.tile.BN, p.nTiles]).toEqual([256, 6]);
    expect(p.mTiles).toBe(Math.floor((32768 + 128 * 127) / 128));
    expect(fusedMoeWgmmaDecline(w13, packed(w13), ON, SMS)).toBeNull();
    // one expert of 256 rows, N 512: 2 row tiles x 2 column tiles of 256 < 132 SMs -> BN 128 (both rings ~193 KiB)
    const small = planFusedMoeWgmma(moeShape(256, 1, 1, 512, 512, 128), SMS);
    expect([small.tile.BN, small.tile.stages, small.grid]).toEqual([128, 6, 2 * 4]);
    expect(wgmmaSmemBytes({ BN: 128, stages: 6 })).toBeLessThanOrEqual(227 * 1024);
  });

  it('declines: the knob, the device, dtype, block size, decode-sized rows, K / N, alignment, shared memory, no maps', () => {
    const s = moeShape(4096, MIXTRAL.topK, MIXTRAL.E, 2 * MIXTRAL.I, MIXTRAL.H, 128);
    const d = (c: Partial<WgmmaCall>, sh = s, tuning = ON) => fusedMoeWgmmaDecline(sh, packed(sh, c), tuning, SMS);
    expect(d({}, s, { fusedMoeWgmma: false })).toMatch(/moe.fusedMoeWgmma is off/);
    expect(d({ arch: 'sm_89' })).toMatch(/needs sm_90a/);
    expect(d({ arch: undefined })).toMatch(/unknown/);
    expect(d({ dtype: 'f32' })).toMatch(/bf16 \/ f16/);
    expect(d({ dtype: 'f16' })).toBeNull();
    expect(d({}, moeShape(4096, 2, 8, 2 * MIXTRAL.I, MIXTRAL.H, 64))).toBeNull(); // packed by the tile map
    expect(d({}, moeShape(4096, 2, 8, 2 * MIXTRAL.I, MIXTRAL.H, 96))).toMatch(/block size 96/);
    expect(d({}, moeShape(256, 2, 8, 2 * MIXTRAL.I, MIXTRAL.H, 128))).toMatch(/64\.0 rows an expert/);
    expect(d({}, moeShape(4096, 8, 128, 2 * QWEN3.I, QWEN3.H, 128))).toBeNull(); // 256 rows an expert
    expect(d({}, moeShape(4096, 2, 8, 1000, 4100, 128))).toMatch(/multiples of 8/);
    expect(d({}, moeShape(4096, 2, 8, 1004, 4096, 128))).toMatch(/multiples of 8/);
    expect(d({ aRowsAligned: false })).toMatch(/A rows/);
    expect(d({ weightStrides: [2 * MIXTRAL.I * MIXTRAL.H, 1, 2 * MIXTRAL.I] })).toMatch(/K-contiguous/);
    expect(d({ weightAddress: (1 << 20) + 8 })).toMatch(/16-byte aligned/);
    expect(d({ weightStrides: [2 * MIXTRAL.I * 4100, 4100, 1] }, s)).toMatch(/byte strides/); // rows of 4100 elements: 8200 B
    expect(d({ sharedPerBlockOptin: 101376 })).toMatch(/shared memory/);
    expect(d({ tensorMapsUnavailable: 'old addon' })).toMatch(/no TMA tensor maps: old addon/);
  });

  it('tensor maps: A_sorted {K, rows, 1} with 64 x 128 boxes, the weight {K, N, E} with 64 x BN boxes, 128-byte swizzle', () => {
    const s = moeShape(4096, MIXTRAL.topK, MIXTRAL.E, 2 * MIXTRAL.I, MIXTRAL.H, 128);
    const a = sortedTensorMapSpec('bf16', 4096, s.K, 71 * 128);
    expect([a.dims, a.stridesBytes, a.box, a.swizzle]).toEqual([[4096, 9088, 1], [8192, 9088 * 8192], [64, 128, 1], TENSOR_MAP_SWIZZLE['128B']]);
    const w = weightTensorMapSpec('f16', s, 8192, [s.N * s.K, s.K, 1], 256);
    expect([w.dataType, w.dims, w.stridesBytes, w.box]).toEqual([6, [4096, 28672, 8], [8192, 28672 * 8192], [64, 256, 1]]);
    // one expert: its (unused) expert stride is the packed one
    const one = moeShape(512, 1, 1, 256, 512, 128);
    expect(weightTensorMapSpec('bf16', one, 0, [7, 512, 1], 256).stridesBytes).toEqual([1024, 256 * 1024]);
  });
});

/** A fake sm_90a device: MoE kernels registered, tensor maps recorded (128 zero bytes each). */
function device() {
  const f = fake();
  const maps: TensorMapSpec[] = [];
  const runtime = (() => ({
    properties: () => ({ multiprocessors: SMS, arch: 'sm_90a', sharedPerBlockOptin: 232448 }),
    tensorMapUnavailable: () => null,
    tensorMap: (spec: TensorMapSpec) => (maps.push(spec), new Uint8Array(128)),
  })) as unknown as () => CudaRuntime;
  const table = new OpKernelTable('fake');
  const gemm = registerMoeKernels(table, f.cache, runtime);
  (f.backend as { opKernels: OpKernelTable }).opKernels = table;
  return { ...f, maps, gemm };
}

describe('fused_moe_gemm route on a fake sm_90a device', () => {
  /** Routing tensors of moe_align's sizes (the kernels never read them on the host). */
  function call(f: ReturnType<typeof device>, M: number, topK: number, E: number, N: number, K: number, bs: number, mul: boolean) {
    const NB = Math.ceil((M * topK + E * (bs - 1)) / bs);
    const x = f.t([M, K]);
    const w = f.t([E, N, K]);
    const tw = f.t([M, topK], 'f32');
    const ins = [x, w, tw, f.t([NB * bs], 'i32'), f.t([NB], 'i32'), f.t([1], 'i32')];
    const [out] = callOp('fused_moe_gemm', ins, { top_k: topK, mul_routed_weight: mul }) as Tensor[];
    return { ins, out };
  }

  it('knob on, Mixtral w13 at T 4096 (bs 128): the gather, then the wgmma GEMM, sized from shapes', () => {
    const f = device();
    withTuning('moe', { fusedMoeWgmma: true }, () => {
      const { ins, out } = call(f, 4096, 2, 8, 2 * MIXTRAL.I, MIXTRAL.H, 128, false);
      expect(f.cache.launches.map((l) => l.entry)).toEqual(['fk_moe_gather_rows', 'fk_fused_moe_wgmma']);
      expect(f.gemm.lastWgmmaDecline).toBeNull();
      const plan = f.gemm.wgmma.lastPlan!;
      const [gather, gemm] = f.cache.launches as [(typeof f.cache.launches)[0], (typeof f.cache.launches)[0]];
      expect([gather.grid, gather.block]).toEqual([plan.sortedRows, GATHER_THREADS]);
      expect(gather.args.slice(1, 6)).toEqual([0, ins[0], ins[3], 0, ins[5]]); // no tile map: moe_align's entries as they are
      expect(gather.args.slice(6)).toEqual([MIXTRAL.H / 8, MIXTRAL.H / 8, 2, 8192, 128]);
      expect([gemm.grid, gemm.block]).toEqual([71 * 112, WGMMA_THREADS]);
      expect(gemm.args.slice(2, 7)).toEqual([out, 0, ins[3], ins[4], ins[5]]); // no routed weights without mul
      expect(gemm.args.slice(7)).toEqual([2 * MIXTRAL.I, MIXTRAL.H, 8, 8192, 128, 71, 112, WGMMA_GROUP_M, 0]);
      expect(gemm.source).toMatch(/^#define FK_T __nv_bfloat16\n#define FK_MOE_WG_BN 256\n/);
      // A_sorted's map (a temporary's address) and the weight's
      expect(f.maps.map((m) => [m.dims, m.box])).toEqual([[[MIXTRAL.H, plan.sortedRows, 1], [64, 128, 1]], [[MIXTRAL.H, 2 * MIXTRAL.I, 8], [64, 256, 1]]]);
      expect(f.maps[1]!.address).toBe(ins[1]!.storage.devicePtr);
    });
  });

  it('knob on, w2 with routed weights: the f32 weights and mul reach the GEMM', () => {
    const f = device();
    withTuning('moe', { fusedMoeWgmma: true }, () => {
      const { ins } = call(f, 8192, 1, 8, MIXTRAL.H, MIXTRAL.I, 128, true);
      const gemm = f.cache.launches[1]!;
      expect(gemm.entry).toBe('fk_fused_moe_wgmma');
      expect(gemm.args[3]).toBe(ins[2]);
      expect(gemm.args.at(-1)).toBe(1);
    });
  });

  it('knob on, blocks of 64: the tile map packs them, the gather and the GEMM read its tiles (block size 128)', () => {
    const f = device();
    withTuning('moe', { fusedMoeWgmma: true }, () => {
      const { ins, out } = call(f, 4096, 2, 8, 2 * MIXTRAL.I, MIXTRAL.H, 64, false);
      expect(f.cache.launches.map((l) => l.entry)).toEqual(['fk_moe_tile_map', 'fk_moe_gather_rows', 'fk_fused_moe_wgmma']);
      const [map, gather, gemm] = f.cache.launches as [(typeof f.cache.launches)[0], (typeof f.cache.launches)[0], (typeof f.cache.launches)[0]];
      const [tileExpert, tileBlock, postTiles] = map.args as [Tensor, Tensor, Tensor];
      expect([map.grid, map.block]).toEqual([1, TILE_MAP_THREADS]);
      expect([tileExpert.shape, tileBlock.shape, postTiles.shape]).toEqual([[71], [142], [1]]);
      expect(map.args.slice(3)).toEqual([ins[4], ins[5], 64, 71]);
      const sortedTiles = gather.args[1] as Tensor;
      expect(sortedTiles.shape).toEqual([71 * 128]);
      expect(gather.args.slice(2, 6)).toEqual([ins[0], ins[3], tileBlock, postTiles]);
      expect(gather.args.at(-1)).toBe(64);
      expect(gemm.args.slice(2, 7)).toEqual([out, 0, sortedTiles, tileExpert, postTiles]);
      expect(gemm.args.slice(7, 13)).toEqual([2 * MIXTRAL.I, MIXTRAL.H, 8, 8192, 128, 71]);
      for (const t of [tileExpert, tileBlock, postTiles, sortedTiles]) expect(t.isDisposed).toBe(true); // stream-ordered temporaries
    });
  });

  it('knob off (the default), a block size that neither divides nor is a multiple of 128, or decode: the mma.sync kernel', () => {
    const f = device();
    call(f, 4096, 2, 8, 2 * MIXTRAL.I, MIXTRAL.H, 128, false);
    expect(f.gemm.lastWgmmaDecline).toMatch(/off in the tuning/);
    withTuning('moe', { fusedMoeWgmma: true }, () => {
      call(f, 4096, 2, 8, 2 * MIXTRAL.I, MIXTRAL.H, 96, false);
      expect(f.gemm.lastWgmmaDecline).toMatch(/block size 96/);
      call(f, 4, 2, 8, 2 * MIXTRAL.I, MIXTRAL.H, 16, false);
      expect(f.gemm.lastWgmmaDecline).toMatch(/rows an expert/);
    });
    expect(f.cache.launches.map((l) => l.entry)).toEqual(['fk_fused_moe', 'fk_fused_moe', 'fk_fused_moe']);
  });
});
