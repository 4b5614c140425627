/**
 * layer_norm and group_norm on the generated row-norm kernel (norm-source.ts). Both normalise contiguous rows:
 * layer_norm's rows are the trailing normalized_shape elements (read in place when the rows are one stride apart),
 * group_norm's are the (C / G) x spatial elements of one group of one sample of a contiguous NCHW tensor. The launch
 * keeps a row in registers: a warp a row up to 8 vectors a lane, else a block a row of about 4 vectors a thread.
 * layer_norm_modulate (adaLN) is layer_norm over the last dim with the modulation epilogue (modulation-rows.ts).
 */
import { Tensor, broadcastStridesTo } from '@fastkernels/core';
import type { CudaKernel } from '../kernel.js';
import type { CudaRuntime } from '../runtime.js';
import { DCODE, GEN_ITEMSIZE, genDType, type GenDType } from './ctypes.js';
import { addr } from './elementwise.js';
import type { GenKernelCache } from './gen-cache.js';
import { planReduce, rowVec } from './reduce-plan.js';
import { modulationRows, type ModulationRows } from './modulation-rows.js';
import { rowNormSource } from './norm-source.js';

/**
 * Most vectors a thread keeps in registers at a block size, without spills (ptxas -v on sm_90a, bf16 / f16 / f32, layer
 * and group forms: 1024 threads get 64 registers a thread, 6 vectors fit; 512 get 128, 14 fit); longer rows read the
 * rest again (norm-source.ts).
 */
export function maxVectorsPerThread(block: number): number {
  return block >= 1024 ? 6 : block >= 512 ? 14 : 16;
}

/** The adaLN epilogue's two row pointers cost a vector at 1024 threads (ptxas -v on sm_90a: f32 x 6 spilled 16 bytes). */
export function maxModulateVectorsPerThread(block: number): number {
  return block >= 1024 ? 5 : maxVectorsPerThread(block);
}

export interface NormLaunch {
  readonly tpr: number;
  readonly block: number;
  readonly npt: number;
  readonly grid: number;
}

/** Launch shape for rows of nv vectors (pure: CPU-tested). */
export function normLaunch(rows: number, nv: number, sms: number): NormLaunch {
  if (nv <= 32 * 8) {
    const npt = Math.max(1, Math.ceil(nv / 32));
    return { tpr: 32, block: 256, npt, grid: Math.max(1, Math.min(Math.ceil(rows / 8), sms * 64)) };
  }
  const tpr = Math.min(1024, Math.ceil(nv / 4 / 32) * 32);
  return { tpr, block: tpr, npt: Math.min(maxVectorsPerThread(tpr), Math.ceil(nv / tpr)), grid: Math.max(1, Math.min(rows, sms * 64)) };
}

/**
 * add_layer_norm's launch: layer_norm's, at most 512 threads a row and 10 vectors a thread at 512 (ptxas -v on sm_90a:
 * the residual's loads in flight beside x's spill at 1024 threads even at 3 vectors, and at 512 above 10); longer rows
 * read the rest again. BGE-M3's 1024-wide bf16 rows keep layer_norm's warp a row x 4 vectors.
 */
export function addNormLaunch(rows: number, nv: number, sms: number): NormLaunch {
  const l = normLaunch(rows, nv, sms);
  if (l.tpr < 512) return l;
  return { tpr: 512, block: 512, npt: Math.min(10, Math.ceil(nv / 512)), grid: l.grid };
}

export class GeneratedNorms {
  private readonly kernels = new Map<number, CudaKernel>();
  private readonly modKernels = new Map<string, CudaKernel>();

  constructor(
    private readonly cache: GenKernelCache,
    private readonly runtime: () => CudaRuntime,
  ) {}

  /**
   * y = layer_norm over the trailing `normDims` dims of x (weight / bias of that shape, or null); with a residual r (x's
   * shape and dtype: add_layer_norm), of x + r rounded to x's dtype, read in the same pass (fk_add_layer_norm).
   */
  layerNorm(x: Tensor, normDims: number, weight: Tensor | null, bias: Tensor | null, eps: number, outDType = x.dtype, residual: Tensor | null = null): Tensor {
    const y = Tensor.empty(x.backend, x.shape, outDType, { device: x.device });
    if (y.numel === 0) return y;
    const dims = Array.from({ length: normDims }, (_, i) => x.rank - normDims + i);
    const temps: Tensor[] = [];
    try {
      // each operand's rows read in place where they are one stride apart, else a contiguous copy
      const rowsOfOperand = (t: Tensor): [Tensor, number] => {
        const p = planReduce(t.shape, t.strides, dims);
        return p.kind === 'rows' ? [t, p.rowStride] : [keep(temps, t.contiguous()), L];
      };
      const L = dims.reduce((a, d) => a * x.shape[d]!, 1);
      const [src, rowStride] = rowsOfOperand(x);
      const rows = y.numel / L;
      const w = weight && denseOf(weight, temps);
      const b = bias && denseOf(bias.dtype === (weight?.dtype ?? bias.dtype) ? bias : keep(temps, bias.to(weight!.dtype)), temps);
      const r = residual && rowsOfOperand(residual);
      this.launch('layer', src, y, w, b, rows, L, rowStride, eps, 1, 1, 1, r);
    } finally {
      for (const t of temps) t.dispose();
    }
    return y;
  }

