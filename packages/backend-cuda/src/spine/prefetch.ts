/**
 * The weight prefetch hint on the CUDA backend (Ops.prefetchWeight, kernels/prefetch.cu): between a bs-1 decode step's
 * qkv projection and its o_proj only small kernels run (rotary + KV write, decode attention, its combine), and DRAM
 * idles; fk_l2_prefetch asks o_proj's weight into L2 meanwhile, so the o_proj GEMV reads it from there. Only where that
 * linear takes a GEMV (M <= LINEAR_TUNING.gemvMaxRows): larger batches go through cuBLASLt, whose own pipeline does
 * not idle like that.
 */
import { Tensor, envChoice, envCount } from '@fastkernels/core';
import type { CudaRuntime } from '../runtime.js';
import type { SpineContext } from './context.js';
import { fileKernel, ptr } from './common.js';
import { LINEAR_TUNING } from './linear.js';

export type PrefetchMode = 'off' | 'chain' | 'fork';

/** Knobs of the weight prefetch (the defaults are the shipped choice). */
export const PREFETCH_TUNING = {
  /**
   * Where fk_l2_prefetch runs. off: never. chain: on the op stream right after the qkv projection, a PDL launch like
   * the spine kernels (rotary's wait then also covers the prefetch kernel, which ends once its prefetches are issued).
   * fork: on a side stream forked after the projection and joined before o_proj (a parallel branch in a captured
   * graph), so nothing on the op stream waits for it. Not yet measured on a GPU: off until the decode A/B bench says
   * which pays. FASTKERNELS_L2_PREFETCH=off|chain|fork.
   */
  mode: envChoice<PrefetchMode>('FASTKERNELS_L2_PREFETCH', ['off', 'chain', 'fork'], 'off'),
  /** At most this many MiB of the weight are prefetched (its first bytes; H200's L2 is 50 MiB). FASTKERNELS_L2_PREFETCH_MIB. */
  maxMiB: envCount('FASTKERNELS_L2_PREFETCH_MIB', 40, 1),
  /** Bytes per bulk prefetch instruction (FK_PF_CHUNK; a multiple of 16). */
  chunkBytes: 16384,
  /** Prefetch instructions in flight per block (threads of fk_l2_prefetch's blocks). */
  threads: 32,
};

/** The byte count fk_l2_prefetch is given for a weight of `bytes`: capped, and a multiple of 16 (the instruction's unit). */
export function prefetchBytes(bytes: number, tuning = PREFETCH_TUNING): number {
  const capped = Math.min(bytes, tuning.maxMiB * 2 ** 20);
  return capped - (capped % 16);
}

/** Blocks of fk_l2_prefetch for `bytes`: one chunk a thread, at most one block an SM. */
export function prefetchBlocks(bytes: number, multiprocessors: number, tuning = PREFETCH_TUNING): number {
  const chunks = Math.ceil(bytes / tuning.chunkBytes);
  return Math.max(1, Math.min(multiprocessors, Math.ceil(chunks / tuning.threads)));
}

/** The side stream of a runtime's forked prefetches (created on first use, kept for the runtime's life). */
const sideStreams = new WeakMap<CudaRuntime, number>();

export function prefetchWeight(ctx: SpineContext, weight: Tensor, rows: number): (() => void) | null {
  const mode = PREFETCH_TUNING.mode;
  if (mode === 'off' || !(rows >= 1 && rows <= Math.min(LINEAR_TUNING.gemvMaxRows, 8))) return null;
  const rt = ctx.runtime;
  if (rt.properties().major < 9 || !weight.isContiguous() || weight.storage.devicePtr === undefined || ptr(weight) % 16 !== 0) return null;
  const bytes = prefetchBytes(weight.numel * weight.itemsize);
  if (bytes === 0) return null;
  const defines = [`-DFK_PF_CHUNK=${PREFETCH_TUNING.chunkBytes}`];
  const blocks = prefetchBlocks(bytes, ctx.multiprocessors);
  const args = [ptr(weight), bytes];
  const k = fileKernel(ctx, 'prefetch.cu', 'fk_l2_prefetch', defines);
  if (mode === 'chain') {
    k.launch(blocks, PREFETCH_TUNING.threads, 0, args);
    return null;
  }
  // fork: the side stream waits for what the op stream has queued (the projection), runs the prefetch, and the op stream
  // waits for it at the join. The branch's kernel is an ordinary launch (flags 0: no PDL edge across streams; a PDL
  // build's wait then returns at once).
  const main = rt.stream;
  let side = sideStreams.get(rt);
  if (side === undefined) {
    side = rt.createStream();
    sideStreams.set(rt, side);
  }
  rt.streamWait(side, main);
  k.launch(blocks, PREFETCH_TUNING.threads, 0, args, side, 0);
  let joined = false;
  return () => {
    if (joined) return;
    joined = true;
    rt.streamWait(main, side);
  };
}
