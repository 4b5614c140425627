/**
 * The tensor-core chunk_gated_delta_rule (kernels/gdn_chunk_tc.cu, as embedded) replayed on the host: its real source
 * built with FK_HOST_REPLAY=1 by g++ (test/host-cuda.ts: a CTA's threads as std::threads, CTAs one after another), the
 * tensor-core primitives emulated lane by lane (test/warp-mma-host.ts), both launches on the plan's grids with the
 * #defines and argument order the launcher uses (gdn-tc.ts). o and the final states (or the pool rows) are held to the
 * float64 CPU op over the same bf16-rounded inputs (q, k, v, beta bf16; g f32, Qwen3-Next's dtypes) at the tolerances
 * the CUDA-core kernel meets (bf16's for o, f32's for the state: the hi + lo operands must hold them): several chunks
 * with a tail and grouped value heads, packed sequences of odd lengths over a pool with a -1 row, strong decays (g
 * down to -20 a token: the factors must underflow, never overflow), l2norm on and off, K 32 / 64 / 128 / 256, the walk's
 * tiles BV 16 / 32 (Qwen3-Next's) / 64. What it cannot see: races between warps, bank conflicts, f16, timing. Skipped
 * where g++ is absent.
 */
import { CpuBackend } from '@fastkernels/backend-cpu';
import { Tensor, callOp } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import type { RecurrentCaseShape } from '../../../test/gla-cases.js';
import { cArray, hasGxx } from '../../../test/host-cuda.js';
import { bf16, bf16Bits, expectUntouchedRows, expectWithin, replayPrepWalk, scaledError } from '../../../test/tc-chunk-checks.js';
import { GDN_TC_PREP_THREADS, gdnTcDefines, planGdnTc, type GdnTcPlan } from './gdn-tc-plan.js';
import { GDN_TC_FILE } from './gdn-tc.js';

const cpu = new CpuBackend();

interface Case extends RecurrentCaseShape {
  /** Value heads (H q / k heads, HV / H value heads each). */
  readonly HV: number;
  readonly l2norm: boolean;
  /** The walk's V tile (recurrent.chunkDeltaTileColumns), else the plan's for 132 SMs. */
  readonly tile?: number;
  /** The log decay of token-head element e from a value in about [-1.3, 1.3]. */
  readonly gate: (x: number, e: number) => number;
}

const sines = (n: number, seed: number, f: (x: number, i: number) => number = (x) => x) => Float64Array.from({ length: n }, (_, i) => f(Math.sin(seed * 12.9898 + i * 78.233) * 1.3, i));

/** Runs both launches on the host; returns o [B, T, HV, V] and the state array after (the final states or the pool). */
function replay(c: Case, p: GdnTcPlan, x: { q: Float64Array; k: Float64Array; v: Float64Array; g: Float64Array; beta: Float64Array; s0: Float64Array | null }): { o: number[]; state: number[] } {
  const { B, T, H, HV, K, V } = c;
  const N = c.cu ? c.cu.length - 1 : B;
  const pooled = c.idx !== undefined;
  const bits = (a: Float64Array) => Array.from(a, bf16Bits);
  const stateLen = pooled ? c.slots! * HV * K * V : N * HV * K * V;
  const scale = c.scale ?? 1 / Math.sqrt(K);
  // q, k, v, g, beta: [B, T, heads, *] contiguous: strides (T heads D, heads D, D)
  const st = (heads: number, D: number) => `${T * heads * D}LL, ${heads * D}LL, ${D}LL`;
  return replayPrepWalk({
    file: GDN_TC_FILE, defines: gdnTcDefines(['bf16', 'f32', 'bf16'], K, V, p, c.l2norm, 'i32', 'i32'), namespace: 'fkgdn',
    arrays: `${cArray('unsigned short', 'q_', bits(x.q))}
${cArray('unsigned short', 'k_', bits(x.k))}
${cArray('unsigned short', 'v_', bits(x.v))}
${cArray('float', 'g_', x.g)}
${cArray('unsigned short', 'b_', bits(x.beta))}
static unsigned short o_[${B * T * HV * V}], w_[${2 * B * T * HV * K}], u_[${2 * B * T * HV * V}], a_[${2 * p.slots * HV * 64 * 64}];
static float gc[${B * T * HV}], nrm[${B * T * H * 2}];`,
    oLen: B * T * HV * V, s0: x.s0, cu: c.cu, idx: c.idx, stateLen,
    prep: {
      grid: p.prepGrid, threads: GDN_TC_PREP_THREADS, shared: p.prepSharedBytes,
      call: `fk_gdn_chunk_prep(BF(q_), BF(k_), BF(v_), g_, BF(b_), ${st(H, K)}, ${st(H, K)}, ${st(HV, V)}, ${st(HV, 1)}, ${st(HV, 1)},
      cup, ${T}, ${H}, ${HV}, ${N}, ${p.ncMax}, ${scale.toPrecision(9)}f, BF(w_), BF(u_), BF(a_), gc, nrm)`,
    },
    walk: {
      grid: p.mainGrid, threads: p.threads, shared: p.mainSharedBytes,
      call: `fk_gdn_chunk_tc(BF(o_), BF(q_), BF(k_), ${st(H, K)}, ${st(H, K)}, BF(w_), BF(u_), BF(a_), gc, nrm, sin_, ${HV * K * V}LL, sout, ${HV * K * V}LL, cup, sip, ${T}, ${H}, ${HV}, ${p.ncMax}, ${scale.toPrecision(9)}f)`,
    },
  });
}