  /**
   * adaLN: y = layer_norm(x) over the last dim (no affine) * (offset + scale) + shift; scale / shift broadcast to x with
   * the last dim whole (layer_norm_modulate). One read of x; the modulation rows are read in place where one
   * (groupRows, stride) pair addresses them (a chunk view of the modulation vector is), else copied dense first.
   */
  layerNormModulate(x: Tensor, scale: Tensor, shift: Tensor, eps: number, offset: number, outDType = x.dtype): Tensor {
    const y = Tensor.empty(x.backend, x.shape, outDType, { device: x.device });
    if (y.numel === 0) return y;
    const p = planReduce(x.shape, x.strides, [x.rank - 1]);
    const temps: Tensor[] = [];
    try {
      const src = p.kind === 'rows' ? x : keep(temps, x.contiguous());
      const L = x.shape[x.rank - 1]!;
      const rowStride = p.kind === 'rows' ? p.rowStride : L;
      const sh = shift.dtype === scale.dtype ? shift : keep(temps, shift.to(scale.dtype)); // one modulation dtype in the kernel
      const [scT, scR] = rowsOf(scale, x.shape, temps);
      const [shT, shR] = rowsOf(sh, x.shape, temps);
      const inD = genDType(src.dtype, 'layer_norm_modulate');
      const outD = genDType(y.dtype, 'layer_norm_modulate');
      const mD = genDType(scT.dtype, 'layer_norm_modulate scale');
      const vec = Math.min(rowVec(GEN_ITEMSIZE[inD], L, rowStride, [addr(src)]), rowVec(GEN_ITEMSIZE[outD], L, L, [addr(y)]));
      const modVector = [[scT, scR], [shT, shR]].every(([t, m]) => addr(t as Tensor) % (vec * (t as Tensor).itemsize) === 0 && (m as ModulationRows).stride % vec === 0);
      const launch = normLaunch(y.numel / L, L / vec, this.runtime().properties().multiprocessors);
      const l = { ...launch, npt: Math.min(launch.npt, maxModulateVectorsPerThread(launch.block)) };
      const key = `norm-mod|${inD}|${outD}|${mD}|${vec}|${l.tpr}|${l.block}|${l.npt}|${modVector ? 1 : 0}`;
      let k = this.modKernels.get(key);
      if (!k) {
        const spec = { kind: 'layer' as const, inDType: inD, outDType: outD, wDType: null, hasWeight: false, hasBias: false, vec, tpr: l.tpr, block: l.block, npt: l.npt, modulate: { dtype: mD, vector: modVector } };
        k = this.cache.kernel(`norm|${JSON.stringify(spec)}`, () => rowNormSource(spec), 'layer-norm-modulate-generated');
        this.modKernels.set(key, k);
      }
      k.launch(l.grid, l.block, 0, [addr(y), addr(src), 0, 0, y.numel / L, L, rowStride, eps, 1, 1, 1, addr(scT), addr(shT), scR.groupRows, scR.stride, shR.groupRows, shR.stride, offset]);
    } finally {
      for (const t of temps) t.dispose();
    }
    return y;
  }

  /** y = group_norm of x [N, C, *] with `groups` groups over (C / groups) x spatial; weight / bias [C] or null. */
  groupNorm(x: Tensor, groups: number, weight: Tensor | null, bias: Tensor | null, eps: number, outDType = x.dtype): Tensor {
    const y = Tensor.empty(x.backend, x.shape, outDType, { device: x.device });
    if (y.numel === 0) return y;
    const N = x.shape[0]!;
    const C = x.shape[1]!;
    const hw = x.shape.slice(2).reduce((a, s) => a * s, 1);
    const cpg = C / groups;
    const temps: Tensor[] = [];
    try {
      const src = x.isContiguous() ? x : keep(temps, x.contiguous());
      const w = weight && denseOf(weight, temps);
      const b = bias && denseOf(bias.dtype === (weight?.dtype ?? bias.dtype) ? bias : keep(temps, bias.to(weight!.dtype)), temps);
      const L = cpg * hw;
      this.launch('group', src, y, w, b, N * groups, L, L, eps, groups, cpg, hw);
    } finally {
      for (const t of temps) t.dispose();
    }
    return y;
  }

