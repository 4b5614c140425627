/**
 * Softmax and log_softmax on the CUDA backend (kernels/softmax.cu): fp32 accumulation, result in the requested float
 * dtype (f32 / f16 / bf16, the input's by default). The reduced dim is made last and contiguous (row-contiguous views
 * are read in place; other layouts and dims are copied first, and the result copied back into x's shape), then one
 * block per row with an online max/sum; rows of more than 2048 vectors (e.g. vocab logits) go to a cluster of CTAs per
 * row (8 by default) that merge their (max, sum) through distributed shared memory (the row read once, written once)
 * while there are fewer rows than SMs; longer rows than one block keeps in registers (softmax.oneReadMinRowBytes) go
 * to the one-read kernel, whose cluster CTAs keep their slices in shared memory. softmaxPlan has the launch choices.
 */
import { Tensor, normalizeDim, type DType } from '@fastkernels/core';
import { cudaTuning } from '../../tuning/load.js';
import type { SoftmaxTuning } from '../../tuning/schema.js';
import type { SpineContext } from '../launch/context.js';
import { disposeAll, floatCType, itemsizeOf, ptr, roundUp, rowsOf, spineKernel, vecWidth } from '../launch/common.js';

/**
 * Vectors a thread folds per block width: threads = ceil(vectors / FOLD_NPT) rounded up to a warp, at most 1024.
 * Which vectors a thread folds (so the result bits) follows from the threads alone; keep it.
 */
const FOLD_NPT = 4;
/** Rows of more than this many vectors may take the cluster path (the tuning's softmax.clusterMaxRows). */
const CLUSTER_MIN_VECTORS = 2048;

// The knobs are the tuning's softmax section (tuning/*.json, docs/tuning.md); none changes the result bits but the
// cluster path's (clusterMaxRows, clusterSize: it folds other vectors per thread, within the float64 reference's
// tolerance). The kernels keep their vectors raw and convert again at the write, so 8 a thread fit in 40 registers.

export interface SoftmaxPlan {
  entry: 'fk_softmax' | 'fk_softmax_cluster' | 'fk_softmax_smem';
  /** CTAs (rows, or rows * cluster). */
  grid: number;
  /** FK_CS: CTAs a row on the cluster paths (0 on one block a row). */
  cluster: number;
  threads: number;
  /** FK_NPT: vectors a thread keeps in registers (the rest is read again for the write; unused by fk_softmax_smem). */
  npt: number;
  /** Dynamic shared memory a CTA: fk_softmax_smem's slice and merge scratch, 0 otherwise. */
  smem: number;
}

/** What the one-read kernel's plan needs of the launch and the device; without it (or below sm_90) it is not chosen. */
export interface OneReadDevice {
  /** Bytes of one vector (FK_VEC elements of the input). */
  readonly vecBytes: number;
  /** The device's shared memory a block may opt in to (cuDeviceGetAttribute MAX_SHARED_MEMORY_PER_BLOCK_OPTIN). */
  readonly sharedPerBlock: number;
  /** Compute capability major (clusters need 9). */
  readonly major: number;
}

const threadsFor = (vectors: number) => Math.min(1024, Math.max(32, roundUp(Math.ceil(vectors / FOLD_NPT), 32)));
/** Vectors a thread of fk_softmax_smem copies and folds (its threads: the slice / this, a warp to 1024). */
const ONE_READ_VECTORS_PER_THREAD = 8;
const MAX_GRID = 2 ** 31 - 1;

/**
 * fk_softmax_smem's launch for rows of nv vectors, or null where it does not apply: off, rows no longer than
 * oneReadMinRowBytes, not sm_90, or a slice that 8 CTAs' shared memory cannot hold (the two-read kernels take those).
 * The cluster is the fewest CTAs (2, 4, 8) whose slices are at most oneReadSliceBytes, else 8.
 */
export function oneReadPlan(rows: number, nv: number, tuning: SoftmaxTuning, dev: OneReadDevice): SoftmaxPlan | null {
  const rowBytes = nv * dev.vecBytes;
  if (tuning.oneReadMinRowBytes <= 0 || rowBytes <= tuning.oneReadMinRowBytes || dev.major < 9) return null;
  const sliceOf = (cs: number) => Math.ceil(nv / cs) * dev.vecBytes;
  const cluster = [2, 4, 8].find((cs) => sliceOf(cs) <= tuning.oneReadSliceBytes) ?? 8;
  const per = Math.ceil(nv / cluster);
  const threads = Math.min(1024, Math.max(32, roundUp(Math.ceil(per / ONE_READ_VECTORS_PER_THREAD), 32)));
  // the kernel's layout: the slice (rounded up to 16 bytes), then a (max, sum) a warp and the CTA's pair (floats)
  const smem = roundUp(sliceOf(cluster), 16) + (2 * (threads / 32) + 2) * 4;
  if (smem > dev.sharedPerBlock || rows * cluster > MAX_GRID) return null;
  return { entry: 'fk_softmax_smem', grid: rows * cluster, cluster, threads, npt: FOLD_NPT, smem };
}

/**
 * Launch plan for `rows` rows of `nv` vectors of `itemsize`-byte elements on `sms` SMs (pure: CPU-tested). `oneRead`
 * (the device, for fk_softmax_smem) left out: the two-read kernels only, as before that kernel.
 */
