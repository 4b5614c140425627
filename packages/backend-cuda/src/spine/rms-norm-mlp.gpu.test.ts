/**
 * rmsNormMlp (LINEAR_TUNING.gemvPersistentMlp, kernels/gemv.cu fk_gemv_mlp): post_attention_layernorm + gate_up + silu
 * + down of a gated MLP in one persistent launch whose blocks wait for each other between the two products. It must
 * give the bits of rmsNormLinear (silu) then linear, launch after launch (its counters reset themselves), inside a PDL
 * graph as eagerly, and decline wherever those two launches would not be fk_gemv_stream's.
 */
import { Tensor, type DType } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { G, cpu, expectClose, gpu, poison, randCpu, toGpu, withTuning } from '../../test/spine-helpers.js';
import { LAUNCH_TUNING } from '../launch-tuning.js';
import { LINEAR_TUNING } from './linear.js';

const EPS = 1e-5;
const ON: Partial<typeof LINEAR_TUNING> = { gemvMaxRows: 1, gemvFuseNorm: true, gemvFuseGlu: true, gemvPersistentMlp: true };
const withLinear = <R>(patch: Partial<typeof LINEAR_TUNING>, fn: () => R): R => withTuning(LINEAR_TUNING, patch, fn);

/** Inputs of one MLP call at hidden H and intermediate D (gate_up [2D, H], down [H, D]) on the GPU, and their CPU copies. */
function inputs(dtype: DType, H: number, D: number, seed: number) {
  const cpuT = [randCpu([1, H], dtype, seed, 2), randCpu([1, H], dtype, seed + 1), randCpu([H], dtype, seed + 2, 1),
    randCpu([2 * D, H], dtype, seed + 3, 1 / Math.sqrt(H)), randCpu([H, D], dtype, seed + 4, 1 / Math.sqrt(D))] as const;
  const [x, r, nw, gu, dn] = cpuT.map(toGpu) as [Tensor, Tensor, Tensor, Tensor, Tensor];
  return { x, r, nw, gu, dn, cpuT, dispose: () => [x, r, nw, gu, dn].forEach((t) => t.dispose()) };
}

/** The two launches rmsNormMlp stands for: [y, new residual]. */
function separate(i: ReturnType<typeof inputs>): [Tensor, Tensor] {
  return withLinear({ gemvMaxRows: 1, gemvFuseNorm: true, gemvFuseGlu: true, gemvPersistentMlp: false }, () => {
    const [a, res] = gpu().ops.rmsNormLinear!(i.x, i.r, i.nw, EPS, i.gu, null, 'silu')!;
    const y = gpu().ops.linear(a, i.dn, null);
    a.dispose();
    return [y, res!];
  });
}

