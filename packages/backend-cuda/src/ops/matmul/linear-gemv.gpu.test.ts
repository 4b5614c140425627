/**
 * linear through the small-batch GEMVs (kernels/gemv.cu: fk_gemv and fk_gemv_stream; linear.gemvMaxRows 8) vs
 * the float64 CPU backend and vs the cuBLASLt path (and fk_gemv_stream vs fk_gemv: the same bits), the fallbacks to
 * cuBLASLt (K not a multiple of the vector, unaligned x, M > 8), plus
 * `kernel-speed: linear M<m> N<n> K<k> [cublaslt|gemv|gemv-stream] <us> us = <GB/s> GB/s (<% of copy>)` lines for the
 * Llama-3-8B projections at M 1, 4 and 8 (printed, not asserted; they set gemvMaxRows, 1 since run 11).
 */
import { Tensor, type DType } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { G, cpu, expectClose, gpu, graphMs, measureCopy, poison, randCpu, toGpu, withTuning, printedAfterAll } from '../../../test/spine-helpers.js';
import { chooseLinearPath } from './linear.js';
import type { Tuning } from '../../tuning/schema.js';
import { cudaTuning } from '../../tuning/load.js';

// As linear.gpu.test.ts: both paths sum in a different order than the float64 reference.
const TOL: Record<string, { atol: number; rtol: number }> = { f32: { atol: 1e-4, rtol: 1e-3 }, f16: { atol: 2e-2, rtol: 2e-2 }, bf16: { atol: 2e-2, rtol: 2e-2 } };

const withLinear = <R>(patch: Partial<Tuning['linear']>, fn: () => R): R => withTuning('linear', patch, fn);
// pdlEager: the PDL cases here launch eagerly too (the default makes PDL launches in graph captures only)
const withPdl = <R>(pdl: boolean, fn: () => R): R => withTuning('launch', { pdl, pdlEager: pdl }, fn);
const ON = { gemvMaxRows: 8 };
const ROWS = { gemvMaxRows: 8, gemvStream: false }; // fk_gemv wherever a GEMV is taken
const OFF = { gemvMaxRows: 0 };

/**
 * Which path one linear call took: cuBLASLt when it called gemmInto, else the GEMV; `kernel` names the GEMV entry
 * the spine context handed out (fk_gemv or fk_gemv_stream).
 */
function withPath(fn: () => Tensor): { y: Tensor; path: 'cublaslt' | 'gemv'; kernel: string | null } {
  const ops = gpu().ops;
  const ctx = ops.spine;
  const orig = ops.gemmInto.bind(ops);
  const origKernel = ctx.kernel.bind(ctx);
  let gemms = 0;
  let kernel: string | null = null;
  ops.gemmInto = (...args: Parameters<typeof orig>) => {
    gemms++;
    return orig(...args);
  };
  ctx.kernel = (spec) => {
    if (spec.entry.startsWith('fk_gemv')) kernel = spec.entry;
    return origKernel(spec);
  };
  try {
    const y = fn();
    return { y, path: gemms > 0 ? 'cublaslt' : 'gemv', kernel };
  } finally {
    Reflect.deleteProperty(ops, 'gemmInto'); // back to the prototype's methods
    Reflect.deleteProperty(ctx, 'kernel');
  }
}

/** The GEMV entry ON takes for K (chooseLinearPath at M 1, aligned). */
const streamEntry = (dtype: DType, K: number) =>
  chooseLinearPath({ M: 1, N: 1, K, dtype, aligned: true }, { ...cudaTuning().linear, ...ON }) === 'gemv-stream' ? 'fk_gemv_stream' : 'fk_gemv';

/**
 * linear on the GPU with the switch on: the path must be `want`; the result matches the CPU and the cuBLASLt path.
 * With a GEMV taken, both kernels run: the one ON picks (fk_gemv_stream where K allows it) and fk_gemv (ROWS), with the
 * same bits.
 */
