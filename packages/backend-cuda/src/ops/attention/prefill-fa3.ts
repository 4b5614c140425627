/**
 * The FlashAttention-3-style varlen prefill route (kernels/attention_fa3.cu, fk_varlen_prefill_fa3: TMA loads into an
 * mbarrier ring, a producer warpgroup and two ping-ponging consumer warpgroups; issue #28). On an H100 it ran 1.65 to
 * 2.6x the wgmma / mma.sync kernels (bench/labs/attention-fa3/README.md), so on sm_90a it comes first for what it
 * implements: bf16 / f16, head dim 64 or 128, GQA, bottom-right causal or not, a left sliding window, attention sinks
 * (gpt-oss: the kernel's FK_SINKS=1 build, as attention_prefill.cu's). The fp32 / other head-dim paths stay on
 * attention_prefill.cu. attention.prefillFa3 in the tuning switches it off.
 *
 * The kernel reads q, k and v through TMA tensor maps (3-D {D, heads, rows}, boxes of 64 columns x 1 head x 64 or 128
 * rows, 128-byte swizzle, zeros past the end): encoded on the host per launch (cached by address and shape), passed by
 * value as __grid_constant__ parameters, so a captured graph keeps them (its buffers' addresses are fixed). A map takes
 * any 16-byte row and head strides, in either order: packed [T, H, D] (head stride < row stride) and a [rows, heads, D]
 * view of [H, rows, D] (dense SDPA's [B, H, S, D]: head stride > row stride) alike. The output is written through a row
 * and a head stride too (Fa3Launch), so dense SDPA's [H, L, D] output is written in place (dense-sdpa-fa3.ts).
 */
import type { Tensor } from '@fastkernels/core';
import { CudaFatalError } from '../../errors.js';
import type { CudaKernel } from '../../kernel.js';
import { PDL_READY_FILES } from '../../launch-tuning.js';
import { cudaTuning } from '../../tuning/load.js';
import type { AttentionTuning } from '../../tuning/schema.js';
import { TENSOR_MAP_DTYPE, TENSOR_MAP_INTERLEAVE_NONE, TENSOR_MAP_L2_PROMOTION, TENSOR_MAP_OOB_FILL, TENSOR_MAP_SWIZZLE, type TensorMapSpec } from '../../tensor-map.js';
import { fileKernel, ptr } from '../launch/common.js';
import type { SpineContext } from '../launch/context.js';

const FILE = 'attention_fa3.cu';
const ENTRY = 'fk_varlen_prefill_fa3';

/** Query rows a CTA (two consumer warpgroups of 64), keys a tile, threads (three warpgroups): fkfa3::BM, BN, THREADS. */
export const FA3_BLOCK_M = 128;
export const FA3_BLOCK_N = 128;
export const FA3_THREADS = 384;
const FA3_STAGES = 2;
const FA3_BARRIERS = 1 + 4 * FA3_STAGES;

/** fkfa3::FA3_SMEM_BYTES: Q (both consumers), STAGES of K and of V, the mbarriers, 1 KB to align the base to 1024. */
export function fa3SharedBytes(headDim: number): number {
  const q = FA3_BLOCK_M * headDim * 2;
  const kv = FA3_BLOCK_N * headDim * 2;
  return q + 2 * FA3_STAGES * kv + FA3_BARRIERS * 8 + 1024;
}

/** An operand as the kernel's tensor map addresses it: its first element's byte address, rows and heads, byte strides. */
export interface Fa3Operand {
  readonly address: number;
  readonly rows: number;
  readonly heads: number;
  readonly rowStrideBytes: number;
  readonly headStrideBytes: number;
}

/** Where the kernel writes: its first element's byte address, the byte strides between rows and between heads. */
export interface Fa3Output {
  readonly address: number;
  readonly rowStrideBytes: number;
  readonly headStrideBytes: number;
}