function check(c: Case): void {
  const { B, T, H, HV, K, V } = c;
  const N = c.cu ? c.cu.length - 1 : B;
  const pooled = c.idx !== undefined;
  const sShape = pooled ? [c.slots!, HV, K, V] : [N, HV, K, V];
  const x = {
    q: sines(B * T * H * K, 1).map(bf16),
    // |k| ~ 1 without the in-kernel l2norm (the delta rule's domain)
    k: sines(B * T * H * K, 2, (z) => (c.l2norm ? z : z / Math.sqrt(K))).map(bf16),
    v: sines(B * T * HV * V, 3).map(bf16),
    g: sines(B * T * HV, 4, c.gate).map((z) => Math.fround(z)),
    beta: sines(B * T * HV, 5, (z) => 1 / (1 + Math.exp(-2 * z))).map(bf16),
    s0: pooled || c.init ? sines(sShape.reduce((a, b) => a * b, 1), 6, (z) => Math.fround(z / 2)) : null,
  };
  const plan = planGdnTc({ N, T, H, HV, K, V, varlen: c.cu !== undefined }, 132, undefined, c.tile ?? 0);
  if (c.tile) expect(plan.bv).toBe(c.tile);
  const got = replay(c, plan, x);
  const t = (d: Float64Array, shape: number[]) => Tensor.fromArray(cpu, d, shape, 'f64');
  const s0 = x.s0 ? Tensor.fromArray(cpu, x.s0.slice(), sShape, 'f32') : null;
  const ins = [t(x.q, [B, T, H, K]), t(x.k, [B, T, H, K]), t(x.v, [B, T, HV, V]), t(x.g, [B, T, HV]), t(x.beta, [B, T, HV]), s0,
    c.cu ? Tensor.fromArray(cpu, c.cu, [c.cu.length], 'i32') : null, c.idx ? Tensor.fromArray(cpu, c.idx, [c.idx.length], 'i32') : null];
  const want = callOp('chunk_gated_delta_rule', ins, { scale: c.scale ?? null, output_final_state: !pooled, use_qk_l2norm_in_kernel: c.l2norm });
  const wantO = want[0]!.toFloat64Array();
  const wantS = pooled ? s0!.toFloat64Array() : want[1]!.toFloat64Array();
  // within the CUDA-core kernel's tolerances (bf16's for o, f32's for the state), and far inside them by scale
  const errors = { o: scaledError(got.o, wantO), state: scaledError(got.state, wantS) };
  console.log(`gdn tc host replay ${JSON.stringify({ B, T, H, HV, K, V, cu: c.cu, l2norm: c.l2norm })}: max |err| / max |want|: o ${errors.o.toExponential(2)}, state ${errors.state.toExponential(2)}`);
  expectWithin(got.o, wantO, 1e-2, 1e-2, 'o');
  expectWithin(got.state, wantS, 1e-5, 1e-3, 'state');
  expect(errors.o).toBeLessThan(0.005);
  expect(errors.state).toBeLessThan(1e-4);
  if (pooled) expectUntouchedRows(got.state, x.s0!, c.idx!, c.slots!, HV * K * V);
}