function check(x: Tensor, w: Tensor, b: Tensor | null, gx: Tensor, gw: Tensor, gb: Tensor | null, want: 'cublaslt' | 'gemv', label: string): void {
  const dtype = x.dtype;
  const expected = cpu().ops.linear(x, w, b);
  poison(expected.numel, expected.numel);
  const on = withLinear(ON, () => withPath(() => gpu().ops.linear(gx, gw, gb)));
  if (on.path !== want) throw new Error(`${label}: took ${on.path}, expected ${want}`);
  const K = gw.shape[1]!;
  if (want === 'gemv' && on.kernel !== streamEntry(dtype, K)) throw new Error(`${label}: ran ${on.kernel}, expected ${streamEntry(dtype, K)}`);
  expectClose(on.y, expected, TOL[dtype]!, `${label} [${on.kernel ?? on.path}] vs float64`);
  if (want === 'gemv') {
    poison(expected.numel, expected.numel);
    const rows = withLinear(ROWS, () => withPath(() => gpu().ops.linear(gx, gw, gb)));
    if (rows.kernel !== 'fk_gemv') throw new Error(`${label}: gemvStream off ran ${rows.kernel}`);
    expectClose(on.y, rows.y, { atol: 0, rtol: 0 }, `${label} fk_gemv_stream vs fk_gemv (same summation order)`);
    rows.y.dispose();
  }
  const off = withLinear(OFF, () => withPath(() => gpu().ops.linear(gx, gw, gb)));
  if (off.path !== 'cublaslt') throw new Error(`${label}: switch off took ${off.path}`);
  expectClose(on.y, off.y, TOL[dtype]!, `${label} [${on.path}] vs [cublaslt]`);
  on.y.dispose();
  off.y.dispose();
}

/** check() on the GEMV path for a random [N, K] weight and bias, at each M of Ms, with the bias and without. */
function checkGemvShape(dtype: DType, N: number, K: number, Ms: readonly number[]): void {
  const w = randCpu([N, K], dtype, N * 7 + K, 1 / Math.sqrt(K));
  const b = randCpu([N], dtype, N + 3, 0.5);
  const [gw, gb] = [toGpu(w), toGpu(b)];
  for (const M of Ms) {
    const x = randCpu([M, K], dtype, M * 1000 + K + N);
    const gx = toGpu(x);
    for (const bias of [false, true]) check(x, w, bias ? b : null, gx, gw, bias ? gb : null, 'gemv', `${dtype} M${M} N${N} K${K}${bias ? ' + bias' : ''}`);
    gx.dispose();
  }
  for (const t of [gw, gb]) t.dispose();
}

describe('linear GEMV path (gemvMaxRows 8) vs the float64 CPU backend and cuBLASLt', () => {
  for (const dtype of ['bf16', 'f16', 'f32'] as DType[]) {
    // N odd (a partial last block), K 64 (one iteration, most lanes idle), 72 (9 bf16 vectors), 4096, 14336 (down);
    // N 10007 x K 256: fk_gemv_stream deals 3 rows to most warps (one 32-vector chunk a row for bf16 and f16)
    for (const [N, K] of [[1001, 64], [1001, 72], [256, 4096], [96, 14336], [10007, 256]] as const) {
      it(`${dtype} N${N} K${K}: M 1..8, bias and none`, G, () => checkGemvShape(dtype, N, K, [1, 2, 3, 4, 5, 6, 7, 8]));
    }
  }

  // fk_gemv_stream's main path: several rows a warp (10007 rows over ~4224 warps: 3 or 2) and more chunks a row (16)
  // than FK_UNR, so the load ring wraps inside rows and across row ends, as in qkv, gate_up and lm_head
  it('bf16 N10007 K4096: M 1 and 3, bias and none (several rows a warp, the ring across row ends)', G, () => checkGemvShape('bf16', 10007, 4096, [1, 3]));

  it('K not a multiple of the vector: cuBLASLt, and right', G, () => {
    for (const [dtype, K] of [['bf16', 100], ['f16', 4100], ['f32', 102]] as [DType, number][]) {
      const N = 77;
      const w = randCpu([N, K], dtype, K, 1 / Math.sqrt(K));
      const b = randCpu([N], dtype, K + 1, 0.5);
      for (const M of [1, 4, 8]) {
        const x = randCpu([M, K], dtype, M + K);
        check(x, w, b, toGpu(x), toGpu(w), toGpu(b), 'cublaslt', `${dtype} M${M} K${K}`);
      }
    }
  });

  it('row-strided x (a narrow of a wider tensor): aligned -> gemv, unaligned -> cuBLASLt', G, () => {
    const [N, K] = [200, 4096];
    for (const dtype of ['bf16', 'f32'] as DType[]) {
      const w = randCpu([N, K], dtype, 5, 1 / Math.sqrt(K));
      const b = randCpu([N], dtype, 6, 0.5);
      const [gw, gb] = [toGpu(w), toGpu(b)];
      for (const M of [1, 3, 8]) {
        const wide = randCpu([M, K + 64], dtype, 100 + M);
        const gwide = toGpu(wide);
        // start 32: 64 / 128 bytes in, row stride (K + 64) elements: 16-byte aligned
        check(wide.narrow(1, 32, K), w, b, gwide.narrow(1, 32, K), gw, gb, 'gemv', `${dtype} M${M} narrow(1, 32)`);
        // start 2: 4 / 8 bytes in, not 16-byte aligned (M 1 too: x's first vector is unaligned)
        check(wide.narrow(1, 2, K), w, null, gwide.narrow(1, 2, K), gw, null, 'cublaslt', `${dtype} M${M} narrow(1, 2)`);
        gwide.dispose();
      }
      for (const t of [gw, gb]) t.dispose();
    }
  });

  it('rank-3 x (M = 6), an f32 weight and bias for a bf16 x, M 9 -> cuBLASLt', G, () => {
    const [N, K] = [129, 512];
    const w = randCpu([N, K], 'f32', 1, 1 / Math.sqrt(K));
    const b = randCpu([N], 'f32', 2, 0.5);
    // the CPU reference sees the bf16-rounded weight and bias, as the CUDA op converts them to x's dtype
    const [wb, bb] = [w.to('bf16'), b.to('bf16')];
    const x3 = randCpu([2, 3, K], 'bf16', 3);
    check(x3, wb, bb, toGpu(x3), toGpu(w), toGpu(b), 'gemv', 'rank-3 bf16 x, f32 weight');
    const x9 = randCpu([9, K], 'bf16', 4);
    check(x9, wb, bb, toGpu(x9), toGpu(wb), toGpu(bb), 'cublaslt', 'M 9');
  });
});

