/**
 * A host model of the GLA kernels (gla-source.ts) for the CPU tests: every CTA of the plan's grid and every thread of
 * it, with the kernels' index math (token ranges from cu_seqlens, pool slots and padding rows, the (ct, rg) ownership
 * of the state, the double-buffered shared arrays, the xor-shuffle reductions over row groups, the per-warp partials)
 * phase by phase between the barriers, in float64. It checks the index math and the chunk algebra against the float64
 * CPU backend where no GPU is; the arithmetic's rounding is the GPU tests' business.
 *
 * The CTAs run here one after another, on the GPU at once and in no set order: so every state element is tracked by
 * the CTAs that touch it, and one that two CTAs touch with at least one write (two sequences naming one pool slot, a
 * tile that overlaps its neighbour's columns) throws as the race it is on the GPU instead of passing in the order
 * this loop happens to give.
 */
import type { GlaPlan } from '../src/ops/recurrent/gla-plan.js';
import { StateTile, ctaSequence, shuffleSum, type RecurrentEmuInputs } from './recurrent-cta.js';

/** An array and the element where a pointer argument points in it. */
export interface EmuPtr {
  readonly data: Float64Array;
  readonly off: number;
}

export interface GlaEmuInputs extends RecurrentEmuInputs {
  readonly H: number;
}

/** Thrown when two CTAs of one launch touch a state element and one of them writes it (a data race on the GPU). */
export class GlaRaceError extends Error {}

/**
 * Which CTA touched each element of the state arrays: per array, the one CTA id (>= 0), SHARED (read by several) or
 * unset; and whether it was written. A write to an element another CTA touched, or a read of one another CTA wrote,
 * is a race whatever the order.
 */
export class StateAccess {
  private static readonly UNSET = -1;
  private static readonly SHARED = -2;
  private readonly arrays = new Map<Float64Array, { owner: Int32Array; written: Uint8Array }>();

  constructor(private readonly name: (cta: number) => string) {}

  private of(a: Float64Array) {
    let r = this.arrays.get(a);
    if (!r) this.arrays.set(a, (r = { owner: new Int32Array(a.length).fill(StateAccess.UNSET), written: new Uint8Array(a.length) }));
    return r;
  }

  read(a: Float64Array, e: number, cta: number): void {
    const { owner, written } = this.of(a);
    const o = owner[e]!;
    if (o === StateAccess.UNSET || o === cta) owner[e] = cta;
    else if (written[e]) this.race(e, cta, o, 'reads', 'wrote');
    else owner[e] = StateAccess.SHARED;
  }

  write(a: Float64Array, e: number, cta: number): void {
    const { owner, written } = this.of(a);
    const o = owner[e]!;
    if (o !== StateAccess.UNSET && o !== cta) this.race(e, cta, o, 'writes', written[e] ? 'wrote' : 'read');
    owner[e] = cta;
    written[e] = 1;
  }

  private race(e: number, cta: number, other: number, does: string, did: string): never {
    const who = other === StateAccess.SHARED ? 'other CTAs' : `CTA ${this.name(other)}`;
    throw new GlaRaceError(`gla emulator: CTA ${this.name(cta)} ${does} state element ${e}, which ${who} ${did}: CTAs run concurrently, so this is a race (two sequences on one pool slot?)`);
  }
}

/** Runs the plan's grid over x: o and sOut are written in place. Throws GlaRaceError where CTAs race on a state. */
export function emulateGla(plan: GlaPlan, x: GlaEmuInputs): void {
  const [gx, gy, gz] = plan.grid;
  const access = new StateAccess((id) => `(x ${id % gx}, head ${Math.floor(id / gx) % gy}, seq ${Math.floor(id / (gx * gy))})`);
  for (let n = 0; n < gz; n++) for (let h = 0; h < gy; h++) for (let bx = 0; bx < gx; bx++) cta(plan, x, bx, h, n, access, bx + gx * (h + gy * n));
}

