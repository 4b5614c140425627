/**
 * The tensor-core chunk_gla (kernels/gla_chunk_tc.cu, as embedded) replayed on the host: its real source built with
 * FK_HOST_REPLAY=1 by g++ (test/host-cuda.ts: a CTA's threads as std::threads, CTAs one after another), the
 * tensor-core primitives emulated lane by lane (test/warp-mma-host.ts: mma.sync m16n8k16 bf16 and ldmatrix x2 / x4 /
 * x4.trans with the fragment layouts of the PTX ISA, bf16 as its bits, cp.async as a copy with the zero fill), both
 * launches on the plan's grids and the #defines and argument order the launcher uses (gla-tc.ts). o and the final state (or the pool
 * rows) are held to the float64 CPU chunk_gla over the same bf16-rounded inputs: bit for bit where the values keep
 * every step exact (any misplaced fragment, row or chunk shows), else at the tolerances the CUDA-core kernel meets
 * (bf16's for o, f32's for the state: the hi + lo operands must hold them): several chunks with a tail, batch rows
 * with an initial state, packed sequences (one empty, ends inside chunks) over a pool with a -1 row, the L1 task's
 * normal inputs at K 256, gates near 0 and strongly negative (down to -40 a token: the intra-chunk factors must
 * underflow, never overflow), K 32 (one 32-channel slab, two warps across K), K 128 (two slabs, eight warps). What it
 * cannot see: races between warps, bank conflicts, f16, timing. Skipped where g++ is absent.
 */
import { CpuBackend } from '@fastkernels/backend-cpu';
import { Rng, Tensor, callOp } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cArray, hasGxx } from '../../../test/host-cuda.js';
import type { RecurrentCaseShape } from '../../../test/gla-cases.js';
import { bf16, bf16Bits, expectUntouchedRows, expectWithin, replayPrepWalk, scaledError } from '../../../test/tc-chunk-checks.js';
import { GLA_TC_PREP_THREADS, glaTcDefines, planGlaTc, type GlaTcPlan } from './gla-tc-plan.js';
import { GLA_TC_FILE } from './gla-tc.js';

const cpu = new CpuBackend();

interface Case extends RecurrentCaseShape {
  /**
   * Values every step keeps exact (q, k, v in {-1, 0, 1}, g = 0, scale 1 / 4, an integer state): each operand and
   * product is then exact in bf16 and f32, so o must equal the op's up to o's own rounding and the state exactly; any
   * misplaced fragment, row or chunk shows as an error instead of hiding in the rounding.
   */
  readonly exact?: boolean;
  /** Normal values (the L1 task's distribution) instead of the sine pattern in about [-1.3, 1.3]. */
  readonly normal?: boolean;
  /** The log gate of element e (token-major [B, T, H, K] order) from a value in about [-1.3, 1.3]. */
  readonly gate: (x: number, e: number) => number;
}

const sines = (n: number, seed: number) => Float64Array.from({ length: n }, (_, i) => Math.sin(seed * 12.9898 + i * 78.233) * 1.3);
let normal = false;
const rnd = (n: number, seed: number, f: (x: number, i: number) => number = (x) => x) => (normal ? new Rng(seed).fillNormal(n) : sines(n, seed)).map(f);
const numel = (s: readonly number[]) => s.reduce((a, b) => a * b, 1);