describe('linearSiluAndMul: gate_up and silu in one fk_gemv_stream launch (linear.gemvFuseGlu)', () => {
  // The same bits as linear then siluAndMul (each sum rounded as the projection stores it, then fk_act_and_mul's
  // arithmetic), and close to the float64 CPU; null wherever linear would not take fk_gemv_stream.
  const FUSE = { gemvMaxRows: 8, gemvFuseGlu: true };
  function checkGlu(dtype: DType, d: number, K: number, Ms: readonly number[]): void {
    const w = randCpu([2 * d, K], dtype, d * 11 + K, 1 / Math.sqrt(K));
    const b = randCpu([2 * d], dtype, d + 5, 0.5);
    const [gw, gb] = [toGpu(w), toGpu(b)];
    // One x of max(Ms) rows; each M takes its leading rows (rows are independent), so the float64 reference runs once
    // per bias setting, not once per M: at d 14336 K 4096 each reference is ~1 G multiply-adds on the host.
    const rows = Math.max(...Ms);
    const x = randCpu([rows, K], dtype, rows * 31 + K + d);
    const gxAll = toGpu(x);
    const refs = new Map([false, true].map((bias) => [bias, cpu().ops.siluAndMul(cpu().ops.linear(x, w, bias ? b : null))]));
    for (const M of Ms) {
      const gx = gxAll.narrow(0, 0, M);
      for (const bias of [false, true]) {
        const label = `${dtype} M${M} d${d} K${K}${bias ? ' + bias' : ''}`;
        const expected = refs.get(bias)!.narrow(0, 0, M);
        poison(M * 2 * d, M * d);
        const fused = withLinear(FUSE, () => withPath(() => gpu().ops.linearSiluAndMul!(gx, gw, bias ? gb : null)!));
        if (fused.kernel !== 'fk_gemv_stream') throw new Error(`${label}: ran ${fused.kernel}`);
        const unfused = withLinear({ gemvMaxRows: 8 }, () => {
          const g = gpu().ops.linear(gx, gw, bias ? gb : null);
          const y = gpu().ops.siluAndMul(g);
          g.dispose();
          return y;
        });
        expectClose(fused.y, unfused, { atol: 0, rtol: 0 }, `${label}: fused vs linear + siluAndMul (same bits)`);
        expectClose(fused.y, expected, { atol: TOL[dtype]!.atol * 2, rtol: TOL[dtype]!.rtol * 2 }, `${label}: fused vs float64`);
        for (const t of [fused.y, unfused, expected]) t.dispose();
      }
      gx.dispose();
    }
    for (const t of [gw, gb, gxAll, ...refs.values()]) t.dispose();
  }
  for (const dtype of ['bf16', 'f16', 'f32'] as DType[]) {
    // d 10007 (more pairs than warps: 2-3 gate | up pairs a warp, so the cursor jumps from a pair's up row to the next
    // pair's gate row), d 1001 (odd: a partial last block), K 256 (one chunk a row for bf16: the ring crosses gate | up
    // ends every chunk), d 48 K 1024 (most warps idle), K 4096 with d 14336 (Llama-3-8B's gate_up)
    for (const [d, K] of [[10007, 256], [1001, 256], [48, 1024], [14336, 4096]] as const) {
      it(`${dtype} d${d} K${K}: M 1, 2, 5, 8, bias and none`, G, () => checkGlu(dtype, d, K, [1, 2, 5, 8]));
    }
  }
  it('declines (null) with the switch off, K not a multiple of 32 vectors, M above gemvMaxRows, an odd N, a weight of another dtype', G, () => {
    const x = toGpu(randCpu([1, 512], 'bf16', 1));
    const w = toGpu(randCpu([64, 512], 'bf16', 2));
    expect(withLinear({ gemvMaxRows: 8, gemvFuseGlu: false }, () => gpu().ops.linearSiluAndMul!(x, w, null))).toBeNull();
    const xk = toGpu(randCpu([1, 72], 'bf16', 3));
    const wk = toGpu(randCpu([64, 72], 'bf16', 4));
    expect(withLinear(FUSE, () => gpu().ops.linearSiluAndMul!(xk, wk, null))).toBeNull();
    const x9 = toGpu(randCpu([9, 512], 'bf16', 5));
    expect(withLinear(FUSE, () => gpu().ops.linearSiluAndMul!(x9, w, null))).toBeNull();
    const wOdd = toGpu(randCpu([63, 512], 'bf16', 6));
    expect(withLinear(FUSE, () => gpu().ops.linearSiluAndMul!(x, wOdd, null))).toBeNull();
    const w32 = toGpu(randCpu([64, 512], 'f32', 7));
    expect(withLinear(FUSE, () => gpu().ops.linearSiluAndMul!(x, w32, null))).toBeNull();
    for (const t of [x, w, xk, wk, x9, wOdd, w32]) t.dispose();
  });
});

