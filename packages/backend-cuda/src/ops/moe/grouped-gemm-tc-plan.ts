/**
 * Launch planning of the tensor-core grouped GEMM (kernels/grouped_gemm_route.cu + grouped_gemm_tc.cu, the prefill path
 * of grouped_gemm and mxfp4_grouped_gemm): the tile configuration, the m-tile slots, the grid, shared memory and the
 * kernels' #defines, from shapes alone (the routing stays on the device, so a planned launch can be captured in a CUDA
 * graph). Pure: unit-tested on the CPU (grouped-gemm-tc-emulated.test.ts), each configuration compiled by
 * grouped-gemm-tc-nvcc.test.ts.
 *
 * The tile follows the rows an expert gets on average (T / E), as fused-moe-plan.ts does by vLLM's M buckets: BM 32 /
 * 64 / 128 x BN 128 x BK 64, 8 warps. Stages: as many as keep two CTAs an SM in shared memory (a CTA's 128 registers a
 * thread allow two). Not yet tuned on a GPU.
 */

import { mmaTileDefines, type MmaDType, type MmaTile } from './mma-tile.js';

export type GroupedTcDType = MmaDType;
/** The weight operand: bf16 / f16 [E, N, K] with k contiguous (rows) or n contiguous (a transposed view), or MXFP4. */
export type GroupedTcFormat = 'k-contiguous' | 'n-contiguous' | 'mxfp4';

/** One compiled variant of fk_grouped_gemm_tc (FK_BM, FK_BN, FK_BK, FK_WM x FK_WN warps, FK_STAGES by weight format). */
export interface GroupedTcTile extends MmaTile {
  /** ring stages with bf16 / f16 weights and with MXFP4 weights (whose ring holds packed bytes beside two decoded tiles) */
  readonly stagesDense: number;
  readonly stagesMxfp4: number;
  /** Slots grouped over all column tiles (Triton's GROUP_SIZE_M): one expert's slots share its weight tiles in L2. */
  readonly groupM: number;
}

export const GROUPED_TC_TILES: readonly GroupedTcTile[] = [
  { name: 'm32', BM: 32, BN: 128, BK: 64, WM: 2, WN: 4, stagesDense: 4, stagesMxfp4: 4, groupM: 8 },
  { name: 'm64', BM: 64, BN: 128, BK: 64, WM: 2, WN: 4, stagesDense: 4, stagesMxfp4: 4, groupM: 8 },
  { name: 'm128', BM: 128, BN: 128, BK: 64, WM: 2, WN: 4, stagesDense: 3, stagesMxfp4: 3, groupM: 8 },
];

/** Threads of the routing kernel's one CTA (fkroute::NT). */
export const GROUPED_TC_ROUTE_THREADS = 1024;

export interface GroupedTcShape {
  /** rows of the input, output columns, reduction length, experts */
  readonly T: number;
  readonly N: number;
  readonly K: number;
  readonly E: number;
  readonly format: GroupedTcFormat;
}

export interface GroupedTcPlan {
  readonly tile: GroupedTcTile;
  readonly stages: number;
  /** m-tile slots: ceil(T / BM) + E bounds the tiles E + 1 groups (the experts and the rows none takes) of T rows need */
  readonly slots: number;
  readonly nTiles: number;
  /** CTAs of the GEMM (slots x column tiles, one dimension) */
  readonly grid: number;
  readonly threads: number;
  /** dynamic shared memory of the GEMM: the ring (and for MXFP4 the two decoded tiles) */
  readonly smemBytes: number;
  /** dynamic shared memory of the routing kernel: 3 (E + 2) ints */
  readonly routeSmemBytes: number;
}

/** The tile by the rows an expert gets on average. */
export function chooseGroupedTcTile(s: GroupedTcShape): GroupedTcTile {
  const perExpert = s.T / Math.max(1, s.E);
  const name = perExpert > 96 ? 'm128' : perExpert > 32 ? 'm64' : 'm32';
  return GROUPED_TC_TILES.find((t) => t.name === name)!;
}

/**
 * Shared memory of one GEMM CTA: stages x (A tile + weight tile: [BN][BK + 8], or [BK][BN + 8] n contiguous), for MXFP4
 * the packed bytes a stage plus two decoded [BN][BK + 8] tiles.
 */
export function groupedTcSmemBytes(t: GroupedTcTile, format: GroupedTcFormat): number {
  const pitchBytes = (t.BK + 8) * 2;
  const aTile = t.BM * pitchBytes;
  if (format === 'k-contiguous') return t.stagesDense * (aTile + t.BN * pitchBytes);
  if (format === 'n-contiguous') return t.stagesDense * (aTile + t.BK * (t.BN + 8) * 2);
  return t.stagesMxfp4 * (aTile + t.BN * (t.BK / 2)) + 2 * t.BN * pitchBytes;
}

export function planGroupedTc(s: GroupedTcShape, force?: GroupedTcTile): GroupedTcPlan {
  const tile = force ?? chooseGroupedTcTile(s);
  const slots = Math.ceil(s.T / tile.BM) + s.E;
  const nTiles = Math.ceil(s.N / tile.BN);
  return {
    tile,
    stages: s.format === 'mxfp4' ? tile.stagesMxfp4 : tile.stagesDense,
    slots,
    nTiles,
    grid: slots * nTiles,
    threads: 32 * tile.WM * tile.WN,
    smemBytes: groupedTcSmemBytes(tile, s.format),
    routeSmemBytes: 3 * (s.E + 2) * 4,
  };
}

/** The GEMM kernel's #defines. */
export function groupedTcDefines(plan: GroupedTcPlan, dtype: GroupedTcDType, format: GroupedTcFormat, bias: boolean): Record<string, string | number> {
  return {
    ...mmaTileDefines(plan.tile, dtype),
    FK_STAGES: plan.stages,
    FK_MXFP4: format === 'mxfp4' ? 1 : 0,
    FK_NCONTIG: format === 'n-contiguous' ? 1 : 0,
    FK_BIAS: bias ? 1 : 0,
  };
}

/** The routing kernel's #defines: the routing's index type and form. */
export function groupedTcRouteDefines(index: 'i32' | 'i64', byIds: boolean): Record<string, string | number> {
  return { FK_IDX: index === 'i64' ? 'long long' : 'int', FK_ROUTE_IDS: byIds ? 1 : 0 };
}