/** Runs both launches on the host; returns o [B, T, H, V] and the state array after (the final states or the pool). */
function replay(c: Case, p: GlaTcPlan, x: { q: Float64Array; k: Float64Array; v: Float64Array; g: Float64Array; s0: Float64Array | null }): { o: number[]; state: number[] } {
  const { B, T, H, K, V } = c;
  const N = c.cu ? c.cu.length - 1 : B;
  const pooled = c.idx !== undefined;
  const bits = (a: Float64Array) => Array.from(a, bf16Bits);
  const stateLen = pooled ? c.slots! * H * K * V : N * H * K * V;
  const scale = c.exact ? 0.25 : (c.scale ?? 1 / Math.sqrt(K));
  // q, k, v, g, o: [B, T, H, *] contiguous: strides (T H D, H D, D)
  const st = (D: number) => `${T * H * D}LL, ${H * D}LL, ${D}LL`;
  return replayPrepWalk({
    file: GLA_TC_FILE, defines: glaTcDefines('bf16', K, p, 'i32', 'i32'), namespace: 'fkgla',
    arrays: `${cArray('unsigned short', 'q_', bits(x.q))}
${cArray('unsigned short', 'k_', bits(x.k))}
${cArray('unsigned short', 'v_', bits(x.v))}
${cArray('unsigned short', 'g_', bits(x.g))}
static unsigned short o_[${B * T * H * V}], qg_[${2 * B * T * H * K}], kd_[${2 * B * T * H * K}], A_[${2 * p.slots * H * 64 * 64}];
static float dec[${p.slots * H * K}];`,
    oLen: B * T * H * V, s0: x.s0, cu: c.cu, idx: c.idx, stateLen,
    prep: {
      grid: p.prepGrid, threads: GLA_TC_PREP_THREADS, shared: p.prepSharedBytes,
      call: `fk_gla_chunk_prep(BF(q_), BF(k_), BF(g_), ${st(K)}, ${st(K)}, ${st(K)}, cup, ${T}, ${H}, ${N}, ${p.ncMax}, ${scale.toPrecision(9)}f, BF(qg_), BF(kd_), BF(A_), dec)`,
    },
    walk: {
      grid: p.mainGrid, threads: p.threads, shared: p.mainSharedBytes,
      call: `fk_gla_chunk_tc(BF(o_), BF(v_), ${st(V)}, BF(qg_), BF(kd_), BF(A_), dec, sin_, ${H * K * V}LL, sout, ${H * K * V}LL, cup, sip, ${T}, ${H}, ${V}, ${p.ncMax})`,
    },
  });
}

function check(c: Case): void {
  const { B, T, H, K, V } = c;
  const N = c.cu ? c.cu.length - 1 : B;
  const pooled = c.idx !== undefined;
  normal = c.normal ?? false;
  const value = c.exact ? (z: number) => Math.round(z) : bf16;
  const x = {
    q: rnd(B * T * H * K, 1).map(value),
    k: rnd(B * T * H * K, 2).map(value),
    v: rnd(B * T * H * V, 3).map(value),
    g: c.exact ? new Float64Array(B * T * H * K) : rnd(B * T * H * K, 4, c.gate).map(bf16),
    s0: pooled || c.init ? rnd(pooled ? c.slots! * H * K * V : N * H * K * V, 5, (z) => (c.exact ? Math.round(2 * z) : Math.fround(z))) : null,
  };
  const plan = planGlaTc({ N, T, H, K, V, varlen: c.cu !== undefined }, 132);
  const got = replay(c, plan, x);
  const t = (d: Float64Array, shape: number[]) => Tensor.fromArray(cpu, d, shape, 'f64');
  const sShape = pooled ? [c.slots!, H, K, V] : [N, H, K, V];
  const s0 = x.s0 ? Tensor.fromArray(cpu, x.s0.slice(), sShape, 'f32') : null;
  const ins = [t(x.q, [B, T, H, K]), t(x.k, [B, T, H, K]), t(x.v, [B, T, H, V]), t(x.g, [B, T, H, K]), s0,
    c.cu ? Tensor.fromArray(cpu, c.cu, [c.cu.length], 'i32') : null, c.idx ? Tensor.fromArray(cpu, c.idx, [c.idx.length], 'i32') : null];
  const want = callOp('chunk_gla', ins, { scale: c.exact ? 0.25 : (c.scale ?? null), output_final_state: !pooled, chunk_size: 64 });
  const wantO = want[0]!.toFloat64Array();
  const wantS = pooled ? s0!.toFloat64Array() : want[1]!.toFloat64Array();
  if (c.exact) {
    const badO = wantO.findIndex((w, i) => got.o[i] !== bf16(w));
    expect(badO, badO < 0 ? 'o' : `o[${badO}]: ${got.o[badO]} vs ${wantO[badO]}`).toBe(-1);
    const badS = wantS.findIndex((w, i) => got.state[i] !== w);
    expect(badS, badS < 0 ? 'state' : `state[${badS}]: ${got.state[badS]} vs ${wantS[badS]}`).toBe(-1);
  } else {
    // the hi + lo operands leave o's own bf16 rounding and f32 sums: within the CUDA-core kernel's tolerances (bf16's
    // for o, f32's for the state), and far inside them by scale
    expectWithin(got.o, wantO, 1e-2, 1e-2, 'o');
    expectWithin(got.state, wantS, 1e-5, 1e-3, 'state');
    expect(scaledError(got.o, wantO)).toBeLessThan(0.005);
    expect(scaledError(got.state, wantS)).toBeLessThan(1e-4);
  }
  if (pooled) expectUntouchedRows(got.state, x.s0!, c.idx!, c.slots!, H * K * V);
}

