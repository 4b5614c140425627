import { describe, expect, it } from 'vitest';
import { cpu, randn, Rng, values } from './test-helpers.js';

const ops = cpu.ops;

// The CPU op is the ops it names by definition, so these tests check its wiring (which residual goes where, the GLU
// half, errors): the kernel that could differ, fk_gemv_stream with FK_NORM, is checked bit for bit in
// linear-gemv.gpu.test.ts.
describe('rmsNormLinear: rmsNorm (fusedAddRmsNorm) then linear (then siluAndMul)', () => {
  for (const dtype of ['f32', 'bf16'] as const) {
    for (const act of [null, 'silu'] as const) {
      it(`${dtype}${act ? ' silu' : ''}: the same output and new residual as the separate ops, with and without a residual`, () => {
        const rng = new Rng(3);
        const [T, K, N] = [3, 16, 10];
        const x = randn(rng, [T, K], dtype);
        const r = randn(rng, [T, K], dtype);
        const nw = randn(rng, [K], dtype);
        const w = randn(rng, [N, K], dtype);
        const b = randn(rng, [N], dtype);
        for (const residual of [null, r]) {
          const [y, res] = ops.rmsNormLinear!(x, residual, nw, 1e-5, w, b, act)!;
          const [h, res2] = residual ? ops.fusedAddRmsNorm(x, residual, nw, 1e-5) : [ops.rmsNorm(x, nw, 1e-5), null];
          const p = ops.linear(h, w, b);
          const want = act ? ops.siluAndMul(p) : p;
          expect(y.shape).toEqual([T, act ? N / 2 : N]);
          expect(values(y)).toEqual(values(want));
          expect(res === null).toBe(residual === null);
          if (res && res2) expect(values(res)).toEqual(values(res2));
        }
      });
    }
  }

  it('a weight that does not match x: linear\'s error (nothing returned)', () => {
    const rng = new Rng(4);
    const x = randn(rng, [1, 8], 'f32');
    expect(() => ops.rmsNormLinear!(x, x, randn(rng, [8], 'f32'), 1e-6, randn(rng, [4, 6], 'f32'), null, null)).toThrow(/last dim|K/);
  });
});
