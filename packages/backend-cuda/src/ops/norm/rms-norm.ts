/**
 * RMSNorm on the CUDA backend (kernels/norm.cu): y = x * rsqrt(mean(x^2) + eps) * w over the last dim,
 * and the fused residual form returning [y, x + residual] (both new tensors: our Ops are out of place).
 * x and residual may be any layout: row-contiguous views are read in place (x's rows also in two levels: a per-head view
 * [T, heads, d] of a fused q / k / v projection, as Qwen3's and FLUX's q / k norms take it), others are copied first.
 */
import { Tensor, formatShape, shapesEqual } from '@fastkernels/core';
import { cudaTuning } from '../../tuning/load.js';
import type { NormTuning } from '../../tuning/schema.js';
import type { SpineContext } from '../launch/context.js';
import { asDType, contiguousOf, disposeAll, floatCType, itemsizeOf, ptr, roundUp, rowGroupsOf, rowsOf, spineKernel, vecWidth } from '../launch/common.js';

// Threads a row: the tuning's norm.vecsPerThread (FK_NPT, tuning/*.json) 16-byte vectors each, held in registers; 2 gives
// a bf16 row of 4096 256 threads, which beat 4 (fewer, busier threads) and 1 at large T (docs/experiments.md).

/** Threads per row of fk_rms_norm (a multiple of 32 in [32, 512]). */
export function normThreads(H: number, vec: number, tuning: NormTuning = cudaTuning().norm): number {
  return Math.min(512, Math.max(32, roundUp(Math.ceil(H / vec / tuning.vecsPerThread), 32)));
}

export function rmsNorm(ctx: SpineContext, x: Tensor, weight: Tensor, eps: number): Tensor {
  return run(ctx, 'rmsNorm', x, null, weight, eps)[0];
}

export function fusedAddRmsNorm(ctx: SpineContext, x: Tensor, residual: Tensor, weight: Tensor, eps: number): [Tensor, Tensor] {
  if (!shapesEqual(x.shape, residual.shape)) throw new RangeError(`fusedAddRmsNorm: residual ${formatShape(residual.shape)} does not match x ${formatShape(x.shape)}`);
  const [y, r] = run(ctx, 'fusedAddRmsNorm', x, residual, weight, eps);
  return [y, r!];
}

function run(ctx: SpineContext, op: string, x: Tensor, residual: Tensor | null, weight: Tensor, eps: number): [Tensor, Tensor | null] {
  const T = floatCType(x, op, 'x');
  if (x.rank < 1) throw new RangeError(`${op}: x needs rank >= 1, got ${formatShape(x.shape)}`);
  const H = x.shape[x.rank - 1]!;
  if (weight.rank !== 1 || weight.shape[0] !== H) throw new RangeError(`${op}: weight ${formatShape(weight.shape)} must be [${H}] (the last dim of x ${formatShape(x.shape)})`);
  const W = floatCType(weight, op, 'weight');
  const temps: Tensor[] = [];
  try {
    const xr = rowGroupsOf(x, temps);
    // the residual in x's dtype (the sum is rounded to x's dtype either way)
    const rr = residual ? rowsOf(residual.dtype === x.dtype ? residual : asDType(residual, x.dtype, temps), temps) : null;
    const w = contiguousOf(weight, temps);
    const y = Tensor.empty(x.backend, x.shape, x.dtype, { device: x.device });
    const r = residual ? Tensor.empty(x.backend, x.shape, x.dtype, { device: x.device }) : null;
    const rows = xr.rows;
    if (rows === 0 || H === 0) return [y, r];
    const it = itemsizeOf(x.dtype);
    const ptrs = [ptr(y), ptr(xr.t), ptr(w)];
    const counts = [H, xr.rowStride, xr.groupStride];
    if (rr && r) {
      ptrs.push(ptr(rr.t), ptr(r));
      counts.push(rr.rowStride);
    }
    let vec = vecWidth(it, counts, ptrs);
    // the weight vector (FK_VEC elements of its own type) must be aligned to its own size
    if (vec > 1 && ptr(w) % (vec * itemsizeOf(weight.dtype)) !== 0) vec = 1;
    const threads = normThreads(H, vec);
    // two-level addressing only where the rows need it (its registers cost plain rows occupancy: norm.cu)
    const grouped: Record<string, number> = xr.group < rows ? { FK_GROUPED: 1 } : {};
    const k = spineKernel(ctx, 'norm.cu', 'fk_rms_norm', { FK_T: T, FK_W: W, FK_VEC: vec, FK_NPT: cudaTuning().norm.vecsPerThread, ...grouped });
    k.launch(rows, threads, 0, [y, r ? ptr(r) : 0, xr.t, rr ? ptr(rr.t) : 0, w, rows, H, xr.rowStride, xr.group, xr.groupStride, rr ? rr.rowStride : 0, eps]);
    return [y, r];
  } finally {
    disposeAll(temps);
  }
}
