/**
 * What the tensor-core chunked kernels (gla_chunk_tc.cu: gla-tc-plan.ts; gdn_chunk_tc.cu: gdn-tc-plan.ts) plan alike:
 * a parallel prep launch a (chunk slot, head), then a walk a (V tile of BV columns, head, sequence) holding its
 * [BV, K] slice of the state in mma accumulators, WM = BV / 16 warps down the value rows times WK warps across the key
 * columns (KW = K / WK each). The walk's tile: the narrowest whose grid still fits one wave (each CTA reads its
 * chunk's shared operands whatever its width, so narrower tiles mean more CTAs but the same per-CTA load time), else
 * the widest (fewer re-reads of the shared operands).
 */

/** Tokens a chunk, as the kernels' C. */
export const CHUNK_TC_TOKENS = 64;
/** Threads of a prep CTA. */
export const CHUNK_TC_PREP_THREADS = 256;
/** sm_90's opt-in limit of dynamic shared memory a block; a device's own (sm_80 163 KiB, sm_86 / sm_89 99 KiB) may be less. */
export const CHUNK_TC_MAX_SHARED = 227 * 1024;
/** The shared-memory limit the plans are held to on a device: its opt-in limit (DeviceProperties.sharedPerBlockOptin), at most sm_90's. */
export function chunkTcSharedLimit(sharedPerBlockOptin: number | undefined): number {
  return Math.min(CHUNK_TC_MAX_SHARED, sharedPerBlockOptin ?? CHUNK_TC_MAX_SHARED);
}
/** Key columns a warp's state slice may hold (KW / 2 accumulator registers a thread). */
export const CHUNK_TC_MAX_KW = 128;
/** The walk's V tiles, narrowest first. */
export const CHUNK_TC_TILES = [16, 32, 64] as const;

/** The launch plan of both kernels. */
export interface ChunkTcPlan {
  readonly bv: number;
  readonly wm: number;
  readonly wk: number;
  readonly threads: number;
  /** Chunks a batch row can hold (ceil(T / 64)) and the workspace's chunk slots. */
  readonly ncMax: number;
  readonly slots: number;
  readonly prepGrid: readonly [number, number, number];
  readonly mainGrid: readonly [number, number, number];
  readonly prepSharedBytes: number;
  readonly mainSharedBytes: number;
}

/** WK for a tile of BV columns: the most warps (a power of two, WM x WK <= 8) whose key slices are whole k16 steps. */
export function warpsAcrossK(K: number, bv: number): number {
  let wk = 8 / (bv / 16);
  while (wk > 1 && (K / 16) % wk !== 0) wk /= 2;
  return wk;
}

/** Whether V splits into tiles of bv columns and a warp's key slice fits its accumulators. */
export function tileShapeFits(K: number, V: number, bv: number): boolean {
  return V % bv === 0 && K / warpsAcrossK(K, bv) <= CHUNK_TC_MAX_KW;
}

/**
 * The walk's tile among `ok` (the tiles that fit, narrowest first; not empty): `tileColumns` where it is one of them,
 * else the narrowest whose ctas(bv) fit one wave of `sms`, else the widest.
 */
export function chooseTile(ok: readonly number[], ctas: (bv: number) => number, sms: number, tileColumns: number): number {
  return ok.find((b) => b === tileColumns) ?? ok.find((b) => ctas(b) <= sms) ?? ok[ok.length - 1]!;
}

/** Chunks a batch row can hold and the workspace's chunk slots: floor(T / 64) + N packed (varlen), else N ceil(T / 64). */
export function chunkSlots(N: number, T: number, varlen: boolean): { ncMax: number; slots: number } {
  const ncMax = Math.ceil(T / CHUNK_TC_TOKENS);
  return { ncMax, slots: varlen ? Math.floor(T / CHUNK_TC_TOKENS) + N : N * ncMax };
}

/** The C type of cu_seqlens' or the state indices' dtype (FK_CU_T, FK_SI_T). */
export function indexCType(d: 'i32' | 'i64'): string {
  return d === 'i64' ? 'long long' : 'int';
}
