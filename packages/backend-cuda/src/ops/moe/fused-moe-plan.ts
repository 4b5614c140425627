/**
 * Launch planning of the fused MoE GEMM (kernels/fused_moe.cu): the tile configuration, the rows a CTA takes, the grid
 * and the kernel's #defines, from shapes alone (the routing stays on the device, so a planned launch can be captured in a
 * CUDA graph). Pure: unit-tested on the CPU (fused-moe-plan.test.ts).
 *
 * Tile configurations follow vLLM's tuned fused_moe configs on the H200 (configs/E=128,N=768,device_name=NVIDIA_H200.json
 * and its neighbours), translated to mma.sync tiles: decode takes BLOCK_M 16 x BLOCK_N 64 x BLOCK_K 64, 4 warps, 5
 * stages (vLLM's M = 1, 2 entry); more rows per expert take wider and then taller tiles (vLLM's M >= 512: BLOCK_M 64,
 * BLOCK_N 128, BLOCK_K 64, 3 stages; M >= 1024: BLOCK_M 128), and GROUP_SIZE_M 8 for the tall tiles so CTAs that share an
 * expert's weight tiles run together. The one rule of our own: at decode, where few experts are hit, BLOCK_N narrows
 * until the grid has a CTA for every SM (vLLM's Triton grid at Mixtral's w2, 2 experts x 4096 / 64 columns, leaves SMs
 * idle on a pure weight stream).
 */

import { mmaTileDefines, type MmaDType, type MmaTile } from './mma-tile.js';

export type MoeDType = MmaDType;

/** One compiled variant of fk_fused_moe (FK_BM, FK_BN, FK_BK, FK_WM x FK_WN warps, FK_STAGES). */
export interface MoeTile extends MmaTile {
  readonly stages: number;
  /** Row tiles grouped over all column tiles (Triton's GROUP_SIZE_M). */
  readonly groupM: number;
}

/** The configurations the planner chooses from (fused-moe-nvcc.test.ts compiles each, both dtypes, both epilogues). */
export const MOE_TILES: readonly MoeTile[] = [
  { name: 'decode-n32', BM: 16, BN: 32, BK: 64, WM: 1, WN: 2, stages: 5, groupM: 1 },
  { name: 'decode', BM: 16, BN: 64, BK: 64, WM: 1, WN: 4, stages: 5, groupM: 1 },
  { name: 'decode-n128', BM: 16, BN: 128, BK: 64, WM: 1, WN: 4, stages: 4, groupM: 1 },
  { name: 'm32', BM: 32, BN: 128, BK: 64, WM: 2, WN: 2, stages: 4, groupM: 1 },
  { name: 'm64', BM: 64, BN: 128, BK: 64, WM: 2, WN: 2, stages: 3, groupM: 8 },
  { name: 'm128', BM: 128, BN: 128, BK: 32, WM: 2, WN: 4, stages: 4, groupM: 8 },
];

const tile = (name: string): MoeTile => MOE_TILES.find((t) => t.name === name)!;

export interface MoeShape {
  /** Rows of A (tokens; token-expert slots for the w2 GEMM, whose top_k is 1). */
  readonly M: number;
  readonly topK: number;
  /** Experts, output columns, reduction length: weight [E, N, K]. */
  readonly E: number;
  readonly N: number;
  readonly K: number;
  /** Entries of sorted_token_ids and blocks of expert_ids (block size P / NB). */
  readonly P: number;
  readonly NB: number;
}

export interface MoePlan {
  readonly tile: MoeTile;
  /** Sorted entries a CTA takes (divides the block size, at most BM). */
  readonly rowsPerCta: number;
  readonly blockSize: number;
  /** Row tiles and column tiles launched; grid = mTiles * nTiles CTAs of threads each. */
  readonly mTiles: number;
  readonly nTiles: number;
  readonly grid: number;
  readonly threads: number;
  /** Dynamic shared memory: the ring of A and W tiles. */
  readonly smemBytes: number;
}

