/**
 * The pooling ops on the generated kernel (pool-source.ts): max_pool{1,2,3}d (+ _with_indices), avg_pool{1,2,3}d,
 * adaptive_avg_pool{1,2,3}d, adaptive_max_pool{1,2,3}d (+ _with_indices). Output sizes come from core's inference
 * (ceil_mode included); the output is channels-last when a batched 2-d / 3-d input is, as PyTorch's CUDA pooling does.
 * Geometry, arguments and grid live in reused buffers; kernels are cached by a small number per variant.
 */
import { Tensor } from '@fastkernels/core';
import type { CudaKernel } from '../../kernel.js';
import type { CudaRuntime } from '../../runtime.js';
import { addr } from '../elementwise.js';
import type { GenKernelCache } from '../gen-cache.js';
import type { ConvDType } from './implicit-gemm-source.js';
import { fromChannelsLastOrder, isChannelsLast, isContiguous, strides5, toChannelsLastOrder, type Nd } from './plan.js';
import { POOL_KIND_CODE, POOL_SIGNATURE, poolSource, type PoolKind } from './pool-source.js';

type IntOrTuple = number | readonly number[];
export interface PoolAttrs {
  readonly kernel_size?: IntOrTuple;
  readonly stride?: IntOrTuple | null;
  readonly padding?: IntOrTuple;
  readonly dilation?: IntOrTuple;
  readonly count_include_pad?: boolean;
  readonly divisor_override?: number | null;
}

const DT: Readonly<Record<ConvDType, number>> = { f32: 0, f16: 1, bf16: 2 };

function at(v: IntOrTuple | null | undefined, j: number, dflt: number): number {
  if (v === undefined || v === null) return dflt;
  if (typeof v === 'number') return v;
  return v.length === 0 ? dflt : v[j]!;
}

export class ConvPools {
  private readonly kernels = new Map<number, CudaKernel>();
  private readonly args: number[] = new Array<number>(POOL_SIGNATURE.length).fill(0);
  private readonly s = new Float64Array(10);

  constructor(
    private readonly cache: GenKernelCache,
    private readonly runtime: () => CudaRuntime,
  ) {}

  /** [out] or [out, indices] of one pooling call; x any strides, outShape from core. */
  run(kind: PoolKind, nd: Nd, indices: boolean, x: Tensor, outShape: readonly number[], a: PoolAttrs): Tensor[] {
    const batched = x.rank === nd + 2;
    const cl = batched && nd > 1 && !isContiguous(x.shape, x.strides) && isChannelsLast(x.shape, x.strides);
    const y = alloc(x, outShape, x.dtype, cl);
    const yi = indices ? alloc(x, outShape, 'i64', cl) : null;
    if (y.numel === 0) return yi ? [y, yi] : [y];
    const dtype = x.dtype as ConvDType;
    const key = ((DT[dtype] * 4 + POOL_KIND_CODE[kind]) * 2 + (indices ? 1 : 0)) * 2 + (cl ? 1 : 0);
    let k = this.kernels.get(key);
    if (!k) this.kernels.set(key, (k = this.cache.kernel(`pool|${key}`, () => poolSource({ dtype, kind, indices, channelsLast: cl }), 'pool-generated')));
    const A = this.args;
    const b = batched ? 1 : 0;
    const lead = 3 - nd;
    A[0] = addr(y);
    A[1] = yi ? addr(yi) : 0;
    A[2] = addr(x);
    A[3] = batched ? x.shape[0]! : 1;
    A[4] = x.shape[b]!;
    for (let i = 0; i < 3; i++) {
      const j = i - lead;
      const own = j >= 0;
      A[5 + i] = own ? x.shape[b + 1 + j]! : 1;
      A[8 + i] = own ? outShape[b + 1 + j]! : 1;
      const kk = own ? at(a.kernel_size, j, 1) : 1;
      A[11 + i] = kk;
      A[14 + i] = own ? at(a.stride, j, kk) : 1;
      A[17 + i] = own ? at(a.padding, j, 0) : 0;
      A[20 + i] = own ? at(a.dilation, j, 1) : 1;
    }
    A[23] = kind === 'avg' ? (a.count_include_pad === false ? 0 : 1) : 1;
    A[24] = kind === 'avg' ? (a.divisor_override ?? 0) : 0;
    strides5(this.s, 0, nd, batched, x.shape, x.strides);
    strides5(this.s, 5, nd, batched, y.shape, y.strides);
    for (let i = 0; i < 10; i++) A[25 + i] = this.s[i]!;
    const sms = this.runtime().properties().multiprocessors;
    k.launch(Math.max(1, Math.min(Math.ceil(y.numel / 256), sms * 16)), 256, 0, A);
    return yi ? [y, yi] : [y];
  }
}

/** Contiguous, or channels-last ([N, *sp, C] in memory viewed as [N, C, *sp]). */
function alloc(x: Tensor, shape: readonly number[], dtype: Tensor['dtype'], cl: boolean): Tensor {
  if (!cl) return Tensor.empty(x.backend, shape, dtype, { device: x.device });
  const base = Tensor.empty(x.backend, toChannelsLastOrder(shape.length).map((d) => shape[d]!), dtype, { device: x.device });
  const y = base.permute(fromChannelsLastOrder(shape.length));
  base.dispose();
  return y;
}
