/**
 * fk_fused_moe's index math without a GPU: the kernel (kernels/fused_moe.cu) transcribed — the grouped grid order, the
 * slot gather and early exits, the 16-byte chunk copies into the shared ring with their zero fill, the ring's stage
 * indices, ldmatrix's addressing and the m16n8k16 fragment layouts as the PTX ISA defines them, the epilogue's pair and
 * single stores — run on the host over the arguments FusedMoeGemm packs on a fake device, against the float64 reference.
 * Shared memory starts as NaN and the output as NaN, so a fragment read from an unfilled slot or a slot never stored
 * shows. Every tile configuration, topk 1 / 2 / 4, K and N tails, blocks smaller than a tile, zero-token experts, a
 * non-local expert's -1 blocks. The CUDA arithmetic itself is GPU-tested (fused-moe.gpu.test.ts).
 */
import { describe, expect, it } from 'vitest';
import { Rng, Tensor, inferOp, type FusedMoeGemmAttrs, type OpCall } from '@fastkernels/core';
import { CpuBackend } from '@fastkernels/backend-cpu';
import { fake } from '../../../test/ops-fake.js';
import { alignRouting, fusedMoeReference, randomRouting, withNonLocal, type Alignment } from '../../../test/moe-routing.js';
import { FusedMoeGemm } from './fused-moe.js';
import { MOE_TILES, type MoeTile } from './fused-moe-plan.js';

const div = (a: number, b: number) => Math.trunc(a / b);
const cpu = new CpuBackend();

/** One warp's m16n8k16: fragments per lane (a: 4 pairs, b: 2 pairs) into accumulators per lane (4), PTX's layouts. */
function mma(acc: Float64Array[], a: number[][][], b: number[][][]): void {
  const A = Array.from({ length: 16 }, () => new Float64Array(16));
  const B = Array.from({ length: 16 }, () => new Float64Array(8));
  for (let t = 0; t < 32; t++) {
    const g = t >> 2, c = 2 * (t & 3);
    for (let e = 0; e < 2; e++) {
      A[g]![c + e] = a[t]![0]![e]!;
      A[g + 8]![c + e] = a[t]![1]![e]!;
      A[g]![c + 8 + e] = a[t]![2]![e]!;
      A[g + 8]![c + 8 + e] = a[t]![3]![e]!;
      B[c + e]![g] = b[t]![0]![e]!;
      B[c + 8 + e]![g] = b[t]![1]![e]!;
    }
  }
  for (let t = 0; t < 32; t++) {
    const g = t >> 2, c = 2 * (t & 3);
    for (let q = 0; q < 4; q++) {
      const row = g + (q >= 2 ? 8 : 0), col = c + (q & 1);
      let s = 0;
      for (let k = 0; k < 16; k++) s += A[row]![k]! * B[k]![col]!;
      acc[t]![q]! += s;
    }
  }
}

/** ldmatrix.x4 (not transposed): lane L gives the row address of matrix L / 8, row L % 8; register j of lane t is row t / 4, elements 2 (t % 4) and + 1 of matrix j. */
function ldsmX4(smem: Float64Array, rowAddr: (lane: number) => number): number[][][] {
  const addr = Array.from({ length: 32 }, (_, l) => rowAddr(l));
  return Array.from({ length: 32 }, (_, t) => Array.from({ length: 4 }, (_, j) => [0, 1].map((e) => smem[addr[8 * j + (t >> 2)]! + 2 * (t & 3) + e]!)));
}

interface Buffers {
  c: Float64Array;
  a: Float64Array;
  b: Float64Array;
  tw: Float64Array | null;
  sorted: Int32Array;
  experts: Int32Array;
  post: number;
}

