/**
 * The MoE kernels of the CUDA backend: grouped_gemm and mxfp4_grouped_gemm (grouped-gemm.ts, mxfp4-grouped-gemm.ts) on
 * CUDA cores for decode steps and on one tensor-core grouped GEMM past them (grouped-gemm-tc.ts, shared by the two);
 * fused_moe_gemm on the tensor-core grouped GEMM (fused-moe.ts) over moe_align's layout (moe-align.ts: one launch);
 * the router's topk_softmax in one launch (topk-softmax.ts). Each declines
 * (with the reason) what it does not take: the registry then runs the op's decomposition. Nothing touches CUDA before
 * the first call.
 */
import { hasOp, type OpKernelTable } from '@fastkernels/core';
import type { CudaRuntime } from '../../runtime.js';
import type { GenKernelCache } from '../gen-cache.js';
import { FusedMoeGemm } from './fused-moe.js';
import { GroupedGemm } from './grouped-gemm.js';
import { GroupedGemmTc } from './grouped-gemm-tc.js';
import { MoeAlignKernel } from './moe-align.js';
import { Mxfp4GroupedGemm } from './mxfp4-grouped-gemm.js';
import { TopkSoftmaxKernel } from './topk-softmax.js';

export function registerMoeKernels(table: OpKernelTable, cache: GenKernelCache, runtime: () => CudaRuntime): FusedMoeGemm {
  const gemm = new FusedMoeGemm(cache, runtime);
  if (hasOp('fused_moe_gemm')) table.register('fused_moe_gemm', gemm.run, gemm.supports);
  const align = new MoeAlignKernel(cache);
  if (hasOp('moe_align')) table.register('moe_align', align.run, align.supports);
  const routing = new TopkSoftmaxKernel(cache);
  if (hasOp('topk_softmax')) table.register('topk_softmax', routing.run, routing.supports);
  const tc = new GroupedGemmTc(cache);
  const grouped = new GroupedGemm(cache, runtime, tc);
  if (hasOp('grouped_gemm')) table.register('grouped_gemm', grouped.run, grouped.supports);
  const mxfp4 = new Mxfp4GroupedGemm(cache, runtime, tc);
  if (hasOp('mxfp4_grouped_gemm')) table.register('mxfp4_grouped_gemm', mxfp4.run, mxfp4.supports);
  return gemm;
}
