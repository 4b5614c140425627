/**
 * The attention group's registry kernels on CUDA: scaled_dot_product_attention on the flash prefill kernel or the dense
 * tensor-core kernel (dense-sdpa.ts), which declines (with the reason) what it does not take: the registry then
 * decomposes the call.
 */
import { hasOp, type OpKernelTable } from '@fastkernels/core';
import type { GenKernelCache } from '../gen-cache.js';
import { DenseSdpa } from './dense-sdpa.js';

export function registerAttentionKernels(table: OpKernelTable, cache: GenKernelCache): DenseSdpa {
  const sdpa = new DenseSdpa(cache);
  if (hasOp('scaled_dot_product_attention')) table.register('scaled_dot_product_attention', sdpa.run, sdpa.supports);
  return sdpa;
}
