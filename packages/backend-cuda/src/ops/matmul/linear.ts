/**
 * Linear on the CUDA backend: y = x W^T + b through cuBLASLt (ctx.ops.gemmInto with transB and the bias
 * epilogue; fp32 accumulation). x [..., K] is flattened to [M, K] (a strided 2-D x is read in place when cuBLAS
 * can address it; other layouts are copied), weight [N, K], bias [N] or null; the result is [..., N] in x's dtype.
 * A weight or bias of another dtype is converted to x's dtype first (one copy per call).
 * Small-batch calls (M <= linear.gemvMaxRows) may take kernels/gemv.cu instead: see the tuning's linear section (docs/tuning.md).
 */
import { Tensor, formatShape, shapesEqual, type DType } from '@fastkernels/core';
import { matrixLayout } from '../../blaslt.js';
import type { CudaKernel } from '../../kernel.js';
import { cudaTuning } from '../../tuning/load.js';
import type { LinearTuning } from '../../tuning/schema.js';
import type { SpineContext } from '../launch/context.js';
import { normThreads } from '../norm/rms-norm.js';
import { FLOAT_CTYPE, asDType, contiguousOf, disposeAll, floatCType, itemsizeOf, ptr, spineKernel } from '../launch/common.js';

/*
 * The knobs are the tuning's linear section (tuning/*.json, docs/tuning.md). Why the defaults: at M 1 (bs-1 decode) the
 * GEMV is the step's only matrix kernel, so every kernel boundary of the step can be a programmatic one (cuBLASLt's
 * kernels are ordinary launches); fk_gemv_stream keeps loads in flight across rows; gate_up + silu and the pre-norm
 * RMSNorm fused into it save launches a layer; a late trigger keeps the next kernel from crowding SMs still streaming
 * weights. Figures: docs/experiments.md.
 */

/**
 * FK_LATE_TRIGGER of a fk_gemv_stream build (FK_GLU or not) under linear.gemvLateTrigger: 0 lets the next kernel
 * in right after the PDL wait, 1 when the blocks exit.
 */
export function gemvTriggerMode(glu: boolean, tuning: LinearTuning = cudaTuning().linear): 0 | 1 {
  switch (tuning.gemvLateTrigger) {
    case 'all':
      return 1;
    case 'glu':
      return glu ? 1 : 0;
    default:
      return 0;
  }
}

/** What chooseLinearPath needs to know about one call. */
export interface LinearShape {
  /** Rows of x (the product of its leading dims). */
  M: number;
  N: number;
  K: number;
  /** x's dtype (the weight and bias are converted to it). */
  dtype: DType;
  /** x, the weight and x's row stride are 16-byte aligned, x's rows have unit stride and the weight is contiguous. */
  aligned: boolean;
}

export type LinearPath = 'cublaslt' | 'gemv' | 'gemv-stream';

/**
 * cuBLASLt, or a GEMV: only when switched on for this M, the dtype has a kernel, and K splits into 16-byte vectors;
 * fk_gemv_stream when linear.gemvStream and K also splits into chunks of 32 vectors (one per lane).
 */
export function chooseLinearPath(s: LinearShape, tuning: LinearTuning = cudaTuning().linear): LinearPath {
  const maxRows = Math.min(tuning.gemvMaxRows, 8);
  if (!(s.M >= 1 && s.M <= maxRows)) return 'cublaslt';
  if (!FLOAT_CTYPE[s.dtype] || s.K < 1) return 'cublaslt';
  const vec = 16 / itemsizeOf(s.dtype);
  if (s.K % vec !== 0 || !s.aligned) return 'cublaslt';
  return tuning.gemvStream && s.K % (32 * vec) === 0 ? 'gemv-stream' : 'gemv';
}

/**
 * fk_gemv_stream's grid: one wave of at most multiprocessors * warpsPerSm warps, as few as still give each warp at
 * most ceil(N / max) rows (the kernel deals rows w, w + W, ... to warp w: shares differ by one row at most), in blocks
 * of warpsPerBlock.
 */
export function gemvStreamGrid(N: number, multiprocessors: number, warpsPerSm: number, warpsPerBlock: number): number {
  const most = Math.max(1, multiprocessors * warpsPerSm);
  const rows = Math.ceil(N / most);
  return Math.ceil(Math.ceil(N / rows) / warpsPerBlock);
}

