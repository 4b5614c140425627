import { describe, expect, it } from 'vitest';
import { NORM_TUNING, planWarpNorm } from './norm.js';
import { SAMPLER_TUNING, planSampler, samplerScratchWords } from './sampler.js';

describe('sampler / norm launch plans (CPU)', () => {
  it('switches are off by default (the H200-verified kernels stay the default)', () => {
    expect(SAMPLER_TUNING.multiCta).toBe(false);
    expect(NORM_TUNING.warpPerRow).toBe(false);
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
  it('warp-per-row norm: vectors per lane, register budget -> CTAs per SM, fallback for long rows', () => {
    const p = planWarpNorm(4096, 4096, 8)!;
    expect(p).toMatchObject({ vecsPerLane: 16, warpsPerCta: 4, grid: 1024 });
    expect(p.minBlocks).toBeGreaterThanOrEqual(2);
    expect(planWarpNorm(4096, 8192, 8)!.minBlocks).toBeGreaterThanOrEqual(2);
    expect(planWarpNorm(5, 100, 1)!.vecsPerLane).toBe(4);
    expect(planWarpNorm(3, 4100, 1)).toBeNull();
    expect(planWarpNorm(2, 12288, 8)).toBeNull();
    expect(planWarpNorm(7, 64, 8)!.vecsPerLane).toBe(1);
  });
});