/** What decides whether a varlen prefill takes the FA3 kernel (prefillFa3Decline). */
export interface Fa3Call {
  /** The device's SASS target (DeviceProperties.arch). */
  readonly arch?: string;
  readonly dtype: string;
  readonly headDim: number;
  readonly totalQ: number;
  readonly numSeqs: number;
  /** q, k, v (their last dim contiguous). */
  readonly q: Fa3Operand;
  readonly k: Fa3Operand;
  readonly v: Fa3Operand;
  /** The output when it is not a fresh packed [Tq, nQ, D] tensor (dense SDPA's in-place [H, L, D]). */
  readonly out?: Fa3Output;
  /** Most dynamic shared memory a block may opt in to. */
  readonly sharedPerBlockOptin?: number;
  /** Why tensor maps cannot be encoded in this process (CudaRuntime.tensorMapUnavailable), or null. */
  readonly tensorMapsUnavailable: string | null;
}

/**
 * Why a varlen prefill cannot take the FA3 kernel (the wgmma / mma.sync / simple kernels then take it), or null when it
 * can. Pure: unit-tested without a GPU.
 */
export function prefillFa3Decline(c: Fa3Call, tuning: Pick<AttentionTuning, 'prefillFa3' | 'prefillMma'>): string | null {
  if (!tuning.prefillFa3) return 'attention.prefillFa3 is off in the tuning';
  if (!tuning.prefillMma) return 'attention.prefillMma is off (no tensor-core prefill kernel)';
  if (c.arch !== 'sm_90a') return `device target ${c.arch ?? 'unknown'}: the FA3 kernel needs sm_90a (TMA, wgmma, setmaxnreg)`;
  if (c.dtype !== 'bf16' && c.dtype !== 'f16') return `dtype ${c.dtype}: the FA3 kernel takes bf16 / f16`;
  if (c.headDim !== 64 && c.headDim !== 128) return `head dim ${c.headDim}: the FA3 kernel takes 64 or 128`;
  const tiles = Math.ceil(c.totalQ / FA3_BLOCK_M) + c.numSeqs;
  if (tiles > 65535) return `${tiles} query tiles exceed the grid's 65535 on y`;
  if (c.sharedPerBlockOptin !== undefined && c.sharedPerBlockOptin < fa3SharedBytes(c.headDim)) {
    return `${fa3SharedBytes(c.headDim)} bytes of shared memory a CTA; the device allows ${c.sharedPerBlockOptin}`;
  }
  for (const [name, o] of [['q', c.q], ['k', c.k], ['v', c.v]] as const) {
    if (o.address % 16 !== 0) return `${name} at byte address ${o.address}: the TMA needs 16-byte aligned tensors`;
    for (const s of [o.rowStrideBytes, o.headStrideBytes]) {
      if (s <= 0 || s % 16 !== 0 || s >= 2 ** 40) return `${name}'s byte strides ${o.rowStrideBytes} / ${o.headStrideBytes}: the TMA needs positive multiples of 16 below 2^40`;
    }
    if (o.rows >= 2 ** 31) return `${name} has ${o.rows} rows: past 32-bit coordinates`;
  }
  if (c.out) {
    const o = c.out;
    if ([o.address, o.rowStrideBytes, o.headStrideBytes].some((x) => x % 16 !== 0 || x < 0)) {
      return `out at byte address ${o.address}, byte strides ${o.rowStrideBytes} / ${o.headStrideBytes}: the kernel stores 16-byte chunks (aligned address and strides)`;
    }
  }
  if (c.tensorMapsUnavailable !== null) return `no TMA tensor maps: ${c.tensorMapsUnavailable}`;
  return null;
}

/**
 * A [rows, heads, D] tensor (last dim contiguous) as the kernel's tensor map sees it. A dim of one element has no
 * meaningful stride (the tensor's may be anything): it gets the packed one, which the TMA accepts and never steps.
 */
