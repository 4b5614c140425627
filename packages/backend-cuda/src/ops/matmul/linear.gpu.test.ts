import type { DType } from '@fastkernels/core';
import { describe, it } from 'vitest';
import { G, checkTaskOnCuda, cpu, expectClose, gpu, randCpu, task, taskCases, toGpu, variant } from '../../../test/spine-helpers.js';

// cuBLASLt sums in a different order than the float64 reference: f32 within 1e-4 relative, half types within 2e-2.
const TOL: Record<string, { atol: number; rtol: number }> = { f32: { atol: 1e-4, rtol: 1e-3 }, f16: { atol: 2e-2, rtol: 2e-2 }, bf16: { atol: 2e-2, rtol: 2e-2 } };

describe('linear (cuBLASLt) vs the float64 CPU backend', () => {
  for (const dtype of ['bf16', 'f16', 'f32'] as DType[]) {
    for (const [M, K, N, bias] of [[1, 256, 384, false], [33, 96, 80, true], [7, 130, 65, true]] as const) {
      it(`${dtype} [${M}x${K}] x [${N}x${K}]^T${bias ? ' + bias' : ''}`, G, () => {
        const x = randCpu([M, K], dtype, M + K);
        const w = randCpu([N, K], dtype, N + K, 1 / Math.sqrt(K));
        const b = bias ? randCpu([N], dtype, N, 0.5) : null;
        expectClose(gpu().ops.linear(toGpu(x), toGpu(w), b ? toGpu(b) : null), cpu().ops.linear(x, w, b), TOL[dtype]!, 'linear');
      });
    }
  }

  it('rank-3 x, a row-strided x, a transposed (copied) x, K = 0', G, () => {
    const w = randCpu([48, 64], 'bf16', 1, 0.125);
    const b = randCpu([48], 'bf16', 2);
    const x3 = randCpu([2, 5, 64], 'bf16', 3);
    const y = gpu().ops.linear(toGpu(x3), toGpu(w), toGpu(b));
    if (y.shape.join() !== '2,5,48') throw new Error(`shape ${y.shape}`);
    expectClose(y, cpu().ops.linear(x3, w, b), TOL.bf16!, 'rank-3');
    const wide = randCpu([9, 96], 'bf16', 4);
    expectClose(gpu().ops.linear(toGpu(wide).narrow(1, 16, 64), toGpu(w), null), cpu().ops.linear(wide.narrow(1, 16, 64), w, null), TOL.bf16!, 'row-strided');
    const xt = randCpu([64, 9], 'bf16', 5);
    expectClose(gpu().ops.linear(toGpu(xt).transpose(0, 1), toGpu(w), toGpu(b)), cpu().ops.linear(xt.transpose(0, 1), w, b), TOL.bf16!, 'transposed');
    const x0 = randCpu([3, 0], 'f32', 6);
    const w0 = randCpu([4, 0], 'f32', 7);
    const b0 = randCpu([4], 'f32', 8);
    expectClose(gpu().ops.linear(toGpu(x0), toGpu(w0), toGpu(b0)), cpu().ops.linear(x0, w0, b0), TOL.f32!, 'K = 0');
  });
});

describe('L1/linear task on CUDA vs its float64 reference', () => {
  const t = task('L1/linear');
  const b = t.cases.ci[1]!;
  const extra = [variant(b, 'odd-f16', { dtype: 'f16', dims: { T: 9, K: 72, N: 40 }, init: [72, 40, true] })];
  for (const { c, seed } of taskCases(t, extra)) it(`${c.name} (${c.dtype}) seed ${seed}`, G, () => checkTaskOnCuda(t, c, seed));
});
