/**
 * fused_moe_gemm's Hopper prefill route (kernels/fused_moe_wgmma.cu, kernels/moe_tile_rows.cu; issue #31):
 * fk_moe_gather_rows copies A's token rows into A_sorted in moe_align's sorted order, then fk_fused_moe_wgmma multiplies
 * 128-row tiles of it by each tile's expert's weight with wgmma on TMA-fed shared memory and scatters the rows to the
 * output slots. Where moe_align's blocks are smaller than a tile (bs 16 / 32 / 64), fk_moe_tile_map first packs each
 * expert's blocks into one-expert tiles, and the gather and the GEMM follow its map. The launches are sized from shapes
 * (fused-moe-wgmma-plan.ts) and read the routing on the device, so they can be captured in a CUDA graph. Taken by
 * fused-moe.ts only when moe.fusedMoeWgmma is on (default off: not yet measured on a GPU), on sm_90a, bf16 / f16, block
 * size a multiple or a divisor of 128 and prefill-sized rows per expert; otherwise the mma.sync kernel runs.
 */
import { Tensor, type FusedMoeGemmAttrs, type OpCall } from '@fastkernels/core';
import { TENSOR_MAP_ARG, type ArgType } from '../../args.js';
import { CudaFatalError } from '../../errors.js';
import type { CudaKernel } from '../../kernel.js';
import { KERNEL_SOURCES } from '../../kernel-sources.generated.js';
import type { CudaRuntime } from '../../runtime.js';
import { cudaTuning } from '../../tuning/load.js';
import type { GenKernelCache } from '../gen-cache.js';
import type { MoeShape } from './fused-moe-plan.js';
import {
  GATHER_THREADS, WGMMA_BLOCK_M, WGMMA_GROUP_M, WGMMA_THREADS, fusedMoeWgmmaDecline, planFusedMoeWgmma, sortedTensorMapSpec, weightTensorMapSpec, wgmmaDefines,
  type WgmmaPlan, type WgmmaTile,
} from './fused-moe-wgmma-plan.js';

const FILE = 'fused_moe_wgmma.cu';
const GEMM_ENTRY = 'fk_fused_moe_wgmma';
const ROWS_FILE = 'moe_tile_rows.cu';
const GATHER_ENTRY = 'fk_moe_gather_rows';
const TILE_MAP_ENTRY = 'fk_moe_tile_map';
/** Threads of fk_moe_tile_map's one CTA. */
export const TILE_MAP_THREADS = 1024;

/** tm_a, tm_w, c, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded; N K E slots bs m_tiles n_tiles group_m mul. */
export const FUSED_MOE_WGMMA_SIGNATURE: readonly ArgType[] = [
  TENSOR_MAP_ARG, TENSOR_MAP_ARG, 'ptr', 'ptr', 'ptr', 'ptr', 'ptr',
  'i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32',
];
/** a_sorted, sorted_tiles, a, sorted_token_ids, tile_block, post; 16-byte pieces a row, A's row stride in pieces; top_k slots bs. */
export const MOE_GATHER_SIGNATURE: readonly ArgType[] = ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i32', 'i64', 'i32', 'i32', 'i32'];
/** tile_expert, tile_block, post_tiles, expert_ids, num_tokens_post_padded; bs m_tiles. */
export const MOE_TILE_MAP_SIGNATURE: readonly ArgType[] = ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i32', 'i32'];

/** The inputs fused-moe.ts hands over: A (rows aligned, possibly a copy), the weight, i32 routing, f32 routed weights. */
export interface WgmmaOperands {
  readonly out: Tensor;
  readonly a: Tensor;
  readonly b: Tensor;
  readonly topkWeights: Tensor | null;
  readonly sorted: Tensor;
  readonly experts: Tensor;
  readonly post: Tensor;
}

export class FusedMoeWgmma {
  private readonly kernels = new Map<string, CudaKernel>();
  /** The plan of the last launch (tests check it ran). */
  lastPlan: WgmmaPlan | undefined;
  /** A width every call takes instead of the planner's (tests run both; A/B runs). */
  forceTile: WgmmaTile | undefined;

  constructor(
    private readonly cache: GenKernelCache,
    private readonly runtime: () => CudaRuntime,
  ) {}

  /** Why this call stays on the mma.sync kernel, or null when the wgmma route takes it. */
  decline(call: OpCall<FusedMoeGemmAttrs>, s: MoeShape, aRowsAligned: boolean): string | null {
    const tuning = cudaTuning().moe;
    if (!tuning.fusedMoeWgmma) return 'moe.fusedMoeWgmma is off in the tuning'; // before touching the runtime
    const rt = this.runtime();
    const props = rt.properties();
    const b = call.inputs[1] as Tensor;
    return fusedMoeWgmmaDecline(
      s,
      {
        arch: props.arch,
        dtype: b.dtype,
        weightAddress: (b.storage.devicePtr ?? 0) + b.offset * b.itemsize,
        weightStrides: [b.strides[0]!, b.strides[1]!, b.strides[2]!],
        aRowsAligned,
        sharedPerBlockOptin: props.sharedPerBlockOptin,
        tensorMapsUnavailable: rt.tensorMapUnavailable(),
      },
      tuning,
      props.multiprocessors,
      this.forceTile,
    );
  }

