/**
 * Helpers shared by the memory-bound spine ops (norm, activation, rotary, embedding, softmax, kvcache, sampler):
 * dtype checks, the C++ type of a dtype, row layouts (fast paths for row-contiguous views, a contiguous copy
 * otherwise), the vector width a launch may use, kernel lookup and the optional device-side index check.
 *
 * Index checks: embedding ids, rotary positions and KV slots are validated on the device. An out-of-range
 * index never reads or writes outside the tensors (the kernel writes a zero row, or skips the slot) and sets
 * a flag. The flag is read back (a host sync) only when checks are on: `FASTKERNELS_CHECK_INDICES=1` in the
 * environment or `setIndexChecks(true)`; then the op throws a RangeError like the CPU backend. Off by default,
 * so the ops never synchronise and stay capturable in CUDA graphs.
 */
import { DTYPE_INFO, Tensor, formatShape, setting, type DType } from '@fastkernels/core';
import type { CudaKernel } from '../../kernel.js';
import { KERNEL_SOURCES } from '../../kernel-sources.generated.js';
import { PDL_READY_FILES, pdlAvailable, pdlLaunches } from '../../launch-tuning.js';
import type { SpineContext } from './context.js';

/** C++ types of the floating dtypes the spine kernels take. */
export const FLOAT_CTYPE: Readonly<Partial<Record<DType, string>>> = { f32: 'float', f16: '__half', bf16: '__nv_bfloat16' };

export function floatCType(t: Tensor, op: string, name: string): string {
  const c = FLOAT_CTYPE[t.dtype];
  if (!c) throw new TypeError(`${op}: ${name} has dtype ${t.dtype}; the CUDA kernels take f32, f16 or bf16`);
  return c;
}

/** C++ type of an integer index tensor (i32 or i64). */
export function indexCType(t: Tensor, op: string, name: string): 'int' | 'long long' {
  if (t.dtype === 'i32') return 'int';
  if (t.dtype === 'i64') return 'long long';
  throw new TypeError(`${op}: ${name} has dtype ${t.dtype}; expected i32 or i64`);
}

/** Device address of a tensor's first element. */
export function ptr(t: Tensor): number {
  const p = t.storage.devicePtr;
  if (p === undefined) throw new TypeError(`${t} is not a CUDA tensor`);
  return p + t.offset * t.itemsize;
}

/** A kernel of kernels/<file>, specialised by -D defines (compiled once per specialisation, cached on disk). */
export function spineKernel(ctx: SpineContext, file: string, entry: string, defines: Readonly<Record<string, string | number>>): CudaKernel {
  return fileKernel(ctx, file, entry, Object.entries(defines).map(([k, v]) => `-D${k}=${v}`));
}

/**
 * A kernel of an embedded file with NVRTC options as given. A PDL-ready file (launch-tuning.ts) is compiled with its
 * griddepcontrol instructions (-DFK_PDL=1) and launched with LAUNCH_PDL exactly when PDL launches are on now (in a
 * graph capture, by default); otherwise the options are untouched and the kernel is the machine code verified without
 * PDL. Run eagerly where captures would use PDL, the PDL build is queued to be compiled before the next capture starts
 * (the engine runs each decode shape eagerly first), so no module is loaded while a stream is being captured.
 */
export function fileKernel(ctx: SpineContext, file: string, entry: string, options: readonly string[]): CudaKernel {
  const source = KERNEL_SOURCES[file];
  if (source === undefined) throw new Error(`kernel source ${file} is not embedded (run npm run embed-kernels -w @fastkernels/backend-cuda)`);
  const ready = PDL_READY_FILES.has(file);
  const pdlSpec = () => ({ source, entry, name: file, options: [...options, '-DFK_PDL=1'], pdl: true });
  if (ready && pdlLaunches(ctx.runtime)) return ctx.kernel(pdlSpec());
  const plain = ctx.kernel({ source, entry, name: file, options, pdl: false });
  if (ready && pdlAvailable(ctx.runtime)) ctx.compileBeforeCapture(plain, pdlSpec);
  return plain;
}

/** Whether t's last dim is contiguous (stride 1, or at most one element): the head / row vector the kernels read. */
export function hasContiguousLastDim(t: Tensor): boolean {
  const r = t.rank;
  return r === 0 || t.shape[r - 1]! <= 1 || t.strides[r - 1] === 1;
}

/**
 * A view of `t` as [rows, t.shape[-1]] rows: the last dim contiguous (stride 1, or size 1) and the leading dims
 * collapsing to one stride between consecutive rows. null when the layout is not like that.
 */
export function rowLayout(t: Tensor): { rows: number; last: number; rowStride: number } | null {
  const r = t.rank;
  if (r === 0) return { rows: 1, last: 1, rowStride: 1 };
  const last = t.shape[r - 1]!;
  if (last > 1 && t.strides[r - 1] !== 1) return null;
  let rows = 1;
  for (let i = 0; i < r - 1; i++) rows *= t.shape[i]!;
  // leading dims, innermost first: each must step by (inner size) x (row stride)
  let rowStride: number | undefined;
  let expected: number | undefined;
  for (let i = r - 2; i >= 0; i--) {
    const n = t.shape[i]!;
    if (n === 1) continue;
    const s = t.strides[i]!;
    if (rowStride === undefined) {
      rowStride = s;
      expected = s * n;
    } else {
      if (s !== expected) return null;
      expected = s * n;
    }
  }
  return { rows, last, rowStride: rowStride ?? last };
}

/**
 * Rows in up to two levels: `group` rows `rowStride` apart, the groups `groupStride` apart, so row r starts at
 * (r / group) groupStride + (r % group) rowStride. A per-head view [T, heads, d] of a fused projection (heads d apart,
 * tokens a whole projection row apart) has two; one level (rowLayout) comes back as a single group. null when the
 * last dim is strided or the leading dims need more levels.
 */
