/**
 * fk_gemv_ring (LINEAR_TUNING.gemvRing: the M 1 GEMV with its weight streamed through a shared-memory ring by bulk
 * copies) against fk_gemv_stream, bit for bit, and against the float64 CPU backend: plain rows (bias and none), the
 * gated MLP's gate_up + silu (linearSiluAndMul), the RMSNorm prologue with and without the residual (rmsNormLinear),
 * rings of 2-3 slots (the producer waits on every slot, warps consume far out of stream order) and grids of 1-8 blocks
 * an SM, fewer rows than blocks, and the PDL wait for x behind a slow kernel.
 */
import { Tensor, type DType } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { G, cpu, expectClose, gpu, poison, randCpu, toGpu, withTuning } from '../../test/spine-helpers.js';
import { LAUNCH_TUNING } from '../launch-tuning.js';
import { LINEAR_TUNING } from './linear.js';

const TOL: Record<string, { atol: number; rtol: number }> = { f32: { atol: 1e-4, rtol: 1e-3 }, f16: { atol: 2e-2, rtol: 2e-2 }, bf16: { atol: 2e-2, rtol: 2e-2 } };
const RING = { gemvMaxRows: 1, gemvRing: true, gemvRingMinRows: 0, gemvRingMinK: 0, gemvFuseGlu: true, gemvFuseNorm: true };
const STREAM = { ...RING, gemvRing: false };
// (gemvRingMinRows 0: every product the ring can take; the engine's default may leave the small ones to the stream)
type Patch = Partial<typeof LINEAR_TUNING>;

/** fn's result under `patch`, and the GEMV entry it ran (the last fk_gemv* kernel the spine context handed out). */
function run<R>(patch: Patch, fn: () => R): { out: R; kernel: string | null } {
  const ctx = gpu().ops.spine;
  const orig = ctx.kernel.bind(ctx);
  let kernel: string | null = null;
  ctx.kernel = (spec) => {
    if (spec.entry.startsWith('fk_gemv')) kernel = spec.entry;
    return orig(spec);
  };
  try {
    return { out: withTuning(LINEAR_TUNING, patch, fn), kernel };
  } finally {
    Reflect.deleteProperty(ctx, 'kernel');
  }
}

/** The ring's result under `patch` must be fk_gemv_ring's and equal the stream's bits; returns it (the caller disposes). */
function ringEqualsStream(label: string, patch: Patch, fn: () => Tensor): Tensor {
  const ring = run({ ...RING, ...patch }, fn);
  expect(ring.kernel, label).toBe('fk_gemv_ring');
  const stream = run(STREAM, fn);
  expect(stream.kernel, label).toBe('fk_gemv_stream');
  expectClose(ring.out, stream.out, { atol: 0, rtol: 0 }, `${label}: fk_gemv_ring vs fk_gemv_stream (same bits)`);
  stream.out.dispose();
  return ring.out;
}

describe('fk_gemv_ring: linear at M 1, the same bits as fk_gemv_stream, close to float64', () => {
  function checkLinear(dtype: DType, N: number, K: number, patch: Patch = {}): void {
    const x = randCpu([1, K], dtype, N + K);
    const w = randCpu([N, K], dtype, N * 3 + K, 1 / Math.sqrt(K));
    const b = randCpu([N], dtype, N + 7, 0.5);
    const [gx, gw, gb] = [x, w, b].map(toGpu) as [Tensor, Tensor, Tensor];
    for (const bias of [false, true]) {
      const label = `${dtype} N${N} K${K}${bias ? ' + bias' : ''} ${JSON.stringify(patch)}`;
      poison(N * K, N);
      const y = ringEqualsStream(label, patch, () => gpu().ops.linear(gx, gw, bias ? gb : null));
      expectClose(y, cpu().ops.linear(x, w, bias ? b : null), TOL[dtype]!, `${label}: vs float64`);
      y.dispose();
    }
    for (const t of [gx, gw, gb]) t.dispose();
  }
  // N 4001 x K 4096: ~10 rows a block at 3 blocks an SM (some warps 2 rows, some 1); 96 x 14336: fewer rows than
  // blocks (one row a block, 7 slots a row, most consumer warps idle); 5 x 2048: one slot a row. (The float64
  // references are the time here: Llama-3-8B's shapes are the engine A/B's.)
  for (const dtype of ['bf16', 'f16'] as DType[]) {
    for (const [N, K] of [[4001, 4096], [96, 14336], [5, 2048]] as const) {
      it(`${dtype} N${N} K${K}: bias and none`, G, () => checkLinear(dtype, N, K));
    }
  }
  for (const [N, K] of [[1001, 1024], [256, 4096]] as const) it(`f32 N${N} K${K}: bias and none`, G, () => checkLinear('f32', N, K));
  // a ring of 2 or 3 slots: the producer waits for every slot's release, and warp w's next row is 8 rows on in the
  // stream, so slots are reused while other warps still hold older ones (the use numbers keep the parity waits right)
  // (1 block an SM: ~30 rows a block, ~4 a warp)
  for (const patch of [{ gemvRingMaxStages: 2 }, { gemvRingMaxStages: 3, gemvRingBlocksPerSm: 1 }, { gemvRingBlocksPerSm: 8 }, { gemvRingLateTrigger: true }]) {
    it(`bf16 N4001 K4096 with ${JSON.stringify(patch)}`, G, () => checkLinear('bf16', 4001, 4096, patch));
  }
  it('declines where a row is not whole 4 KB slots (bf16 K 1024) and at M 2: fk_gemv_stream runs', G, () => {
    const x = toGpu(randCpu([1, 1024], 'bf16', 1));
    const w = toGpu(randCpu([64, 1024], 'bf16', 2));
    const a = run({ ...RING, gemvMaxRows: 8 }, () => gpu().ops.linear(x, w, null));
    expect(a.kernel).toBe('fk_gemv_stream');
    const x2 = toGpu(randCpu([2, 2048], 'bf16', 3));
    const w2 = toGpu(randCpu([64, 2048], 'bf16', 4));
    const b = run({ ...RING, gemvMaxRows: 8 }, () => gpu().ops.linear(x2, w2, null));
    expect(b.kernel).toBe('fk_gemv_stream');
    for (const t of [x, w, a.out, x2, w2, b.out]) t.dispose();
  });
});

