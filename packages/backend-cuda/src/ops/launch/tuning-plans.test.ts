import { describe, expect, it } from 'vitest';
import { normThreads } from '../norm/rms-norm.js';
import { planSampler, samplerScratchWords } from '../sampling/sampler.js';
import { cudaTuning } from '../../tuning/load.js';

describe('sampler / norm launch plans (CPU)', () => {
  it('switches are off by default (the H200-verified kernels stay the default)', () => {
    expect(cudaTuning().sampler.multiCta).toBe(false);
    expect(cudaTuning().norm.vecsPerThread).toBe(2); // run 9: fastest, or within 2% of vpt1, at every measured shape
  });
  it('multi-CTA sampler: ~3 CTAs per SM in total, slices of >= 2048 logits, multiples of 64 covering V', () => {
    for (const [B, V] of [[1, 128256], [7, 32000], [32, 128256], [64, 128256], [1, 1000], [64, 1000], [1, 1]] as const) {
      const p = planSampler(B, V, 132);
      expect(p.chunk % 64).toBe(0);
      expect(p.ctas * p.chunk).toBeGreaterThanOrEqual(V);
      expect((p.ctas - 1) * p.chunk).toBeLessThan(V);
      expect(p.ctas).toBeGreaterThanOrEqual(1);
    }
    expect(planSampler(32, 128256, 132).ctas).toBe(12);
    expect(planSampler(64, 128256, 132).ctas).toBe(6);
    expect(planSampler(1, 128256, 132).ctas).toBe(63);
    expect(planSampler(1, 1000, 132).ctas).toBe(1);
    expect(samplerScratchWords(2, 3)).toEqual({ hist: 8192, part: 6, state: 32, total: 8230 });
  });
  it('rms_norm threads per row: ceil(H / vec / vecsPerThread) rounded up to a warp, within [32, 512]', () => {
    expect(normThreads(4096, 8)).toBe(256); // the default, 2 vectors per thread
    expect(normThreads(4096, 8, { vecsPerThread: 4 })).toBe(128);
    expect(normThreads(4096, 8, { vecsPerThread: 1 })).toBe(512);
    expect(normThreads(8192, 8, { vecsPerThread: 1 })).toBe(512); // capped: the kernel re-reads the rest
    expect(normThreads(100, 1)).toBe(64); // 100 scalar "vectors", 2 a thread: 50 threads, one warp more
    expect(normThreads(64, 8)).toBe(32);
  });
});
