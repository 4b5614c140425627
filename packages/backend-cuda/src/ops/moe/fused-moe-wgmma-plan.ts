/**
 * Launch planning of the Hopper MoE prefill GEMM (kernels/fused_moe_wgmma.cu: fk_moe_gather_rows, then
 * fk_fused_moe_wgmma; issue #31): whether a fused_moe_gemm call takes it, its grid, shared memory and tensor maps, from
 * shapes alone (the routing stays on the device, so the launches can be captured in a CUDA graph). Pure: unit-tested
 * on the CPU (fused-moe-wgmma-plan.test.ts).
 *
 * The kernel multiplies 128-row tiles of moe_align's sorted entries (gathered into A_sorted [rows, K] by
 * moe_tile_rows.cu) by the tile's expert's weight on wgmma, so a tile must hold one expert's rows: where the block size
 * is a multiple of 128, moe_align's blocks are split into tiles as they are; where it divides 128 (16, 32, 64: the
 * engine's prefill aligns to 64), fk_moe_tile_map first packs each expert's run of blocks into tiles of 128 / bs
 * blocks (its last tile of a run partly empty). Other block sizes decline. It is a prefill kernel: below MIN_ROWS_PER_EXPERT rows an expert, most of a 128-row tile would be padding, and the mma.sync
 * kernel's smaller tiles (fused-moe-plan.ts) take the call. Off unless moe.fusedMoeWgmma is on in the tuning: the
 * kernel is not yet measured on a GPU (bench/labs/moe-wgmma/README.md).
 */
import { TENSOR_MAP_DTYPE, TENSOR_MAP_INTERLEAVE_NONE, TENSOR_MAP_L2_PROMOTION, TENSOR_MAP_OOB_FILL, TENSOR_MAP_SWIZZLE, type TensorMapSpec } from '../../tensor-map.js';
import { liveBlocksBound, type MoeShape } from './fused-moe-plan.js';

/** fkmoewg::BM (sorted entries a CTA), THREADS (producer + two consumer warpgroups), BK (k a stage). */
export const WGMMA_BLOCK_M = 128;
export const WGMMA_THREADS = 384;
const WGMMA_BLOCK_K = 64;
/** Threads a CTA of the gather (one CTA a row of A_sorted). */
export const GATHER_THREADS = 256;
/** Fewest rows an expert (slots / hit experts) for the wgmma kernel: a 128-row tile should be mostly rows. */
export const MIN_ROWS_PER_EXPERT = 128;
/** Row tiles grouped over all column tiles (the CTAs in flight share an expert's weight tiles in L2). */
export const WGMMA_GROUP_M = 8;
const MAX_GRID = 2 ** 31 - 1;

/** One compiled width: BN columns a CTA (one m64nBNk16 wgmma a consumer), its ring depth. */
export interface WgmmaTile {
  readonly BN: 128 | 256;
  readonly stages: number;
}
/** fkmoewg's FK_MOE_WG_BN and its default FK_MOE_WG_STAGES: both rings fill ~193 KiB. */
export const WGMMA_TILES: readonly WgmmaTile[] = [
  { BN: 256, stages: 4 },
  { BN: 128, stages: 6 },
];

/** fkmoewg::MOE_WG_SMEM_BYTES: the ring (A [128 x 64] + W [BN x 64] a stage), two mbarriers a stage, 1 KB to align. */
export function wgmmaSmemBytes(t: WgmmaTile): number {
  return t.stages * (WGMMA_BLOCK_M * WGMMA_BLOCK_K * 2 + t.BN * WGMMA_BLOCK_K * 2) + 2 * t.stages * 8 + 1024;
}

