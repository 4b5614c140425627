/**
 * The MoE kernels of the CUDA backend: fused_moe_gemm on the tensor-core grouped GEMM (fused-moe.ts), which declines
 * (with the reason) what it does not take: the registry then runs the op's decomposition. Nothing touches CUDA before
 * the first call.
 */
import { hasOp, type OpKernelTable } from '@fastkernels/core';
import type { CudaRuntime } from '../../runtime.js';
import type { GenKernelCache } from '../gen-cache.js';
import { FusedMoeGemm } from './fused-moe.js';

export function registerMoeKernels(table: OpKernelTable, cache: GenKernelCache, runtime: () => CudaRuntime): FusedMoeGemm {
  const gemm = new FusedMoeGemm(cache, runtime);
  if (hasOp('fused_moe_gemm')) table.register('fused_moe_gemm', gemm.run, gemm.supports);
  return gemm;
}
