/**
 * The CTA pieces the recurrent kernels' host models share (gla-emulator.ts, gdn-emulator.ts; the conv's blocks take
 * the sequence part): which batch row, token range and pool slot a CTA works on, the (ct, rg) ownership of its state
 * tile, loading and storing that tile (every element through StateAccess, so two CTAs on one element are a race), and
 * the xor-shuffle sum over row groups.
 */
import type { GlaPlan } from '../src/ops/recurrent/gla-plan.js';
import type { EmuPtr, StateAccess } from './gla-emulator.js';

const rd = (p: EmuPtr, i: number) => p.data[p.off + i]!;

/** A recurrence launch's arguments both models read, as the kernel gets them. */
export interface RecurrentEmuInputs {
  readonly T: number;
  readonly K: number;
  readonly V: number;
  readonly scale: number;
  readonly o: EmuPtr;
  readonly q: EmuPtr;
  readonly k: EmuPtr;
  readonly v: EmuPtr;
  readonly g: EmuPtr;
  /** Element strides (batch, token, head; the last dim contiguous). */
  readonly qs: readonly number[];
  readonly ks: readonly number[];
  readonly vs: readonly number[];
  readonly gs: readonly number[];
  /** The states read / written (the same array for a pool) and their slot strides. */
  readonly sIn: EmuPtr | null;
  readonly sInStride: number;
  readonly sOut: EmuPtr | null;
  readonly sOutStride: number;
  readonly cu: EmuPtr | null;
  readonly idx: EmuPtr | null;
}

/** What sequence n of a launch covers. */
export interface CtaSequence {
  /** Its batch row (0 when cu_seqlens packs the sequences along the tokens) and tokens [t0, t1). */
  readonly row: number;
  readonly t0: number;
  readonly t1: number;
  /** Its state row: the pool slot the indices name, else n. */
  readonly slot: number;
  /** Whether its state is read / written (neither on a -1 padding slot). */
  readonly read: boolean;
  readonly write: boolean;
}

export function ctaSequence(x: { readonly cu: EmuPtr | null; readonly idx: EmuPtr | null; readonly sIn: EmuPtr | null; readonly sOut: EmuPtr | null }, n: number, T: number): CtaSequence {
  const [row, t0, t1] = x.cu ? [0, rd(x.cu, n), rd(x.cu, n + 1)] : [n, 0, T];
  const slot = x.idx ? rd(x.idx, n) : n;
  const live = slot >= 0;
  return { row, t0, t1, slot, read: x.sIn !== null && live, write: x.sOut !== null && live };
}

/**
 * A CTA's part of one head's [K, V] state: its BV columns from c0, CT threads across them (VEC columns each), RG row
 * groups down K; thread tid holds rows rg(tid) + r RG (r < RK) of columns j0(tid) .. j0(tid) + VEC.
 */
export class StateTile {
  readonly CT: number;
  readonly RG: number;
  readonly RK: number;
  constructor(
    private readonly p: GlaPlan,
    private readonly K: number,
    private readonly V: number,
    private readonly c0: number,
  ) {
    this.CT = p.bv / p.vec;
    this.RG = p.threads / this.CT;
    this.RK = Math.ceil(K / this.RG);
  }

  readonly ct = (tid: number) => tid % this.CT;
  readonly rg = (tid: number) => Math.floor(tid / this.CT);
  readonly j0 = (tid: number) => this.c0 + this.ct(tid) * this.p.vec;

  /** s[tid][r][e] from the state whose [K, V] block starts at element `base` of sIn; zeros where `read` is false. */
  load(sIn: EmuPtr | null, base: number, read: boolean, access: StateAccess, id: number): Float64Array[][] {
    const { K, V, RG, RK } = this;
    const VEC = this.p.vec;
    return Array.from({ length: this.p.threads }, (_, tid) => {
      const st = Array.from({ length: RK }, () => new Float64Array(VEC));
      for (let r = 0; r < RK; r++) {
        const i = this.rg(tid) + r * RG;
        if (read && this.j0(tid) < V && i < K) {
          for (let e = 0; e < VEC; e++) {
            const at = sIn!.off + base + i * V + this.j0(tid) + e;
            access.read(sIn!.data, at, id);
            st[r]![e] = sIn!.data[at]!;
          }
        }
      }
      return st;
    });
  }

  /** s back into the state whose [K, V] block starts at element `base` of sOut (the columns and rows in range). */
  store(s: readonly Float64Array[][], sOut: EmuPtr, base: number, access: StateAccess, id: number): void {
    const { K, V, RG, RK } = this;
    for (let tid = 0; tid < this.p.threads; tid++) {
      if (this.j0(tid) >= V) continue;
      for (let r = 0; r < RK; r++) {
        const i = this.rg(tid) + r * RG;
        if (i >= K) continue;
        for (let e = 0; e < this.p.vec; e++) {
          const at = sOut.off + base + i * V + this.j0(tid) + e;
          access.write(sOut.data, at, id);
          sOut.data[at] = s[tid]![r]![e]!;
        }
      }
    }
  }
}

/** The kernel's xor-shuffle sum over lane offsets CT..16 of per-thread values (vals[tid][m], TH threads), in place. */
export function shuffleSum(vals: Float64Array[], CT: number, TH: number): void {
  for (let off = CT; off < 32; off <<= 1) {
    const before = vals.map((a) => a.slice());
    for (let tid = 0; tid < TH; tid++) {
      const partner = (tid & ~31) | ((tid & 31) ^ off);
      for (let m = 0; m < vals[tid]!.length; m++) vals[tid]![m] = before[tid]![m]! + before[partner]![m]!;
    }
  }
}
