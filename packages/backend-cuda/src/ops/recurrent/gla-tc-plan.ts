/**
 * Launch plans of the tensor-core chunk_gla (kernels/gla_chunk_tc.cu) and what it declines to the CUDA-core
 * fk_gla_chunk (gla-plan.ts): pure functions of the shapes, unit-tested without a GPU.
 *
 * Two launches. fk_gla_chunk_prep: a CTA per (chunk slot, head), PREP_THREADS threads, fully parallel: Qg, Kd, A (as
 * hi + lo pairs of the dtype) and the decay of each chunk, computed once a chunk. fk_gla_chunk_tc: a CTA per (V tile of BV columns, head, sequence)
 * walks the chunks in order with its [BV, K] slice of the state in mma accumulators: WM = BV / 16 warps down the value
 * rows times WK warps across the key columns (KW = K / WK each).
 *
 * Why this split and not FLA's two passes (every chunk's state to memory, then the outputs in parallel): at GLA-2.7B
 * (5 heads of 256 x 512) FLA's per-chunk states are 64 chunks x 2.6 MB = 168 MB of f32 (84 MB in bf16) written and
 * read back a 4096-token prefill, about 50-100 us of HBM time alone, while the sequential walk keeps the state on chip.
 * Its chain of 64 dependent chunk steps is short (a step is ~5.5 MFLOP of mma a CTA plus ~150 KB of L2 reads), and
 * what depends on q / k / g alone (the exponentials, the intra-chunk scores) is hoisted into the parallel prep pass
 * so the walk is loads and mma only. The walk's grid is the one choice: a CTA reads the chunk's Qg / Kd / A whatever
 * its BV, so narrower tiles mean more CTAs but the same per-CTA load time; the plan takes the narrowest tile whose grid
 * still fits one wave (H 5, V 512 on 132 SMs: BV 32, 80 CTAs; BV 16 would be 160 CTAs = two waves of one CTA an SM),
 * and the widest when no tile fits a wave (many sequences: fewer re-reads of the shared operands).
 */
import {
  CHUNK_TC_MAX_KW as MAX_KW, CHUNK_TC_PREP_THREADS, CHUNK_TC_TILES as BVS, CHUNK_TC_TOKENS,
  chooseTile, chunkSlots, chunkTcSharedLimit, indexCType, tileShapeFits as tileFits, warpsAcrossK, type ChunkTcPlan,
} from './chunk-tc-tiles.js';

/** Tokens a chunk and a sub-chunk (A's diagonal blocks), as the kernel's constants. */
export const GLA_TC_CHUNK = CHUNK_TC_TOKENS;
export const GLA_TC_SUB = 16;
export const GLA_TC_PREP_THREADS = CHUNK_TC_PREP_THREADS;
/** The largest key head dim: Qg and Kd as hi + lo [64, K + 8] (bf16) must fit a CTA's shared memory beside the rest. */
export const GLA_TC_MAX_K = 256;

export interface GlaTcShape {
  /** Sequences (B, or cu_seqlens' N), tokens a batch row (T), heads, key and value head dims. */
  readonly N: number;
  readonly T: number;
  readonly H: number;
  readonly K: number;
  readonly V: number;
  /** cu_seqlens given: the sequences packed along batch row 0 (chunk slots floor(cu[n] / 64) + n + c). */
  readonly varlen: boolean;
}

export interface GlaTcPlan extends ChunkTcPlan {
  /** Key channels a slab of the prep kernel. */
  readonly ks: number;
}

/**
 * The main kernel's dynamic shared memory (gla_chunk_tc.cu MAIN_SMEM), bytes: Qg and Kd (hi, lo) once, two stages of
 * A (hi, lo), the v tile and the decay, and the o partials.
 */
export function glaTcMainShared(K: number, bv: number, wk: number): number {
  const C = GLA_TC_CHUNK;
  const stage = (2 * C * (C + 8) + C * (bv + 8)) * 2 + K * 4;
  return 4 * C * (K + 8) * 2 + 2 * stage + wk * C * (bv + 4) * 4;
}

/** The prep kernel's (gla_chunk_tc.cu PREP_SMEM), bytes. */
export function glaTcPrepShared(ks: number): number {
  const C = GLA_TC_CHUNK;
  const kpRows = (GLA_TC_SUB * (C / GLA_TC_SUB - 1) * (C / GLA_TC_SUB)) / 2;
  const tri = (GLA_TC_SUB * (GLA_TC_SUB + 1)) / 2;
  return 2 * C * (ks + 2) * 2 + C * (ks + 1) * 4 + 2 * (C + kpRows) * (ks + 8) * 2 + (C / GLA_TC_SUB) * tri * 4 + GLA_TC_PREP_THREADS * 4;
}