export function softmaxPlan(rows: number, nv: number, itemsize: number, sms: number, tuning: SoftmaxTuning = cudaTuning().softmax, oneRead?: OneReadDevice): SoftmaxPlan {
  const clusterRows = tuning.clusterMaxRows > 0 ? rows <= tuning.clusterMaxRows : rows < sms;
  const cluster = tuning.clusterSize;
  const long = oneRead ? oneReadPlan(rows, nv, tuning, oneRead) : null;
  // the register cluster keeps 1024 threads x FOLD_NPT vectors a CTA: a longer slice is read twice, so the one-read kernel
  const registersHold = Math.ceil(nv / cluster) <= 1024 * FOLD_NPT;
  if (nv > CLUSTER_MIN_VECTORS && clusterRows && rows * cluster <= MAX_GRID && (registersHold || !long)) {
    // long rows (vocab logits): a cluster of `cluster` CTAs per row, each holding a slice in registers
    return { entry: 'fk_softmax_cluster', grid: rows * cluster, cluster, threads: threadsFor(Math.ceil(nv / cluster)), npt: FOLD_NPT, smem: 0 };
  }
  if (long) return long;
  const threads = threadsFor(nv);
  // f32 keeps 4: its 4-vector build takes 32 registers (2 blocks of 1024 an SM), 8 would cost one of them
  const npt = itemsize < 4 && nv > FOLD_NPT * threads ? tuning.longRowVectors : FOLD_NPT;
  return { entry: 'fk_softmax', grid: rows, cluster: 0, threads, npt, smem: 0 };
}

/** log_softmax instead of softmax, and the output dtype (f32 / f16 / bf16; x's when left out). */
export interface SoftmaxOptions {
  readonly log?: boolean;
  readonly outDType?: DType;
}

export function softmax(ctx: SpineContext, x: Tensor, dim: number, opts: SoftmaxOptions = {}): Tensor {
  const op = opts.log ? 'log_softmax' : 'softmax';
  lastSoftmaxLaunch = null;
  const T = floatCType(x, op, 'x');
  const outDType = opts.outDType ?? x.dtype;
  if (x.rank === 0) throw new RangeError(`${op}: x needs rank >= 1`);
  const d = normalizeDim(dim, x.rank);
  const last = x.rank - 1;
  const k = { T, log: opts.log === true };
  if (d === last) {
    const out = Tensor.empty(x.backend, x.shape, outDType, { device: x.device });
    if (out.numel === 0) return out;
    lastDim(ctx, k, out, x);
    return out;
  }
  // Move the dim last, run on a contiguous copy, then write back in x's layout.
  const moved = x.transpose(d, last);
  const temps: Tensor[] = [moved];
  try {
    const tmp = Tensor.empty(x.backend, moved.shape, outDType, { device: x.device });
    temps.push(tmp);
    const out = Tensor.empty(x.backend, x.shape, outDType, { device: x.device });
    if (out.numel === 0) return out;
    lastDim(ctx, k, tmp, moved);
    const back = tmp.transpose(d, last);
    temps.push(back);
    ctx.ops.copy(out, back);
    return out;
  } finally {
    disposeAll(temps);
  }
}

/** The launch of the last softmax call (its kernel and plan): what the ops bench records as the route. */
export let lastSoftmaxLaunch: { readonly kernel: string; readonly plan: SoftmaxPlan } | null = null;

/** out (contiguous, x's shape, a float dtype) = softmax (log: log_softmax) of x over its last dim. */
function lastDim(ctx: SpineContext, k: { T: string; log: boolean }, out: Tensor, x: Tensor): void {
  const temps: Tensor[] = [];
  try {
    const OT = floatCType(out, k.log ? 'log_softmax' : 'softmax', 'out');
    const xr = rowsOf(x, temps);
    const D = xr.last;
    const inSize = itemsizeOf(x.dtype);
    let vec = vecWidth(inSize, [D, xr.rowStride], [ptr(xr.t)]);
    // the output vector is FK_VEC elements of its own dtype (32 bytes for 8 floats): its alignment too
    if (vec > 1 && ptr(out) % (vec * itemsizeOf(out.dtype)) !== 0) vec = 1;
    const props = ctx.runtime.properties();
    const p = softmaxPlan(xr.rows, D / vec, inSize, ctx.multiprocessors, cudaTuning().softmax, { vecBytes: vec * inSize, sharedPerBlock: props.sharedPerBlockOptin, major: props.major });
    const defines = {
      FK_T: k.T,
      FK_VEC: vec,
      FK_NPT: p.npt,
      ...(p.cluster ? { FK_CS: p.cluster } : {}),
      // only where they differ from the defaults, so softmax in the input dtype keeps its kernels (and their cache keys)
      ...(OT !== k.T ? { FK_OT: OT } : {}),
      ...(k.log ? { FK_LOG: 1 } : {}),
    };
    spineKernel(ctx, 'softmax.cu', p.entry, defines).launch(p.grid, p.threads, p.smem, [out, xr.t, xr.rows, D, xr.rowStride]);
    lastSoftmaxLaunch = { kernel: p.entry, plan: p };
  } finally {
    disposeAll(temps);
  }
}
