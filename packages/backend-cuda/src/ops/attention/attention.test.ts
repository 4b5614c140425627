import { callOp1, OpKernelTable, opRoute, Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { KERNEL_SOURCES } from '../../kernel-sources.generated.js';
import { lanesPerRow, largestDivisorAtMost, planDecode, planPrefill, PREFILL_WGMMA_SMEM_BYTES, vectorBytes } from './attention-plan.js';
import { pagedDecodeAttention, varlenPrefillAttention } from './attention.js';
import { registerAttentionKernels } from './register.js';
import { GenKernelCache } from '../gen-cache.js';
import { fakeDevice } from '../../../test/fake-device.js';
import { withTuning } from '../../../test/spine-helpers.js';
import { ptr } from '../launch/common.js';
import { cudaTuning } from '../../tuning/load.js';

describe('attention launch plans', () => {
  it('helpers', () => {
    expect(largestDivisorAtMost(4, 4)).toBe(4);
    expect(largestDivisorAtMost(8, 4)).toBe(4);
    expect(largestDivisorAtMost(6, 4)).toBe(3);
    expect(largestDivisorAtMost(7, 4)).toBe(1);
    expect([1, 2, 3, 5, 8, 9, 16, 17, 32, 64].map(lanesPerRow)).toEqual([1, 2, 4, 8, 8, 16, 16, 32, 32, 32]);
    expect(vectorBytes(2, [256, 4096, 1024])).toBe(16);
    expect(vectorBytes(2, [160, 4096, 8])).toBe(8);
    expect(vectorBytes(2, [2, 16])).toBe(2);
    expect(vectorBytes(4, [64, 12])).toBe(4);
  });

  const llama = { qHeads: 32, kvHeads: 8, headDim: 128, itemsize: 2, vecBytes: 16, blockSize: 16, slidingWindow: 0, multiprocessors: 132 };

  it('decode, Llama-3-8B at batch 64 x 2048: 4 heads per CTA, 16 lanes per row, a few splits', () => {
    const p = planDecode({ ...llama, batch: 64, maxBlocks: 128 });
    expect(p.headsPerCta).toBe(4);
    expect(p.lanesPerRow).toBe(16);
    expect(p.rows).toBe(8);
    expect(p.unroll).toBe(4);
    expect(p.tokensPerIter).toBe(32);
    expect(p.chunk % p.tokensPerIter).toBe(0);
    expect(p.splits * p.chunk).toBeGreaterThanOrEqual(2048);
    expect((p.splits - 1) * p.chunk).toBeLessThan(2048);
    expect(p.grid).toEqual([p.splits, 8, 64]);
  });

  it('decode, batch 1 x 8k context splits the sequence finely; a window bounds the splits', () => {
    const p = planDecode({ ...llama, batch: 1, maxBlocks: 512 });
    expect(p.splits).toBeGreaterThanOrEqual(16);
    expect(p.chunk).toBeGreaterThanOrEqual(cudaTuning().attention.decodeMinSplitTokens);
    const w = planDecode({ ...llama, batch: 1, maxBlocks: 512, slidingWindow: 100 });
    expect(w.splits).toBe(1);
    expect(w.chunk).toBeGreaterThanOrEqual(100);
  });

  it('decode: empty tables, fp32 and odd head dims give consistent plans', () => {
    expect(planDecode({ ...llama, batch: 3, maxBlocks: 0 }).splits).toBe(1);
    const f = planDecode({ ...llama, itemsize: 4, headDim: 256, batch: 2, maxBlocks: 4, qHeads: 8, kvHeads: 1 });
    expect(f.lanesPerRow).toBe(32);
    expect(f.headsPerCta).toBe(4);
    expect(f.unroll).toBe(4);
    const odd = planDecode({ ...llama, headDim: 80, batch: 2, maxBlocks: 4 });
    expect(odd.lanesPerRow).toBe(16);
  });

  it('decode, the mma kernel: eligibility, heads per CTA up to 16, stages from the shared budget, split sizes', () => {
    const m = planDecode({ ...llama, batch: 64, maxBlocks: 128, dtype: 'bf16' });
    expect(m.mma).toBe(true);
    expect(m.headsPerCta).toBe(4);
    expect(m.warps).toBe(cudaTuning().attention.decodeMmaWarps);
    expect(m.stages).toBe(2); // run 14's default: three CTAs an SM
    expect(m.sharedBytes).toBe(4 * 2 * 2 * 16 * 128 * 2);
    expect(m.chunk).toBe(512); // 132 SMs x 16 CTAs aimed for
    expect(m.splits).toBe(4);
    expect(m.grid).toEqual([4, 8, 64]);
    // decodeMmaStages 0: as many stages as the shared budget holds
    const budget = { ...cudaTuning().attention, decodeMmaStages: 0 };
    expect(planDecode({ ...llama, batch: 64, maxBlocks: 128, dtype: 'bf16' }, budget).stages).toBe(3);
    const d64 = planDecode({ ...llama, headDim: 64, batch: 64, maxBlocks: 128, dtype: 'f16' }, budget);
    expect(d64.stages).toBe(6);
    expect(planDecode({ ...llama, qHeads: 64, kvHeads: 1, batch: 2, maxBlocks: 8, dtype: 'bf16' }).headsPerCta).toBe(16);
    expect(planDecode({ ...llama, qHeads: 12, kvHeads: 2, batch: 2, maxBlocks: 8, dtype: 'bf16' }).headsPerCta).toBe(6);
    const one = planDecode({ ...llama, batch: 1, maxBlocks: 512, dtype: 'bf16' });
    expect(one.chunk).toBe(64); // decodeMmaMinSplitTokens: one 16-key tile per warp of 4 (run 15)
    expect(one.splits).toBe(128);
    // not eligible: f32, odd head dims, caches not 16-byte aligned, or switched off
    expect(planDecode({ ...llama, itemsize: 4, batch: 2, maxBlocks: 4, dtype: 'f32' }).mma).toBe(false);
    expect(planDecode({ ...llama, headDim: 96, batch: 2, maxBlocks: 4, dtype: 'bf16' }).mma).toBe(false);
    expect(planDecode({ ...llama, batch: 2, maxBlocks: 4, dtype: 'bf16', cacheVecBytes: 8 }).mma).toBe(false);
    expect(planDecode({ ...llama, batch: 2, maxBlocks: 4, dtype: 'bf16', vecBytes: 2, cacheVecBytes: 16 }).mma).toBe(true);
    expect(planDecode({ ...llama, batch: 2, maxBlocks: 4, dtype: 'bf16' }, { ...cudaTuning().attention, decodeMma: false }).mma).toBe(false);
    // a forced depth is capped by the device's per-block shared memory (H200: 227 KB, so 7 stages of 8 KB at 4 warps)
    const deep = { ...cudaTuning().attention, decodeMmaStages: 8 };
    expect(planDecode({ ...llama, batch: 64, maxBlocks: 128, dtype: 'bf16' }, deep).stages).toBe(8);
    expect(planDecode({ ...llama, batch: 64, maxBlocks: 128, dtype: 'bf16', sharedPerBlockOptin: 232448 }, deep).stages).toBe(7);
    expect(planDecode({ ...llama, batch: 64, maxBlocks: 128, dtype: 'bf16', sharedPerBlockOptin: 232448 }, { ...deep, decodeMmaWarps: 8 }).stages).toBe(3);
    // a forced split rounds up to one tile per warp
    expect(planDecode({ ...llama, batch: 2, maxBlocks: 40, dtype: 'bf16' }, { ...cudaTuning().attention, decodeSplitTokens: 65 }).chunk).toBe(128);
  });

  it('prefill: wgmma on sm_90a at head dim 128 (16-bit), mma for bf16/f16 at 64/128 elsewhere, the simple path otherwise', () => {
    const w = planPrefill({ totalQ: 4096, qHeads: 32, headDim: 128, dtype: 'bf16', numSeqs: 3, arch: 'sm_90a' });
    expect(w).toMatchObject({ kernel: 'wgmma', mma: true, rowsPerCta: 128, block: 256, skipRescale: true, grid: [32, 32 + 3, 1] });
    expect(w.sharedBytes).toBe(PREFILL_WGMMA_SMEM_BYTES);
    expect(planPrefill({ totalQ: 8, qHeads: 1, headDim: 128, dtype: 'f16', numSeqs: 1, arch: 'sm_90a' }).kernel).toBe('wgmma');
    // not at head dim 64, not on plain sm_90 / other devices, not when switched off, never for f32
    expect(planPrefill({ totalQ: 8, qHeads: 1, headDim: 64, dtype: 'bf16', numSeqs: 1, arch: 'sm_90a' }).kernel).toBe('mma');
    expect(planPrefill({ totalQ: 8, qHeads: 1, headDim: 128, dtype: 'bf16', numSeqs: 1, arch: 'sm_89' }).kernel).toBe('mma');
    expect(planPrefill({ totalQ: 8, qHeads: 1, headDim: 128, dtype: 'bf16', numSeqs: 1, arch: 'sm_90a' }, { ...cudaTuning().attention, prefillWgmma: false }).kernel).toBe('mma');
    expect(planPrefill({ totalQ: 8, qHeads: 1, headDim: 128, dtype: 'f32', numSeqs: 1, arch: 'sm_90a' }).kernel).toBe('simple');
    const p = planPrefill({ totalQ: 4096, qHeads: 32, headDim: 128, dtype: 'bf16', numSeqs: 1 }, { ...cudaTuning().attention, prefillWarps: 4 });
    expect(p.mma).toBe(true);
    expect(p.kernel).toBe('mma');
    expect(p.grid).toEqual([32, 65, 1]);
    expect(p.sharedBytes).toBe((64 * 128 + 4 * 64 * 128) * 2);
    const p8 = planPrefill({ totalQ: 4096, qHeads: 32, headDim: 128, dtype: 'bf16', numSeqs: 1 });
    expect(p8.warps).toBe(cudaTuning().attention.prefillWarps);
    expect(p8.skipRescale).toBe(true);
    expect(planPrefill({ totalQ: 8, qHeads: 1, headDim: 128, dtype: 'f16', numSeqs: 1 }, { ...cudaTuning().attention, prefillSkipRescale: false }).skipRescale).toBe(false);
    expect(planPrefill({ totalQ: 8, qHeads: 1, headDim: 64, dtype: 'f16', numSeqs: 1 }).skipRescale).toBe(false);
    expect(planPrefill({ totalQ: 10, qHeads: 4, headDim: 64, dtype: 'f32', numSeqs: 2 }).mma).toBe(false);
    expect(planPrefill({ totalQ: 10, qHeads: 4, headDim: 96, dtype: 'bf16', numSeqs: 2 }).mma).toBe(false);
  });
});

// ------------------------------------------------------------------------ the op path with a fake device

describe('attention ops on a fake device (argument packing, grids, specialisations)', () => {
  it('paged decode (register-streaming kernel, decodeMma off): one launch without a split, main + combine with splits', () => {
    const saved = cudaTuning().attention.decodeMma;
    cudaTuning().attention.decodeMma = false;
    try {
      oldKernelLaunches();
    } finally {
      cudaTuning().attention.decodeMma = saved;
    }
  });

  it('paged decode, bf16 Llama-3-8B at batch 64: the mma kernel, its shared memory, combine skipping single splits', () => {
    const { backend, ctx, launches } = fakeDevice();
    const q = Tensor.empty(backend, [64, 32, 128], 'bf16');
    const kc = Tensor.empty(backend, [9000, 16, 8, 128], 'bf16');
    const bt = Tensor.empty(backend, [64, 128], 'i32');
    const lens = Tensor.empty(backend, [64], 'i32');
    pagedDecodeAttention(ctx, q, kc, kc, bt, lens, 0.088, 0);
    expect(launches.map((l) => l.entry)).toEqual(['fk_paged_decode_mma', 'fk_paged_decode_combine']);
    const main = launches[0]!;
    expect(main.options).toContain('-DFK_MHG=4');
    expect(main.options).toContain('-DFK_DEC_PATH=2');
    expect(main.options).toContain('-DFK_STAGES=2');
    expect(main.options.some((o: string) => o.startsWith('-DFK_EARLY_KV'))).toBe(false); // no KV-cache write just before
    expect(main.shared).toBe(4 * 2 * 8192);
    expect(main.grid).toEqual([4, 8, 64]);
    expect(main.args.at(-3)).toBe(512); // chunk
    expect(main.args.at(-1)).toBe(0); // no sinks
    expect(launches[1]!.args.at(-2)).toBe(1); // skip_single
    expect(launches[1]!.args.at(-1)).toBe(0); // no sinks
    expect([...main.options, ...launches[1]!.options].some((o: string) => o.startsWith('-DFK_SINKS'))).toBe(false);
    expect(launches[1]!.options).toContain(`-DFK_COMBINE_UNROLL=${cudaTuning().attention.decodeCombineUnroll}`);
    if (process.env.FASTKERNELS_TUNING === undefined) expect(cudaTuning().attention.decodeCombineUnroll).toBe(8); // run 20's default
    // early cache loads (attention.decodeEarlyKv, on by default since run 15): only right after the KV-cache
    // write of one token a sequence into these caches, with no launch of ours in between (a copy of an input is one)
    const early = (write: { k?: Tensor; tokens?: number; between?: boolean } | null, lensT: Tensor = lens) => {
      if (write) ctx.noteKvWrite(ptr(write.k ?? kc), ptr(write.k ?? kc), write.tokens ?? 64);
      if (write?.between) backend.ops.fill(lens, 0);
      launches.length = 0;
      withTuning('attention', { decodeEarlyKv: true }, () => pagedDecodeAttention(ctx, q, kc, kc, bt, lensT, 0.088, 0));
      return launches.find((l) => l.entry === 'fk_paged_decode_mma')!.options.includes('-DFK_EARLY_KV=1');
    };
    expect(early({})).toBe(true);
    expect(early(null)).toBe(false); // the decode's own launches came after that write
    expect(early({ between: true })).toBe(false);
    expect(early({ tokens: 32 })).toBe(false); // not one token a sequence
    expect(early({ k: Tensor.empty(backend, [9000, 16, 8, 128], 'bf16') })).toBe(false); // other caches
    expect(early({}, Tensor.empty(backend, [64], 'i64'))).toBe(false); // the lengths' int32 copy is a launch in between
    expect(early({}, Tensor.empty(backend, [128], 'i32').narrow(0, 0, 64))).toBe(true); // a contiguous view: no copy
    expect(withTuning('attention', { decodeEarlyKv: false }, () => {
      ctx.noteKvWrite(ptr(kc), ptr(kc), 64);
      launches.length = 0;
      pagedDecodeAttention(ctx, q, kc, kc, bt, lens, 0.088, 0);
      return launches[0]!.options.includes('-DFK_EARLY_KV=1');
    })).toBe(false); // switched off
    // f32 and odd head dims keep the register-streaming kernel
    launches.length = 0;
    const qf = Tensor.empty(backend, [2, 8, 128], 'f32');
    const kf = Tensor.empty(backend, [10, 16, 2, 128], 'f32');
    pagedDecodeAttention(ctx, qf, kf, kf, Tensor.empty(backend, [2, 4], 'i32'), Tensor.empty(backend, [2], 'i32'), 0.088, 0);
    expect(launches[0]!.entry).toBe('fk_paged_decode');
    launches.length = 0;
    const q80 = Tensor.empty(backend, [2, 8, 80], 'bf16');
    const k80 = Tensor.empty(backend, [10, 16, 2, 80], 'bf16');
    pagedDecodeAttention(ctx, q80, k80, k80, Tensor.empty(backend, [2, 4], 'i32'), Tensor.empty(backend, [2], 'i32'), 0.1, 0);
    expect(launches[0]!.entry).toBe('fk_paged_decode');
  });

  function oldKernelLaunches(): void {
    const { backend, ctx, launches } = fakeDevice();
    const q = Tensor.empty(backend, [64, 32, 128], 'bf16');
    const kc = Tensor.empty(backend, [9000, 16, 8, 128], 'bf16');
    const vc = Tensor.empty(backend, [9000, 16, 8, 128], 'bf16');
    const bt = Tensor.empty(backend, [64, 128], 'i32');
    const lens = Tensor.empty(backend, [64], 'i32');
    const out = pagedDecodeAttention(ctx, q, kc, vc, bt, lens, 0.088, 0);
    expect([...out.shape]).toEqual([64, 32, 128]);
    const main = launches.find((l) => l.entry === 'fk_paged_decode')!;
    expect(main.options).toContain('-DFK_HG=4');
    expect(main.options).toContain('-DFK_VB=16');
    expect(main.options).toContain('-DFK_BS=16');
    const splits = (main.grid as number[])[0]!;
    expect(launches.length).toBe(splits > 1 ? 2 : 1);
    if (splits > 1) expect(launches[1]!.entry).toBe('fk_paged_decode_combine');

    launches.length = 0;
    const q1 = Tensor.empty(backend, [1, 32, 128], 'bf16');
    pagedDecodeAttention(ctx, q1, kc, vc, Tensor.empty(backend, [1, 512], 'i32'), Tensor.empty(backend, [1], 'i32'), 0.088, 0);
    expect(launches.map((l) => l.entry)).toEqual(['fk_paged_decode', 'fk_paged_decode_combine']);
    expect(launches[1]!.args.at(-2)).toBe(0); // skip_single off: the combine writes every output
  }

  it('paged decode: a strided query view (a slice of fused qkv) is read in place', () => {
    const { backend, ctx, launches } = fakeDevice();
    const qkv = Tensor.empty(backend, [4, 48, 64], 'f16'); // 32 q heads + 8 k + 8 v
    const q = qkv.narrow(1, 0, 32);
    const kc = Tensor.empty(backend, [10, 16, 8, 64], 'f16');
    pagedDecodeAttention(ctx, q, kc, kc, Tensor.empty(backend, [4, 3], 'i32'), Tensor.empty(backend, [4], 'i32'), 0.125, 0);
    const main = launches[0]!;
    expect(main.args[4]).toBe(48 * 64); // q batch stride
    expect(main.args[5]).toBe(64); // q head stride
  });

  it('varlen prefill: mma path grid and shared memory; simple path for f32', () => {
    const { backend, ctx, launches } = fakeDevice();
    const q = Tensor.empty(backend, [4096, 32, 128], 'bf16');
    const k = Tensor.empty(backend, [4096, 8, 128], 'bf16');
    const cu = Tensor.empty(backend, [2], 'i32');
    varlenPrefillAttention(ctx, q, k, k, cu, cu, 0.088, true, 0);
    expect(launches[0]!.entry).toBe('fk_varlen_prefill');
    expect(launches[0]!.options).toContain('-DFK_SKIP_RESCALE=1');
    const bm = 16 * cudaTuning().attention.prefillWarps;
    expect(launches[0]!.grid).toEqual([32, Math.ceil(4096 / bm) + 1, 1]);
    expect(launches[0]!.shared).toBe((bm * 128 + 4 * 64 * 128) * 2);
    launches.length = 0;
    const qf = Tensor.empty(backend, [10, 4, 16], 'f32');
    const kf = Tensor.empty(backend, [12, 2, 16], 'f32');
    varlenPrefillAttention(ctx, qf, kf, kf, Tensor.empty(backend, [3], 'i32'), Tensor.empty(backend, [3], 'i32'), 0.25, false, 8);
    expect(launches[0]!.entry).toBe('fk_varlen_prefill_simple');
    expect(launches[0]!.grid).toEqual([3, 4, 1]);
  });

  it('rejects bad shapes and dtypes with clear messages', () => {
    const { backend, ctx } = fakeDevice();
    const q = Tensor.empty(backend, [2, 6, 64], 'bf16');
    const kc = Tensor.empty(backend, [4, 16, 4, 64], 'bf16');
    expect(() => pagedDecodeAttention(ctx, q, kc, kc, Tensor.empty(backend, [2, 2], 'i32'), Tensor.empty(backend, [2], 'i32'), 1, 0)).toThrow('not a multiple');
    const k8 = Tensor.empty(backend, [4, 16, 2, 64], 'f32');
    expect(() => pagedDecodeAttention(ctx, q, k8, k8, Tensor.empty(backend, [2, 2], 'i32'), Tensor.empty(backend, [2], 'i32'), 1, 0)).toThrow('dtype');
    const cu2 = Tensor.empty(backend, [2], 'i32');
    const cu3 = Tensor.empty(backend, [3], 'i32');
    const k = Tensor.empty(backend, [5, 2, 64], 'bf16');
    expect(() => varlenPrefillAttention(ctx, Tensor.empty(backend, [5, 4, 64], 'bf16'), k, k, cu2, cu3, 1, true, 0)).toThrow('B + 1');
  });
});

// ------------------------------------------------------------------------ attention sinks (gpt-oss), fake device

describe('attention sinks on a fake device: the FK_SINKS build, the sinks pointer last, the combine adding them', () => {
  const hasSinks = (l: { options: readonly string[] }) => l.options.includes('-DFK_SINKS=1');

  it('paged decode, the mma kernel: main + combine both built with sinks and given the f32 sinks; none without sinks', () => {
    const { backend, ctx, launches } = fakeDevice();
    const q = Tensor.empty(backend, [64, 32, 128], 'bf16');
    const kc = Tensor.empty(backend, [9000, 16, 8, 128], 'bf16');
    const bt = Tensor.empty(backend, [64, 128], 'i32');
    const lens = Tensor.empty(backend, [64], 'i32');
    const sinks = Tensor.empty(backend, [32], 'f32');
    pagedDecodeAttention(ctx, q, kc, kc, bt, lens, 0.088, 0, sinks);
    expect(launches.map((l) => l.entry)).toEqual(['fk_paged_decode_mma', 'fk_paged_decode_combine']);
    for (const l of launches) {
      expect(hasSinks(l), l.entry).toBe(true);
      expect(l.args.at(-1), l.entry).toBe(ptr(sinks)); // an f32 [nQ] tensor is read in place
    }
    expect(launches[0]!.args.at(-3)).toBe(512); // chunk: the plan is the one without sinks
    expect(launches[1]!.args.at(-2)).toBe(1); // skip_single: the mma kernel adds the sinks of the sequences it writes
    // without sinks: the build from before (no define), the pointer 0
    launches.length = 0;
    pagedDecodeAttention(ctx, q, kc, kc, bt, lens, 0.088, 0, null);
    for (const l of launches) {
      expect(hasSinks(l), l.entry).toBe(false);
      expect(l.args.at(-1), l.entry).toBe(0);
    }
  });

  it('paged decode, the register kernel: one split (the main kernel adds them) and several (the combine does)', () => {
    withTuning('attention', { decodeMma: false }, () => {
      const { backend, ctx, launches } = fakeDevice();
      const kc = Tensor.empty(backend, [100, 16, 2, 64], 'f32');
      const sinks = Tensor.empty(backend, [8], 'f32');
      // a sliding window of 16 keys: one split
      pagedDecodeAttention(ctx, Tensor.empty(backend, [3, 8, 64], 'f32'), kc, kc, Tensor.empty(backend, [3, 8], 'i32'), Tensor.empty(backend, [3], 'i32'), 0.125, 16, sinks);
      expect(launches.map((l) => l.entry)).toEqual(['fk_paged_decode']);
      expect(launches[0]!.args.at(-2)).toBe(1); // num_splits
      expect(hasSinks(launches[0]!)).toBe(true);
      expect(launches[0]!.args.at(-1)).toBe(ptr(sinks));
      launches.length = 0;
      // batch 1 over 1024 keys: split, and merged
      pagedDecodeAttention(ctx, Tensor.empty(backend, [1, 8, 64], 'f32'), kc, kc, Tensor.empty(backend, [1, 64], 'i32'), Tensor.empty(backend, [1], 'i32'), 0.125, 0, sinks);
      expect(launches.map((l) => l.entry)).toEqual(['fk_paged_decode', 'fk_paged_decode_combine']);
      expect(launches[0]!.args.at(-2)).toBeGreaterThan(1);
      expect(launches.every(hasSinks)).toBe(true);
      expect(launches[1]!.args.at(-2)).toBe(0); // skip_single off: the combine adds every sink
      expect(launches[1]!.args.at(-1)).toBe(ptr(sinks));
    });
  });

  it('bf16 sinks are converted to f32 first (a launch: no early cache loads then); a strided f32 view is copied', () => {
    const { backend, ctx, launches } = fakeDevice();
    const q = Tensor.empty(backend, [64, 32, 128], 'bf16');
    const kc = Tensor.empty(backend, [9000, 16, 8, 128], 'bf16');
    const bt = Tensor.empty(backend, [64, 128], 'i32');
    const lens = Tensor.empty(backend, [64], 'i32');
    const run = (sinks: Tensor) => {
      ctx.noteKvWrite(ptr(kc), ptr(kc), 64);
      launches.length = 0;
      withTuning('attention', { decodeEarlyKv: true }, () => pagedDecodeAttention(ctx, q, kc, kc, bt, lens, 0.088, 0, sinks));
      return launches[0]!;
    };
    const f32 = Tensor.empty(backend, [32], 'f32');
    expect(run(f32).options).toContain('-DFK_EARLY_KV=1'); // read in place: nothing launched in between
    const bf = Tensor.empty(backend, [32], 'bf16');
    const main = run(bf);
    expect(main.options).not.toContain('-DFK_EARLY_KV=1');
    expect(main.args.at(-1)).not.toBe(ptr(bf));
    expect(main.args.at(-1)).not.toBe(0);
    const strided = Tensor.empty(backend, [64], 'f32').reshape([32, 2]).select(1, 0);
    expect(run(strided).args.at(-1)).not.toBe(ptr(strided));
  });

  it('varlen prefill: mma, wgmma and simple builds with sinks, the pointer last', () => {
    const { backend, ctx, launches } = fakeDevice();
    const sinks = Tensor.empty(backend, [32], 'f32');
    const q = Tensor.empty(backend, [300, 32, 128], 'bf16');
    const k = Tensor.empty(backend, [300, 8, 128], 'bf16');
    const cu = Tensor.empty(backend, [3], 'i32');
    varlenPrefillAttention(ctx, q, k, k, cu, cu, 0.088, true, 128, sinks);
    varlenPrefillAttention(ctx, q, k, k, cu, cu, 0.088, true, 0, null);
    const props = ctx.runtime.properties;
    (ctx.runtime as unknown as { properties: () => object }).properties = () => ({ ...props(), arch: 'sm_90a' });
    // the FA3 kernel off (it takes sinks on sm_90a: prefill-fa3.test.ts), so the wgmma sinks build
    withTuning('attention', { prefillFa3: false }, () => varlenPrefillAttention(ctx, q, k, k, cu, cu, 0.088, true, 0, sinks));
    const qf = Tensor.empty(backend, [10, 32, 96], 'f32');
    const kf = Tensor.empty(backend, [12, 8, 96], 'f32');
    varlenPrefillAttention(ctx, qf, kf, kf, cu, cu, 0.1, false, 0, sinks);
    expect(launches.map((l) => l.entry)).toEqual(['fk_varlen_prefill', 'fk_varlen_prefill', 'fk_varlen_prefill_wgmma', 'fk_varlen_prefill_simple']);
    expect(launches.map(hasSinks)).toEqual([true, false, true, true]);
    expect(launches.map((l) => l.args.at(-1))).toEqual([ptr(sinks), 0, ptr(sinks), ptr(sinks)]);
    expect(launches[0]!.args.at(-3)).toBe(128); // window, then scale_log2
  });

  it('rejects sinks that are not one logit per query head', () => {
    const { backend, ctx } = fakeDevice();
    const q = Tensor.empty(backend, [2, 8, 64], 'bf16');
    const kc = Tensor.empty(backend, [4, 16, 2, 64], 'bf16');
    const bt = Tensor.empty(backend, [2, 2], 'i32');
    const sl = Tensor.empty(backend, [2], 'i32');
    expect(() => pagedDecodeAttention(ctx, q, kc, kc, bt, sl, 1, 0, Tensor.empty(backend, [2], 'f32'))).toThrow(/sinks \[2\] must be \[8\]/);
    expect(() => pagedDecodeAttention(ctx, q, kc, kc, bt, sl, 1, 0, Tensor.empty(backend, [8], 'i32'))).toThrow(/sinks dtype i32/);
    const k = Tensor.empty(backend, [5, 2, 64], 'bf16');
    const cu = Tensor.empty(backend, [2], 'i32');
    expect(() => varlenPrefillAttention(ctx, Tensor.empty(backend, [5, 8, 64], 'bf16'), k, k, cu, cu, 1, true, 0, Tensor.empty(backend, [4, 2], 'f32'))).toThrow(/sinks \[4, ?2\] must be \[8\]/);
  });

  it('the registry routes sinks calls to these kernels (they declined before: the Ops methods take no sinks)', () => {
    const { backend, ctx, launches } = fakeDevice();
    const table = new OpKernelTable('fake');
    Object.assign(backend, { opKernels: table });
    Object.assign(backend.ops, { spine: ctx });
    registerAttentionKernels(table, new GenKernelCache());
    const q = Tensor.empty(backend, [2, 8, 64], 'bf16');
    const kc = Tensor.empty(backend, [4, 16, 2, 64], 'bf16');
    const bt = Tensor.empty(backend, [2, 2], 'i32');
    const sl = Tensor.empty(backend, [2], 'i32');
    const sinks = Tensor.empty(backend, [8], 'f32');
    const inputs = [q, kc, kc, bt, sl, sinks];
    expect(opRoute('paged_decode_attention', inputs, { scale: 0.125, sliding_window: 16 })).toEqual({ via: 'kernel' });
    const o = callOp1('paged_decode_attention', inputs, { scale: 0.125, sliding_window: 16 });
    expect(o.shape).toEqual([2, 8, 64]);
    const main = launches[0]!;
    expect(main.entry).toBe('fk_paged_decode_mma');
    expect(main.options).toContain('-DFK_SINKS=1');
    expect(main.args.at(-1)).toBe(ptr(sinks));
    expect(main.args.at(-5)).toBe(16); // window
    expect(main.args.at(-4)).toBeCloseTo(0.125 * Math.LOG2E, 12);
    launches.length = 0;
    const t = Tensor.empty(backend, [7, 8, 64], 'bf16');
    const kv = Tensor.empty(backend, [9, 2, 64], 'bf16');
    const cu = Tensor.empty(backend, [3], 'i32');
    const p = callOp1('varlen_prefill_attention', [t, kv, kv, cu, cu, sinks], { scale: 0.125, causal: true });
    expect(p.shape).toEqual([7, 8, 64]);
    expect(launches[0]!.entry).toBe('fk_varlen_prefill');
    expect(launches[0]!.options).toContain('-DFK_SINKS=1');
    expect(launches[0]!.args.at(-1)).toBe(ptr(sinks));
    expect(launches[0]!.args.at(-4)).toBe(1); // causal
  });
});