/**
 * The plan for `s` on a device of `sms` multiprocessors (the shape must pass glaTcDecline); `tileColumns`
 * (recurrent.chunkGlaTileColumns) forces the V tile where it fits the shape.
 */
export function planGlaTc(s: GlaTcShape, sms: number, tileColumns = 0): GlaTcPlan {
  const ok = BVS.filter((bv) => tileFits(s.K, s.V, bv));
  if (ok.length === 0) throw new RangeError(`gla tc: no tile for K ${s.K} / V ${s.V}`);
  const bv = chooseTile(ok, (b) => s.N * s.H * (s.V / b), sms, tileColumns);
  const wm = bv / 16;
  const wk = warpsAcrossK(s.K, bv);
  const ks = s.K % 64 === 0 ? 64 : s.K % 32 === 0 ? 32 : 16;
  const { ncMax, slots } = chunkSlots(s.N, s.T, s.varlen);
  return {
    bv, wm, wk, threads: 32 * wm * wk, ks, ncMax, slots,
    prepGrid: [slots, s.H, 1],
    mainGrid: [s.V / bv, s.H, s.N],
    prepSharedBytes: glaTcPrepShared(ks),
    mainSharedBytes: glaTcMainShared(s.K, bv, wk),
  };
}

export interface GlaTcCall extends Omit<GlaTcShape, 'varlen'> {
  readonly dtype: string;
  /** The device's compute capability major (undefined: unknown, declined). */
  readonly smMajor: number | undefined;
  /** recurrent.chunkGlaTensorCore in the tuning. */
  readonly enabled: boolean;
  /**
   * Most dynamic shared memory a block may opt in to (DeviceProperties.sharedPerBlockOptin; absent: sm_90's 227 KiB).
   * sm_80 has 163 KiB and sm_86 / sm_89 99 KiB, under the walk's 151-222 KiB at K 128-256: there the launch would throw.
   */
  readonly sharedPerBlockOptin?: number;
}

/** Why the tensor-core chunk_gla does not take a call (the CUDA-core fk_gla_chunk then does), or null. */
export function glaTcDecline(c: GlaTcCall): string | null {
  if (!c.enabled) return 'recurrent.chunkGlaTensorCore is off in the tuning';
  if (c.smMajor === undefined || c.smMajor < 8) return `compute capability ${c.smMajor ?? 'unknown'}: mma.sync bf16 needs sm_80+`;
  if (c.dtype !== 'bf16' && c.dtype !== 'f16') return `dtype ${c.dtype}: the tensor-core kernels take bf16 and f16`;
  if (c.K % 16 !== 0 || c.K < 16 || c.K > GLA_TC_MAX_K) return `key head dim ${c.K}: the tensor-core kernels take multiples of 16 up to ${GLA_TC_MAX_K}`;
  if (c.V % 16 !== 0 || c.V < 16) return `value head dim ${c.V}: the tensor-core kernels take multiples of 16`;
  if (!BVS.some((bv) => tileFits(c.K, c.V, bv))) return `K ${c.K} / V ${c.V}: no state tile fits (V a multiple of 16, 32 or 64 with K / WK <= ${MAX_KW})`;
  if (c.H > 65535 || c.N > 65535) return `${c.N} sequences x ${c.H} heads: past the grid's 65535 limit on y / z`;
  const p = planGlaTc({ ...c, varlen: true }, 1);
  if (Math.max(p.slots, c.N * p.ncMax) > 2 ** 31 - 1) return 'too many chunks for the grid';
  const limit = chunkTcSharedLimit(c.sharedPerBlockOptin);
  // the run's tile depends on the SM count and the tuning: every tile that fits the shape must fit the device
  const main = Math.max(...BVS.filter((bv) => tileFits(c.K, c.V, bv)).map((bv) => glaTcMainShared(c.K, bv, warpsAcrossK(c.K, bv))));
  if (main > limit || p.prepSharedBytes > limit) return `shared memory: ${main} bytes (walk) / ${p.prepSharedBytes} (prep) a block, the device allows ${limit}`;
  return null;
}

/** The #defines of one build of gla_chunk_tc.cu (both entries share them). */
export function glaTcDefines(dtype: 'bf16' | 'f16', K: number, p: GlaTcPlan, cuDType: 'i32' | 'i64', idxDType: 'i32' | 'i64'): Record<string, string | number> {
  return { FK_T: dtype === 'bf16' ? '__nv_bfloat16' : '__half', FK_K: K, FK_BV: p.bv, FK_WK: p.wk, FK_KS: p.ks, FK_CU_T: indexCType(cuDType), FK_SI_T: indexCType(idxDType) };
}
