/** The attention group's float64 kernels in the cpu op table (scaled_dot_product_attention lives in sdpa.ts). */
import type { Backend, OpCall, OpKernelTable, Tensor } from '@fastkernels/core';
import { scaledDotProductAttention, type SdpaOptions } from './sdpa.js';

export function registerAttentionKernels(table: OpKernelTable, backend: Backend): void {
  table.register('scaled_dot_product_attention', (c: OpCall<SdpaOptions>) => {
    const [q, k, v, mask] = c.inputs as [Tensor, Tensor, Tensor, Tensor | null];
    return scaledDotProductAttention(backend, q, k, v, { ...c.attrs, attn_mask: mask ?? null });
  });
}
