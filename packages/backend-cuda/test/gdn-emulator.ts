/**
 * A host model of the gated-DeltaNet kernels (src/ops/recurrent/gdn-source.ts, KDA's per-key-channel decay included) for the CPU tests, in the manner of
 * gla-emulator.ts: every CTA of the launch's grid and every thread of it, with the kernels' index math (sequence ranges
 * from cu_seqlens / query_start_loc, pool rows and padding, has_initial_state, the (ct, rg) ownership of the delta
 * rule's state slice, the xor-shuffle and per-warp reductions, the conv's token groups, its barrier and in-place state
 * shift) phase by phase between the barriers, in float64. CTAs run one after another here and at once on the GPU: every
 * state element is tracked by the CTAs that touch it (StateAccess), and two CTAs touching one with a write throw
 * GlaRaceError (two sequences on one pool row).
 */
import type { GlaPlan } from '../src/ops/recurrent/gla-plan.js';
import { StateAccess, type EmuPtr } from './gla-emulator.js';
import { StateTile, ctaSequence, shuffleSum, type RecurrentEmuInputs } from './recurrent-cta.js';

export interface GdnEmuInputs extends RecurrentEmuInputs {
  readonly HV: number;
  /** Value heads a q / k head (HV / H). */
  readonly R: number;
  readonly l2norm: boolean;
  /** FK_KDA: g [.., HV, K], a decay a key channel. */
  readonly kda: boolean;
  readonly beta: EmuPtr;
  readonly bs: readonly number[];
}

const rd = (p: EmuPtr, i: number) => p.data[p.off + i]!;

/** Runs fk_gdn_recurrent's (plan.kind 'recurrent') or fk_gdn_chunk's grid over x: o and sOut are written in place. Throws GlaRaceError where CTAs race. */
export function emulateGdn(p: GlaPlan, x: GdnEmuInputs): void {
  const [gx, gy, gz] = p.grid;
  const access = new StateAccess((id) => `(x ${id % gx}, value head ${Math.floor(id / gx) % gy}, seq ${Math.floor(id / (gx * gy))})`);
  for (let n = 0; n < gz; n++) for (let hv = 0; hv < gy; hv++) for (let bx = 0; bx < gx; bx++) gdnCta(p, x, bx, hv, n, access, bx + gx * (hv + gy * n));
}

