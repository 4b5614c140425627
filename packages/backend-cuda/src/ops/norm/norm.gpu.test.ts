import { Tensor, type DType } from '@fastkernels/core';
import { describe, it } from 'vitest';
import { G, checkTaskOnCuda, cpu, expectClose, gpu, poison, randCpu, releasing, task, taskCases, toGpu, tolOf, variant } from '../../../test/spine-helpers.js';

const DTYPES: DType[] = ['bf16', 'f16', 'f32'];

describe('rms_norm / fused_add_rms_norm vs the float64 CPU backend', () => {
  for (const dtype of DTYPES) {
    // H = 4096 (Llama), 100 (not a multiple of 8: scalar path), 12288 (rows longer than the register cache), 64 (one warp)
    for (const [T, H] of [[7, 4096], [5, 100], [3, 12288], [33, 64], [1, 20480]] as const) {
      it(`${dtype} T=${T} H=${H}`, G, () =>
        releasing((keep) => {
          const x = randCpu([T, H], dtype, T * 31 + H, 2);
          const r = randCpu([T, H], dtype, T * 37 + H, 2);
          const w = randCpu([H], dtype, H + 5, 0.5);
          const eps = 1e-5;
          const [gx, gr, gw] = keep([toGpu(x), toGpu(r), toGpu(w)]);
          poison(T * H, T * H);
          expectClose(keep(gpu().ops.rmsNorm(gx, gw, eps)), cpu().ops.rmsNorm(x, w, eps), tolOf(dtype), 'rmsNorm');
          poison(T * H, T * H);
          const [y, res] = keep(gpu().ops.fusedAddRmsNorm(gx, gr, gw, eps));
          const [ey, eres] = cpu().ops.fusedAddRmsNorm(x, r, w, eps);
          expectClose(res, eres, tolOf(dtype), 'fused residual');
          expectClose(y, ey, tolOf(dtype), 'fused y');
          // out of place: the inputs keep their values
          expectClose(gx, x, { atol: 0, rtol: 0 }, 'x unchanged');
          expectClose(gr, r, { atol: 0, rtol: 0 }, 'residual unchanged');
        }),
      );
    }
  }

  it('strided rows (a slice of a wider tensor), a transposed (copied) input, a rank-3 input', G, () =>
    releasing((keep) => {
      const dtype: DType = 'bf16';
      const [T, H] = [9, 256];
      const wide = randCpu([T, H + 64], dtype, 1, 1);
      const x = wide.narrow(1, 32, H);
      const w = randCpu([H], dtype, 2);
      const gw = keep(toGpu(w));
      const gwide = keep(toGpu(wide));
      expectClose(keep(gpu().ops.rmsNorm(gwide.narrow(1, 32, H), gw, 1e-6)), cpu().ops.rmsNorm(x, w, 1e-6), tolOf(dtype), 'row-strided');
      const xt = randCpu([H, T], dtype, 3);
      const gxt = keep(toGpu(xt));
      expectClose(keep(gpu().ops.rmsNorm(gxt.transpose(0, 1), gw, 1e-6)), cpu().ops.rmsNorm(xt.transpose(0, 1), w, 1e-6), tolOf(dtype), 'transposed');
      const x3 = randCpu([2, 5, H], dtype, 4);
      const r3 = randCpu([2, 5, H], dtype, 5);
      const rT = keep(keep(toGpu(r3)).transpose(0, 1).contiguous());
      const [y, res] = keep(gpu().ops.fusedAddRmsNorm(keep(toGpu(x3)), rT.transpose(0, 1), gw, 1e-6));
      const [ey, eres] = cpu().ops.fusedAddRmsNorm(x3, r3, w, 1e-6);
      expectClose(y, ey, tolOf(dtype), 'rank-3 y');
      expectClose(res, eres, tolOf(dtype), 'rank-3 residual');
      const e = keep(Tensor.empty(gpu(), [0, H], dtype));
      if (keep(gpu().ops.rmsNorm(e, gw, 1e-6)).numel !== 0) throw new Error('empty');
    }),
  );

  it('per-head views of a fused projection, read in place (two-level rows): Qwen3 q / k [T, heads, 128], FLUX [B, S, 24, 128]', G, () =>
    releasing((keep) => {
      const dtype: DType = 'bf16';
      const d = 128;
      const [T, nq, nk] = [7, 32, 4];
      const W = (nq + 2 * nk) * d;
      const qkv = randCpu([T, W], dtype, 11, 2);
      const gqkv = keep(toGpu(qkv));
      const w = randCpu([d], dtype, 12, 0.5);
      const gw = keep(toGpu(w));
      for (const [start, heads] of [[0, nq], [nq * d, nk]] as const) {
        const view = (t: Tensor) => keep(keep(t.narrow(1, start, heads * d)).view(T, heads, d));
        expectClose(keep(gpu().ops.rmsNorm(view(gqkv), gw, 1e-6)), cpu().ops.rmsNorm(view(qkv), w, 1e-6), tolOf(dtype), `qwen3 heads at ${start}`);
      }
      const [B, S, H] = [2, 9, 24];
      const flux = randCpu([B, S, 3 * H * d], dtype, 13, 2);
      const gflux = keep(toGpu(flux));
      const fv = (t: Tensor, i: number) => keep(keep(t.narrow(2, i * H * d, H * d)).view(B, S, H, d));
      for (const i of [0, 1]) expectClose(keep(gpu().ops.rmsNorm(fv(gflux, i), gw, 1e-6)), cpu().ops.rmsNorm(fv(flux, i), w, 1e-6), tolOf(dtype), `flux part ${i}`);
    }),
  );
});

describe('L1/rms_norm task on CUDA vs its float64 reference', () => {
  const t = task('L1/rms_norm');
  const base = t.cases.ci[1]!;
  const extra = [
    variant(base, 'odd-H-bf16', { dims: { T: 13, H: 200 }, init: [200, 1e-6], options: { residual: false } }),
    variant(base, 'fused-f16-H4104', { dtype: 'f16', dims: { T: 3, H: 4104 }, init: [4104, 1e-5], options: { residual: true } }),
    variant(base, 'fused-f32-H999', { dtype: 'f32', dims: { T: 4, H: 998 }, init: [998, 1e-5], options: { residual: true } }),
    variant(base, 'llama-decode-bf16', { dims: { T: 32, H: 4096 }, init: [4096, 1e-5], options: { residual: true } }),
  ];
  for (const { c, seed } of taskCases(t, extra)) it(`${c.name} (${c.dtype}) seed ${seed}`, G, () => checkTaskOnCuda(t, c, seed));
});
