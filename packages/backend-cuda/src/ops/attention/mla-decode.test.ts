/**
 * The paged MLA decode's host side without a GPU: the plan (head tiles, ring depth under the shared-memory opt-in, splits
 * sized from the block table's capacity), what it declines, and paged decode attention's route on a fake device
 * (test/fake-device.ts): a D > 256 call over one latent kv head given as both caches launches fk_paged_mla_decode
 * (and attention_decode.cu's combine, skipping single-split sequences, when it splits) with the arguments its
 * signature declares; anything else past 256 still throws, saying why; D <= 256 keeps the paged decode kernels. The
 * op's v_head_dim (Kimi-Linear's kv_lora_rank 512 of the 576-wide row) reaches the kernel as FK_MLA_DV through the registry.
 */
import { callOp1, OpKernelTable, opRoute, Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { fakeDevice } from '../../../test/fake-device.js';
import { GenKernelCache } from '../gen-cache.js';
import { pagedDecodeAttention } from './attention.js';
import { registerAttentionKernels } from './register.js';
import { MLA_MIN_SPLIT_TOKENS, MLA_STAGES, MLA_THREADS, MLA_TILE, mlaDecodeDecline, mlaSharedBytes, planMlaDecode } from './mla-decode-plan.js';

const kimi = { qHeads: 32, headDim: 576, blockSize: 16, multiprocessors: 132, sharedPerBlockOptin: 227 * 1024 };

describe('planMlaDecode', () => {
  it('Kimi-Linear-48B (32 heads, D 576): one CTA holds every head; three 37 KB stages; ~130 KB of shared memory', () => {
    const p = planMlaDecode({ ...kimi, batch: 64, maxBlocks: 256 })!;
    expect(p).toMatchObject({ headTiles: 2, headsPerCta: 32, stages: MLA_STAGES });
    expect(p.sharedBytes).toBe(mlaSharedBytes(576, 2, 3));
    expect(p.sharedBytes).toBe(3 * 32 * 584 * 2 + 4 * 32 * 36 * 4 + 32 * 40 * 2 + 3 * 32 * 4);
  });

  it('splits fill about one wave of SMs, none shorter than MLA_MIN_SPLIT_TOKENS, chunks whole tiles', () => {
    const bs1 = planMlaDecode({ ...kimi, batch: 1, maxBlocks: 256 })!; // 4096 keys
    expect(bs1.splits).toBe(4096 / MLA_MIN_SPLIT_TOKENS);
    expect(bs1.chunk).toBe(MLA_MIN_SPLIT_TOKENS);
    const bs64 = planMlaDecode({ ...kimi, batch: 64, maxBlocks: 256 })!;
    expect(bs64.splits).toBe(2); // 128 CTAs on 132 SMs (3 would start a second, mostly idle wave)
    expect(bs64.grid).toEqual([2, 1, 64]);
    const bs200 = planMlaDecode({ ...kimi, batch: 200, maxBlocks: 256 })!;
    expect(bs200.splits).toBe(1);
    for (const p of [bs1, bs64, bs200]) {
      expect(p.chunk % MLA_TILE).toBe(0);
      expect(p.splits * p.chunk).toBeGreaterThanOrEqual(4096);
      expect((p.splits - 1) * p.chunk).toBeLessThan(4096);
    }
    expect(planMlaDecode({ ...kimi, batch: 3, maxBlocks: 0 })!.splits).toBe(1);
  });

  it('head groups: 16 heads or fewer take one head tile; 40 heads two groups of 32; 128 heads four', () => {
    expect(planMlaDecode({ ...kimi, qHeads: 16, batch: 1, maxBlocks: 8 })).toMatchObject({ headTiles: 1, headsPerCta: 16 });
    expect(planMlaDecode({ ...kimi, qHeads: 4, headDim: 20, batch: 1, maxBlocks: 8 })).toMatchObject({ headTiles: 1 });
    expect(planMlaDecode({ ...kimi, qHeads: 40, batch: 2, maxBlocks: 8 })!.grid).toEqual([1, 2, 2]);
    expect(planMlaDecode({ ...kimi, qHeads: 128, batch: 2, maxBlocks: 8 })!.grid[1]).toBe(4);
  });

  it('the ring shrinks to what the shared memory allows, and a row too wide for two stages declines', () => {
    const tight = planMlaDecode({ ...kimi, batch: 1, maxBlocks: 8, sharedPerBlockOptin: 100 * 1024 })!;
    expect(tight.stages).toBe(2);
    expect(tight.sharedBytes).toBeLessThanOrEqual(100 * 1024);
    expect(planMlaDecode({ ...kimi, headDim: 2048, batch: 1, maxBlocks: 8 })).toBeNull();
  });

  it('declines what the kernel does not take, saying why', () => {
    const ok = { dtype: 'bf16', kvHeads: 1, headDim: 576, sharedCache: true, sinks: false, slidingWindow: 0, cacheVecBytes: 16 };
    expect(mlaDecodeDecline(ok)).toBeNull();
    expect(mlaDecodeDecline({ ...ok, cacheVecBytes: 4 })).toBeNull();
    expect(mlaDecodeDecline({ ...ok, dtype: 'f32' })).toMatch(/dtype f32/);
    expect(mlaDecodeDecline({ ...ok, kvHeads: 2 })).toMatch(/2 kv heads/);
    expect(mlaDecodeDecline({ ...ok, sharedCache: false })).toMatch(/different tensors/);
    expect(mlaDecodeDecline({ ...ok, sinks: true })).toMatch(/sinks/);
    expect(mlaDecodeDecline({ ...ok, slidingWindow: 128 })).toMatch(/sliding window/);
    expect(mlaDecodeDecline({ ...ok, headDim: 577 })).toMatch(/odd/);
    expect(mlaDecodeDecline({ ...ok, cacheVecBytes: 2 })).toMatch(/4-byte/);
  });
});

describe("paged decode attention's MLA route (fake device)", () => {
  const inputs = (backend: ReturnType<typeof fakeDevice>['backend'], B: number, maxBlocks: number, D = 576, nQ = 32) => ({
    q: Tensor.empty(backend, [B, nQ, D], 'bf16'),
    cache: Tensor.empty(backend, [600, 16, 1, D], 'bf16'),
    bt: Tensor.empty(backend, [B, maxBlocks], 'i32'),
    lens: Tensor.empty(backend, [B], 'i32'),
  });

  it('Kimi-48B at bs 1 x 4096: fk_paged_mla_decode over 16 splits, then the combine (value 576, skip_single)', () => {
    const { backend, ctx, launches } = fakeDevice();
    const { q, cache, bt, lens } = inputs(backend, 1, 256);
    const out = pagedDecodeAttention(ctx, q, cache, cache, bt, lens, 1 / Math.sqrt(192), 0);
    expect([...out.shape]).toEqual([1, 32, 576]);
    expect(launches.map((l) => l.entry)).toEqual(['fk_paged_mla_decode', 'fk_paged_decode_combine']);
    const [main, combine] = launches as [(typeof launches)[0], (typeof launches)[0]];
    expect(main.options).toEqual(['-DFK_T=__nv_bfloat16', '-DFK_MLA_D=576', '-DFK_MLA_DV=576', '-DFK_MLA_MT=2', '-DFK_STAGES=3', '-DFK_BS=16', '-DFK_MLA_CB=16']);
    expect(main.grid).toEqual([16, 1, 1]);
    expect(main.block).toBe(MLA_THREADS);
    expect(main.shared).toBe(mlaSharedBytes(576, 2, 3));
    expect(main.args.slice(4, 6)).toEqual([0, 576]); // q batch (one sequence: 0) / head strides
    expect(main.args.slice(7, 9)).toEqual([16 * 576, 576]); // cache block / token strides
    expect(main.args.slice(-2)).toEqual([256, 16]); // chunk, splits
    expect(main.args.at(-3)).toBeCloseTo(Math.LOG2E / Math.sqrt(192), 12);
    expect(combine.grid).toEqual([32, 1, 1]);
    expect(combine.args.slice(4)).toEqual([4096, 32, 576, 0, 256, 16, 1, 0]); // max tokens, nQ, DV, window, chunk, splits, skip_single, sinks
  });

  it('bs 200: one split, no combine; 8-byte aligned tiny rows take 8-byte chunks', () => {
    const { backend, ctx, launches } = fakeDevice();
    const { q, cache, bt, lens } = inputs(backend, 200, 256);
    pagedDecodeAttention(ctx, q, cache, cache, bt, lens, 0.07, 0);
    expect(launches.map((l) => l.entry)).toEqual(['fk_paged_mla_decode']);
    expect(launches[0]!.grid).toEqual([1, 1, 200]);
    // D 300: 600-byte rows, 8-byte aligned
    launches.length = 0;
    const w = inputs(backend, 2, 4, 300, 8);
    pagedDecodeAttention(ctx, w.q, w.cache, w.cache, w.bt, w.lens, 0.07, 0);
    expect(launches[0]!.options).toContain('-DFK_MLA_CB=8');
    expect(launches[0]!.options).toContain('-DFK_MLA_MT=1');
  });

  it("the op's v_head_dim 512 through the registry (Kimi-Linear's absorbed decode): FK_MLA_DV 512, a [B, 32, 512] output, the combine over 512", () => {
    const { backend, ctx, launches } = fakeDevice();
    const table = new OpKernelTable('fake');
    Object.assign(backend, { opKernels: table });
    Object.assign(backend.ops, { spine: ctx });
    registerAttentionKernels(table, new GenKernelCache());
    const { q, cache, bt, lens } = inputs(backend, 1, 256);
    const args = [q, cache, cache, bt, lens, null];
    expect(opRoute('paged_decode_attention', args, { scale: 0.07, v_head_dim: 512 })).toEqual({ via: 'kernel' });
    const out = callOp1('paged_decode_attention', args, { scale: 0.07, v_head_dim: 512 });
    expect([...out.shape]).toEqual([1, 32, 512]);
    expect(launches.map((l) => l.entry)).toEqual(['fk_paged_mla_decode', 'fk_paged_decode_combine']);
    const [main, combine] = launches as [(typeof launches)[0], (typeof launches)[0]];
    expect(main.options).toContain('-DFK_MLA_D=576');
    expect(main.options).toContain('-DFK_MLA_DV=512');
    expect(combine.block).toBe(256);
    expect(combine.args.slice(4, 7)).toEqual([4096, 32, 512]); // max tokens, nQ, DV
    // without the attribute: the whole row, as before
    launches.length = 0;
    expect([...callOp1('paged_decode_attention', args, { scale: 0.07 }).shape]).toEqual([1, 32, 576]);
    expect(launches[0]!.options).toContain('-DFK_MLA_DV=576');
    expect(() => callOp1('paged_decode_attention', args, { scale: 0.07, v_head_dim: 600 })).toThrow(/v_head_dim 600 must be in 1\.\.576/);
  });

  it('a value width below the row at D <= 256: the paged decode kernel over the whole row, then its first columns copied out', () => {
    const { backend, ctx, launches } = fakeDevice();
    const tiny = inputs(backend, 2, 4, 20, 4);
    const before = ctx.runtime.launches;
    const out = pagedDecodeAttention(ctx, tiny.q, tiny.cache, tiny.cache, tiny.bt, tiny.lens, 0.2, 0, null, 16);
    expect([...out.shape]).toEqual([2, 4, 16]);
    expect(out.isContiguous()).toBe(true);
    expect(launches.map((l) => l.entry)).toEqual(['fk_paged_decode']);
    expect(launches[0]!.options).toContain('-DFK_D=20');
    expect(ctx.runtime.launches - before).toBe(2); // the kernel, then the copy
    expect(() => pagedDecodeAttention(ctx, tiny.q, tiny.cache, tiny.cache, tiny.bt, tiny.lens, 0.2, 0, null, 21)).toThrow(/value width 21 must be an integer in 1..20/);
  });

  it('past 256 anything but one latent kv head given as both caches still throws, saying why; 256 and below keep the paged decode kernels', () => {
    const { backend, ctx, launches } = fakeDevice();
    const { q, cache, bt, lens } = inputs(backend, 2, 4);
    const other = Tensor.empty(backend, [600, 16, 1, 576], 'bf16');
    expect(() => pagedDecodeAttention(ctx, q, cache, other, bt, lens, 0.1, 0)).toThrow(/only for MLA's latent cache.*different tensors/);
    expect(() => pagedDecodeAttention(ctx, q, cache, cache, bt, lens, 0.1, 64)).toThrow(/sliding window/);
    expect(() => pagedDecodeAttention(ctx, q, cache, cache, bt, lens, 0.1, 0, Tensor.empty(backend, [32], 'f32'))).toThrow(/sinks/);
    const two = Tensor.empty(backend, [600, 16, 2, 576], 'bf16');
    expect(() => pagedDecodeAttention(ctx, q, two, two, bt, lens, 0.1, 0)).toThrow(/2 kv heads/);
    const qf = Tensor.empty(backend, [2, 32, 576], 'f32');
    const cf = Tensor.empty(backend, [600, 16, 1, 576], 'f32');
    expect(() => pagedDecodeAttention(ctx, qf, cf, cf, bt, lens, 0.1, 0)).toThrow(/dtype f32/);
    expect(launches).toHaveLength(0);
    const tiny = inputs(backend, 2, 4, 20, 4);
    pagedDecodeAttention(ctx, tiny.q, tiny.cache, tiny.cache, tiny.bt, tiny.lens, 0.2, 0);
    expect(launches[0]!.entry).toBe('fk_paged_decode');
  });
});
