/**
 * The one-read kernel (fk_softmax_smem: a cluster a row, slices in shared memory) and the registry route of softmax /
 * log_softmax onto softmax.cu, vs the float64 CPU backend: lengths around each threshold (softmax.oneReadMinRowBytes,
 * the register cluster's capacity, the longest row 8 CTAs' shared memory hold), odd lengths (scalar vectors, uneven
 * last slices), rows of -inf, large magnitudes, several rows, bf16 / f16 / f32 in, the output in another dtype, and
 * the kernel each case ran (GeneratedOps.softmaxPath) on sm_90.
 */
import { callOp, Tensor, type DType } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { G, cpu, expectClose, gpu, poison, randCpu, toGpu, tolOf, withTuning } from '../../../test/spine-helpers.js';

/** The gpu tag, and time for NVRTC (a kernel a dtype / define set) and the float64 reference of long rows. */
const GT = { ...G, timeout: 300_000 };
const DTYPES: DType[] = ['bf16', 'f16', 'f32'];

const pathNow = () => (gpu() as unknown as { generatedOps: { softmaxPath: string | null } }).generatedOps.softmaxPath;
const hopper = () => gpu().runtime.properties().major >= 9;

/** op over the last dim (or `dim`) of x on CUDA and on the CPU backend; within the output dtype's tolerance. Returns the kernel. */
function check(label: string, op: 'softmax' | 'log_softmax', x: Tensor, attrs: { dim?: number; dtype?: DType } = {}): string | null {
  const a = { dim: attrs.dim ?? -1, ...(attrs.dtype ? { dtype: attrs.dtype } : {}) };
  poison(x.numel * 2);
  const xg = toGpu(x);
  try {
    const [got] = callOp(op, [xg], a);
    const path = pathNow();
    const [want] = callOp(op, [x], a);
    expect(got!.dtype, label).toBe(want!.dtype);
    expectClose(got!, want!, tolOf(got!.dtype), `${label} (${path})`);
    got!.dispose();
    want!.dispose();
    return path;
  } finally {
    xg.dispose();
  }
}

/** Rows: random; all -inf; -inf but for a few entries; large magnitudes (scale 1000, offset); random again. */
function awkwardRows(D: number, dtype: DType, seed: number): Tensor {
  const r = randCpu([5, D], 'f64', seed, 3).toFloat64Array();
  for (let j = 0; j < D; j++) {
    r[D + j] = -Infinity;
    if (j % 977 !== 3) r[2 * D + j] = -Infinity;
    r[3 * D + j] = r[3 * D + j]! * 333 + 20000;
  }
  return Tensor.fromArray(cpu(), r, [5, D], dtype);
}

describe('softmax / log_softmax on long rows: the one-read cluster kernel', () => {
  // a few rows only: clusterMaxRows 1 keeps rows >= 2 off the register cluster (whose path is rows below the SMs)
  const few = { clusterMaxRows: 1 };
  for (const dtype of DTYPES) {
    const item = dtype === 'f32' ? 4 : 2;
    it(`${dtype}: around softmax.oneReadMinRowBytes (128 KiB), odd lengths, 256k elements`, GT, () => {
      withTuning('softmax', few, () => {
        const at = 131072 / item; // exactly 128 KiB: the one-block kernel keeps it
        const cases: [number, number, string][] = [
          [4, at, 'fk_softmax'],
          [5, at + 16 / item, 'fk_softmax_smem'], // one 16-byte vector more
          [3, at + 1, 'fk_softmax_smem'], // odd: scalar vectors, an uneven last slice
          [3, 128256, 'fk_softmax_smem'], // vocab logits
          [2, 131071, 'fk_softmax_smem'],
          [2, 262144, 'fk_softmax_smem'], // 256k: f32 1 MiB a row, 128 KiB a CTA
          [3, 262143, 'fk_softmax_smem'],
        ];
        for (const [B, D, want] of cases) {
          for (const op of ['softmax', 'log_softmax'] as const) {
            const x = randCpu([B, D], dtype, B * 31 + D, 3);
            const path = check(`${op} ${dtype} [${B}, ${D}]`, op, x);
            if (hopper()) expect(path, `${op} ${dtype} [${B}, ${D}]`).toBe(want);
            x.dispose();
          }
        }
      });
    });

    it(`${dtype}: rows of -inf, a few finite entries, large magnitudes`, GT, () => {
      withTuning('softmax', few, () => {
        for (const D of [70001, 131072, 200000]) {
          const x = awkwardRows(D, dtype, D);
          for (const op of ['softmax', 'log_softmax'] as const) check(`${op} ${dtype} awkward [5, ${D}]`, op, x);
          x.dispose();
        }
      });
    });

    it(`${dtype}: the output in another float dtype; another dim`, GT, () => {
      withTuning('softmax', few, () => {
        const x = randCpu([3, 128256], dtype, 7, 3);
        for (const to of DTYPES.filter((d) => d !== dtype)) {
          check(`softmax ${dtype} -> ${to}`, 'softmax', x, { dtype: to });
          check(`log_softmax ${dtype} -> ${to}`, 'log_softmax', x, { dtype: to });
        }
        x.dispose();
        const t = randCpu([70000, 3], dtype, 8, 3);
        check(`log_softmax ${dtype} dim 0 of [70000, 3]`, 'log_softmax', t, { dim: 0 });
        t.dispose();
      });
    });
  }

  it('the ops bench case, log_softmax [256, 128256] bf16, default tuning: the one-read kernel on sm_90', GT, () => {
    const x = randCpu([256, 128256], 'bf16', 256, 3);
    const path = check('log_softmax bf16 [256, 128256]', 'log_softmax', x);
    if (hopper()) expect(path).toBe('fk_softmax_smem');
    expect(check('softmax bf16 -> f32 [256, 128256]', 'softmax', x, { dtype: 'f32' })).toBe(path);
    x.dispose();
  });

  it('one row of 256k f32 (below the SM count, too long for the register cluster): the one-read kernel', GT, () => {
    const x = randCpu([1, 262144], 'f32', 1, 3);
    const path = check('log_softmax f32 [1, 262144]', 'log_softmax', x);
    if (hopper()) expect(path).toBe('fk_softmax_smem');
    x.dispose();
  });

  it('longer rows than 8 CTAs\' shared memory hold: the two-read kernel, still right', GT, () => {
    withTuning('softmax', { clusterMaxRows: 1 }, () => {
      const D = 600000; // f32: 2.4 MB, past 8 x 227 KiB (the exact bound: softmax-plan.test.ts)
      const x = randCpu([2, D], 'f32', 3, 3);
      const path = check(`log_softmax f32 [2, ${D}]`, 'log_softmax', x);
      expect(path).toBe('fk_softmax');
      x.dispose();
    });
  });

  it('softmax.oneReadMinRowBytes 0 turns the kernel off (the A/B of the ops bench)', GT, () => {
    withTuning('softmax', { oneReadMinRowBytes: 0 }, () => {
      const x = randCpu([140, 128256], 'bf16', 140, 3);
      expect(check('log_softmax bf16 [140, 128256] off', 'log_softmax', x)).toBe('fk_softmax');
      x.dispose();
    });
  });
});
