import { Tensor, type DType } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { G, checkTaskOnCuda, cpu, expectClose, gpu, poison, randCpu, task, taskCases, toGpu, tolOf, variant, withTuning } from '../../../test/spine-helpers.js';
import { cudaTuning } from '../../tuning/load.js';

describe('softmax vs the float64 CPU backend', () => {
  for (const dtype of ['bf16', 'f16', 'f32'] as DType[]) {
    // 128256 / 32768: long rows (one 8-CTA cluster per row); 40001: odd long row (scalar loads, each CTA's slice
    // longer than its register cache: the re-read path); 16392: just over the cluster threshold in bf16/f16 (an
    // uneven last slice); 257 / 6: odd; 4096: attention scores
    for (const [B, V, scale] of [[3, 128256, 3], [5, 257, 3], [33, 6, 1], [16, 4096, 8], [2, 32768, 2], [3, 40001, 3], [2, 16392, 2]] as const) {
      it(`${dtype} [${B}, ${V}] last dim`, G, () => {
        const x = randCpu([B, V], dtype, B + V, scale);
        poison(B * V);
        expectClose(gpu().ops.softmax(toGpu(x), -1), cpu().ops.softmax(x, -1), tolOf(dtype), 'softmax');
      });
    }
  }

  it('other dims, non-contiguous inputs, -inf (masked) entries', G, () => {
    const x = randCpu([4, 5, 6], 'f32', 1, 2);
    const gx = toGpu(x);
    for (const d of [0, 1, 2, -2]) expectClose(gpu().ops.softmax(gx, d), cpu().ops.softmax(x, d), tolOf('f32'), `dim ${d}`);
    const xt = randCpu([40, 30], 'bf16', 2, 2);
    expectClose(gpu().ops.softmax(toGpu(xt).transpose(0, 1), 1), cpu().ops.softmax(xt.transpose(0, 1), 1), tolOf('bf16'), 'transposed');
    const wide = randCpu([6, 300], 'f16', 3);
    expectClose(gpu().ops.softmax(toGpu(wide).narrow(1, 8, 256), -1), cpu().ops.softmax(wide.narrow(1, 8, 256), -1), tolOf('f16'), 'row-strided');
    // causal-mask style: row r has -inf after column r
    const n = 70;
    const v = new Float64Array(n * n);
    for (let r = 0; r < n; r++) for (let c = 0; c < n; c++) v[r * n + c] = c > r ? -Infinity : Math.sin(r * 13 + c);
    const m = Tensor.fromArray(cpu(), v, [n, n], 'f32');
    expectClose(gpu().ops.softmax(toGpu(m), -1), cpu().ops.softmax(m, -1), tolOf('f32'), 'masked');
  });
});

describe('softmax launch knobs', () => {
  // FK_NPT (softmax.longRowVectors) changes registers, not which vectors a thread folds: the same bits.
  // B32 / B4: the cluster path; B140 (>= the SMs): one block a row, 8 vectors kept (16-bit); f32 40001: scalar, re-read.
  const firstDiff = (a: Float64Array, b: Float64Array) => {
    if (a.length !== b.length) return -2;
    for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) return i;
    return -1;
  };
  for (const [dtype, B, V] of [['bf16', 32, 128256], ['bf16', 140, 128256], ['f16', 4, 128256], ['f32', 3, 40001], ['f32', 140, 32768], ['bf16', 64, 4096]] as [DType, number, number][]) {
    it(`${dtype} [${B}, ${V}]: 8 and 4 vectors kept give the same bits`, G, () => {
      const x = toGpu(randCpu([B, V], dtype, B * 7 + V, 3));
      const run = (longRowVectors: number) => {
        // the one-read kernel off: B140 bf16 rows (256 KB) would take it, and it keeps no vectors in registers
        const y = withTuning('softmax', { longRowVectors, oneReadMinRowBytes: 0 }, () => gpu().ops.softmax(x, -1));
        const values = y.toFloat64Array();
        y.dispose(); // the device buffers are released here, not left to the garbage collector (run 17 warned of 36 MB)
        return values;
      };
      expect(firstDiff(run(8), run(4))).toBe(-1);
      x.dispose();
    });
  }
  for (const clusterSize of [2, 4]) {
    it(`bf16 [32, 128256] in clusters of ${clusterSize} (softmax.clusterSize): within tolerance`, G, () => {
      const x = randCpu([32, 128256], 'bf16', 32 + clusterSize, 3);
      poison(32 * 128256);
      const xg = toGpu(x);
      const y = withTuning('softmax', { clusterSize }, () => gpu().ops.softmax(xg, -1));
      expectClose(y, cpu().ops.softmax(x, -1), tolOf('bf16'), 'softmax');
      y.dispose();
      xg.dispose();
    });
  }
  it('bf16 [140, 128256] on the cluster path (softmax.clusterMaxRows): within tolerance', G, () => {
    const x = randCpu([140, 128256], 'bf16', 140, 3);
    poison(140 * 128256);
    const xg = toGpu(x);
    const y = withTuning('softmax', { clusterMaxRows: 256 }, () => gpu().ops.softmax(xg, -1));
    expectClose(y, cpu().ops.softmax(x, -1), tolOf('bf16'), 'softmax');
    y.dispose();
    xg.dispose();
  });
});

describe('L1/softmax task on CUDA vs its float64 reference', () => {
  const t = task('L1/softmax');
  const b = t.cases.ci[0]!;
  const extra = [
    variant(b, 'vocab-bf16', { dtype: 'bf16', dims: { B: 4, V: 128256 } }),
    variant(b, 'scores-f16', { dtype: 'f16', dims: { B: 64, V: 4096 }, options: { scale: 8 } }),
    variant(b, 'dim0-bf16', { dtype: 'bf16', dims: { B: 300, V: 7 }, init: [0] }),
  ];
  for (const { c, seed } of taskCases(t, extra)) it(`${c.name} (${c.dtype}) seed ${seed}`, G, () => checkTaskOnCuda(t, c, seed));
});