/** Qwen3-Next's decay: -exp(A_log) softplus(a + dt_bias), here about -0.1 .. -1.5 a token. */
const qwenGate = (z: number) => -Math.log1p(Math.exp(z)) / 1.5;

describe(`tensor-core chunk_gated_delta_rule replayed on the host vs the float64 CPU op${hasGxx ? '' : ' (SKIPPED: g++ not on PATH)'}`, () => {
  it.skipIf(!hasGxx)('batch rows, 150 tokens (two chunks and a 22-token tail), grouped value heads (HV 2 H), initial and final states, l2norm, K 32 / V 32', { timeout: 600_000 }, () => {
    check({ B: 2, T: 150, H: 2, HV: 4, K: 32, V: 32, init: true, l2norm: true, gate: qwenGate });
  });
  it.skipIf(!hasGxx)('three packed sequences of odd lengths (17, 73, 61) and an empty one over a pool with a -1 row, no l2norm, scale 0.3, K 32 / V 48', { timeout: 600_000 }, () => {
    check({ B: 1, T: 151, H: 1, HV: 2, K: 32, V: 48, cu: [0, 17, 17, 90, 151], idx: [2, 1, -1, 0], slots: 5, scale: 0.3, l2norm: false, gate: qwenGate });
  });
  it.skipIf(!hasGxx)('strong decays (g -1e-3 .. -20 a token: the factors underflow, never overflow), l2norm, K 64 / V 32', { timeout: 600_000 }, () => {
    check({ B: 1, T: 130, H: 1, HV: 2, K: 64, V: 32, init: true, l2norm: true, gate: (z, e) => [-1e-3 * (1 + Math.abs(z)), qwenGate(z), -5 - 4 * Math.abs(z), -20 + Math.abs(z) / 10][e % 4]! });
  });
  it.skipIf(!hasGxx)("Qwen3-Next's head dims K = V = 128 (8 warps of 16 key columns), grouped heads, l2norm, 100 tokens", { timeout: 600_000 }, () => {
    check({ B: 1, T: 100, H: 1, HV: 2, K: 128, V: 128, init: true, l2norm: true, gate: qwenGate });
  });
  it.skipIf(!hasGxx)("Qwen3-Next's production tile: BV 32 (2 x 4 warps, 32 key columns each), K = V = 128 over a pool with packed sequences", { timeout: 600_000 }, () => {
    check({ B: 1, T: 140, H: 1, HV: 2, K: 128, V: 128, cu: [0, 61, 140], idx: [1, 0], slots: 3, l2norm: true, tile: 32, gate: qwenGate });
  });
  it.skipIf(!hasGxx)('the widest tile: BV 64 (4 x 2 warps, 64 key columns each), K 128 / V 128, initial and final states', { timeout: 600_000 }, () => {
    check({ B: 1, T: 90, H: 1, HV: 1, K: 128, V: 128, init: true, l2norm: true, tile: 64, gate: qwenGate });
  });
  it.skipIf(!hasGxx)('K 256 (the largest head: 8 warps of 32 key columns), 70 tokens, initial state, l2norm', { timeout: 600_000 }, () => {
    check({ B: 1, T: 70, H: 1, HV: 1, K: 256, V: 32, init: true, l2norm: true, gate: qwenGate });
  });
});

describe('the plans the host replay runs', () => {
  it('K 32: BV 16, two warps across K; K 128 / V 128 at 2 value heads: BV 16, eight warps across K', () => {
    const a = planGdnTc({ N: 2, T: 150, H: 2, HV: 4, K: 32, V: 32, varlen: false }, 132);
    expect([a.bv, a.wm, a.wk, a.threads, a.ncMax, a.slots]).toEqual([16, 1, 2, 64, 3, 6]);
    const b = planGdnTc({ N: 1, T: 100, H: 1, HV: 2, K: 128, V: 128, varlen: false }, 132);
    expect([b.bv, b.wk, b.threads]).toEqual([16, 8, 256]);
  });
});