export function fa3Operand(t: Tensor): Fa3Operand {
  const [rows, heads, d] = t.shape as [number, number, number];
  const it = t.itemsize;
  const headStride = heads > 1 ? t.strides[1]! : d;
  const rowStride = rows > 1 ? t.strides[0]! : heads * headStride;
  return { address: ptr(t), rows, heads, rowStrideBytes: rowStride * it, headStrideBytes: headStride * it };
}

/**
 * The tensor map of one operand: {D, heads, rows} innermost first, boxes of 64 columns x 1 head x boxRows rows (Q: 64,
 * a consumer warpgroup's rows; K and V: 128, a key tile), 128-byte swizzle (64 16-bit columns a box row, the layout the
 * wgmma descriptors read), 256-byte L2 promotion, zeros past the end. As the lab encodes them (attention_fa3_lab.cu).
 */
export function fa3TensorMapSpec(dtype: 'bf16' | 'f16', headDim: number, o: Fa3Operand, boxRows: number): TensorMapSpec {
  return {
    dataType: TENSOR_MAP_DTYPE[dtype],
    address: o.address,
    dims: [headDim, o.heads, o.rows],
    stridesBytes: [o.headStrideBytes, o.rowStrideBytes],
    box: [64, 1, boxRows],
    elementStrides: [1, 1, 1],
    interleave: TENSOR_MAP_INTERLEAVE_NONE,
    swizzle: TENSOR_MAP_SWIZZLE['128B'],
    l2Promotion: TENSOR_MAP_L2_PROMOTION['256B'],
    oobFill: TENSOR_MAP_OOB_FILL.zeros,
  };
}

/** The q, k and v maps (fa3TensorMapSpec's boxes), encoded by the runtime; throws what the driver says of a layout. */
export function fa3TensorMaps(ctx: SpineContext, dtype: 'bf16' | 'f16', headDim: number, q: Fa3Operand, k: Fa3Operand, v: Fa3Operand): Fa3Maps {
  const rt = ctx.runtime;
  const map = (o: Fa3Operand, boxRows: number) => rt.tensorMap(fa3TensorMapSpec(dtype, headDim, o, boxRows));
  return { q: map(q, FA3_BLOCK_M / 2), k: map(k, FA3_BLOCK_N), v: map(v, FA3_BLOCK_N) };
}

/**
 * Whether a call on these operands takes the FA3 kernel: its encoded tensor maps, or why not. Every cheap test first
 * (prefillFa3Decline without, then with the runtime's tensor-map availability); then the maps are encoded (cached), and
 * a layout the driver refuses declines with the driver's words.
 */
export function fa3Route(
  ctx: SpineContext, dtype: string, headDim: number, ops: { q: Fa3Operand; k: Fa3Operand; v: Fa3Operand; out?: Fa3Output }, totalQ: number, numSeqs: number,
): { take: true; maps: Fa3Maps } | { take: false; reason: string } {
  if (ops.k.rows === 0) return { take: false, reason: 'no keys (a tensor map needs a row)' };
  const rt = ctx.runtime;
  const props = rt.properties();
  const call = { arch: props.arch, dtype, headDim, totalQ, numSeqs, ...ops, sharedPerBlockOptin: props.sharedPerBlockOptin };
  const tuning = cudaTuning().attention;
  const reason = prefillFa3Decline({ ...call, tensorMapsUnavailable: null }, tuning) ?? prefillFa3Decline({ ...call, tensorMapsUnavailable: rt.tensorMapUnavailable() }, tuning);
  if (reason !== null) return { take: false, reason };
  try {
    return { take: true, maps: fa3TensorMaps(ctx, dtype as 'bf16' | 'f16', headDim, ops.q, ops.k, ops.v) };
  } catch (e) {
    if (e instanceof CudaFatalError) throw e; // the context is lost: no other route would run either
    return { take: false, reason: `a tensor map was refused: ${(e as Error).message}` };
  }
}

/** The three encoded maps (TENSOR_MAP_ARG values). */
export interface Fa3Maps {
  readonly q: Uint8Array;
  readonly k: Uint8Array;
  readonly v: Uint8Array;
}