  /**
   * The tile map (blocks below 128 rows), the gather and the GEMM into o.out; false (nothing launched) when the driver
   * refuses a tensor map, so the caller runs the mma.sync kernel instead. A_sorted and the tile map are temporaries
   * released after the launches (stream-ordered).
   */
  run(call: OpCall<FusedMoeGemmAttrs>, s: MoeShape, o: WgmmaOperands): boolean {
    const rt = this.runtime();
    const plan = planFusedMoeWgmma(s, rt.properties().multiprocessors, this.forceTile);
    this.lastPlan = plan;
    if (plan.grid === 0) return true;
    const dtype = o.a.dtype as 'bf16' | 'f16';
    const temps: Tensor[] = [];
    const temp = (shape: number[], dt: 'bf16' | 'f16' | 'i32') => {
      const t = Tensor.empty(call.backend, shape, dt, { device: o.a.device });
      temps.push(t);
      return t;
    };
    const aSorted = temp([plan.sortedRows, s.K], dtype);
    try {
      let maps: [Uint8Array, Uint8Array];
      try {
        const bAddr = o.b.storage.devicePtr! + o.b.offset * o.b.itemsize;
        maps = [
          rt.tensorMap(sortedTensorMapSpec(dtype, aSorted.storage.devicePtr!, s.K, plan.sortedRows)),
          rt.tensorMap(weightTensorMapSpec(dtype, s, bAddr, [o.b.strides[0]!, o.b.strides[1]!, o.b.strides[2]!], plan.tile.BN)),
        ];
      } catch (e) {
        if (e instanceof CudaFatalError) throw e; // the context is lost: no other route would run either
        return false;
      }
      const slots = s.M * s.topK;
      // the GEMM's routing: moe_align's where its blocks are whole tiles, else the tile map's (block size 128)
      let [sorted, experts, post, bs] = [o.sorted, o.experts, o.post, plan.blockSize];
      let tileBlock: Tensor | number = 0;
      let sortedTiles: Tensor | number = 0;
      if (plan.blocksPerTile > 0) {
        [experts, tileBlock, post] = [temp([plan.mTiles], 'i32'), temp([plan.mTiles * plan.blocksPerTile], 'i32'), temp([1], 'i32')];
        sorted = sortedTiles = temp([plan.sortedRows], 'i32');
        this.rowsKernel(TILE_MAP_ENTRY).launch(1, TILE_MAP_THREADS, 0, [experts, tileBlock, post, o.experts, o.post, plan.blockSize, plan.mTiles]);
        bs = WGMMA_BLOCK_M;
      }
      const pieces = s.K / 8; // 16-byte pieces of a 16-bit row
      const aStride = o.a.rank > 1 ? o.a.strides[0]! : s.K;
      this.rowsKernel(GATHER_ENTRY).launch(plan.sortedRows, GATHER_THREADS, 0, [
        aSorted, sortedTiles, o.a, o.sorted, tileBlock, post, pieces, aStride / 8, s.topK, slots, plan.blockSize,
      ]);
      this.gemmKernel(plan, dtype).launch(plan.grid, WGMMA_THREADS, plan.smemBytes, [
        maps[0], maps[1], o.out, o.topkWeights ?? 0, sorted, experts, post,
        s.N, s.K, s.E, slots, bs, plan.mTiles, plan.nTiles, WGMMA_GROUP_M, call.attrs.mul_routed_weight ? 1 : 0,
      ]);
      return true;
    } finally {
      for (const t of temps) t.dispose();
    }
  }

  private gemmKernel(plan: WgmmaPlan, dtype: 'bf16' | 'f16'): CudaKernel {
    const key = `${GEMM_ENTRY} ${plan.tile.BN} ${dtype}`;
    let k = this.kernels.get(key);
    if (!k) {
      const defines = wgmmaDefines(plan.tile, dtype);
      k = this.cache.kernel(`fused_moe_wgmma ${JSON.stringify(defines)}`, () => fusedMoeWgmmaSource(defines), 'fused_moe_wgmma');
      this.kernels.set(key, k);
    }
    return k;
  }

  /** moe_tile_rows.cu's kernels: no specialisation (16-byte pieces, int routing). */
  private rowsKernel(entry: string): CudaKernel {
    let k = this.kernels.get(entry);
    if (!k) {
      k = this.cache.kernel(`moe_tile_rows ${entry}`, () => moeTileRowsSource(entry), 'moe_tile_rows');
      this.kernels.set(entry, k);
    }
    return k;
  }
}

function embedded(file: string): string {
  const source = KERNEL_SOURCES[file];
  if (source === undefined) throw new Error(`kernel source ${file} is not embedded (run npm run embed-kernels -w @fastkernels/backend-cuda)`);
  return source;
}

/** The GEMM's file with its specialisation prepended as #defines. */
export function fusedMoeWgmmaSource(defines: Readonly<Record<string, string | number>>): { source: string; entry: string; signature: readonly ArgType[] } {
  const head = Object.entries(defines).map(([k, v]) => `#define ${k} ${v}`).join('\n');
  return { source: `${head}\n${embedded(FILE)}`, entry: GEMM_ENTRY, signature: FUSED_MOE_WGMMA_SIGNATURE };
}

/** One of moe_tile_rows.cu's two kernels (the gather, the tile map). */
export function moeTileRowsSource(entry: string): { source: string; entry: string; signature: readonly ArgType[] } {
  return { source: embedded(ROWS_FILE), entry, signature: entry === TILE_MAP_ENTRY ? MOE_TILE_MAP_SIGNATURE : MOE_GATHER_SIGNATURE };
}