/** fk_gdn_chunk's chunk loop over one CTA's state slice s[tid][r][e] (SETUP and STORE are the recurrent kernel's). */
function chunkLoop(p: GlaPlan, x: GdnEmuInputs, c: { br: number; t0: number; t1: number; h: number; hv: number; c0: number; s: Float64Array[][] }): void {
  const { K, V, HV } = x;
  const { bv: BV, vec: VEC, threads: TH, chunk: C } = p;
  const CT = BV / VEC;
  const RG = TH / CT;
  const RK = Math.ceil(K / RG);
  const WARPS = TH / 32;
  const { br, h, hv, c0, s } = c;
  const at = (a: EmuPtr, st: readonly number[], t: number, hh: number, i: number) => rd(a, br * st[0]! + t * st[1]! + hh * st[2]! + i);
  for (let cs = c.t0; cs < c.t1; cs += C) {
    const L = Math.min(C, c.t1 - cs);
    // (1)
    const cq = new Float64Array(C * K);
    const ck = new Float64Array(C * K);
    const cv = new Float64Array(C * BV);
    const GW = x.kda ? K : 1; // gate values a token
    const cG = new Float64Array(C * GW);
    const cB = new Float64Array(C);
    for (let xi = 0; xi < C * K; xi++) {
      const tt = Math.floor(xi / K);
      const i = xi - tt * K;
      if (tt < L) {
        cq[xi] = at(x.q, x.qs, cs + tt, h, i);
        ck[xi] = at(x.k, x.ks, cs + tt, h, i);
      }
    }
    for (let xi = 0; xi < C * BV; xi++) {
      const tt = Math.floor(xi / BV);
      const cc = xi - tt * BV;
      cv[xi] = tt < L && c0 + cc < V ? at(x.v, x.vs, cs + tt, hv, c0 + cc) : 0;
    }
    for (let tt = 0; tt < C; tt++) {
      for (let i = 0; i < GW; i++) cG[tt * GW + i] = tt < L ? at(x.g, x.gs, cs + tt, hv, i) : 0;
      cB[tt] = tt < L ? at(x.beta, x.bs, cs + tt, hv, 0) : 0;
    }
    /** The running gate sum of token tt at key channel i (one a token without KDA). */
    const G = (tt: number, i: number) => cG[tt * GW + (x.kda ? i : 0)]!;
    // (2)
    if (x.l2norm) {
      for (let tt = 0; tt < C; tt++) {
        let [a, b2] = [0, 0];
        for (let i = 0; i < K; i++) {
          a += cq[tt * K + i]! ** 2;
          b2 += ck[tt * K + i]! ** 2;
        }
        const [rq, rk] = [1 / Math.sqrt(a + 1e-6), 1 / Math.sqrt(b2 + 1e-6)];
        for (let i = 0; i < K; i++) {
          cq[tt * K + i] = cq[tt * K + i]! * rq;
          ck[tt * K + i] = ck[tt * K + i]! * rk;
        }
      }
    }
    for (let i = 0; i < GW; i++) for (let tt = 0, run = 0; tt < C; tt++) cG[tt * GW + i] = run += cG[tt * GW + i]!;
    // (3)
    const cAkk = new Float64Array(C * C);
    const cAqk = new Float64Array(C * C);
    for (let pp = 0; pp < C * C; pp++) {
      const tt = Math.floor(pp / C);
      const sj = pp - tt * C;
      let [a, b2] = [0, 0];
      if (sj <= tt && tt < L) {
        for (let i = 0; i < K; i++) {
          const kk = ck[sj * K + i]! * (x.kda ? Math.exp(G(tt, i) - G(sj, i)) : 1);
          a += ck[tt * K + i]! * kk;
          b2 += cq[tt * K + i]! * kk;
        }
      }
      const dec = sj <= tt && tt < L ? (x.kda ? 1 : Math.exp(G(tt, 0) - G(sj, 0))) : 0;
      cAkk[pp] = sj < tt ? cB[tt]! * dec * a : 0;
      cAqk[pp] = dec * b2;
    }
    // (4) the two passes: per-thread partials over its rows, the xor shuffles, the warps' partials, their sum
    const passes = [ck, cq].map((src) => {
      const acc = Array.from({ length: TH }, (_, tid) => {
        const a = new Float64Array(C * VEC);
        for (let r = 0; r < RK; r++) {
          const i = Math.floor(tid / CT) + r * RG;
          if (i >= K) continue;
          for (let tt = 0; tt < C; tt++) {
            const xv = src[tt * K + i]! * (x.kda ? Math.exp(G(tt, i)) : 1);
            for (let e = 0; e < VEC; e++) a[tt * VEC + e] += xv * s[tid]![r]![e]!;
          }
        }
        return a;
      });
      shuffleSum(acc, CT, TH);
      const red = new Float64Array(WARPS * C * BV);
      for (let tid = 0; tid < TH; tid++) if ((tid & 31) < CT) for (let tt = 0; tt < C; tt++) for (let e = 0; e < VEC; e++) red[((tid >> 5) * C + tt) * BV + (tid % CT) * VEC + e] = acc[tid]![tt * VEC + e]!;
      const dst = new Float64Array(C * BV);
      for (let xi = 0; xi < C * BV; xi++) for (let w = 0; w < WARPS; w++) dst[xi] += red[w * C * BV + xi]!;
      return dst;
    });
    const [cKS, cQS] = passes as [Float64Array, Float64Array];
    // (5)
    for (let cc = 0; cc < BV; cc++) {
      for (let tt = 0; tt < L; tt++) {
        let u = cB[tt]! * (cv[tt * BV + cc]! - (x.kda ? 1 : Math.exp(G(tt, 0))) * cKS[tt * BV + cc]!);
        for (let sj = 0; sj < tt; sj++) u -= cAkk[tt * C + sj]! * cv[sj * BV + cc]!;
        cv[tt * BV + cc] = u;
      }
    }
    // (6)
    for (let xi = 0; xi < C * BV; xi++) {
      const tt = Math.floor(xi / BV);
      const cc = xi - tt * BV;
      if (tt >= L || c0 + cc >= V) continue;
      let y = (x.kda ? 1 : Math.exp(G(tt, 0))) * cQS[xi]!;
      for (let sj = 0; sj <= tt; sj++) y += cAqk[tt * C + sj]! * cv[sj * BV + cc]!;
      x.o.data[x.o.off + ((br * x.T + cs + tt) * HV + hv) * V + c0 + cc] = x.scale * y;
    }
    // (7)
    for (let tid = 0; tid < TH; tid++) {
      for (let r = 0; r < RK; r++) {
        const i = Math.floor(tid / CT) + r * RG;
        if (i >= K) continue;
        const gl = G(L - 1, i);
        const st = s[tid]![r]!;
        for (let e = 0; e < VEC; e++) st[e] = st[e]! * Math.exp(gl);
        for (let sj = 0; sj < L; sj++) {
          const kd = ck[sj * K + i]! * Math.exp(gl - G(sj, i));
          for (let e = 0; e < VEC; e++) st[e] = st[e]! + kd * cv[sj * BV + (tid % CT) * VEC + e]!;
        }
      }
    }
  }
}

