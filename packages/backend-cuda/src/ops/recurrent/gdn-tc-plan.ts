/**
 * Launch plans of the tensor-core chunk_gated_delta_rule (kernels/gdn_chunk_tc.cu) and what it declines to the
 * CUDA-core fk_gdn_chunk (gdn-plan.ts): pure functions of the shapes, unit-tested without a GPU.
 *
 * Two launches, as the tensor-core chunk_gla's (gla-tc-plan.ts). fk_gdn_chunk_prep: a CTA per (chunk slot, value
 * head), PREP_THREADS threads, fully parallel: the q, k norms, the scores, the triangular inverse and W, U of each chunk
 * (hi + lo pairs of the dtype), computed once a chunk. fk_gdn_chunk_tc: a CTA per (V tile of BV columns, value head,
 * sequence) walks the chunks in order with its [BV, K] slice of the state in mma accumulators: WM = BV / 16 warps down
 * the value rows times WK warps across the key columns (KW = K / WK each). The walk holds q, W (hi + lo) and k of a
 * chunk ([64, K + 8] each) in shared memory at once: at K 256 only the tiles up to BV 32 fit beside the rest. The tile
 * choice is chunk_gla's: the narrowest whose grid fits one wave (Qwen3-Next's 32 value heads of 128 at one sequence:
 * BV 32, 128 CTAs on 132 SMs), else the widest.
 */
import {
  CHUNK_TC_MAX_KW as MAX_KW, CHUNK_TC_MAX_SHARED, CHUNK_TC_PREP_THREADS, CHUNK_TC_TILES as BVS, CHUNK_TC_TOKENS,
  chooseTile, chunkSlots, chunkTcSharedLimit, indexCType, tileShapeFits, warpsAcrossK, type ChunkTcPlan,
} from './chunk-tc-tiles.js';

/** Tokens a chunk, as the kernel's constant. */
export const GDN_TC_CHUNK = CHUNK_TC_TOKENS;
export const GDN_TC_PREP_THREADS = CHUNK_TC_PREP_THREADS;
/** The largest key head dim (the walk's shared memory). */
export const GDN_TC_MAX_K = 256;
/** sm_90's opt-in limit of dynamic shared memory a block (a device's own may be less: gdnTcSharedLimit). */
export const GDN_TC_MAX_SHARED = CHUNK_TC_MAX_SHARED;

export interface GdnTcShape {
  /** Sequences (B, or cu_seqlens' N), tokens a batch row (T), q / k heads, value heads, key and value head dims. */
  readonly N: number;
  readonly T: number;
  readonly H: number;
  readonly HV: number;
  readonly K: number;
  readonly V: number;
  /** cu_seqlens given: the sequences packed along batch row 0 (chunk slots floor(cu[n] / 64) + n + c). */
  readonly varlen: boolean;
}

export type GdnTcPlan = ChunkTcPlan;

/** The tile's shape fits and its walk fits the shared-memory limit. */
function tileFits(K: number, V: number, bv: number, sharedLimit: number): boolean {
  return tileShapeFits(K, V, bv) && gdnTcMainShared(K, bv, warpsAcrossK(K, bv)) <= sharedLimit;
}

/**
 * The walk's dynamic shared memory (gdn_chunk_tc.cu MAIN_SMEM), bytes: q, W (hi, lo), k [64][K + 8], Aqk (hi, lo)
 * [64][72], U, V' and V' m e^(G_last - G) (hi, lo) [64][BV + 8] (2-byte values), G and the norms twice [64] and the
 * partials [WK][64][BV + 4] (f32).
 */
export function gdnTcMainShared(K: number, bv: number, wk: number): number {
  const C = GDN_TC_CHUNK;
  return (4 * C * (K + 8) + 2 * C * (C + 8) + 6 * C * (bv + 8)) * 2 + 6 * C * 4 + wk * C * (bv + 4) * 4;
}

/**
 * The prep kernel's (gdn_chunk_tc.cu PREP_SMEM), bytes: k [64][K + 8]; q [64][K + 8] or, in its place later, Tw and
 * Tu (hi, lo) [64][72]; v [64][V + 8] (2-byte values); A and T [64][68], G, beta and the norms [64] (f32).
 */
export function gdnTcPrepShared(K: number, V: number): number {
  const C = GDN_TC_CHUNK;
  return C * (K + 8) * 2 + Math.max(C * (K + 8), 4 * C * (C + 8)) * 2 + C * (V + 8) * 2 + 2 * C * (C + 4) * 4 + 4 * C * 4;
}

/**
 * The plan for `s` on a device of `sms` multiprocessors allowing `sharedLimit` bytes of dynamic shared memory a block
 * (the shape must pass gdnTcDecline for that limit): the tiles whose walk fits it, then chunk_gla's choice among them;
 * `tileColumns` (recurrent.chunkDeltaTileColumns) forces the V tile where it fits (0: the plan's choice).
 */
