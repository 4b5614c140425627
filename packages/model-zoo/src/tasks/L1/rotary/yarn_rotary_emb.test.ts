import { ModuleRegistry, withContext } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../../test/l1-harness.js';
import { GPT_OSS_YARN_SCALING, YaRNRotaryEmbedding, yarnAttentionFactor, yarnCorrectionRange, yarnCosSinCache, yarnInvFreq, yarnRotaryEmbTask, type YarnRopeScaling } from './yarn_rotary_emb.js';

/** dim 8, base 1e4, factor 4 over 64 positions: extrapolated 1, 0.1, 0.01, 0.001; interpolated a quarter of those. */
const S: YarnRopeScaling = { ...GPT_OSS_YARN_SCALING, factor: 4, originalMaxPositionEmbeddings: 64 };

describe('YaRN parameters (HF _compute_yarn_parameters)', () => {
  it('correction range and blended inv_freq by hand, without truncation (gpt-oss)', () => {
    const [low, high] = yarnCorrectionRange(8, 10000, S);
    expect(low).toBe(0); // 8 ln(64 / 64 pi) / 2 ln 1e4 < 0, clamped
    expect(high).toBeCloseTo(1.0080001056257721, 14);
    const inv = yarnInvFreq(8, 10000, S);
    // pair 0 extrapolated, pair 1 ramp 1 / 1.008 of the way to 0.1 / 4, pairs 2-3 interpolated
    [1, 0.02559524589192421, 0.0025, 0.00025].forEach((v, i) => expect(inv[i]).toBeCloseTo(v, 15));
  });

  it('truncate rounds the range outwards to whole dims', () => {
    const t = { ...S, truncate: true };
    expect(yarnCorrectionRange(8, 10000, t)).toEqual([0, 2]);
    [1, 0.0625, 0.0025, 0.00025].forEach((v, i) => expect(yarnInvFreq(8, 10000, t)[i]).toBeCloseTo(v, 15));
  });

  it('attention factor 0.1 ln(factor) + 1 (1.3466 for gpt-oss), or the given one; the cache carries it on cos and sin', () => {
    expect(yarnAttentionFactor(GPT_OSS_YARN_SCALING)).toBeCloseTo(1.3465735902799727, 14);
    expect(yarnAttentionFactor({ factor: 0.5, attentionFactor: null })).toBe(1);
    expect(yarnAttentionFactor({ factor: 4, attentionFactor: 0.7 })).toBe(0.7);
    const cache = yarnCosSinCache(8, 3, 10000, S);
    const m = 0.1 * Math.log(4) + 1;
    expect(cache[0]).toBeCloseTo(m, 15); // position 0: cos 0 * m
    expect(cache[8 + 1]).toBeCloseTo(Math.cos(0.02559524589192421) * m, 14);
    expect(cache[16 + 4 + 3]).toBeCloseTo(Math.sin(2 * 0.00025) * m, 14);
  });
});

describe('YaRNRotaryEmbedding', () => {
  it("the module's float32 cache covers original * factor positions and matches the float64 one", () => {
    withContext({ backend: cpuBackend(), device: 0, registry: new ModuleRegistry(), dtype: 'f32' }, () => {
      const m = new YaRNRotaryEmbedding(64, 64, 4096, 150000, true, 32, 'f32', 32, 1, false, null);
      expect(m.cosSinCache.shape).toEqual([131072, 64]);
      const got = m.cosSinCache.toFloat64Array();
      const want = yarnCosSinCache(64, 2048, 150000, GPT_OSS_YARN_SCALING);
      let worst = 0;
      for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(got[i]! - want[i]!));
      expect(worst).toBeLessThan(2e-4); // float32 angles up to position 2047
      m.dispose();
    });
  });

  it('is the L1/yarn_rotary_emb task with gpt-oss production cases', () => {
    expect(yarnRotaryEmbTask.id).toBe('L1/yarn_rotary_emb');
    expect(yarnRotaryEmbTask.cases.production.map((c) => c.dims.P)).toEqual([131072, 131072]);
  });
});