function gdnCta(p: GlaPlan, x: GdnEmuInputs, bx: number, hv: number, n: number, access: StateAccess, id: number): void {
  const { K, V, HV } = x;
  const { bv: BV, vec: VEC, threads: TH } = p;
  const WARPS = TH / 32;
  const c0 = bx * BV;
  const h = Math.floor(hv / x.R);
  const { row: br, t0, t1, slot, read, write } = ctaSequence(x, n, x.T);
  const tile = new StateTile(p, K, V, c0);
  const { CT, RG, RK, ct: ctOf, rg: rgOf, j0: j0Of } = tile;
  const head = hv * K * V;
  const s = tile.load(x.sIn, slot * x.sInStride + head, read, access, id);
  const at = (a: EmuPtr, st: readonly number[], t: number, hh: number, i: number) => rd(a, br * st[0]! + t * st[1]! + hh * st[2]! + i);
  if (p.kind === 'chunk') chunkLoop(p, x, { br, t0, t1, h, hv, c0, s });
  else for (let t = t0; t < t1; t++) {
    // stage (one buffer suffices here: the phases run in order)
    const sq = new Float64Array(K);
    const sk = new Float64Array(K);
    const sv = new Float64Array(BV);
    for (let i = 0; i < K; i++) {
      sq[i] = at(x.q, x.qs, t, h, i);
      sk[i] = at(x.k, x.ks, t, h, i);
    }
    for (let c = 0; c < BV; c++) sv[c] = c0 + c < V ? at(x.v, x.vs, t, hv, c0 + c) : 0;
    // KDA: row i decays by exp(g_t[i]) in the pass that reads it, and d is 1
    const dk = x.kda ? Float64Array.from({ length: K }, (_, i) => Math.exp(at(x.g, x.gs, t, hv, i))) : null;
    const d = dk ? 1 : Math.exp(at(x.g, x.gs, t, hv, 0));
    const be = at(x.beta, x.bs, t, hv, 0);
    // [ak (VEC), aq (VEC), qq, kk, qk] a thread
    const acc = Array.from({ length: TH }, (_, tid) => {
      const a = new Float64Array(2 * VEC + 3);
      for (let r = 0; r < RK; r++) {
        const i = rgOf(tid) + r * RG;
        if (i >= K) continue;
        if (dk) for (let e = 0; e < VEC; e++) s[tid]![r]![e] = s[tid]![r]![e]! * dk[i]!;
        for (let e = 0; e < VEC; e++) {
          a[e] += sk[i]! * s[tid]![r]![e]!;
          a[VEC + e] += sq[i]! * s[tid]![r]![e]!;
        }
        a[2 * VEC + 2] += sq[i]! * sk[i]!;
        if (x.l2norm) {
          a[2 * VEC] += sq[i]! ** 2;
          a[2 * VEC + 1] += sk[i]! ** 2;
        }
      }
      return a;
    });
    shuffleSum(acc, CT, TH);
    const red = new Float64Array(WARPS * 2 * BV);
    const reds = new Float64Array(WARPS * 3);
    for (let tid = 0; tid < TH; tid++) {
      const w = tid >> 5;
      if ((tid & 31) < CT) {
        for (let e = 0; e < VEC; e++) {
          red[(w * 2 + 0) * BV + ctOf(tid) * VEC + e] = acc[tid]![e]!;
          red[(w * 2 + 1) * BV + ctOf(tid) * VEC + e] = acc[tid]![VEC + e]!;
        }
      }
      if ((tid & 31) === 0) for (let m = 0; m < 3; m++) reds[w * 3 + m] = acc[tid]![2 * VEC + m]!;
    }
    // __syncthreads
    for (let tid = 0; tid < TH; tid++) {
      const kS = new Float64Array(VEC);
      const qS = new Float64Array(VEC);
      let [qq, kk, qk] = [0, 0, 0];
      for (let w = 0; w < WARPS; w++) {
        for (let e = 0; e < VEC; e++) {
          kS[e] += red[(w * 2) * BV + ctOf(tid) * VEC + e]!;
          qS[e] += red[(w * 2 + 1) * BV + ctOf(tid) * VEC + e]!;
        }
        qq += reds[w * 3]!;
        kk += reds[w * 3 + 1]!;
        qk += reds[w * 3 + 2]!;
      }
      const rq = x.l2norm ? 1 / Math.sqrt(qq + 1e-6) : 1;
      const rk = x.l2norm ? 1 / Math.sqrt(kk + 1e-6) : 1;
      const u = Array.from({ length: VEC }, (_, e) => be * (sv[ctOf(tid) * VEC + e]! - d * rk * kS[e]!));
      const j0 = j0Of(tid);
      if (rgOf(tid) === 0 && j0 < V) {
        for (let e = 0; e < VEC; e++) x.o.data[x.o.off + ((br * x.T + t) * HV + hv) * V + j0 + e] = x.scale * rq * (d * qS[e]! + rk * qk * u[e]!);
      }
      for (let r = 0; r < RK; r++) {
        const i = rgOf(tid) + r * RG;
        if (i >= K) continue;
        for (let e = 0; e < VEC; e++) s[tid]![r]![e] = sk[i]! * rk * u[e]! + d * s[tid]![r]![e]!;
      }
    }
  }
  if (write) tile.store(s, x.sOut!, slot * x.sOutStride + head, access, id);
}

