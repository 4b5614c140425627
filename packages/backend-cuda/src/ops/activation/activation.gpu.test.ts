import type { DType } from '@fastkernels/core';
import { describe, it } from 'vitest';
import { G, checkTaskOnCuda, cpu, expectClose, gpu, poison, randCpu, task, taskCases, toGpu, tolOf, variant } from '../../../test/spine-helpers.js';

const DTYPES: DType[] = ['bf16', 'f16', 'f32'];

describe('silu_and_mul / gelu_and_mul vs the float64 CPU backend', () => {
  for (const dtype of DTYPES) {
    for (const [T, d] of [[4, 14336], [7, 100], [1, 4], [65, 1000]] as const) {
      it(`${dtype} T=${T} d=${d}`, G, () => {
        const x = randCpu([T, 2 * d], dtype, T + d, 2.5);
        const gx = toGpu(x);
        poison(T * d);
        expectClose(gpu().ops.siluAndMul(gx), cpu().ops.siluAndMul(x), tolOf(dtype), 'silu');
        poison(T * d);
        expectClose(gpu().ops.geluAndMul(gx, 'none'), cpu().ops.geluAndMul(x, 'none'), tolOf(dtype), 'gelu erf');
        poison(T * d);
        expectClose(gpu().ops.geluAndMul(gx, 'tanh'), cpu().ops.geluAndMul(x, 'tanh'), tolOf(dtype), 'gelu tanh');
      });
    }
  }

  it('strided rows, rank-3 and transposed inputs', G, () => {
    const dtype: DType = 'bf16';
    const wide = randCpu([6, 3 * 256], dtype, 7, 2);
    const x = wide.narrow(1, 256, 512);
    expectClose(gpu().ops.siluAndMul(toGpu(wide).narrow(1, 256, 512)), cpu().ops.siluAndMul(x), tolOf(dtype), 'row-strided');
    const x3 = randCpu([2, 3, 96], 'f32', 8, 2);
    expectClose(gpu().ops.geluAndMul(toGpu(x3), 'tanh'), cpu().ops.geluAndMul(x3, 'tanh'), tolOf('f32'), 'rank-3');
    const xt = randCpu([64, 5], 'f16', 9, 2);
    expectClose(gpu().ops.siluAndMul(toGpu(xt).transpose(0, 1)), cpu().ops.siluAndMul(xt.transpose(0, 1)), tolOf('f16'), 'transposed');
  });
});

describe('L1 gated-activation tasks on CUDA vs their float64 references', () => {
  const silu = task('L1/silu_and_mul');
  const sb = silu.cases.ci[1]!;
  const siluExtra = [
    variant(sb, 'odd-d-bf16', { dims: { T: 9, D: 77, D2: 154 } }),
    variant(sb, 'f16', { dtype: 'f16', dims: { T: 5, D: 1024, D2: 2048 } }),
    variant(sb, 'llama-decode-bf16', { dims: { T: 32, D: 14336, D2: 28672 } }),
  ];
  for (const { c, seed } of taskCases(silu, siluExtra)) it(`silu ${c.name} (${c.dtype}) seed ${seed}`, G, () => checkTaskOnCuda(silu, c, seed));
  const gelu = task('L1/gelu_and_mul');
  const gb = gelu.cases.ci[2]!;
  const geluExtra = [
    variant(gb, 'odd-d-erf-f16', { dtype: 'f16', dims: { T: 3, D: 51, D2: 102 }, init: ['none'] }),
    variant(gb, 'tanh-bf16', { dims: { T: 17, D: 4096, D2: 8192 }, init: ['tanh'] }),
  ];
  for (const { c, seed } of taskCases(gelu, geluExtra)) it(`gelu ${c.name} (${c.dtype}) seed ${seed}`, G, () => checkTaskOnCuda(gelu, c, seed));
});