describe('rmsNormLinear: the RMSNorm in fk_gemv_stream\'s prologue (linear.gemvFuseNorm)', () => {
  // The same bits as rms_norm (fused_add_rms_norm with a residual) then linear (then siluAndMul), the new residual
  // included, and close to the float64 CPU composition; null wherever the fused kernel would not give those bits.
  const FUSE = { gemvMaxRows: 1, gemvFuseNorm: true };
  const EPS = 1e-5;
  function checkNormLinear(dtype: DType, N: number, K: number, act: 'silu' | null): void {
    const seed = N * 7 + K + (act ? 1 : 0);
    const x = randCpu([1, K], dtype, seed, 2);
    const r = randCpu([1, K], dtype, seed + 1);
    const nw = randCpu([K], dtype, seed + 2, 1);
    const w = randCpu([N, K], dtype, seed + 3, 1 / Math.sqrt(K));
    const b = randCpu([N], dtype, seed + 4, 0.5);
    const [gx, gr, gnw, gw, gb] = [x, r, nw, w, b].map(toGpu) as [Tensor, Tensor, Tensor, Tensor, Tensor];
    for (const residual of [false, true]) {
      for (const bias of [false, true]) {
        const label = `${dtype} N${N} K${K}${act ? ' silu' : ''}${residual ? ' + residual' : ''}${bias ? ' + bias' : ''}`;
        poison(N * K, 2 * K);
        let resFused: Tensor | null = null;
        const fused = withLinear(FUSE, () =>
          withPath(() => {
            const out = gpu().ops.rmsNormLinear!(gx, residual ? gr : null, gnw, EPS, gw, bias ? gb : null, act);
            if (!out) throw new Error(`${label}: declined`);
            resFused = out[1];
            return out[0];
          }),
        );
        if (fused.kernel !== 'fk_gemv_stream') throw new Error(`${label}: ran ${fused.kernel}`);
        expect(resFused === null).toBe(!residual);
        // the same on the GPU through the separate ops (no GLU fusion: linear, then siluAndMul)
        const [h, resUnfused] = residual ? gpu().ops.fusedAddRmsNorm(gx, gr, gnw, EPS) : [gpu().ops.rmsNorm(gx, gnw, EPS), null];
        const proj = withLinear({ gemvMaxRows: 1 }, () => gpu().ops.linear(h, gw, bias ? gb : null));
        const unfused = act ? gpu().ops.siluAndMul(proj) : proj;
        expectClose(fused.y, unfused, { atol: 0, rtol: 0 }, `${label}: fused vs rms_norm + linear (same bits)`);
        if (resFused && resUnfused) expectClose(resFused, resUnfused, { atol: 0, rtol: 0 }, `${label}: new residual (same bits)`);
        const [expected, expectedRes] = cpu().ops.rmsNormLinear!(x, residual ? r : null, nw, EPS, w, bias ? b : null, act)!;
        expectClose(fused.y, expected, { atol: TOL[dtype]!.atol * 2, rtol: TOL[dtype]!.rtol * 2 }, `${label}: fused vs float64`);
        if (resFused && expectedRes) expectClose(resFused, expectedRes, TOL[dtype]!, `${label}: new residual vs float64`);
        for (const t of [fused.y, resFused, h, resUnfused, proj, unfused]) t?.dispose();
      }
    }
    for (const t of [gx, gr, gnw, gw, gb]) t.dispose();
  }
  // K: where rms_norm's block is fk_gemv_stream's 256 threads (bf16/f16 4096, f32 2048); N 6144 (Llama-3-8B's qkv), 10007
  // (2-3 rows a warp, a partial last block), GLU d 1001 (2002 rows: gate | up pairs)
  for (const [dtype, K] of [['bf16', 4096], ['f16', 4096], ['f32', 2048]] as const) {
    for (const [N, act] of [[6144, null], [10007, null], [2002, 'silu']] as const) {
      it(`${dtype} N${N} K${K}${act ? ' silu' : ''}: residual and none, bias and none`, G, () => checkNormLinear(dtype, N, K, act));
    }
  }

  it('declines (null) with the switch off, two rows, a norm block other than 256 threads, a strided residual, another dtype, an odd GLU', G, () => {
    const x = toGpu(randCpu([1, 4096], 'bf16', 1));
    const nw = toGpu(randCpu([4096], 'bf16', 2));
    const w = toGpu(randCpu([64, 4096], 'bf16', 3));
    const call = (xx: Tensor, rr: Tensor | null, nn: Tensor, ww: Tensor, act: 'silu' | null = null, patch: Partial<Tuning['linear']> = FUSE) =>
      withLinear(patch, () => gpu().ops.rmsNormLinear!(xx, rr, nn, EPS, ww, null, act));
    const ok = call(x, null, nw, w);
    expect(ok).not.toBeNull();
    ok![0].dispose();
    expect(call(x, null, nw, w, null, { gemvMaxRows: 1, gemvFuseNorm: false })).toBeNull();
    expect(call(x, null, nw, w, 'silu', { gemvMaxRows: 1, gemvFuseNorm: true, gemvFuseGlu: false })).toBeNull(); // GLU switched off
    const x2 = toGpu(randCpu([2, 4096], 'bf16', 4));
    expect(call(x2, null, nw, w)).toBeNull();
    const xk = toGpu(randCpu([1, 1024], 'bf16', 5));
    const nk = toGpu(randCpu([1024], 'bf16', 6));
    const wk = toGpu(randCpu([64, 1024], 'bf16', 7));
    expect(call(xk, null, nk, wk)).toBeNull(); // rms_norm takes 64 threads for 1024: another order of the sum
    const wide = toGpu(randCpu([4096, 2], 'bf16', 8));
    const colStrided = wide.narrow(1, 0, 1).transpose(0, 1); // [1, 4096] at a stride of 2 elements
    expect(call(x, colStrided, nw, w)).toBeNull();
    const n32 = toGpu(randCpu([4096], 'f32', 9));
    expect(call(x, null, n32, w)).toBeNull();
    const wOdd = toGpu(randCpu([63, 4096], 'bf16', 10));
    expect(call(x, null, nw, wOdd, 'silu')).toBeNull();
    for (const t of [x, nw, w, x2, xk, nk, wk, colStrided, wide, n32, wOdd]) t.dispose();
  });
});