/**
 * The most blocks a moe_align layout of `slots` slots over E experts can have below its padded count: each hit expert
 * (at most min(E, slots)) pads its run to whole blocks, so sum ceil(count / bs) <= (slots + hit * (bs - 1)) / bs — the
 * moe_align sizing with only the experts that can be hit. The grid covers these; blocks past them are never live.
 */
export function liveBlocksBound(slots: number, E: number, blockSize: number, NB: number): number {
  const hit = Math.min(E, slots);
  return Math.min(NB, slots, Math.floor((slots + hit * (blockSize - 1)) / blockSize));
}

/** The largest divisor of n that is at most cap. */
function largestDivisorAtMost(n: number, cap: number): number {
  for (let d = Math.min(n, cap); d > 1; d--) if (n % d === 0) return d;
  return 1;
}

/** Shared memory of one CTA's ring: STAGES x (BM + BN) rows of BK + 8 elements (2 bytes each). */
export function tileSmemBytes(t: MoeTile): number {
  return t.stages * (t.BM + t.BN) * (t.BK + 8) * 2;
}

/** The tile for a call: by rows per hit expert (vLLM's M buckets), capped by the alignment's block size, then grid fill. */
export function chooseTile(s: MoeShape, sms: number): MoeTile {
  const slots = s.M * s.topK;
  const bs = s.NB === 0 ? 16 : s.P / s.NB;
  const perExpert = slots / Math.max(1, Math.min(s.E, slots));
  // a tile's rows must sit in one block: BM divides bs (or bs is below 16, one block a CTA)
  const fits = (bm: number) => bs % bm === 0;
  if (perExpert > 64 && fits(128)) return tile('m128');
  if (perExpert > 32 && fits(64)) return tile('m64');
  if (perExpert > 16 && fits(32)) return tile('m32');
  // BM 16: vLLM's decode tile (BN 64; BN 128 once an expert has more than 8 rows), narrowed to BN 32 where the grid
  // would leave SMs idle (decode streams weights: an idle SM is lost bandwidth). Row tiles holding a slot: each hit
  // expert's rows fill ceil(count / 16) tiles, at most slots / 16 + hit in all.
  const rowTiles = Math.min(liveBlocksBound(slots, s.E, bs, s.NB) * Math.ceil(bs / 16), Math.ceil(slots / 16) + Math.min(s.E, slots));
  const wide = tile(perExpert > 8 ? 'decode-n128' : 'decode');
  if (rowTiles * Math.ceil(s.N / wide.BN) >= sms) return wide;
  const mid = tile('decode');
  return rowTiles * Math.ceil(s.N / mid.BN) >= sms ? mid : tile('decode-n32');
}

/** The launch of one call: tile, rows a CTA, grid (row tiles over the live blocks bound x column tiles). */
export function planFusedMoe(s: MoeShape, sms: number, force?: MoeTile): MoePlan {
  const t = force ?? chooseTile(s, sms);
  const blockSize = s.NB === 0 ? 1 : s.P / s.NB;
  if (!Number.isInteger(blockSize)) throw new RangeError(`fused_moe_gemm: ${s.P} sorted ids do not make ${s.NB} whole blocks`);
  const rowsPerCta = largestDivisorAtMost(blockSize, t.BM);
  const slots = s.M * s.topK;
  const blocks = liveBlocksBound(slots, s.E, blockSize, s.NB);
  const mTiles = (blocks * blockSize) / rowsPerCta;
  const nTiles = Math.ceil(s.N / t.BN);
  return {
    tile: t,
    rowsPerCta,
    blockSize,
    mTiles,
    nTiles,
    grid: mTiles * nTiles,
    threads: 32 * t.WM * t.WN,
    smemBytes: tileSmemBytes(t),
  };
}

/** The kernel's #defines for a tile, dtype and epilogue. */
export function moeDefines(t: MoeTile, dtype: MoeDType, mulRoutedWeight: boolean): Record<string, string | number> {
  return {
    ...mmaTileDefines(t, dtype),
    FK_STAGES: t.stages,
    FK_MUL: mulRoutedWeight ? 1 : 0,
  };
}