/**
 * The most rows one SM streams when fk_gemv_stream runs `blocks` blocks of `warpsPerBlock` warps over N rows (warp w:
 * rows w, w + W, ...), the blocks of one wave placed round-robin on the SMs (block b on SM b mod multiprocessors, as the
 * block scheduler fills an idle GPU). The products are bound by DRAM and by what each SM can pull: the SM with the most
 * rows sets the time.
 */
export function gemvSmLoad(N: number, blocks: number, multiprocessors: number, warpsPerBlock: number): number {
  const W = blocks * warpsPerBlock;
  const load = new Array<number>(Math.min(multiprocessors, blocks)).fill(0);
  for (let b = 0; b < blocks; b++) {
    let rows = 0;
    for (let i = 0; i < warpsPerBlock; i++) {
      const w = b * warpsPerBlock + i;
      if (w < N) rows += Math.floor((N - 1 - w) / W) + 1;
    }
    load[b % multiprocessors] += rows;
  }
  return Math.max(...load);
}

/**
 * fk_gemv_stream's grid chosen for balance across SMs rather than warps: of the one-wave block counts from
 * gemvStreamGrid's up to a full wave (no more warps than rows), the one whose busiest SM streams the fewest rows
 * (gemvSmLoad; ties: fewer blocks). gemvStreamGrid can leave a third of the SMs a block short: FK_GLU's 14336 gate | up
 * pairs at 32 warps per SM get 448 blocks (4 pairs a warp), so 52 SMs stream 128 pairs against 109 on average; here
 * 510 blocks, 3-4 pairs a warp, at most 112 pairs an SM. Memoised per shape (it runs on every launch).
 */
export function gemvStreamGridBalanced(N: number, multiprocessors: number, warpsPerSm: number, warpsPerBlock: number): number {
  const key = `${N}|${multiprocessors}|${warpsPerSm}|${warpsPerBlock}`;
  let best = balancedGrids.get(key);
  if (best === undefined) {
    const first = gemvStreamGrid(N, multiprocessors, warpsPerSm, warpsPerBlock);
    const last = Math.max(first, Math.min(Math.floor((multiprocessors * warpsPerSm) / warpsPerBlock), Math.ceil(N / warpsPerBlock)));
    best = first;
    let bestLoad = gemvSmLoad(N, first, multiprocessors, warpsPerBlock);
    for (let blocks = first + 1; blocks <= last; blocks++) {
      const load = gemvSmLoad(N, blocks, multiprocessors, warpsPerBlock);
      if (load < bestLoad) [best, bestLoad] = [blocks, load];
    }
    balancedGrids.set(key, best);
  }
  return best;
}
const balancedGrids = new Map<string, number>();

export function linear(ctx: SpineContext, x: Tensor, weight: Tensor, bias: Tensor | null): Tensor {
  const op = 'linear';
  floatCType(x, op, 'x');
  if (weight.rank !== 2) throw new RangeError(`${op}: weight ${formatShape(weight.shape)} must be [N, K]`);
  const [N, K] = weight.shape as [number, number];
  if (x.rank < 1 || x.shape[x.rank - 1] !== K) throw new RangeError(`${op}: x ${formatShape(x.shape)} has last dim != K = ${K} of weight ${formatShape(weight.shape)}`);
  if (bias && (bias.rank !== 1 || bias.shape[0] !== N)) throw new RangeError(`${op}: bias ${formatShape(bias.shape)} must be [${N}]`);
  const lead = x.shape.slice(0, -1);
  const M = lead.reduce((a, b) => a * b, 1);
  const out = Tensor.empty(x.backend, [...lead, N], x.dtype, { device: x.device });
  if (out.numel === 0) return out;
  const temps: Tensor[] = [];
  try {
    const b = bias ? asDType(bias, x.dtype, temps) : null;
    if (K === 0) {
      // no products: y = bias (or 0)
      if (b) ctx.ops.copy(out, b.expand([...lead, N]));
      else ctx.ops.fill(out, 0);
      return out;
    }
    let w = weight.dtype === x.dtype ? weight : asDType(weight, x.dtype, temps);
    if (!addressable(w)) w = contiguousOf(w, temps);
    const a = asMatrix(x, M, K, temps);
    if (M <= cudaTuning().linear.gemvMaxRows) {
      const path = chooseLinearPath({ M, N, K, dtype: x.dtype, aligned: gemvAligned(a, w, M) });
      if (path !== 'cublaslt') {
        // A programmatic dependent launch when PDL launches are on (in graph captures): gemv.cu reads its first weight
        // vectors before it waits for the kernel before it, which is only right when that kernel did not write them; a
        // weight converted or copied just above was, so that launch is an ordinary one (its wait then returns at once).
        launchGemv(ctx, op, path, out, a, w, b, N, w === weight);
        return out;
      }
    }
    const o2 = out.view([M, N]);
    temps.push(o2);
    ctx.ops.gemmInto(o2, a, w, { transB: true, bias: b });
    return out;
  } catch (e) {
    out.dispose(); // a failed launch (compile, cuBLASLt) leaves nothing allocated behind
    throw e;
  } finally {
    disposeAll(temps);
  }
}

