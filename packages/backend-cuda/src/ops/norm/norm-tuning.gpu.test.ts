/**
 * rms_norm at norm.vecsPerThread 4, 2 (the shipped choice since run 9) and 1 (more threads per row): each vs the float64
 * CPU backend, plus `kernel-speed: rms_norm <case> [vpt4|vpt2|vpt1] <us> = <GB/s> (<% of copy>)` lines.
 */
import { Tensor, type DType } from '@fastkernels/core';
import { describe, it } from 'vitest';
import { G, measureCopy, medianMs, cpu, expectClose, gpu, poison, randCpu, toGpu, tolOf, withTuning, printedAfterAll } from '../../../test/spine-helpers.js';
import type { Tuning } from '../../tuning/schema.js';
import { cudaTuning } from '../../tuning/load.js';

const withNorm = <R>(patch: Partial<Tuning['norm']>, fn: () => R): R => withTuning('norm', patch, fn);
const PATHS = [['vpt4', { vecsPerThread: 4 }], ['vpt2', { vecsPerThread: 2 }], ['vpt1', { vecsPerThread: 1 }]] as const;

describe('rms_norm at 4, 2 and 1 vectors per thread vs the float64 CPU backend', () => {
  for (const dtype of ['bf16', 'f16', 'f32'] as DType[]) {
    // 4096/8192, 100 and 4100 (not a multiple of 8: scalar vectors), 64, 12288 (rows longer than 512 threads hold: the re-read loop), odd T
    for (const [T, H] of [[7, 4096], [5, 100], [9, 8192], [3, 4100], [33, 64], [2, 12288], [13, 1000]] as const) {
      it(`${dtype} T=${T} H=${H}`, G, () => {
        const x = randCpu([T, H], dtype, T * 31 + H, 2);
        const r = randCpu([T, H], dtype, T * 37 + H, 2);
        const w = randCpu([H], dtype, H + 5, 0.5);
        const eps = 1e-5;
        const [gx, gr, gw] = [toGpu(x), toGpu(r), toGpu(w)];
        const ey = cpu().ops.rmsNorm(x, w, eps);
        const [fy, fres] = cpu().ops.fusedAddRmsNorm(x, r, w, eps);
        for (const [name, patch] of PATHS) {
          poison(T * H, T * H);
          const plain = withNorm(patch, () => gpu().ops.rmsNorm(gx, gw, eps));
          expectClose(plain, ey, tolOf(dtype), `${name} rmsNorm`);
          poison(T * H, T * H);
          const [y, res] = withNorm(patch, () => gpu().ops.fusedAddRmsNorm(gx, gr, gw, eps));
          expectClose(res, fres, tolOf(dtype), `${name} fused residual`);
          expectClose(y, fy, tolOf(dtype), `${name} fused y`);
          for (const t of [plain, y, res]) t.dispose();
        }
        for (const t of [gx, gr, gw]) t.dispose(); // released here, not left to the garbage collector
      });
    }
  }
  it('strided rows and a bf16 activation with an f32 weight', G, () => {
    const [T, H] = [9, 256];
    const wide = randCpu([T, H + 64], 'bf16', 1, 1);
    const w = randCpu([H], 'f32', 2);
    const [gWide, gw] = [toGpu(wide), toGpu(w)];
    const rows = gWide.narrow(1, 32, H);
    for (const [name, patch] of PATHS) {
      const got = withNorm(patch, () => gpu().ops.rmsNorm(rows, gw, 1e-6));
      expectClose(got, cpu().ops.rmsNorm(wide.narrow(1, 32, H), w, 1e-6), tolOf('bf16'), `${name} strided`);
      got.dispose();
    }
    for (const t of [rows, gWide, gw]) t.dispose();
  });
});

describe('rms_norm speed at 4, 2 and 1 vectors per thread (printed, not asserted)', () => {
  const lines = printedAfterAll();
  it('bf16 H4096 plain/fused at T 32, 4096, 16384; H8192 T4096', G, () => {
    const b = gpu();
    const n = 64 * 1024 * 1024;
    const { ms: copyMs, gbs: copyGBs } = measureCopy(n);
    lines.push(`kernel-speed: copy ${copyMs.toFixed(3)} ms = ${copyGBs.toFixed(0)} GB/s`);
    for (const [T, H] of [[32, 4096], [4096, 4096], [16384, 4096], [4096, 8192]] as const) {
      const x = Tensor.empty(b, [T, H], 'bf16');
      x.fill_(0.5);
      const r = Tensor.empty(b, [T, H], 'bf16');
      r.fill_(0.25);
      const w = Tensor.empty(b, [H], 'bf16');
      w.fill_(1);
      for (const fused of [false, true]) {
        const bytes = (fused ? 4 : 2) * T * H * 2 + H * 2;
        for (const [name, patch] of PATHS) {
          const ms = withNorm(patch, () =>
            medianMs(() => {
              if (fused) for (const t of b.ops.fusedAddRmsNorm(x, r, w, 1e-5)) t.dispose();
              else b.ops.rmsNorm(x, w, 1e-5).dispose();
            }, 20),
          );
          const gbs = bytes / ms / 1e6;
          lines.push(`kernel-speed: rms_norm ${fused ? 'fused' : 'plain'} bf16 T${T} H${H} [${name}] ${(ms * 1e3).toFixed(1)} us = ${gbs.toFixed(0)} GB/s (${((gbs / copyGBs) * 100).toFixed(0)}% of copy)`);
        }
      }
      for (const t of [x, r, w]) t.dispose();
    }
  });
});