/** fk_fused_moe on the host over the packed arguments (7 pointers, then the ints and strides). */
function emulate(t: MoeTile, mul: boolean, grid: number, threads: number, args: readonly number[], m: Buffers): void {
  const [N, K, E, topK, slots, R, bs, mTiles, nTiles, groupM, sam, sbe, sbn] = args.slice(7) as number[];
  const { BM, BN, BK, WM, WN, stages: STAGES } = t;
  const NT = 32 * WM * WN;
  expect(threads).toBe(NT);
  const WTM = BM / WM, WTN = BN / WN, MI = WTM / 16, NI = WTN / 8, PITCH = BK + 8, CPR = BK / 8;
  const STAGE = (BM + BN) * PITCH;
  for (let pid = 0; pid < grid; pid++) {
    const perGroup = groupM! * nTiles!;
    const first = div(pid, perGroup) * groupM!;
    const size = Math.min(mTiles! - first, groupM!);
    const pm = first + ((pid % perGroup) % size);
    const pn = div(pid % perGroup, size);
    const row0 = pm * R!;
    if (row0 >= m.post) continue;
    const n0 = pn * BN;
    const slot = Array.from({ length: BM }, (_, r) => {
      const s = r < R! ? m.sorted[row0 + r]! : -1;
      return s >= 0 && s < slots! ? s : -1;
    });
    const e = m.experts[div(row0, bs!)]!;
    if (!slot.some((s) => s >= 0)) continue;
    if (e < 0 || e >= E!) {
      for (let i = 0; i < BM * BN; i++) {
        const s = slot[div(i, BN)]!, n = n0 + (i % BN);
        if (s >= 0 && n < N!) m.c[s * N! + n] = 0;
      }
      continue;
    }
    const smem = new Float64Array(STAGES * STAGE).fill(NaN);
    const KT = div(K! + BK - 1, BK);
    const RSTEP = NT / CPR;
    const loadStage = (st: number, kt: number) => {
      const k0 = kt * BK;
      for (let tid = 0; tid < NT; tid++) {
        const ccol = (tid % CPR) * 8, crow = div(tid, CPR);
        const kin = k0 + ccol < K!;
        for (let i = 0; i < (BM * CPR) / NT; i++) {
          const s = slot[crow + i * RSTEP]!;
          const ok = s >= 0 && kin;
          const src = div(s, topK!) * sam! + ccol + k0;
          for (let x = 0; x < 8; x++) smem[st * STAGE + (crow + i * RSTEP) * PITCH + ccol + x] = ok ? m.a[src + x]! : 0;
        }
        const bBase = e * sbe! + (n0 + crow) * sbn! + ccol;
        for (let i = 0; i < (BN * CPR) / NT; i++) {
          const ok = n0 + crow + i * RSTEP < N! && kin;
          const src = bBase + i * RSTEP * sbn! + k0;
          for (let x = 0; x < 8; x++) smem[st * STAGE + BM * PITCH + (crow + i * RSTEP) * PITCH + ccol + x] = ok ? m.b[src + x]! : 0;
        }
      }
    };
    // acc[warp][i][j][lane][4]
    const acc = Array.from({ length: WM * WN }, () => Array.from({ length: MI }, () => Array.from({ length: NI }, () => Array.from({ length: 32 }, () => new Float64Array(4)))));
    for (let st = 0; st < STAGES - 1; st++) if (st < KT) loadStage(st, st);
    for (let kt = 0; kt < KT; kt++) {
      const next = kt + STAGES - 1;
      if (next < KT) loadStage(next % STAGES, next);
      const sa = (kt % STAGES) * STAGE, sb = sa + BM * PITCH;
      for (let warp = 0; warp < WM * WN; warp++) {
        const wm = div(warp, WN), wn = warp % WN;
        for (let kk = 0; kk < BK / 16; kk++) {
          const af = Array.from({ length: MI }, (_, i) =>
            ldsmX4(smem, (lane) => sa + (wm * WTM + i * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * PITCH + kk * 16 + (lane >> 4) * 8),
          );
          const bf: number[][][][] = [];
          for (let j = 0; j < NI / 2; j++) {
            const r = ldsmX4(smem, (lane) => sb + (wn * WTN + j * 16 + (lane >> 4) * 8 + (lane & 7)) * PITCH + kk * 16 + ((lane >> 3) & 1) * 8);
            bf[2 * j] = r.map((regs) => [regs[0]!, regs[1]!]);
            bf[2 * j + 1] = r.map((regs) => [regs[2]!, regs[3]!]);
          }
          for (let i = 0; i < MI; i++) for (let j = 0; j < NI; j++) mma(acc[warp]![i]![j]!, af[i]!, bf[j]!);
        }
      }
    }
    for (let warp = 0; warp < WM * WN; warp++) {
      const wm = div(warp, WN), wn = warp % WN;
      for (let lane = 0; lane < 32; lane++) {
        const g = lane >> 2, t4 = lane & 3;
        for (let i = 0; i < MI; i++) {
          for (let h = 0; h < 2; h++) {
            const s = slot[wm * WTM + i * 16 + g + 8 * h]!;
            if (s < 0) continue;
            const f = mul ? m.tw![s]! : 1;
            for (let j = 0; j < NI; j++) {
              const n = n0 + wn * WTN + j * 8 + 2 * t4;
              const v0 = acc[warp]![i]![j]![lane]![2 * h]! * f, v1 = acc[warp]![i]![j]![lane]![2 * h + 1]! * f;
              if (n + 1 < N! && !(N! & 1)) {
                m.c[s * N! + n] = v0;
                m.c[s * N! + n + 1] = v1;
              } else {
                if (n < N!) m.c[s * N! + n] = v0;
                if (n + 1 < N!) m.c[s * N! + n + 1] = v1;
              }
            }
          }
        }
      }
    }
  }
}

interface Case {
  label: string;
  tile: string;
  M: number;
  topK: number;
  E: number;
  N: number;
  K: number;
  bs: number;
  mul: boolean;
  nonLocal?: number;
}

const CASES: Case[] = [
  { label: 'top2, K tail', tile: 'decode-n32', M: 3, topK: 2, E: 8, N: 40, K: 72, bs: 16, mul: false },
  { label: 'top4, N tail, zero-token experts', tile: 'decode', M: 2, topK: 4, E: 16, N: 136, K: 32, bs: 16, mul: true },
  { label: 'top1, block of 4 in a 16-row tile, odd N', tile: 'decode-n128', M: 9, topK: 1, E: 4, N: 131, K: 48, bs: 4, mul: true },
  { label: 'block of 3', tile: 'decode', M: 5, topK: 2, E: 6, N: 20, K: 16, bs: 3, mul: false },
  { label: 'blocks of 64 cut into 16-row tiles (padding-only tiles exit)', tile: 'decode', M: 6, topK: 2, E: 4, N: 64, K: 16, bs: 64, mul: true },
  { label: 'top2 of 3', tile: 'm32', M: 40, topK: 2, E: 3, N: 72, K: 40, bs: 32, mul: false },
  { label: 'top1, a non-local expert (-1 blocks)', tile: 'm64', M: 70, topK: 1, E: 4, N: 136, K: 24, bs: 64, mul: true, nonLocal: 1 },
  { label: 'top2 of 2', tile: 'm128', M: 100, topK: 2, E: 2, N: 24, K: 16, bs: 128, mul: false },
];

describe('fk_fused_moe emulated on the host = the float64 reference', () => {
  for (const c of CASES) {
    it(`${c.tile}: ${c.label}`, () => {
      const tile = MOE_TILES.find((t) => t.name === c.tile)!;
      const rng = new Rng(c.M * 7 + c.K);
      const ids = randomRouting(rng, c.M, c.E, c.topK);
      let al: Alignment = alignRouting(ids, c.E, c.bs);
      if (c.nonLocal !== undefined) al = withNonLocal(al, c.nonLocal);
      // bf16 values (exact in float64), as the device reads them
      const bf = (n: number, scale: number) => Tensor.fromArray(cpu, rng.fillNormal(n, scale), [n], 'bf16').toFloat64Array();
      const x = bf(c.M * c.K, 1);
      const w = bf(c.E * c.N * c.K, 1 / Math.sqrt(c.K));
      const tw = Float64Array.from({ length: c.M * c.topK }, () => 0.1 + rng.uniform());

      const f = fake();
      const ft = (shape: number[], dtype: Tensor['dtype']) => f.t(shape, dtype);
      const inputs = [ft([c.M, c.K], 'bf16'), ft([c.E, c.N, c.K], 'bf16'), ft([c.M, c.topK], 'f32'), ft([al.sorted.length], 'i32'), ft([al.experts.length], 'i32'), ft([1], 'i32')];
      const attrs = { top_k: c.topK, mul_routed_weight: c.mul };
      const { spec, attrs: parsed, outputs } = inferOp('fused_moe_gemm', inputs, attrs);
      const call = { op: spec, backend: f.backend, inputs, attrs: parsed, outputs } as unknown as OpCall<FusedMoeGemmAttrs>;
      const gemm = new FusedMoeGemm(f.cache, f.runtime);
      gemm.forceTile = tile;
      expect(gemm.supports(call)).toBe(true);
      const out = gemm.run(call);
      expect(out.shape).toEqual([c.M, c.topK, c.N]);
      expect(f.cache.launches).toHaveLength(1);
      const l = f.cache.launches[0]!;
      expect(l.source).toContain(`#define FK_BM ${tile.BM}\n#define FK_BN ${tile.BN}`);
      // pointer arguments are the call's tensors themselves (no copies: all aligned, i32, contiguous)
      expect(l.args.slice(0, 7)).toEqual([out, inputs[0], inputs[1], c.mul ? inputs[2] : 0, inputs[3], inputs[4], inputs[5]]);

      const m: Buffers = {
        c: new Float64Array(c.M * c.topK * c.N).fill(NaN),
        a: x, b: w, tw: c.mul ? tw : null,
        sorted: Int32Array.from(al.sorted), experts: Int32Array.from(al.experts), post: al.post,
      };
      emulate(tile, c.mul, l.grid as number, l.block as number, l.args as number[], m);
      const want = fusedMoeReference(x, w, c.mul ? tw : null, al, c.M, c.K, c.N, c.topK);
      let worst = 0;
      for (let i = 0; i < want.length; i++) worst = Math.max(worst, Number.isNaN(m.c[i]!) ? Infinity : Math.abs(m.c[i]! - want[i]!));
      expect(worst).toBeLessThan(1e-9);
      if (c.nonLocal !== undefined) {
        // the -1 blocks held slots, and other experts' rows are not all zero
        expect(ids.some((e) => e === c.nonLocal)).toBe(true);
        expect(want.some((v) => v !== 0)).toBe(true);
      }
    });
  }
});