describe('linear GEMV as a programmatic dependent launch (launch.pdl, sm_90+)', () => {
  // fk_gemv starts before the kernel that writes x has finished and streams weights in before fk_pdl_wait. Without
  // the wait it would read x while a slow one-block rms_norm (which lets dependents start first thing) still writes
  // it: the x buffer is poisoned with NaN beforehand, so a read too early shows up as NaN or a wrong row.
  it('waits for x: M 1 linear of a one-row rms_norm over 65536 elements, PDL on and off, vs float64', G, () => {
    const [N, K] = [256, 65536];
    const x = randCpu([1, K], 'bf16', 91);
    const nw = randCpu([K], 'bf16', 92, 0.5);
    const w = randCpu([N, K], 'bf16', 93, 1 / Math.sqrt(K));
    const expected = cpu().ops.linear(cpu().ops.rmsNorm(x, nw, 1e-5).to('bf16'), w, null);
    const [gx, gnw, gw] = [toGpu(x), toGpu(nw), toGpu(w)];
    for (const gemvStream of [true, false]) {
      for (const pdl of [true, false]) {
        for (let rep = 0; rep < 3; rep++) {
          poison(K / 2, K / 2); // the size of the bf16 rms_norm output
          const got = withPdl(pdl, () => withLinear({ gemvMaxRows: 1, gemvStream }, () => withPath(() => gpu().ops.linear(gpu().ops.rmsNorm(gx, gnw, 1e-5), gw, null))));
          if (got.path !== 'gemv') throw new Error(`took ${got.path}`);
          if (got.kernel !== (gemvStream ? 'fk_gemv_stream' : 'fk_gemv')) throw new Error(`gemvStream ${gemvStream} ran ${got.kernel}`);
          expectClose(got.y, expected, TOL.bf16!, `${gemvStream ? 'fk_gemv_stream' : 'fk_gemv'} pdl ${pdl} rep ${rep} vs float64`);
          got.y.dispose();
        }
      }
    }
    for (const t of [gx, gnw, gw]) t.dispose();
  });
});