  /** residual: [r, r's row stride] (add_layer_norm's r, x's dtype), or null. */
  private launch(kind: 'layer' | 'group', x: Tensor, y: Tensor, w: Tensor | null, b: Tensor | null, rows: number, L: number, rowStride: number, eps: number, G: number, cpg: number, hw: number, residual: [Tensor, number] | null = null): void {
    const inD = genDType(x.dtype, `${kind}_norm`);
    const outD = genDType(y.dtype, `${kind}_norm`);
    const wD: GenDType | null = w ? genDType(w.dtype, `${kind}_norm weight`) : b ? genDType(b.dtype, `${kind}_norm bias`) : null;
    let vec = Math.min(rowVec(GEN_ITEMSIZE[inD], L, rowStride, [addr(x)]), rowVec(GEN_ITEMSIZE[outD], L, L, [addr(y)]));
    if (residual) vec = Math.min(vec, rowVec(GEN_ITEMSIZE[inD], L, residual[1], [addr(residual[0])]));
    // a layer-norm weight is read as vectors when aligned; group norm reads one channel value a vector or element
    const wAligned = (v: number) => [w, b].every((t) => !t || addr(t) % (v * t.itemsize) === 0);
    const weightVector = kind === 'layer' && wD !== null && wAligned(vec);
    const channelPerVector = kind === 'group' && hw % vec === 0;
    const sms = this.runtime().properties().multiprocessors;
    const l = residual ? addNormLaunch(rows, L / vec, sms) : normLaunch(rows, L / vec, sms);
    // a numeric key (no string work per launch): every field below fits its bits
    const key =
      ((((((((kind === 'group' ? 1 : 0) * 16 + DCODE[inD]) * 16 + DCODE[outD]) * 16 + (wD ? DCODE[wD] : 0)) * 4 + (w ? 2 : 0) + (b ? 1 : 0)) * 32 + vec) * 64 + l.tpr / 32) * 64 + l.block / 32) * 32 * 4 +
      l.npt * 4 + (channelPerVector ? 2 : 0) + (weightVector ? 1 : 0) + (residual ? 2 ** 48 : 0);
    let k = this.kernels.get(key);
    if (!k) {
      const spec = { kind, inDType: inD, outDType: outD, wDType: wD, hasWeight: !!w, hasBias: !!b, vec, tpr: l.tpr, block: l.block, npt: l.npt, channelPerVector, weightVector, ...(residual ? { residual: true } : {}) };
      k = this.cache.kernel(`norm|${JSON.stringify(spec)}`, () => rowNormSource(spec), residual ? 'add-layer-norm-generated' : `${kind}-norm-generated`);
      this.kernels.set(key, k);
    }
    const args = [addr(y), addr(x), w ? addr(w) : 0, b ? addr(b) : 0, rows, L, rowStride, eps, G, cpg, hw];
    k.launch(l.grid, l.block, 0, residual ? [...args, addr(residual[0]), residual[1]] : args);
  }
}

/** A modulation operand and how the kernel reads its rows against x's shape (a dense copy where no one pair does). */
function rowsOf(t: Tensor, shape: readonly number[], temps: Tensor[]): [Tensor, ModulationRows] {
  const m = modulationRows(shape, broadcastStridesTo('layer_norm_modulate', t.shape, t.strides, shape));
  if (m) return [t, m];
  const dense = keep(temps, t.contiguous());
  const again = modulationRows(shape, broadcastStridesTo('layer_norm_modulate', dense.shape, dense.strides, shape));
  if (again) return [dense, again];
  // an outer broadcast dim (e.g. [1, S, L] against [B, S, L]): the operand expanded to x's shape
  const full = keep(temps, t.expand(...shape).contiguous());
  return [full, { groupRows: 1, stride: shape[shape.length - 1]! }];
}

function keep(temps: Tensor[], t: Tensor): Tensor {
  temps.push(t);
  return t;
}

/** t itself when contiguous, else a contiguous copy (kept for disposal). */
function denseOf(t: Tensor, temps: Tensor[]): Tensor {
  return t.isContiguous() ? t : keep(temps, t.contiguous());
}
