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
 * value as __grid_constant__ parameters, so a captured graph keeps them (its buffers' addresses are fixed).
 */
import type { Tensor } from '@fastkernels/core';
import type { AttentionTuning } from '../../tuning/schema.js';
import { TENSOR_MAP_DTYPE, TENSOR_MAP_INTERLEAVE_NONE, TENSOR_MAP_L2_PROMOTION, TENSOR_MAP_OOB_FILL, TENSOR_MAP_SWIZZLE, type TensorMapSpec } from '../../tensor-map.js';
import { fileKernel, ptr } from '../launch/common.js';
import type { SpineContext } from '../launch/context.js';

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

/** The three encoded maps (TENSOR_MAP_ARG values). */
export interface Fa3Maps {
  readonly q: Uint8Array;
  readonly k: Uint8Array;
  readonly v: Uint8Array;
}

export interface Fa3Launch {
  readonly out: Tensor;
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
 * Launch fk_varlen_prefill_fa3 (out: [Tq, nQ, D] contiguous; no LSE). The sinks pointer is always the last argument (0
 * without sinks, whose build does not declare it: the driver reads only the parameters a kernel has).
 */
export function launchPrefillFa3(ctx: SpineContext, l: Fa3Launch): void {
  const kernel = fileKernel(ctx, 'attention_fa3.cu', 'fk_varlen_prefill_fa3', fa3Defines(l.dtype, l.headDim, l.sinks !== null));
  kernel.launch(fa3Grid(l.qHeads, l.totalQ, l.numSeqs), FA3_THREADS, fa3SharedBytes(l.headDim), [
    l.maps.q, l.maps.k, l.maps.v,
    ptr(l.out), 0, ptr(l.cuQ), ptr(l.cuK), l.numSeqs, l.totalQ, l.qHeads, l.group, l.causal ? 1 : 0, l.window, l.scaleLog2,
    l.sinks ? ptr(l.sinks) : 0,
  ]);
}
