/**
 * mxfp4_dequant on CUDA (mxfp4-source.ts): one launch, a thread a 32-value group, graph-safe (no host reads). It feeds
 * the registry's mxfp4_grouped_gemm / mxfp4_linear decompositions (dequantised weights, then grouped_gemm / linear).
 */
import { Tensor, type DType, type OpCall } from '@fastkernels/core';
import type { ArgValue } from '../../args.js';
import type { CudaKernel } from '../../kernel.js';
import type { CudaRuntime } from '../../runtime.js';
import type { GenKernelCache } from '../gen-cache.js';
import { MXFP4_DEQUANT_SIGNATURE, MXFP4_DEQUANT_THREADS, mxfp4DequantSource, type Mxfp4OutDType } from './mxfp4-source.js';

const OUT_DTYPES = new Set<DType>(['f32', 'f16', 'bf16']);
/** CTAs a launch uses at most (a grid-stride loop covers the rest). */
const MAX_CTAS = 65536;

export class Mxfp4Dequant {
  private readonly args: ArgValue[] = new Array<ArgValue>(MXFP4_DEQUANT_SIGNATURE.length).fill(0);

  constructor(
    private readonly cache: GenKernelCache,
    _runtime: () => CudaRuntime,
  ) {}

  readonly supports = (call: OpCall<{ dtype: DType }>): true | string =>
    OUT_DTYPES.has(call.attrs.dtype) ? true : `output dtype ${call.attrs.dtype}: the kernel writes f32, f16 or bf16`;

  readonly run = (call: OpCall<{ dtype: DType }>): Tensor => {
    const [blocksIn, scalesIn] = call.inputs as [Tensor, Tensor];
    const meta = call.outputs[0]!;
    const out = Tensor.empty(call.backend, meta.shape, meta.dtype, { device: blocksIn.device });
    const groups = scalesIn.numel;
    if (groups === 0) return out;
    const temps: Tensor[] = [];
    try {
      // contiguous and 16-byte aligned block rows (a fresh copy is both)
      const aligned = (t: Tensor) => t.isContiguous() && ((t.storage.devicePtr ?? 0) + t.offset) % 16 === 0;
      const blocks = aligned(blocksIn) ? blocksIn : keep(temps, blocksIn.clone());
      const scales = scalesIn.isContiguous() ? scalesIn : keep(temps, scalesIn.contiguous());
      const g = this.args;
      g[0] = out; g[1] = blocks; g[2] = scales; g[3] = groups;
      const ctas = Math.min(MAX_CTAS, Math.ceil(groups / MXFP4_DEQUANT_THREADS));
      this.kernel(meta.dtype as Mxfp4OutDType).launch(ctas, MXFP4_DEQUANT_THREADS, 0, g);
    } catch (e) {
      out.dispose();
      throw e;
    } finally {
      for (const t of temps) t.dispose();
    }
    return out;
  };

  private kernel(dtype: Mxfp4OutDType): CudaKernel {
    return this.cache.kernel(`mxfp4_dequant ${dtype}`, () => mxfp4DequantSource(dtype), 'mxfp4_dequant');
  }
}

function keep(temps: Tensor[], t: Tensor): Tensor {
  temps.push(t);
  return t;
}
