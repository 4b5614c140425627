/**
 * rms-norm.ts's build choice on a fake device: plain rows take fk_rms_norm without FK_GROUPED (40 registers on sm_90a,
 * the build measured before two-level rows existed: the division's 6 more registers cost a 4096-wide bf16 norm's
 * 256-thread blocks one block an SM), per-head views of a fused projection take the FK_GROUPED=1 build with their
 * group and group stride, and both pass the same arguments.
 */
import { Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { fakeDevice } from '../../../test/fake-device.js';
import { fusedAddRmsNorm, rmsNorm } from './rms-norm.js';

const grouped = (options: readonly string[]) => options.includes('-DFK_GROUPED=1');

describe('fk_rms_norm builds', () => {
  it('plain and one-level strided rows take the build without two-level addressing', () => {
    const { backend, ctx, launches } = fakeDevice();
    const w = Tensor.empty(backend, [4096], 'bf16');
    const x = Tensor.empty(backend, [16, 4096], 'bf16');
    const res = Tensor.empty(backend, [16, 4096], 'bf16');
    const wide = Tensor.empty(backend, [16, 3 * 4096], 'bf16');
    const outs = [rmsNorm(ctx, x, w, 1e-6), ...fusedAddRmsNorm(ctx, x, res, w, 1e-6), rmsNorm(ctx, wide.narrow(1, 4096, 4096), w, 1e-6)];
    expect(launches.map((l) => l.entry)).toEqual(['fk_rms_norm', 'fk_rms_norm', 'fk_rms_norm']);
    expect(launches.map((l) => grouped(l.options))).toEqual([false, false, false]);
    // rows, H, xs, group, xgs: the narrowed rows are 3 * 4096 apart, one group
    expect(launches[2]!.args.slice(5, 10)).toEqual([16, 4096, 3 * 4096, 16, 0]);
    for (const t of [...outs, w, x, res, wide]) t.dispose();
  });

  it('a per-head view [T, heads, d] of a fused q / k / v projection takes FK_GROUPED=1 with its group and stride', () => {
    const { backend, ctx, launches } = fakeDevice();
    const [T, nq, nk, d] = [5, 4, 2, 128];
    const qkv = Tensor.empty(backend, [T, (nq + 2 * nk) * d], 'bf16');
    const q = qkv.narrow(1, 0, nq * d).view(T, nq, d);
    const w = Tensor.empty(backend, [d], 'bf16');
    const y = rmsNorm(ctx, q, w, 1e-6);
    expect(launches).toHaveLength(1);
    expect(grouped(launches[0]!.options)).toBe(true);
    expect(launches[0]!.args.slice(5, 10)).toEqual([T * nq, d, d, nq, (nq + 2 * nk) * d]);
    for (const t of [y, q, w, qkv]) t.dispose();
  });
});