describe('linear speed: cuBLASLt vs the GEMV at M 1, 4, 8 (printed, not asserted)', () => {
  const lines = printedAfterAll();
  it('bf16 Llama-3-8B projections: qkv, o, gate_up, down, lm_head', G, () => {
    const b = gpu();
    const { ms: copyMs, gbs: copyGBs } = measureCopy(64 * 1024 * 1024);
    lines.push(`kernel-speed: copy ${copyMs.toFixed(3)} ms = ${copyGBs.toFixed(0)} GB/s`);
    // [N, K]: qkv, o, gate_up, down, lm_head
    for (const [N, K] of [[6144, 4096], [4096, 4096], [28672, 4096], [4096, 14336], [128256, 4096]] as const) {
      // As in a decode step, each call streams a weight that is not in L2 (50 MB): the graph cycles through copies
      // totalling >= 256 MB.
      const copies = Math.max(1, Math.ceil((256 << 20) / (N * K * 2)));
      const ws = Array.from({ length: copies }, () => Tensor.empty(b, [N, K], 'bf16').fill_(0.01));
      const inner = Math.max(8, copies);
      for (const M of [1, 4, 8]) {
        const x = Tensor.empty(b, [M, K], 'bf16');
        x.fill_(0.5);
        const bytes = N * K * 2 + M * K * 2 + M * N * 2;
        for (const [name, patch] of [['cublaslt', OFF], ['gemv', ROWS], ['gemv-stream', ON]] as const) {
          // PDL off: kernel against kernel (cuBLASLt's are ordinary launches; the PDL pairs are timed below)
          const ms = withPdl(false, () => withLinear(patch, () => graphMs((i) => b.ops.linear(x, ws[i % copies]!, null).dispose(), inner)));
          const gbs = bytes / ms / 1e6;
          lines.push(`kernel-speed: linear M${M} N${N} K${K} [${name}] ${(ms * 1e3).toFixed(1)} us = ${gbs.toFixed(0)} GB/s (${((gbs / copyGBs) * 100).toFixed(0)}% of copy; in a CUDA graph)`);
        }
        x.dispose();
      }
      for (const w of ws) w.dispose();
    }
  });
});