export function planGdnTc(s: GdnTcShape, sms: number, sharedLimit = GDN_TC_MAX_SHARED, tileColumns = 0): GdnTcPlan {
  const ok = BVS.filter((bv) => tileFits(s.K, s.V, bv, sharedLimit));
  if (ok.length === 0) throw new RangeError(`gdn tc: no tile for K ${s.K} / V ${s.V}`);
  const bv = chooseTile(ok, (b) => s.N * s.HV * (s.V / b), sms, tileColumns);
  const wm = bv / 16;
  const wk = warpsAcrossK(s.K, bv);
  const { ncMax, slots } = chunkSlots(s.N, s.T, s.varlen);
  return {
    bv, wm, wk, threads: 32 * wm * wk, ncMax, slots,
    prepGrid: [slots, s.HV, 1],
    mainGrid: [s.V / bv, s.HV, s.N],
    prepSharedBytes: gdnTcPrepShared(s.K, s.V),
    mainSharedBytes: gdnTcMainShared(s.K, bv, wk),
  };
}

export interface GdnTcCall extends Omit<GdnTcShape, 'varlen'> {
  /** The registry op: chunk_gated_delta_rule takes these kernels; chunk_kda (a decay a key channel) does not. */
  readonly op: string;
  /** q / k / v, g, beta. */
  readonly dtypes: readonly [string, string, string];
  /** The device's compute capability major (undefined: unknown, declined). */
  readonly smMajor: number | undefined;
  /** recurrent.chunkDeltaTensorCore in the tuning. */
  readonly enabled: boolean;
  /** Most dynamic shared memory a block may opt in to (DeviceProperties.sharedPerBlockOptin; absent: sm_90's 227 KiB). */
  readonly sharedPerBlockOptin?: number;
}

/** The shared-memory limit the plan is held to on a device: its opt-in limit, at most sm_90's. */
export const gdnTcSharedLimit = chunkTcSharedLimit;

const GATE_DTYPES = ['f32', 'bf16', 'f16'];

/** Why the tensor-core chunk_gated_delta_rule does not take a call (the CUDA-core fk_gdn_chunk then does), or null. */
export function gdnTcDecline(c: GdnTcCall): string | null {
  if (c.op === 'chunk_kda') return 'chunk_kda: a decay a key channel (its scores need per-channel reference points): the CUDA-core fk_kda_chunk runs it';
  if (c.op !== 'chunk_gated_delta_rule') return `${c.op}: the tensor-core kernels run chunk_gated_delta_rule only`;
  if (!c.enabled) return 'recurrent.chunkDeltaTensorCore is off in the tuning';
  if (c.smMajor === undefined || c.smMajor < 8) return `compute capability ${c.smMajor ?? 'unknown'}: mma.sync bf16 needs sm_80+`;
  const [dt, gdt, bdt] = c.dtypes;
  if (dt !== 'bf16' && dt !== 'f16') return `dtype ${dt}: the tensor-core kernels take bf16 and f16`;
  if (!GATE_DTYPES.includes(gdt) || !GATE_DTYPES.includes(bdt)) return `g ${gdt} / beta ${bdt}: the tensor-core kernels take f32, bf16, f16 gates`;
  if (c.K % 16 !== 0 || c.K < 16 || c.K > GDN_TC_MAX_K) return `key head dim ${c.K}: the tensor-core kernels take multiples of 16 up to ${GDN_TC_MAX_K}`;
  if (c.V % 16 !== 0 || c.V < 16) return `value head dim ${c.V}: the tensor-core kernels take multiples of 16`;
  if (c.H < 1 || c.HV % c.H !== 0) return `value heads ${c.HV} must be a multiple of q / k heads ${c.H}`;
  const limit = gdnTcSharedLimit(c.sharedPerBlockOptin);
  if (!BVS.some((bv) => tileFits(c.K, c.V, bv, limit))) {
    return `K ${c.K} / V ${c.V}: no state tile fits (V a multiple of 16, 32 or 64 with K / WK <= ${MAX_KW} and the walk's shared memory within the device's ${limit} bytes)`;
  }
  if (c.HV > 65535 || c.N > 65535) return `${c.N} sequences x ${c.HV} value heads: past the grid's 65535 limit on y / z`;
  const p = planGdnTc({ ...c, varlen: true }, 1, limit);
  if (Math.max(p.slots, c.N * p.ncMax) > 2 ** 31 - 1) return 'too many chunks for the grid';
  if (p.prepSharedBytes > limit) return `V ${c.V}: the prep kernel's ${p.prepSharedBytes} bytes of shared memory exceed the device's ${limit}`;
  return null;
}

const CTYPE: Record<string, string> = { f32: 'float', bf16: '__nv_bfloat16', f16: '__half' };

/** The #defines of one build of gdn_chunk_tc.cu (both entries share them). */
export function gdnTcDefines(
  dtypes: readonly [string, string, string], K: number, V: number, p: GdnTcPlan, l2norm: boolean, cuDType: 'i32' | 'i64', idxDType: 'i32' | 'i64',
): Record<string, string | number> {
  return {
    FK_T: CTYPE[dtypes[0]]!, FK_TG: CTYPE[dtypes[1]]!, FK_TB: CTYPE[dtypes[2]]!, FK_K: K, FK_V: V, FK_BV: p.bv, FK_WK: p.wk, FK_L2: l2norm ? 1 : 0,
    FK_CU_T: indexCType(cuDType), FK_SI_T: indexCType(idxDType),
  };
}