describe('fk_gemv_ring with FK_GLU (linearSiluAndMul) and FK_NORM (rmsNormLinear): the stream\'s bits', () => {
  it('bf16 gate_up + silu, d 2003 K 4096 and d 1001 K 2048, bias and none; a 2-slot ring', G, () => {
    for (const [d, K, patch] of [[2003, 4096, {}], [1001, 2048, {}], [1001, 2048, { gemvRingMaxStages: 2 }]] as const) {
      const x = randCpu([1, K], 'bf16', d + K);
      const w = randCpu([2 * d, K], 'bf16', d * 5 + K, 1 / Math.sqrt(K));
      const b = randCpu([2 * d], 'bf16', d + 9, 0.5);
      const [gx, gw, gb] = [x, w, b].map(toGpu) as [Tensor, Tensor, Tensor];
      for (const bias of [false, true]) {
        const label = `d${d} K${K}${bias ? ' + bias' : ''} ${JSON.stringify(patch)}`;
        const y = ringEqualsStream(label, patch, () => gpu().ops.linearSiluAndMul!(gx, gw, bias ? gb : null)!);
        const expected = cpu().ops.siluAndMul(cpu().ops.linear(x, w, bias ? b : null));
        expectClose(y, expected, { atol: TOL.bf16!.atol * 2, rtol: TOL.bf16!.rtol * 2 }, `${label}: vs float64`);
        y.dispose();
      }
      for (const t of [gx, gw, gb]) t.dispose();
    }
  });
  for (const [dtype, K] of [['bf16', 4096], ['f16', 4096], ['f32', 2048]] as const) {
    for (const [N, act] of [[3001, null], [2002, 'silu']] as const) {
      it(`${dtype} N${N} K${K}${act ? ' silu' : ''}: the norm in the consumers' prologue, residual and none, bias and none`, G, () => {
        const seed = N + K;
        const x = randCpu([1, K], dtype, seed, 2);
        const r = randCpu([1, K], dtype, seed + 1);
        const nw = randCpu([K], dtype, seed + 2, 1);
        const w = randCpu([N, K], dtype, seed + 3, 1 / Math.sqrt(K));
        const b = randCpu([N], dtype, seed + 4, 0.5);
        const [gx, gr, gnw, gw, gb] = [x, r, nw, w, b].map(toGpu) as [Tensor, Tensor, Tensor, Tensor, Tensor];
        for (const residual of [false, true]) {
          for (const bias of [false, true]) {
            const label = `${dtype} N${N} K${K}${act ? ' silu' : ''}${residual ? ' + residual' : ''}${bias ? ' + bias' : ''}`;
            const res: Tensor[] = [];
            const call = () => {
              const out = gpu().ops.rmsNormLinear!(gx, residual ? gr : null, gnw, 1e-5, gw, bias ? gb : null, act);
              if (!out) throw new Error(`${label}: declined`);
              if (out[1]) res.push(out[1]);
              return out[0];
            };
            const y = ringEqualsStream(label, {}, call);
            if (residual) expectClose(res[0]!, res[1]!, { atol: 0, rtol: 0 }, `${label}: new residual, ring vs stream`);
            const [expected] = cpu().ops.rmsNormLinear!(x, residual ? r : null, nw, 1e-5, w, bias ? b : null, act)!;
            expectClose(y, expected, { atol: TOL[dtype]!.atol * 2, rtol: TOL[dtype]!.rtol * 2 }, `${label}: vs float64`);
            for (const t of [y, ...res]) t.dispose();
          }
        }
        for (const t of [gx, gr, gnw, gw, gb]) t.dispose();
      });
    }
  }
});

describe('fk_gemv_ring as a programmatic dependent launch', () => {
  // Its producer streams the weight before the consumers wait for x: behind a slow one-block rms_norm over 65536
  // elements (launched first thing) whose output was poisoned with NaN, a read too early shows as NaN or a wrong row.
  it('waits for x: M 1 linear of a one-row rms_norm over 65536 elements, PDL on and off, vs float64', G, () => {
    const [N, K] = [256, 65536];
    const x = randCpu([1, K], 'bf16', 91);
    const nw = randCpu([K], 'bf16', 92, 0.5);
    const w = randCpu([N, K], 'bf16', 93, 1 / Math.sqrt(K));
    const expected = cpu().ops.linear(cpu().ops.rmsNorm(x, nw, 1e-5).to('bf16'), w, null);
    const [gx, gnw, gw] = [toGpu(x), toGpu(nw), toGpu(w)];
    for (const pdl of [true, false]) {
      for (let rep = 0; rep < 3; rep++) {
        poison(K / 2, K / 2);
        const got = withTuning(LAUNCH_TUNING, { pdl, pdlEager: pdl }, () => run(RING, () => gpu().ops.linear(gpu().ops.rmsNorm(gx, gnw, 1e-5), gw, null)));
        expect(got.kernel).toBe('fk_gemv_ring');
        expectClose(got.out, expected, TOL.bf16!, `fk_gemv_ring pdl ${pdl} rep ${rep} vs float64`);
        got.out.dispose();
      }
    }
    for (const t of [gx, gnw, gw]) t.dispose();
  });
});