export interface WgmmaPlan {
  readonly tile: WgmmaTile;
  readonly blockSize: number;
  /** Blocks a tile where moe_align's blocks are smaller than a tile (fk_moe_tile_map runs first), else 0. */
  readonly blocksPerTile: number;
  /** Row tiles (of 128 sorted entries) and column tiles launched; grid = mTiles * nTiles CTAs of WGMMA_THREADS. */
  readonly mTiles: number;
  readonly nTiles: number;
  readonly grid: number;
  /** Rows of A_sorted (mTiles * 128): the gather's grid, the A tensor map's rows. */
  readonly sortedRows: number;
  readonly smemBytes: number;
}

/** The plan of a call (the decline checks the rules first): BN 256 unless its grid would not fill the SMs once. */
export function planFusedMoeWgmma(s: MoeShape, sms: number, force?: WgmmaTile): WgmmaPlan {
  const blockSize = s.NB === 0 ? WGMMA_BLOCK_M : s.P / s.NB;
  const slots = s.M * s.topK;
  const live = liveBlocksBound(slots, s.E, blockSize, s.NB);
  const blocksPerTile = blockSize < WGMMA_BLOCK_M ? WGMMA_BLOCK_M / blockSize : 0;
  // packed: each hit expert's run of n blocks fills ceil(n / G) tiles, at most (live + hit (G - 1)) / G in all
  const mTiles = blocksPerTile ? Math.min(live, Math.floor((live + Math.min(s.E, slots) * (blocksPerTile - 1)) / blocksPerTile)) : (live * blockSize) / WGMMA_BLOCK_M;
  const wide = WGMMA_TILES[0]!;
  const tile = force ?? (mTiles * Math.ceil(s.N / wide.BN) >= sms ? wide : WGMMA_TILES[1]!);
  const nTiles = Math.ceil(s.N / tile.BN);
  return { tile, blockSize, blocksPerTile, mTiles, nTiles, grid: mTiles * nTiles, sortedRows: mTiles * WGMMA_BLOCK_M, smemBytes: wgmmaSmemBytes(tile) };
}

/** What decides whether a fused_moe_gemm call takes the wgmma kernel, besides its shape. */
export interface WgmmaCall {
  /** The device's SASS target (DeviceProperties.arch). */
  readonly arch?: string;
  readonly dtype: string;
  /** The weight [E, N, K]: byte address of its first element and element strides of dims 0 and 1 (dim 2 contiguous). */
  readonly weightAddress: number;
  readonly weightStrides: readonly [number, number, number];
  /** A [M, K]: whether its rows are contiguous and 16-byte aligned (the gather copies 16-byte pieces). */
  readonly aRowsAligned: boolean;
  readonly sharedPerBlockOptin?: number;
  /** Why tensor maps cannot be encoded in this process (CudaRuntime.tensorMapUnavailable), or null. */
  readonly tensorMapsUnavailable: string | null;
}