/**
 * The gate_up projection of a gated MLP and its activation in one launch (CudaOps.linearSiluAndMul): y [..., d] =
 * silu(x W[:d]^T + b[:d]) * (x W[d:]^T + b[d:]) for weight [2d, K], with the bits of linear then siluAndMul
 * (fk_gemv_stream with FK_GLU: each sum rounded to x's dtype, then fk_act_and_mul's arithmetic). Only where linear itself
 * would take fk_gemv_stream, with the weight and bias already in x's dtype and linear.gemvFuseGlu on; null
 * otherwise (the caller then runs linear and siluAndMul).
 */
export function linearSiluAndMul(ctx: SpineContext, x: Tensor, weight: Tensor, bias: Tensor | null): Tensor | null {
  if (!cudaTuning().linear.gemvFuseGlu || weight.rank !== 2 || x.rank < 1) return null;
  const [N, K] = weight.shape as [number, number];
  if (N % 2 !== 0 || K === 0 || x.shape[x.rank - 1] !== K || weight.dtype !== x.dtype || !weight.isContiguous()) return null;
  if (bias && (bias.dtype !== x.dtype || bias.rank !== 1 || bias.shape[0] !== N || !bias.isContiguous())) return null;
  floatCType(x, 'linearSiluAndMul', 'x');
  const lead = x.shape.slice(0, -1);
  const M = lead.reduce((p, q) => p * q, 1);
  if (!(M >= 1 && M <= cudaTuning().linear.gemvMaxRows)) return null;
  const temps: Tensor[] = [];
  try {
    const a = asMatrix(x, M, K, temps);
    if (chooseLinearPath({ M, N, K, dtype: x.dtype, aligned: gemvAligned(a, weight, M) }) !== 'gemv-stream') return null;
    const out = Tensor.empty(x.backend, [...lead, N / 2], x.dtype, { device: x.device });
    try {
      launchGemv(ctx, 'linearSiluAndMul', 'gemv-stream', out, a, weight, bias, N, true, { FK_GLU: 1, FK_ACT: 0 });
    } catch (e) {
      out.dispose();
      throw e;
    }
    return out;
  } finally {
    disposeAll(temps);
  }
}

/**
 * A pre-norm projection in one launch (CudaOps.rmsNormLinear): fk_gemv_stream with FK_NORM normalises x (plus the
 * residual) in its prologue, then projects it (FK_GLU with act 'silu'). [y, x + residual] with the bits of rms_norm (or
 * fused_add_rms_norm) then linear (then siluAndMul). Only for one row of x (bs-1 decode) where fk_gemv_stream would take
 * the projection, with every operand in x's dtype, contiguous and 16-byte aligned, when rms_norm's block for this row is
 * fk_gemv_stream's (normThreads(K) = gemvWarps x 32: the same order of the sum of squares, so the same bits), and
 * linear.gemvFuseNorm is on (and gemvFuseGlu for act 'silu'); null otherwise (the caller then runs the ops).
 */
