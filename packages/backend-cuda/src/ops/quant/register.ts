/** The quantisation kernels of the CUDA backend: mxfp4_dequant (gpt-oss's MXFP4 experts). Nothing touches CUDA before the first call. */
import { hasOp, type OpKernelTable } from '@fastkernels/core';
import type { CudaRuntime } from '../../runtime.js';
import type { GenKernelCache } from '../gen-cache.js';
import { Mxfp4Dequant } from './mxfp4.js';

export function registerQuantKernels(table: OpKernelTable, cache: GenKernelCache, runtime: () => CudaRuntime): void {
  const dequant = new Mxfp4Dequant(cache, runtime);
  if (hasOp('mxfp4_dequant')) table.register('mxfp4_dequant', dequant.run, dequant.supports);
}