function cta(p: GlaPlan, x: GlaEmuInputs, bx: number, h: number, n: number, access: StateAccess, id: number): void {
  const { K, V, H } = x;
  const { bv: BV, vec: VEC, threads: TH } = p;
  const WARPS = TH / 32;
  const c0 = bx * BV;
  // SETUP
  const { row: bt, t0, t1, slot, read, write } = ctaSequence(x, n, x.T);
  const tile = new StateTile(p, K, V, c0);
  const { CT, RG, RK, ct: ctOf, rg: rgOf } = tile;
  const head = h * K * V;
  const s = tile.load(x.sIn, slot * x.sInStride + head, read, access, id);
  const at = (a: EmuPtr, st: readonly number[], b: number, t: number, i: number) => a.data[a.off + b * st[0]! + t * st[1]! + h * st[2]! + i]!;
  const o = x.o.data;
  const oAt = (t: number, j: number) => x.o.off + (bt * x.T + t) * (H * V) + h * V + j;

  if (p.kind === 'recurrent') {
    const sq = [new Float64Array(K), new Float64Array(K)];
    const sk = [new Float64Array(K), new Float64Array(K)];
    const sd = [new Float64Array(K), new Float64Array(K)];
    const sv = [new Float64Array(BV), new Float64Array(BV)];
    const red = [new Float64Array(WARPS * BV), new Float64Array(WARPS * BV)];
    for (let t = t0; t < t1; t++) {
      const b = (t - t0) & 1;
      for (let tid = 0; tid < TH; tid++) {
        for (let i = tid; i < K; i += TH) {
          sq[b]![i] = at(x.q, x.qs, bt, t, i);
          sk[b]![i] = at(x.k, x.ks, bt, t, i);
          sd[b]![i] = Math.exp(at(x.g, x.gs, bt, t, i));
        }
        for (let c = tid; c < BV; c += TH) sv[b]![c] = c0 + c < V ? at(x.v, x.vs, bt, t, c0 + c) : 0;
      }
      // __syncthreads
      const acc = Array.from({ length: TH }, () => new Float64Array(VEC));
      for (let tid = 0; tid < TH; tid++) {
        for (let r = 0; r < RK; r++) {
          const i = rgOf(tid) + r * RG;
          if (i >= K) continue;
          for (let e = 0; e < VEC; e++) {
            const st = s[tid]![r]!;
            st[e] = st[e]! * sd[b]![i]! + sk[b]![i]! * sv[b]![ctOf(tid) * VEC + e]!;
            acc[tid]![e] += sq[b]![i]! * st[e]!;
          }
        }
      }
      shuffleSum(acc, CT, TH);
      for (let tid = 0; tid < TH; tid++) if ((tid & 31) < CT) for (let e = 0; e < VEC; e++) red[b]![(tid >> 5) * BV + ctOf(tid) * VEC + e] = acc[tid]![e]!;
      // __syncthreads
      for (let tid = 0; tid < TH; tid++) {
        for (let c = tid; c < BV; c += TH) {
          if (c0 + c >= V) continue;
          let y = 0;
          for (let w = 0; w < WARPS; w++) y += red[b]![w * BV + c]!;
          o[oAt(t, c0 + c)] = y * x.scale;
        }
      }
    }
  } else {
    const C = p.chunk;
    const sq = new Float64Array(C * K);
    const sk = new Float64Array(C * K);
    const sb = new Float64Array(C * K);
    const sv = new Float64Array(C * BV);
    const sA = new Float64Array(C * C);
    const sdec = new Float64Array(K);
    const red = new Float64Array(WARPS * C * BV);
    for (let cs = t0; cs < t1; cs += C) {
      const L = Math.min(C, t1 - cs);
      for (let tid = 0; tid < TH; tid++) {
        for (let xi = tid; xi < C * K; xi += TH) {
          const tt = Math.floor(xi / K);
          const i = xi - tt * K;
          const live = tt < L;
          sq[xi] = live ? at(x.q, x.qs, bt, cs + tt, i) : 0;
          sk[xi] = live ? at(x.k, x.ks, bt, cs + tt, i) : 0;
          sb[xi] = live ? at(x.g, x.gs, bt, cs + tt, i) : 0;
        }
        for (let xi = tid; xi < C * BV; xi += TH) {
          const tt = Math.floor(xi / BV);
          const c = xi - tt * BV;
          sv[xi] = tt < L && c0 + c < V ? at(x.v, x.vs, bt, cs + tt, c0 + c) : 0;
        }
      }
      for (let tid = 0; tid < TH; tid++) {
        for (let i = tid; i < K; i += TH) {
          let run = 0;
          for (let tt = 0; tt < C; tt++) sb[tt * K + i] = run += sb[tt * K + i]!;
          sdec[i] = Math.exp(run);
        }
      }
      for (let warp = 0; warp < WARPS; warp++) {
        for (let pp = warp; pp < C * C; pp += WARPS) {
          const tt = Math.floor(pp / C);
          const sj = pp - tt * C;
          let a = 0;
          if (sj <= tt && tt < L) {
            // the lanes' partial sums, then the xor-shuffle tree (every lane ends with the total)
            const part = new Float64Array(32);
            for (let lane = 0; lane < 32; lane++) for (let i = lane; i < K; i += 32) part[lane] += sq[tt * K + i]! * sk[sj * K + i]! * Math.exp(sb[tt * K + i]! - sb[sj * K + i]!);
            for (let off = 16; off > 0; off >>= 1) {
              const before = part.slice();
              for (let lane = 0; lane < 32; lane++) part[lane] = before[lane]! + before[lane ^ off]!;
            }
            a = part[0]!;
          }
          sA[pp] = a;
        }
      }
      const bl = sb.slice((C - 1) * K, C * K);
      for (let xi = 0; xi < C * K; xi++) {
        const bx2 = sb[xi]!;
        sq[xi] = sq[xi]! * Math.exp(bx2);
        sk[xi] = sk[xi]! * Math.exp(bl[xi % K]! - bx2);
      }
      const acc = Array.from({ length: TH }, () => new Float64Array(C * VEC));
      for (let tid = 0; tid < TH; tid++) {
        for (let r = 0; r < RK; r++) {
          const i = rgOf(tid) + r * RG;
          if (i >= K) continue;
          for (let tt = 0; tt < C; tt++) for (let e = 0; e < VEC; e++) acc[tid]![tt * VEC + e] += sq[tt * K + i]! * s[tid]![r]![e]!;
        }
      }
      shuffleSum(acc, CT, TH);
      for (let tid = 0; tid < TH; tid++) {
        if ((tid & 31) < CT) for (let tt = 0; tt < C; tt++) for (let e = 0; e < VEC; e++) red[((tid >> 5) * C + tt) * BV + ctOf(tid) * VEC + e] = acc[tid]![tt * VEC + e]!;
        for (let r = 0; r < RK; r++) {
          const i = rgOf(tid) + r * RG;
          if (i >= K) continue;
          const st = s[tid]![r]!;
          for (let e = 0; e < VEC; e++) st[e] = st[e]! * sdec[i]!;
          for (let sj = 0; sj < C; sj++) for (let e = 0; e < VEC; e++) st[e] = st[e]! + sk[sj * K + i]! * sv[sj * BV + ctOf(tid) * VEC + e]!;
        }
      }
      for (let tid = 0; tid < TH; tid++) {
        for (let xi = tid; xi < C * BV; xi += TH) {
          const tt = Math.floor(xi / BV);
          const c = xi - tt * BV;
          if (tt >= L || c0 + c >= V) continue;
          let y = 0;
          for (let w = 0; w < WARPS; w++) y += red[(w * C + tt) * BV + c]!;
          for (let sj = 0; sj <= tt; sj++) y += sA[tt * C + sj]! * sv[sj * BV + c]!;
          o[oAt(cs + tt, c0 + c)] = y * x.scale;
        }
      }
    }
  }
  // STORE
  if (write) tile.store(s, x.sOut!, slot * x.sOutStride + head, access, id);
}
