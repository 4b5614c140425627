/**
 * What moe_align costs in launches on CUDA, on a fake device (test/ops-fake.ts: no GPU, each launch recorded and its
 * arguments packed as the runtime would): the kernel is one launch of one CTA with no host read and no copy, for a
 * decode step and a 4096-token prefill of Mixtral / Qwen3-MoE / gpt-oss widths; the op's decomposition (what
 * L1/moe_align ran before: one_hot counts, cumsums, a stable sort, a scatter) on the same fake device launches 20+.
 */
import { callOp, moeAlignSizes, type Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { fakeRegistered } from '../../../test/ops-fake.js';
import { MOE_ALIGN_SMEM_LIMIT, MOE_ALIGN_THREADS, planMoeAlign } from './moe-align-plan.js';

const MODELS = [
  { name: 'Mixtral', E: 8, topK: 2 },
  { name: 'Qwen3-MoE', E: 128, topK: 8 },
  { name: 'gpt-oss', E: 32, topK: 4 },
];

describe('moe_align on CUDA: launches (fake device)', () => {
  for (const m of MODELS) {
    for (const [T, bs] of [[1, 16], [4096, 64]] as const) {
      it(`${m.name} T ${T}: one launch of fk_moe_align, outputs sized from shapes, no copies`, () => {
        const f = fakeRegistered();
        const ids = f.t([T, m.topK], 'i32');
        const outs = callOp('moe_align', [ids], { block_size: bs, num_experts: m.E });
        const { maxPadded, numBlocks } = moeAlignSizes(T * m.topK, m.E, bs);
        expect(outs.map((t: Tensor) => t.shape)).toEqual([[maxPadded], [numBlocks], [1]]);
        expect(f.cache.launches.map((l) => l.entry)).toEqual(['fk_moe_align']);
        expect(f.copies).toEqual([]);
        const l = f.cache.launches[0]!;
        const plan = planMoeAlign(m.E)!;
        expect([l.grid, l.block]).toEqual([1, MOE_ALIGN_THREADS]);
        expect(l.source).toMatch(/^#define FK_IDX int\n/);
        expect(l.args[0]).toBe(ids);
        expect(l.args.slice(1, 4)).toEqual(outs);
        expect(l.args.slice(4)).toEqual([T * m.topK, m.E, bs, maxPadded, plan.countWarps]);
      });
    }
  }

  it('i64 ids are read in place; a strided view is copied (contiguous) first', () => {
    const f = fakeRegistered();
    callOp('moe_align', [f.t([7, 4], 'i64')], { block_size: 16, num_experts: 32 });
    expect(f.cache.launches[0]!.source).toMatch(/^#define FK_IDX long long\n/);
    callOp('moe_align', [f.t([4, 7], 'i32').transpose(0, 1)], { block_size: 16, num_experts: 32 });
    expect(f.cache.launches.map((l) => l.entry)).toEqual(['fk_moe_align', 'fk_moe_align']);
    expect(f.copies).toHaveLength(1); // the contiguous copy the second launch reads
    expect(f.cache.launches[1]!.args[0]).toBe(f.copies[0]![0]);
  });

  it('the decomposition (L1/moe_align before this kernel) launches 20+ kernels on the same device', () => {
    const f = fakeRegistered('moe_align');
    callOp('moe_align', [f.t([1, 2], 'i32')], { block_size: 16, num_experts: 8 });
    const entries = f.cache.launches.map((l) => l.entry);
    expect(entries).not.toContain('fk_moe_align');
    expect(entries.length).toBeGreaterThanOrEqual(20);
    console.log(`moe_align decomposition: ${entries.length} launches + ${f.copies.length} copies: ${entries.join(' ')}`);
  });

  it('the plan: 32 counting warps up to E 361, fewer past it within 48 KiB; past 4095 experts a decline (the decomposition runs)', () => {
    for (const E of [8, 32, 128, 256, 361]) expect(planMoeAlign(E)!.countWarps).toBe(32);
    for (const E of [362, 1000, 4095]) {
      const p = planMoeAlign(E)!;
      expect(p.countWarps).toBeLessThan(32);
      expect(p.smemBytes).toBeLessThanOrEqual(MOE_ALIGN_SMEM_LIMIT);
      expect(planMoeAlign(E)!.smemBytes + 4 * E).toBeGreaterThan(MOE_ALIGN_SMEM_LIMIT); // one more warp would not fit
    }
    expect(planMoeAlign(4096)).toBeNull();
    const f = fakeRegistered();
    const outs = callOp('moe_align', [f.t([3, 2], 'i32')], { block_size: 4, num_experts: 7000 });
    expect(outs).toHaveLength(3);
    expect(f.cache.launches.map((l) => l.entry)).not.toContain('fk_moe_align');
  });
});