describe('programmatic dependent launch in a captured graph (launch.pdl)', () => {
  // Run 10: a PDL launch of the GEMV did not overlap the rms_norm before it. Does stream capture turn the launch
  // attribute into a programmatic edge? The edges of rms_norm -> GEMV, PDL on and off, printed and checked.
  it('rms_norm -> GEMV: a programmatic edge with PDL, only full-completion edges without', G, () => {
    const b = gpu();
    const [N, K] = [512, 4096];
    const x = Tensor.empty(b, [1, K], 'bf16').fill_(0.5);
    const nw = Tensor.empty(b, [K], 'bf16').fill_(1);
    const w = Tensor.empty(b, [N, K], 'bf16').fill_(0.01);
    const kinds: Record<string, Record<string, number> | null> = {};
    for (const pdl of [true, false]) {
      withPdl(pdl, () => withLinear({ gemvMaxRows: 1 }, () => {
        const step = () => {
          const y = b.ops.rmsNorm(x, nw, 1e-5);
          b.ops.linear(y, w, null).dispose();
          y.dispose();
        };
        step(); // compile outside the capture
        b.synchronize();
        const g = b.runtime.capture(step, { poolBytes: 16 << 20 });
        kinds[String(pdl)] = g.edgeKinds();
        g.destroy();
      }));
    }
    console.log(`kernel-speed: pdl graph edges (type/from port: count): with PDL ${JSON.stringify(kinds.true)}, without ${JSON.stringify(kinds.false)}`);
    for (const t of [x, nw, w]) t.dispose();
    if (kinds.true === null) return; // the driver cannot list edge types
    const programmatic = (k: Record<string, number> | null) => Object.entries(k ?? {}).filter(([key]) => key.startsWith('1/')).reduce((a, [, n]) => a + n, 0);
    if (programmatic(kinds.false) !== 0) throw new Error(`a programmatic edge without PDL: ${JSON.stringify(kinds.false)}`);
    if (programmatic(kinds.true) < 1) throw new Error(`no programmatic edge with PDL: ${JSON.stringify(kinds.true)}`);
  });
});

describe('does programmatic dependent launch overlap? rms_norm (T 1) then linear (M 1), in a CUDA graph (printed)', () => {
  const lines = printedAfterAll();
  // Run 10 saw no change in the bs-1 step with the GEMV as a PDL launch. Here the pair the decode step has before
  // every qkv and gate_up projection, timed with cuBLASLt and with the GEMV, PDL off and on (on: both kernels are
  // PDL launches, fk_rms_norm lets the GEMV start once it has begun). If PDL overlaps, gemv+pdl beats gemv by about
  // the norm's time.
  it('bf16 H 4096: o (4096 x 4096) and gate_up (28672 x 4096)', G, () => {
    const b = gpu();
    const H = 4096;
    const x = Tensor.empty(b, [1, H], 'bf16').fill_(0.5);
    const nw = Tensor.empty(b, [H], 'bf16').fill_(1);
    for (const [label, N] of [['o', 4096], ['gate_up', 28672]] as const) {
      const copies = Math.max(1, Math.ceil((256 << 20) / (N * H * 2)));
      const ws = Array.from({ length: copies }, () => Tensor.empty(b, [N, H], 'bf16').fill_(0.01));
      const inner = Math.max(8, copies);
      const normOnly = graphMs(() => b.ops.rmsNorm(x, nw, 1e-5).dispose(), inner);
      lines.push(`kernel-speed: pdl rms_norm T1 H${H} alone ${(normOnly * 1e3).toFixed(1)} us`);
      for (const [name, patch, pdl] of [
        ['cublaslt', { gemvMaxRows: 0 }, false],
        ['cublaslt+pdl', { gemvMaxRows: 0 }, true],
        ['gemv', { gemvMaxRows: 1, gemvStream: false }, false],
        ['gemv+pdl', { gemvMaxRows: 1, gemvStream: false }, true],
        ['gemv-stream', { gemvMaxRows: 1 }, false],
        ['gemv-stream+pdl', { gemvMaxRows: 1 }, true],
      ] as const) {
        const ms = withPdl(pdl, () => withLinear(patch, () =>
          graphMs((i) => {
            const y = b.ops.rmsNorm(x, nw, 1e-5);
            b.ops.linear(y, ws[i % copies]!, null).dispose();
            y.dispose();
          }, inner),
        ));
        lines.push(`kernel-speed: pdl rms_norm T1 -> linear ${label} M1 N${N} K${H} [${name}] ${(ms * 1e3).toFixed(1)} us (pair, in a CUDA graph)`);
      }
      for (const w of ws) w.dispose();
    }
    x.dispose();
    nw.dispose();
  });
});