/** Why a call cannot take the wgmma kernel (the mma.sync kernel, fused-moe.ts, then takes it), or null. */
export function fusedMoeWgmmaDecline(s: MoeShape, c: WgmmaCall, tuning: { readonly fusedMoeWgmma: boolean }, sms: number, force?: WgmmaTile): string | null {
  if (!tuning.fusedMoeWgmma) return 'moe.fusedMoeWgmma is off in the tuning';
  if (c.arch !== 'sm_90a') return `device target ${c.arch ?? 'unknown'}: the wgmma kernel needs sm_90a (TMA, wgmma, setmaxnreg)`;
  if (c.dtype !== 'bf16' && c.dtype !== 'f16') return `dtype ${c.dtype}: the wgmma kernel takes bf16 / f16`;
  const bs = s.NB === 0 ? 0 : s.P / s.NB;
  if (!Number.isInteger(bs) || bs < 1 || (bs % WGMMA_BLOCK_M !== 0 && WGMMA_BLOCK_M % bs !== 0)) {
    return `block size ${bs}: a 128-row tile must hold one expert (block size a multiple or a divisor of 128)`;
  }
  const slots = s.M * s.topK;
  const perExpert = slots / Math.max(1, Math.min(s.E, slots));
  if (perExpert < MIN_ROWS_PER_EXPERT) return `${perExpert.toFixed(1)} rows an expert: below ${MIN_ROWS_PER_EXPERT} (a prefill kernel; the mma.sync tiles fit)`;
  if (s.K % 8 !== 0 || s.N % 8 !== 0) return `K ${s.K}, N ${s.N}: both must be multiples of 8 (16-byte rows for the tensor maps and stores)`;
  if (!c.aRowsAligned) return 'A rows are not contiguous and 16-byte aligned';
  const [se, sn, sk] = c.weightStrides;
  if (sk !== 1 && s.K > 1) return 'the weight is not K-contiguous';
  if (c.weightAddress % 16 !== 0) return `weight at byte address ${c.weightAddress}: the TMA needs 16-byte aligned tensors`;
  for (const x of weightStrideBytes(s, se, sn)) if (x % 16 !== 0 || x <= 0 || x >= 2 ** 40) return `weight byte strides ${weightStrideBytes(s, se, sn).join(' / ')}: the TMA needs positive multiples of 16 below 2^40`;
  const plan = planFusedMoeWgmma(s, sms, force);
  if (plan.grid > MAX_GRID) return 'grid too large';
  if (c.sharedPerBlockOptin !== undefined && c.sharedPerBlockOptin < plan.smemBytes) return `${plan.smemBytes} bytes of shared memory a CTA; the device allows ${c.sharedPerBlockOptin}`;
  if (c.tensorMapsUnavailable !== null) return `no TMA tensor maps: ${c.tensorMapsUnavailable}`;
  return null;
}

/** The weight's byte strides of dims 1 (N) and 2 (E) as the map takes them (a dim of one element: the packed stride). */
function weightStrideBytes(s: MoeShape, se: number, sn: number): [number, number] {
  const row = s.N > 1 ? sn : s.K;
  return [row * 2, (s.E > 1 ? se : s.N * row) * 2];
}

const map = (dtype: 'bf16' | 'f16', address: number, dims: number[], stridesBytes: number[], box: number[]): TensorMapSpec => ({
  dataType: TENSOR_MAP_DTYPE[dtype],
  address,
  dims,
  stridesBytes,
  box,
  elementStrides: [1, 1, 1],
  interleave: TENSOR_MAP_INTERLEAVE_NONE,
  swizzle: TENSOR_MAP_SWIZZLE['128B'],
  l2Promotion: TENSOR_MAP_L2_PROMOTION['256B'],
  oobFill: TENSOR_MAP_OOB_FILL.zeros,
});

/** A_sorted [rows, K] (packed) as the kernel reads it: {K, rows, 1}, boxes of 64 k x 128 rows, 128-byte swizzle. */
export function sortedTensorMapSpec(dtype: 'bf16' | 'f16', address: number, K: number, rows: number): TensorMapSpec {
  return map(dtype, address, [K, rows, 1], [K * 2, rows * K * 2], [WGMMA_BLOCK_K, WGMMA_BLOCK_M, 1]);
}

/** The weight [E, N, K] as the kernel reads it: {K, N, E}, boxes of 64 k x BN rows x 1 expert, 128-byte swizzle. */
export function weightTensorMapSpec(dtype: 'bf16' | 'f16', s: MoeShape, address: number, strides: readonly [number, number, number], BN: number): TensorMapSpec {
  return map(dtype, address, [s.K, s.N, s.E], weightStrideBytes(s, strides[0], strides[1]), [WGMMA_BLOCK_K, BN, 1]);
}

/** The kernel's #defines for a tile and dtype (FK_MOE_WG_STAGES left at the file's default for the width). */
export function wgmmaDefines(t: WgmmaTile, dtype: 'bf16' | 'f16'): Record<string, string | number> {
  return { FK_T: dtype === 'bf16' ? '__nv_bfloat16' : '__half', FK_MOE_WG_BN: t.BN };
}
