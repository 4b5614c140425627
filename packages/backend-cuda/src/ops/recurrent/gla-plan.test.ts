/**
 * The GLA launch plans and the host path on the fake device: tile choices at GLA-2.7B's decode and prefill shapes,
 * the state access width from alignment, what the kernels decline (and where the registry then goes), copies only for
 * a non-contiguous head dim, and no host read of any tensor (the launch packs device addresses only).
 */
import { Tensor, callOp, opRoute } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { fake } from '../../../test/ops-fake.js';
import { stateVec } from './gla.js';
import { GLA_CHUNK, glaDecline, planGla } from './gla-plan.js';
import { registerRecurrentKernels } from './register.js';

const GLA = { H: 5, K: 256, V: 512 };

describe('planGla', () => {
  it('decode at batch 1 narrows the V tile for two CTAs an SM; from 7 to 256 it keeps BV 32 (8 rows of 4 floats a thread)', () => {
    const p1 = planGla('recurrent', { N: 1, ...GLA }, 4, 132);
    expect([p1.bv, p1.vec, p1.threads, p1.rowsPerThread]).toEqual([16, 4, 256, 4]);
    expect(p1.grid).toEqual([32, 5, 1]);
    // bs 7 (the H100 run of issue 32) already has 560 CTAs at BV 32
    const p7 = planGla('recurrent', { N: 7, ...GLA }, 4, 132);
    expect([p7.bv, p7.threads, p7.rowsPerThread, ...p7.grid]).toEqual([32, 256, 8, 16, 5, 7]);
    const p256 = planGla('recurrent', { N: 256, ...GLA }, 4, 132);
    expect([p256.bv, p256.colThreads, p256.rowGroups, p256.rowsPerThread]).toEqual([32, 8, 32, 8]);
    expect(p256.grid).toEqual([16, 5, 256]);
  });

  it('every plan tiles: BV / VEC a power of two <= 32, whole warps, RK x VEC within the register budget', () => {
    for (const kind of ['recurrent', 'chunk'] as const) {
      for (const [N, H, K, V] of [[1, 5, 256, 512], [7, 3, 8, 12], [2, 1, 1, 1], [1, 1, 1024, 4096], [300, 16, 128, 128], [1, 2, 40, 10]] as const) {
        const p = planGla(kind, { N, H, K, V }, 4, 132);
        expect(32 % p.colThreads, `${kind} ${K}x${V}`).toBe(0);
        expect(p.threads % 32).toBe(0);
        expect(p.colThreads * p.rowGroups).toBe(p.threads);
        expect(p.rowsPerThread * p.rowGroups).toBeGreaterThanOrEqual(K);
        expect(p.rowsPerThread * p.vec).toBeLessThanOrEqual(32);
        expect(p.grid[0] * p.bv).toBeGreaterThanOrEqual(V);
        expect(p.chunk).toBe(kind === 'chunk' ? GLA_CHUNK : 0);
      }
    }
  });

  it('the prefill plan sizes its shared memory; the state access is as wide as alignment and V allow', () => {
    const p = planGla('chunk', { N: 1, ...GLA }, 4, 132);
    expect(p.sharedBytes).toBe(4 * (3 * 16 * 256 + 16 * p.bv + 16 * 16 + 256 + 8 * 16 * p.bv));
    expect(planGla('recurrent', { N: 1, H: 1, K: 8, V: 6 }, 4, 132).vec).toBe(2);
    expect(stateVec([{ byteAddress: 1 << 20, slotStride: 4096 }])).toBe(4);
    expect(stateVec([{ byteAddress: (1 << 20) + 8, slotStride: 4096 }])).toBe(2);
    expect(stateVec([{ byteAddress: 1 << 20, slotStride: 4097 }, { byteAddress: 1 << 20, slotStride: 4096 }])).toBe(1);
  });

  it('declines f64, K past 1024, an empty head dim and a pool whose slots are not contiguous, naming why', () => {
    const base = { op: 'fused_recurrent_gla', dtype: 'bf16', N: 1, ...GLA, pool: null };
    expect(glaDecline(base)).toBeNull();
    expect(glaDecline({ ...base, dtype: 'f64' })).toMatch(/f64 runs on the CPU/);
    expect(glaDecline({ ...base, K: 2048 })).toMatch(/key head dim 2048/);
    expect(glaDecline({ ...base, V: 0 })).toMatch(/value head dim 0/);
    expect(glaDecline({ ...base, pool: { dtype: 'f32', slotContiguous: false } })).toMatch(/contiguous \[H, K, V\]/);
  });

  it("chunk_gla holds the chunked kernel's shared memory to the device's opt-in (A100 163 KiB, sm_86 / sm_89 99 KiB)", () => {
    const chunk = (K: number) => ({ op: 'chunk_gla', dtype: 'bf16', N: 1, H: 5, K, V: 512, pool: null });
    const need = (K: number) => planGla('chunk', chunk(K), 4, 1).sharedBytes;
    expect(need(1024)).toBeGreaterThan(163 * 1024);
    expect(need(512)).toBeGreaterThan(99 * 1024);
    expect(glaDecline(chunk(1024))).toBeNull(); // sm_90's 227 KiB when the device does not say
    expect(glaDecline({ ...chunk(1024), sharedPerBlockOptin: 163 * 1024 })).toMatch(/exceed the device's 166912/);
    expect(glaDecline({ ...chunk(512), sharedPerBlockOptin: 163 * 1024 })).toBeNull();
    expect(glaDecline({ ...chunk(512), sharedPerBlockOptin: 99 * 1024 })).toMatch(/exceed the device's 101376/);
    expect(glaDecline({ ...chunk(256), sharedPerBlockOptin: 99 * 1024 })).toBeNull(); // GLA-2.7B's heads fit everywhere
  });
});

describe('GlaKernels on the fake device', () => {
  const setup = () => {
    const f = fake();
    registerRecurrentKernels(f.backend.opKernels!, f.cache, f.runtime);
    return f;
  };

  it('decode over a pool: one launch, the pool passed in place with its slot stride, indices and no cu_seqlens', () => {
    const f = setup();
    const D = 4;
    const [q, k, g] = [0, 1, 2].map(() => f.t([D, 1, 5, 256]));
    const v = f.t([D, 1, 5, 512]);
    const pool = f.t([8, 5, 256, 512], 'f32');
    const idx = f.t([D], 'i32');
    const [o] = callOp('fused_recurrent_gla', [q!, k!, v, g!, pool, null, idx], {});
    expect(o!.shape).toEqual([D, 1, 5, 512]);
    expect(f.cache.launches).toHaveLength(1);
    const a = f.cache.launches[0]!.args as number[];
    expect(a[17]).toBe(pool.storage.devicePtr);
    expect(a[19]).toBe(pool.storage.devicePtr);
    expect([a[18], a[20]]).toEqual([5 * 256 * 512, 5 * 256 * 512]);
    expect([a[21], a[22]]).toEqual([0, idx.storage.devicePtr]);
    expect([a[23], a[24], a[25]]).toEqual([1, 5, 512]);
    expect(a[26]).toBeCloseTo(1 / 16);
    expect(f.copies).toHaveLength(0);
  });

  it('a pool narrowed from a larger one is addressed at its offset; a head-dim-strided q is copied first', () => {
    const f = setup();
    const big = f.t([10, 2, 8, 16], 'f32');
    const pool = big.narrow(0, 2, 6);
    const q = f.t([1, 3, 2, 8]);
    const qStrided = f.t([1, 3, 8, 2]).transpose(2, 3); // head dim stride 2
    const [k, g] = [0, 1].map(() => f.t([1, 3, 2, 8]));
    const v = f.t([1, 3, 2, 16]);
    const cu = f.t([3], 'i64');
    const idx = f.t([2], 'i64');
    callOp('chunk_gla', [q, k!, v, g!, pool, cu, idx], {});
    expect((f.cache.launches[0]!.args as number[])[17]).toBe(big.storage.devicePtr! + 2 * 2 * 8 * 16 * 4);
    expect(f.copies).toHaveLength(0);
    callOp('chunk_gla', [qStrided, k!, v, g!, pool, cu, idx], {});
    expect(f.copies).toHaveLength(1);
    expect(f.cache.launches[1]!.source).toContain('typedef long long CU_T;');
  });

  it('routes: bf16 to the kernel, f64 chunk_gla to its decomposition, a strided pool declined with the reason', () => {
    const f = setup();
    const x = (d: Tensor['dtype']) => [f.t([1, 2, 1, 8], d), f.t([1, 2, 1, 8], d), f.t([1, 2, 1, 8], d), f.t([1, 2, 1, 8], d)];
    expect(opRoute('chunk_gla', [...x('bf16'), null, null, null])).toEqual({ via: 'kernel' });
    expect(opRoute('chunk_gla', [...x('f64'), null, null, null])).toEqual({ via: 'decomposition' });
    const strided = f.t([3, 1, 16, 8], 'f32').transpose(2, 3); // [3, 1, 8, 16] with V stride 8
    expect(() => callOp('fused_recurrent_gla', [...x('bf16').map((t, i) => (i === 2 ? f.t([1, 2, 1, 16]) : t)), strided, null, f.t([1], 'i32')], {})).toThrow(/contiguous \[H, K, V\]/);
  });
});
