import { describe, expect, it } from 'vitest';
import { withTuning } from '../../../test/spine-helpers.js';
import { chooseSamplerPath } from './sampler.js';
import type { Tuning } from '../../tuning/schema.js';
import { cudaTuning } from '../../tuning/load.js';

describe('chooseSamplerPath (CPU): one CTA per row vs multi-CTA, per call', () => {
  const V = 128256;
  it.skipIf(process.env.FASTKERNELS_TUNING !== undefined)('defaults (run 10): not forced; multi-CTA from one drawing row, one CTA per row when all rows are greedy or without a hint', () => {
    expect(cudaTuning().sampler.multiCta).toBe(false);
    expect(cudaTuning().sampler.multiCtaMinSampledRows).toBe(1);
    expect(cudaTuning().sampler.unhinted).toBe('single');
    expect(chooseSamplerPath(64, V, 64)).toBe('multi');
    expect(chooseSamplerPath(1, V, 1)).toBe('multi');
    expect(chooseSamplerPath(64, V, 0)).toBe('single');
    expect(chooseSamplerPath(64, V, undefined)).toBe('single');
  });
  // the rule, at a threshold of 8 drawing rows (the greedy split off: its cases follow)
  const ON = { multiCtaMinSampledRows: 8, greedySplitMaxRows: 0 };
  const cases: [string, number, number | undefined, Partial<Tuning['sampler']>, 'single' | 'multi'][] = [
    ['no hint: the unhinted path (multi-CTA)', 32, undefined, { unhinted: 'multi' }, 'multi'],
    ['no hint, unhinted single (the default): one CTA per row', 32, undefined, { unhinted: 'single' }, 'single'],
    ['no hint, B = 1', 1, undefined, { unhinted: 'multi' }, 'multi'],
    ['no hint, B > 65535: single whatever unhinted says', 65536, undefined, { unhinted: 'multi' }, 'single'],
    ['all greedy (B64, 0 drawing rows)', 64, 0, {}, 'single'],
    ['one drawing row (B1 sampled)', 1, 1, {}, 'single'],
    ['one drawing row among greedy ones', 64, 1, {}, 'single'],
    ['7 drawing rows: below the threshold', 32, 7, {}, 'single'],
    ['8 drawing rows: the threshold', 8, 8, {}, 'multi'],
    ['B32 all drawing', 32, 32, {}, 'multi'],
    ['B64 mixed, 40 drawing', 64, 40, {}, 'multi'],
    ['multiCta forced, no hint', 1, undefined, { multiCta: true }, 'multi'],
    ['multiCta forced, all greedy', 64, 0, { multiCta: true }, 'multi'],
    ['B > 65535 (grid y limit), all drawing', 65536, 65536, {}, 'single'],
    ['B > 65535 even when forced', 70000, 70000, { multiCta: true }, 'single'],
    ['B = 65535, all drawing', 65535, 65535, {}, 'multi'],
    ['threshold from the tuning', 4, 4, { multiCtaMinSampledRows: 4 }, 'multi'],
    ['threshold from the tuning, below', 4, 3, { multiCtaMinSampledRows: 4 }, 'single'],
    ['NaN hint: single', 32, Number.NaN, {}, 'single'],
  ];
  for (const [name, B, sampled, patch, want] of cases) {
    it(`${name} -> ${want}`, () => {
      expect(chooseSamplerPath(B, V, sampled, { ...cudaTuning().sampler, ...ON, ...patch })).toBe(want);
    });
  }
  it.skipIf(process.env.FASTKERNELS_TUNING !== undefined)('by default (run 12) the greedy split serves all-greedy bs-1 calls only', () => {
    expect(cudaTuning().sampler.greedySplitMaxRows).toBe(1);
    expect(chooseSamplerPath(1, V, 0)).toBe('greedy-split');
    expect(chooseSamplerPath(2, V, 0)).toBe('single');
  });
  const SPLIT = { ...cudaTuning().sampler, greedySplitMaxRows: 4 };
  const splitCases: [string, number, number | undefined, Partial<Tuning['sampler']>, string][] = [
    ['all greedy, B1', 1, 0, {}, 'greedy-split'],
    ['all greedy, B4 (the limit)', 4, 0, {}, 'greedy-split'],
    ['all greedy, B5: above the limit', 5, 0, {}, 'single'],
    ['no hint (nothing known about the rows): never the greedy split', 1, undefined, { unhinted: 'single' }, 'single'],
    ['one drawing row', 1, 1, {}, 'multi'],
    ['multiCta forced wins', 1, 0, { multiCta: true }, 'multi'],
  ];
  for (const [name, B, sampled, patch, want] of splitCases) {
    it(`greedySplitMaxRows 4: ${name} -> ${want}`, () => expect(chooseSamplerPath(B, V, sampled, { ...SPLIT, ...patch })).toBe(want));
  }
  it('reads sampler by default (the GPU tests flip multiCta on it)', () => {
    withTuning('sampler', { multiCta: true }, () => expect(chooseSamplerPath(1, V, undefined)).toBe('multi'));
    withTuning('sampler', { multiCta: false, unhinted: 'single' }, () => expect(chooseSamplerPath(1, V, undefined)).toBe('single'));
    withTuning('sampler', { multiCta: false, multiCtaMinSampledRows: 8 }, () => expect(chooseSamplerPath(32, V, 32)).toBe('multi'));
  });
});