export function rowGroupLayout(t: Tensor): { rows: number; last: number; rowStride: number; group: number; groupStride: number } | null {
  const one = rowLayout(t);
  if (one) return { ...one, group: Math.max(1, one.rows), groupStride: 0 };
  const r = t.rank;
  const last = t.shape[r - 1]!;
  if (last > 1 && t.strides[r - 1] !== 1) return null;
  // the leading dims of more than one element, innermost first, cut into runs whose strides chain
  const dims: [number, number][] = [];
  for (let i = r - 2; i >= 0; i--) if (t.shape[i]! > 1) dims.push([t.shape[i]!, t.strides[i]!]);
  const runs: [number, number][] = []; // [rows, stride of the run's innermost dim]
  let expected: number | undefined;
  for (const [n, s] of dims) {
    if (expected === s) runs[runs.length - 1]![0] *= n;
    else runs.push([n, s]);
    expected = s * n;
  }
  if (runs.length !== 2) return null;
  const [[group, rowStride], [outer, groupStride]] = runs as [[number, number], [number, number]];
  return { rows: group * outer, last, rowStride, group, groupStride };
}

/** `t` itself when its rows are addressable (rowLayout), else a contiguous copy pushed onto `temps`. */
export function rowsOf(t: Tensor, temps: Tensor[]): { t: Tensor; rows: number; last: number; rowStride: number } {
  const l = rowLayout(t);
  if (l) return { t, ...l };
  const c = t.contiguous();
  temps.push(c);
  return { t: c, ...rowLayout(c)! };
}

/** `t` itself when its rows are addressable in two levels (rowGroupLayout), else a contiguous copy pushed onto `temps`. */
export function rowGroupsOf(t: Tensor, temps: Tensor[]): { t: Tensor; rows: number; last: number; rowStride: number; group: number; groupStride: number } {
  const l = rowGroupLayout(t);
  if (l) return { t, ...l };
  const c = t.contiguous();
  temps.push(c);
  return { t: c, ...rowGroupLayout(c)! };
}

/** `t` when contiguous, else a contiguous copy pushed onto `temps`. */
export function contiguousOf(t: Tensor, temps: Tensor[]): Tensor {
  if (t.isContiguous()) return t;
  const c = t.contiguous();
  temps.push(c);
  return c;
}

/** t itself when its last dim is contiguous (the kernels take the outer strides), else a contiguous copy (in temps). */
export function lastDimContiguous(t: Tensor, temps: Tensor[]): Tensor {
  return hasContiguousLastDim(t) ? t : contiguousOf(t, temps);
}

/** `t` converted to `dtype` (and contiguous) unless it already is both; copies go onto `temps`. */
export function asDType(t: Tensor, dtype: DType, temps: Tensor[]): Tensor {
  if (t.dtype === dtype) return contiguousOf(t, temps);
  const c = t.to(dtype);
  temps.push(c);
  return c;
}

/**
 * Elements per access: 16 bytes' worth when every element count (row lengths, strides, offsets) is a multiple
 * of it and every pointer is 16-byte aligned; 1 otherwise.
 */
export function vecWidth(itemsize: number, counts: readonly number[], pointers: readonly number[]): number {
  const v = 16 / itemsize;
  if (!Number.isInteger(v)) return 1;
  if (counts.some((c) => c % v !== 0)) return 1;
  if (pointers.some((p) => p % 16 !== 0)) return 1;
  return v;
}

export function itemsizeOf(dtype: DType): number {
  return DTYPE_INFO[dtype].itemsize;
}

export function disposeAll(temps: readonly Tensor[]): void {
  for (const t of temps) t.dispose();
}

export function expectFloatRank(t: Tensor, op: string, name: string, minRank = 1): void {
  floatCType(t, op, name);
  if (t.rank < minRank) throw new RangeError(`${op}: ${name} ${formatShape(t.shape)} needs rank >= ${minRank}`);
}

/** Grid of `n` blocks capped to the launch limit (kernels grid-stride beyond it). */
export function gridFor(n: number): number {
  return Math.max(1, Math.min(n, 2 ** 31 - 1));
}

export function roundUp(n: number, m: number): number {
  return Math.ceil(n / m) * m;
}

// ------------------------------------------------------------------------------------- index checks

// read on first use (the settings registry), not at import
let checksOn: boolean | undefined;
const flags = new WeakMap<SpineContext, Tensor>();

/** Turn the device-side index checks' read-back on or off (default: FASTKERNELS_CHECK_INDICES=1). */
export function setIndexChecks(on: boolean): void {
  checksOn = on;
}
export function indexChecksOn(): boolean {
  return (checksOn ??= setting('FASTKERNELS_CHECK_INDICES'));
}

/** The device flag to pass to a kernel (0 = no checking), given the tensor the op allocates on. */
export function indexFlag(ctx: SpineContext, like: Tensor): number {
  if (!indexChecksOn()) return 0;
  let f = flags.get(ctx);
  if (!f || f.isDisposed) {
    f = Tensor.zeros(like.backend, [1], 'i32', { device: like.device });
    flags.set(ctx, f);
  }
  return ptr(f);
}

/** After the launch: when checks are on and the kernel raised the flag, clear it and throw. */
export function checkIndexFlag(ctx: SpineContext, flag: number, message: () => string): void {
  if (!flag) return;
  const f = flags.get(ctx)!;
  const v = f.toFloat64Array()[0];
  if (v !== 0) {
    f.fill_(0);
    throw new RangeError(message());
  }
}
