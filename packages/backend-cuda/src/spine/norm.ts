/**
 * RMSNorm on the CUDA backend (kernels/norm.cu): y = x * rsqrt(mean(x^2) + eps) * w over the last dim,
 * and the fused residual form returning [y, x + residual] (both new tensors: our Ops are out of place).
 * x and residual may be any layout: row-contiguous views are read in place, others are copied first.
 */
import { Tensor, formatShape, shapesEqual } from '@fastkernels/core';
import type { SpineContext } from './context.js';
import { asDType, contiguousOf, disposeAll, floatCType, itemsizeOf, ptr, roundUp, rowsOf, spineKernel, vecWidth } from './common.js';

const NPT = 4; // vectors per thread kept in registers (kernels/norm.cu FK_NPT)

/** Knobs of rms_norm (the defaults are the shipped, H200-verified choice). */
export const NORM_TUNING = {
  /** One warp per row, several rows per CTA (kernels/norm.cu fk_rms_norm_warp) where the row fits in registers. */
  warpPerRow: false,
  /** Warps (rows) per CTA of the warp-per-row kernel. */
  warpsPerCta: 4,
  /** Most 16-byte (or scalar) vectors per lane the warp-per-row kernel holds (32 = H 8192 bf16); longer rows use fk_rms_norm. */
  maxVecsPerLane: 32,
  /** Vectors of x and residual loaded per group on the fused path (registers: 2 x 4 per vector in flight). */
  fusedGroup: 4,
};

export interface WarpNormPlan {
  vecsPerLane: number;
  warpsPerCta: number;
  grid: number;
  /** __launch_bounds__ min blocks (FK_MINB): caps the registers so that many CTAs fit on an SM. */
  minBlocks: number;
  group: number;
}

/** Plan of fk_rms_norm_warp, or null when the row does not fit (pure; unit-tested without a GPU). */
export function planWarpNorm(rows: number, H: number, vec: number, tuning = NORM_TUNING): WarpNormPlan | null {
  const nv = H / vec;
  const vecsPerLane = Math.max(1, Math.ceil(nv / 32));
  if (vecsPerLane > tuning.maxVecsPerLane) return null;
  const wpc = tuning.warpsPerCta;
  const group = Math.max(1, Math.min(tuning.fusedGroup, vecsPerLane));
  // registers per 16-byte vector: 4; the row + one fused group of x and residual + ~48 for the rest
  const regs = Math.min(255, 4 * vecsPerLane + 8 * group + 48);
  const minBlocks = Math.max(1, Math.floor(65536 / (wpc * 32 * regs)));
  return { vecsPerLane, warpsPerCta: wpc, grid: Math.ceil(rows / wpc), minBlocks, group };
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
    const xr = rowsOf(x, temps);
    // the residual in x's dtype (the sum is rounded to x's dtype either way)
    const rr = residual ? rowsOf(residual.dtype === x.dtype ? residual : asDType(residual, x.dtype, temps), temps) : null;
    const w = contiguousOf(weight, temps);
    const y = Tensor.empty(x.backend, x.shape, x.dtype, { device: x.device });
    const r = residual ? Tensor.empty(x.backend, x.shape, x.dtype, { device: x.device }) : null;
    const rows = xr.rows;
    if (rows === 0 || H === 0) return [y, r];
    const it = itemsizeOf(x.dtype);
    const ptrs = [ptr(y), ptr(xr.t), ptr(w)];
    const counts = [H, xr.rowStride];
    if (rr && r) {
      ptrs.push(ptr(rr.t), ptr(r));
      counts.push(rr.rowStride);
    }
    let vec = vecWidth(it, counts, ptrs);
    // the weight vector (FK_VEC elements of its own type) must be aligned to its own size
    if (vec > 1 && ptr(w) % (vec * itemsizeOf(weight.dtype)) !== 0) vec = 1;
    if (NORM_TUNING.warpPerRow) {
      const plan = planWarpNorm(rows, H, vec);
      if (plan) {
        const kw = spineKernel(ctx, 'norm.cu', 'fk_rms_norm_warp', { FK_T: T, FK_W: W, FK_VEC: vec, FK_NVPL: plan.vecsPerLane, FK_WPC: plan.warpsPerCta, FK_MINB: plan.minBlocks, FK_GRP: plan.group });
        kw.launch(plan.grid, plan.warpsPerCta * 32, 0, [y, r ? ptr(r) : 0, xr.t, rr ? ptr(rr.t) : 0, w, rows, H, xr.rowStride, rr ? rr.rowStride : 0, eps]);
        return [y, r];
      }
    }
    const nv = H / vec;
    const threads = Math.min(512, Math.max(32, roundUp(Math.ceil(nv / NPT), 32)));
    const k = spineKernel(ctx, 'norm.cu', 'fk_rms_norm', { FK_T: T, FK_W: W, FK_VEC: vec });
    k.launch(rows, threads, 0, [y, r ? ptr(r) : 0, xr.t, rr ? ptr(rr.t) : 0, w, rows, H, xr.rowStride, rr ? rr.rowStride : 0, eps]);
    return [y, r];
  } finally {
    disposeAll(temps);
  }
}