export function rmsNormLinear(
  ctx: SpineContext, x: Tensor, residual: Tensor | null, normWeight: Tensor, eps: number, weight: Tensor, bias: Tensor | null, act: 'silu' | null,
): [Tensor, Tensor | null] | null {
  const tune = cudaTuning().linear;
  if (!tune.gemvFuseNorm || tune.gemvMaxRows < 1 || weight.rank !== 2 || x.rank < 1) return null;
  const [N, K] = weight.shape as [number, number];
  const dt = x.dtype;
  const lead = x.shape.slice(0, -1);
  if (lead.reduce((p, q) => p * q, 1) !== 1 || K === 0 || x.shape[x.rank - 1] !== K) return null;
  if (act === 'silu' && (N % 2 !== 0 || !tune.gemvFuseGlu)) return null; // the GLU epilogue is gemvFuseGlu's to switch
  const same = (t: Tensor | null, shape: readonly number[]) => !t || (t.dtype === dt && t.isContiguous() && shapesEqual(t.shape, shape) && ptr(t) % 16 === 0);
  if (!same(x, x.shape) || !same(weight, [N, K]) || !same(normWeight, [K]) || !same(residual, x.shape)) return null;
  if (bias && !(bias.dtype === dt && bias.rank === 1 && bias.shape[0] === N && bias.isContiguous())) return null;
  floatCType(x, 'rmsNormLinear', 'x');
  const vec = 16 / itemsizeOf(dt);
  if (normThreads(K, vec) !== tune.gemvWarps * 32) return null;
  const temps: Tensor[] = [];
  try {
    const a = asMatrix(x, 1, K, temps);
    if (chooseLinearPath({ M: 1, N, K, dtype: dt, aligned: gemvAligned(a, weight, 1) }) !== 'gemv-stream') return null;
    const out = Tensor.empty(x.backend, [...lead, act ? N / 2 : N], dt, { device: x.device });
    const resOut = residual ? Tensor.empty(x.backend, x.shape, dt, { device: x.device }) : null;
    try {
      launchGemv(ctx, 'rmsNormLinear', 'gemv-stream', out, a, weight, bias, N, true, act ? { FK_GLU: 1, FK_ACT: 0 } : {}, {
        residual, residualOut: resOut, weight: normWeight, eps,
      });
    } catch (e) {
      out.dispose();
      resOut?.dispose();
      throw e;
    }
    return [out, resOut];
  } finally {
    disposeAll(temps);
  }
}

/** x [..., K] as [M, K] rows the GEMV and cuBLASLt can address: x itself, a view, or a contiguous copy (in temps). */
function asMatrix(x: Tensor, M: number, K: number, temps: Tensor[]): Tensor {
  if (x.rank === 2 && addressable(x)) return x;
  const c = x.isContiguous() ? x : contiguousOf(x, temps);
  const a = c.view([M, K]);
  temps.push(a);
  return a;
}

/**
 * The GEMV reads x and w in 16-byte vectors (y and the bias one element at a time); x's row stride only matters from the
 * second row on.
 */
function gemvAligned(a: Tensor, w: Tensor, M: number): boolean {
  const it = itemsizeOf(a.dtype);
  return a.strides[1] === 1 && w.isContiguous() && ptr(a) % 16 === 0 && ptr(w) % 16 === 0 && (M === 1 || (a.strides[0]! * it) % 16 === 0);
}

/**
 * One GEMV launch for `op`: y = a w^T (+ b) through fk_gemv or fk_gemv_stream (extra defines: FK_GLU, which only
 * fk_gemv_stream has). `pdlSafe`: w was not written by the kernel just before (else an ordinary launch: see linear).
 */
