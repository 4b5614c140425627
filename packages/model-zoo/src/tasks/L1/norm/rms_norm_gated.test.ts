import { hostArray } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { rmsNormGatedReference } from './rms_norm_gated.js';

const silu = (v: number) => v / (1 + Math.exp(-v));

describe('L1/rms_norm_gated reference', () => {
  const x = hostArray([1, 4], [1, -2, 3, 2]);
  const z = hostArray([1, 4], [0.5, -1, 2, 0]);
  const w = hostArray([4], [1, 2, 0.5, 1]);

  it('norm before gate (FLA FusedRMSNormGated): rms(x) * w * silu(z)', () => {
    const inv = 1 / Math.sqrt((1 + 4 + 9 + 4) / 4 + 1e-6);
    const y = rmsNormGatedReference(x, z, w, 1e-6, null, true, 'swish');
    [1, -2, 3, 2].forEach((v, j) => expect(y.data[j]).toBeCloseTo(v * inv * w.data[j]! * silu(z.data[j]!), 12));
  });

  it('gate before norm, in groups of 2 (vLLM RMSNormGated default)', () => {
    const g = [1, -2, 3, 2].map((v, j) => v * silu(z.data[j]!));
    const y = rmsNormGatedReference(x, z, w, 0, 2, false, 'silu');
    const inv0 = 1 / Math.sqrt((g[0]! ** 2 + g[1]! ** 2) / 2);
    const inv1 = 1 / Math.sqrt((g[2]! ** 2 + g[3]! ** 2) / 2);
    g.forEach((v, j) => expect(y.data[j]).toBeCloseTo(v * (j < 2 ? inv0 : inv1) * w.data[j]!, 12));
  });

  it('sigmoid gate, and no gate at all', () => {
    const inv = 1 / Math.sqrt(18 / 4);
    const ys = rmsNormGatedReference(x, z, w, 0, null, true, 'sigmoid');
    expect(ys.data[2]).toBeCloseTo(3 * inv * 0.5 / (1 + Math.exp(-2)), 12);
    const yn = rmsNormGatedReference(x, null, w, 0, null, true, 'swish');
    expect(yn.data[1]).toBeCloseTo(-2 * inv * 2, 12);
  });
});