export interface ConvEmuInputs {
  readonly W: number;
  readonly ct: number;
  readonly tg: number;
  readonly silu: boolean;
  readonly grid: readonly number[];
  readonly block: number;
  readonly out: EmuPtr;
  readonly x: EmuPtr;
  readonly w: EmuPtr;
  readonly bias: EmuPtr | null;
  /** x's (batch, channel, token) strides; the states' (slot, channel, column) strides. */
  readonly xs: readonly number[];
  readonly sIn: EmuPtr | null;
  readonly sIns: readonly number[];
  readonly sOut: EmuPtr | null;
  readonly sOuts: readonly number[];
  readonly cu: EmuPtr | null;
  readonly idx: EmuPtr | null;
  readonly his: EmuPtr | null;
  readonly L: number;
  readonly D: number;
  readonly S: number;
}

/** Runs fk_causal_conv1d's grid over x: out and sOut are written in place. Throws GlaRaceError where CTAs race. */
export function emulateConv(x: ConvEmuInputs): void {
  const [gx, gy] = x.grid as [number, number];
  if (x.block !== x.ct * x.tg) throw new Error(`conv emulator: block ${x.block} for ${x.ct} x ${x.tg} threads`);
  const access = new StateAccess((id) => `(channel block ${id % gx}, seq ${Math.floor(id / gx)})`);
  const W1 = x.W - 1;
  for (let n = 0; n < gy; n++) {
    for (let bxi = 0; bxi < gx; bxi++) {
      const id = bxi + gx * n;
      const { row: br, t0, t1, slot, read, write: doWrite } = ctaSequence(x, n, x.L);
      const len = t1 - t0;
      // has_initial_state false: a fresh sequence, its state not read
      const doRead = read && !(x.his && rd(x.his, n) === 0);
      const sInAt = (d: number, j: number) => x.sIn!.off + slot * x.sIns[0]! + d * x.sIns[1]! + j * x.sIns[2]!;
      const xAt = (d: number, t: number) => rd(x.x, br * x.xs[0]! + d * x.xs[1]! + t * x.xs[2]!);
      // phase 1: every thread's outputs from its taps and the state's tail
      for (let tid = 0; tid < x.block; tid++) {
        const c = tid % x.ct;
        const tg = Math.floor(tid / x.ct);
        const d = bxi * x.ct + c;
        if (d >= x.D) continue;
        const taps = Array.from({ length: x.W }, (_, j) => rd(x.w, d * x.W + j));
        const b0 = x.bias ? rd(x.bias, d) : 0;
        const tail = Array.from({ length: W1 }, (_, j) => {
          if (!doRead) return 0;
          const a = sInAt(d, x.S - W1 + j);
          access.read(x.sIn!.data, a, id);
          return x.sIn!.data[a]!;
        });
        for (let tt = tg; tt < len; tt += x.tg) {
          let acc = b0;
          for (let j = 0; j < x.W; j++) {
            const p = tt + j - W1;
            acc += taps[j]! * (p < 0 ? tail[p + W1]! : xAt(d, t0 + p));
          }
          x.out.data[x.out.off + (br * x.D + d) * x.L + t0 + tt] = x.silu ? acc / (1 + Math.exp(-acc)) : acc;
        }
      }
      // __syncthreads; phase 2: one thread a channel shifts the row in place, in increasing column order
      if (!doWrite) continue;
      for (let tid = 0; tid < x.ct; tid++) {
        const d = bxi * x.ct + tid;
        if (d >= x.D) continue;
        for (let j = 0; j < x.S; j++) {
          const p = len + j;
          let val = 0;
          if (p < x.S) {
            if (doRead) {
              const a = sInAt(d, p);
              access.read(x.sIn!.data, a, id);
              val = x.sIn!.data[a]!;
            }
          } else val = xAt(d, t0 + p - x.S);
          const a = x.sOut!.off + slot * x.sOuts[0]! + d * x.sOuts[1]! + j * x.sOuts[2]!;
          access.write(x.sOut!.data, a, id);
          x.sOut!.data[a] = val;
        }
      }
    }
  }
}
