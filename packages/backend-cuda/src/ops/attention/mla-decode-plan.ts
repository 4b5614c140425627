/**
 * The launch plan of the paged MLA decode kernel (kernels/attention_mla_decode.cu) and what it declines: pure
 * functions of the shapes, the layout and the device's SM count / shared-memory opt-in, unit-tested without a GPU.
 */

/** Tokens per tile (fkmla::BN), threads a CTA (fkmla::THREADS), key groups (fkmla::KG). */
export const MLA_TILE = 32;
export const MLA_THREADS = 256;
export const MLA_KEY_GROUPS = 4;
/** Ring depth: three 37 KB tiles at D 576 (two in flight while one is used), one CTA an SM (registers: ~230 a thread). */
export const MLA_STAGES = 3;
/**
 * Fewest keys a split takes: a split's fp32 partials (32 heads x 576 x 4 bytes = 74 KB) are written and read back by
 * the combine, so a split should read several times that from the cache (256 rows of 1152 bytes = 295 KB).
 */
export const MLA_MIN_SPLIT_TOKENS = 256;

const ceilDiv = (a: number, b: number) => Math.ceil(a / b);

/** The kernel's dynamic shared memory (fkmla::SMEM_BYTES): the ring, the key groups' partial scores, P, alpha / max / sum. */
export function mlaSharedBytes(headDim: number, headTiles: number, stages: number): number {
  const pitch = ceilDiv(headDim, 16) * 16 + 8;
  const heads = 16 * headTiles;
  return stages * MLA_TILE * pitch * 2 + MLA_KEY_GROUPS * heads * (MLA_TILE + 4) * 4 + heads * (MLA_TILE + 8) * 2 + 3 * heads * 4;
}

export interface MlaDecodePlanInput {
  readonly batch: number;
  readonly qHeads: number;
  /** The cached row's width (kv_lora_rank + rope dims), the query's too. */
  readonly headDim: number;
  readonly blockSize: number;
  /** Columns of the block table: the grid is sized from its capacity, never from seq_lens (no host sync: graph-capturable). */
  readonly maxBlocks: number;
  readonly multiprocessors: number;
  /** Most dynamic shared memory a block may opt in to (caps the ring's depth); absent: no cap. */
  readonly sharedPerBlockOptin?: number;
}

export interface MlaDecodePlan {
  /** m16 tiles of query heads a CTA (FK_MLA_MT) and the heads they hold. */
  readonly headTiles: 1 | 2;
  readonly headsPerCta: number;
  readonly stages: number;
  readonly sharedBytes: number;
  /** Keys per split (a multiple of the tile) and splits (1: no combine kernel). */
  readonly chunk: number;
  readonly splits: number;
  /** (splits, head groups, batch). */
  readonly grid: readonly [number, number, number];
}

/**
 * One CTA an SM: the splits fill about one wave of SMs (batch x head groups CTAs a split, rounded down so a second,
 * mostly idle wave is not started), no split shorter than MLA_MIN_SPLIT_TOKENS. null when even a two-stage ring does
 * not fit the shared memory.
 */
export function planMlaDecode(p: MlaDecodePlanInput): MlaDecodePlan | null {
  const headTiles = p.qHeads > 16 ? 2 : 1;
  const headsPerCta = 16 * headTiles;
  let stages = MLA_STAGES;
  while (stages > 2 && p.sharedPerBlockOptin !== undefined && mlaSharedBytes(p.headDim, headTiles, stages) > p.sharedPerBlockOptin) stages--;
  const sharedBytes = mlaSharedBytes(p.headDim, headTiles, stages);
  if (p.sharedPerBlockOptin !== undefined && sharedBytes > p.sharedPerBlockOptin) return null;
  const groups = ceilDiv(p.qHeads, headsPerCta);
  const capacity = Math.max(1, p.maxBlocks * p.blockSize);
  const want = Math.max(1, Math.floor(p.multiprocessors / Math.max(1, p.batch * groups)));
  const most = Math.max(1, ceilDiv(capacity, MLA_MIN_SPLIT_TOKENS));
  const chunk = ceilDiv(ceilDiv(capacity, Math.min(want, most)), MLA_TILE) * MLA_TILE;
  const splits = ceilDiv(capacity, chunk);
  return { headTiles, headsPerCta, stages, sharedBytes, chunk, splits, grid: [splits, groups, p.batch] };
}

export interface MlaDecodeCall {
  readonly dtype: string;
  readonly kvHeads: number;
  readonly headDim: number;
  /** k_cache and v_cache are one tensor view (same address and strides): the latent rows are the values. */
  readonly sharedCache: boolean;
  readonly sinks: boolean;
  readonly slidingWindow: number;
  /** Largest of 16, 8, 4, 2 bytes dividing the cache's address, its block and token strides and a row (vectorBytes). */
  readonly cacheVecBytes: number;
}

/** Why this paged decode cannot take the MLA kernel, or null when it can. */
export function mlaDecodeDecline(c: MlaDecodeCall): string | null {
  if (c.dtype !== 'bf16' && c.dtype !== 'f16') return `dtype ${c.dtype} (the MLA kernel takes bf16 / f16)`;
  if (c.kvHeads !== 1) return `${c.kvHeads} kv heads (the MLA kernel reads one latent kv head)`;
  if (!c.sharedCache) return 'k_cache and v_cache are different tensors (the MLA kernel reads the latent rows as both)';
  if (c.sinks) return 'sinks (MLA has none)';
  if (c.slidingWindow > 0) return 'a sliding window (MLA has none)';
  if (c.headDim % 2 !== 0) return `odd head size ${c.headDim}`;
  if (c.cacheVecBytes < 4) return 'the cache rows are not 4-byte aligned (cp.async moves 4, 8 or 16 bytes)';
  return null;
}