describe('rmsNormMlp: a gated MLP after its pre-norm in one persistent launch (fk_gemv_mlp)', () => {
  // H 4096: rms_norm's block is the GEMV's 256 threads (bf16 / f16); D 14336 (Llama-3-8B), 2048 (1 gate_up pair a warp or
  // none), 3072; repeated launches check that the counters the blocks wait on are zero again after each
  for (const [dtype, D] of [['bf16', 14336], ['bf16', 2048], ['f16', 3072]] as const) {
    it(`${dtype} H4096 D${D}: the bits of rmsNormLinear (silu) + linear, three launches in a row; close to float64`, G, () => {
      const H = 4096;
      const i = inputs(dtype, H, D, D + (dtype === 'f16' ? 1 : 0));
      poison(2 * D * H, 2 * H);
      const [want, wantRes] = separate(i);
      for (let n = 0; n < 3; n++) {
        const got = withLinear(ON, () => gpu().ops.rmsNormMlp!(i.x, i.r, i.nw, EPS, i.gu, i.dn));
        if (!got) throw new Error(`${dtype} D${D}: declined`);
        expectClose(got[0], want, { atol: 0, rtol: 0 }, `${dtype} D${D} launch ${n + 1}: y (same bits)`);
        expectClose(got[1], wantRes, { atol: 0, rtol: 0 }, `${dtype} D${D} launch ${n + 1}: new residual (same bits)`);
        got.forEach((t) => t.dispose());
      }
      const [cx, cr, cnw, cgu, cdn] = i.cpuT;
      const [a, res] = cpu().ops.rmsNormLinear!(cx, cr, cnw, EPS, cgu, null, 'silu')!;
      const ref = cpu().ops.linear(a, cdn, null);
      expectClose(want, ref, { atol: 4e-2, rtol: 4e-2 }, `${dtype} D${D}: vs float64`);
      expectClose(wantRes, res!, { atol: 2e-2, rtol: 2e-2 }, `${dtype} D${D}: new residual vs float64`);
      [want, wantRes, a, res!, ref].forEach((t) => t.dispose());
      i.dispose();
    });
  }

  it('in a CUDA graph with PDL launches (after an eager warm-up, as the engine captures): replays = eager, bit for bit', G, () => {
    const b = gpu();
    const i = inputs('bf16', 4096, 14336, 5);
    const [want, wantRes] = separate(i);
    withTuning(LAUNCH_TUNING, { pdl: true }, () => withLinear(ON, () => {
      const cur: { out: [Tensor, Tensor] | null } = { out: null }; // the last call's outputs (the capture's, then replayed into)
      const step = () => {
        cur.out?.forEach((t) => t.dispose());
        cur.out = b.ops.rmsNormMlp!(i.x, i.r, i.nw, EPS, i.gu, i.dn);
        if (!cur.out) throw new Error('declined');
      };
      step();
      b.synchronize();
      const g = b.runtime.capture(step, { poolBytes: 64 << 20 });
      for (let n = 0; n < 3; n++) {
        g.replay();
        b.synchronize();
        expectClose(cur.out![0], want, { atol: 0, rtol: 0 }, `replay ${n + 1}: y`);
        expectClose(cur.out![1], wantRes, { atol: 0, rtol: 0 }, `replay ${n + 1}: new residual`);
      }
      g.destroy();
      cur.out?.forEach((t) => t.dispose());
    }));
    [want, wantRes].forEach((t) => t.dispose());
    i.dispose();
  });

  it('declines (null) with the switch off, two rows, D not in whole 32-vector chunks, a norm block other than 256 threads, another dtype', G, () => {
    const i = inputs('bf16', 4096, 2048, 9);
    const call = (patch: Partial<typeof LINEAR_TUNING>, x = i.x, r = i.r, nw = i.nw, gu = i.gu, dn = i.dn) =>
      withLinear(patch, () => gpu().ops.rmsNormMlp!(x, r, nw, EPS, gu, dn));
    const ok = call(ON);
    expect(ok).not.toBeNull();
    ok!.forEach((t) => t.dispose());
    expect(call({ ...ON, gemvPersistentMlp: false })).toBeNull();
    expect(call({ ...ON, gemvFuseNorm: false })).toBeNull();
    const x2 = toGpu(randCpu([2, 4096], 'bf16', 1));
    expect(call(ON, x2, x2)).toBeNull();
    const gu1000 = toGpu(randCpu([2000, 4096], 'bf16', 2));
    const dn1000 = toGpu(randCpu([4096, 1000], 'bf16', 3)); // down's K 1000: not 256-element chunks
    expect(call(ON, i.x, i.r, i.nw, gu1000, dn1000)).toBeNull();
    const xs = toGpu(randCpu([1, 1024], 'bf16', 4));
    const nws = toGpu(randCpu([1024], 'bf16', 5));
    const gus = toGpu(randCpu([4096, 1024], 'bf16', 6));
    const dns = toGpu(randCpu([1024, 2048], 'bf16', 7));
    expect(call(ON, xs, xs, nws, gus, dns)).toBeNull(); // rms_norm takes 64 threads for 1024
    const nw32 = toGpu(randCpu([4096], 'f32', 8));
    expect(call(ON, i.x, i.r, nw32)).toBeNull();
    [x2, gu1000, dn1000, xs, nws, gus, dns, nw32].forEach((t) => t.dispose());
    i.dispose();
  });
});