const glaGate = (z: number) => -Math.log1p(Math.exp(-z)) / 16; // GLA's logsigmoid(x) / 16

describe(`tensor-core chunk_gla replayed on the host vs the float64 CPU op${hasGxx ? '' : ' (SKIPPED: g++ not on PATH)'}`, () => {
  it.skipIf(!hasGxx)('exact values: batch rows with initial states, 150 tokens (a 22-token tail), K 32 / V 48: o and the states bit-exact', { timeout: 600_000 }, () => {
    check({ B: 2, T: 150, H: 2, K: 32, V: 48, init: true, exact: true, gate: () => 0 });
  });
  it.skipIf(!hasGxx)('exact values: packed sequences over a pool with a -1 row, K 128 / V 64 (two slabs, 4 x 2 warps)', { timeout: 600_000 }, () => {
    check({ B: 1, T: 140, H: 2, K: 128, V: 64, cu: [0, 70, 70, 133, 140], idx: [2, -1, 0, 3], slots: 4, exact: true, gate: () => 0 });
  });
  it.skipIf(!hasGxx)('batch rows, 150 tokens (two chunks and a 22-token tail), an initial and a final state, K 32 / V 48', { timeout: 600_000 }, () => {
    check({ B: 2, T: 150, H: 2, K: 32, V: 48, init: true, gate: glaGate });
  });
  it.skipIf(!hasGxx)('packed sequences (one empty, ends inside chunks) over a pool with a -1 row, scale 0.3', { timeout: 600_000 }, () => {
    check({ B: 1, T: 150, H: 2, K: 32, V: 32, cu: [0, 17, 17, 90, 130, 150], idx: [3, 0, -1, 4, 1], slots: 6, scale: 0.3, gate: glaGate });
  });
  it.skipIf(!hasGxx)("the L1 task's inputs (q, k, v, the state ~ N(0, 1), GLA's gates) at K 256: 256 tokens, 4 slabs, 8 warps across K", { timeout: 600_000 }, () => {
    check({ B: 1, T: 256, H: 1, K: 256, V: 32, init: true, normal: true, gate: glaGate });
  });
  it.skipIf(!hasGxx)('gates near 0 on some channels and down to -40 a token on others (strong forgetting), K 128 (two slabs)', { timeout: 600_000 }, () => {
    // channel i % 4: 0 -> about -1e-4 (the state barely decays), 1 -> GLA's, 2 -> -3 .. -10, 3 -> -20 .. -40
    const K = 128;
    check({ B: 1, T: 100, H: 1, K, V: 32, init: true, gate: (z, e) => [-1e-4 * (1 + Math.abs(z)), glaGate(z), -3 - 5 * Math.abs(z), -20 - 15 * Math.abs(z)][(e % K) % 4]! });
  });
});

describe('the plan the host replay runs', () => {
  it('K 32 takes one 32-channel slab and two warps across K; K 128 two 64-channel slabs and eight', () => {
    const a = planGlaTc({ N: 2, T: 150, H: 2, K: 32, V: 48, varlen: false }, 132);
    expect([a.bv, a.wm, a.wk, a.threads, a.ks, a.ncMax, a.slots]).toEqual([16, 1, 2, 64, 32, 3, 6]);
    const b = planGlaTc({ N: 1, T: 100, H: 1, K: 128, V: 32, varlen: false }, 132);
    expect([b.bv, b.wk, b.threads, b.ks]).toEqual([16, 8, 256, 64]);
    expect(numel(b.mainGrid)).toBe(2);
  });
});