function launchGemv(ctx: SpineContext, op: string, path: 'gemv' | 'gemv-stream', out: Tensor, a: Tensor, w: Tensor, b: Tensor | null, N: number,
                    pdlSafe: boolean, extra: Readonly<Record<string, number>> = {}, norm?: GemvNorm): void {
  if ((extra.FK_GLU || norm) && path !== 'gemv-stream') throw new Error(`${op}: FK_GLU and FK_NORM need fk_gemv_stream (fk_gemv would compute plain rows)`);
  const [M, K] = a.shape as [number, number];
  const tune = cudaTuning().linear;
  const warps = tune.gemvWarps;
  const entry = path === 'gemv-stream' ? 'fk_gemv_stream' : 'fk_gemv';
  // FK_LATE_TRIGGER only where on (every stream build by default): 'off' builds keep run 14's defines and cache keys
  const mode = path === 'gemv-stream' ? gemvTriggerMode(!!extra.FK_GLU) : 0;
  const late: Readonly<Record<string, number>> = mode ? { FK_LATE_TRIGGER: mode } : {};
  const warpsPerSm = tune.gemvStreamWarpsPerSm;
  // FK_NORM: the prologue's registers must not cost resident warps (FK_MINB: the blocks an SM must hold)
  const normPf = !!norm && tune.gemvNormPrefetch;
  const normDefines: Record<string, number> = norm
    ? { FK_NORM: norm.residual ? 2 : 1, FK_MINB: Math.max(1, Math.floor(warpsPerSm / warps)), ...(normPf ? { FK_NORM_PF: 1 } : {}) }
    : {};
  const defines = {
    FK_T: floatCType(a, op, 'x'), FK_VEC: 16 / itemsizeOf(a.dtype), FK_M: M, FK_UNR: path === 'gemv-stream' ? tune.gemvUnroll : tune.gemvPlainUnroll,
    FK_WARPS: warps, FK_BIAS: b ? 1 : 0, ...extra, ...late, ...normDefines,
  };
  const k = spineKernel(ctx, 'gemv.cu', entry, defines);
  const rows = extra.FK_GLU ? N / 2 : N; // the warps' rows: FK_GLU's logical rows are gate | up pairs
  const normShared = norm ? (normPf ? 2 : 1) * K * itemsizeOf(a.dtype) : 0; // FK_NORM: the normalised x (and FK_NORM_PF: the weight)
  // the grid whose busiest SM streams the fewest rows (gemvStreamGridBalanced: never more than gemvStreamGrid's fewest-
  // warps grid, which left a third of the SMs a block short for FK_GLU's pairs; plain rows measured the same either way)
  const blocks =
    path === 'gemv-stream'
      ? gemvStreamGridBalanced(rows, ctx.multiprocessors, Math.min(warpsPerSm, residentWarpsPerSm(k, defines, normShared)), warps)
      : Math.ceil(N / warps);
  const args = [out, a, w, b ? ptr(b) : 0, M, N, K, M === 1 ? K : a.strides[0]!];
  // fk_gemv_stream's FK_NORM parameters (read only by those builds)
  if (path === 'gemv-stream') args.push(norm?.residual ? ptr(norm.residual) : 0, norm?.residualOut ? ptr(norm.residualOut) : 0, norm ? ptr(norm.weight) : 0, norm?.eps ?? 0);
  k.launch(blocks, warps * 32, normShared, args, undefined, pdlSafe ? undefined : 0);
}

/** FK_NORM's inputs: x is normalised with `weight` (and `residual` added first; the sum stored to `residualOut`). */
interface GemvNorm {
  readonly residual: Tensor | null;
  readonly residualOut: Tensor | null;
  readonly weight: Tensor;
  readonly eps: number;
}

/**
 * Warps of fk_gemv_stream `k` (built from `d`) an SM holds at once (registers decide: f32 at M 6-8 takes 78-80, so 3
 * blocks of 8 warps). Keyed by the defines, not the kernel: the eager run (the engine's warm-up) asks with the plain
 * build, and the PDL build launched in the capture that follows reuses the answer, so nothing is queried mid-capture.
 */
const residentWarps = new Map<string, number>();
function residentWarpsPerSm(k: CudaKernel, d: Readonly<Record<string, string | number>> & { FK_WARPS: number }, sharedBytes = 0): number {
  const key = `${Object.entries(d).join(';')};shared=${sharedBytes}`; // every define: any of them may change the registers (FK_ACT's gelu does)
  let n = residentWarps.get(key);
  if (n === undefined) {
    n = Math.max(1, k.occupancy(d.FK_WARPS * 32, sharedBytes).activeBlocksPerSM) * d.FK_WARPS;
    residentWarps.set(key, n);
  }
  return n;
}

function addressable(t: Tensor): boolean {
  return matrixLayout(t.shape[0]!, t.shape[1]!, t.strides[0]!, t.strides[1]!) !== undefined;
}