export interface Fa3Launch {
  /** The output tensor, or its first element's device address (a view's, written through the strides below). */
  readonly out: Tensor | number;
  readonly maps: Fa3Maps;
  readonly dtype: 'bf16' | 'f16';
  readonly headDim: number;
  readonly cuQ: Tensor;
  readonly cuK: Tensor;
  /** [nQ] fp32 sink logits (gpt-oss), or null: the FK_SINKS=1 build, the pointer as the last argument (0 without). */
  readonly sinks: Tensor | null;
  readonly numSeqs: number;
  readonly totalQ: number;
  readonly qHeads: number;
  readonly group: number;
  readonly causal: boolean;
  readonly window: number;
  readonly scaleLog2: number;
  /** Output strides in elements (multiples of 8); packed [Tq, nQ, D] when absent: qHeads * D and D. */
  readonly outRowStride?: number;
  readonly outHeadStride?: number;
}

/** Grid of the FA3 kernel: (query heads, an upper bound on the query tiles over all sequences); spare CTAs zero the rest. */
export function fa3Grid(qHeads: number, totalQ: number, numSeqs: number): [number, number, number] {
  return [qHeads, Math.ceil(totalQ / FA3_BLOCK_M) + numSeqs, 1];
}

/** The build of fk_varlen_prefill_fa3 for a call: element type, head dim, and FK_SINKS=1 only with sinks. */
export function fa3Defines(dtype: 'bf16' | 'f16', headDim: number, sinks: boolean): string[] {
  return [`-DFK_T=${dtype === 'bf16' ? '__nv_bfloat16' : '__half'}`, `-DFK_D=${headDim}`, ...(sinks ? ['-DFK_SINKS=1'] : [])];
}

/**
 * Launch fk_varlen_prefill_fa3 (out: [Tq, nQ, D] through its row and head strides; no LSE). The sinks pointer is always
 * the last argument (0 without sinks, whose build does not declare it: the driver reads only the parameters a kernel has).
 */
export function launchPrefillFa3(ctx: SpineContext, l: Fa3Launch): void {
  const kernel = fa3Kernel(ctx, l.dtype, l.headDim, l.sinks !== null);
  kernel.launch(fa3Grid(l.qHeads, l.totalQ, l.numSeqs), FA3_THREADS, fa3SharedBytes(l.headDim), [
    l.maps.q, l.maps.k, l.maps.v,
    typeof l.out === 'number' ? l.out : ptr(l.out), 0, ptr(l.cuQ), ptr(l.cuK), l.numSeqs, l.totalQ, l.qHeads, l.group, l.causal ? 1 : 0, l.window, l.scaleLog2,
    l.outRowStride ?? l.qHeads * l.headDim, l.outHeadStride ?? l.headDim,
    l.sinks ? ptr(l.sinks) : 0,
  ]);
}

/**
 * The kernel of a build, from a per-context array indexed by a number (dtype, head dim, sinks): a launch formats no
 * options string. The file is not PDL-ready (launch-tuning.ts), so its build does not depend on capture state; were it
 * made so, fileKernel (which picks the build per launch) is asked every time.
 */
const fa3Kernels = new WeakMap<SpineContext, CudaKernel[]>();
export function fa3Kernel(ctx: SpineContext, dtype: 'bf16' | 'f16', headDim: number, sinks: boolean): CudaKernel {
  const build = () => fileKernel(ctx, FILE, ENTRY, fa3Defines(dtype, headDim, sinks));
  if (PDL_READY_FILES.has(FILE)) return build();
  const slot = (dtype === 'f16' ? 4 : 0) + (headDim === 64 ? 2 : 0) + (sinks ? 1 : 0);
  let kernels = fa3Kernels.get(ctx);
  if (!kernels) fa3Kernels.set(ctx, (kernels = []));
  return (kernels[slot] ??= build());
}
