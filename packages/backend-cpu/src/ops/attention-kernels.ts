/** The attention group's float64 kernels in the cpu op table (scaled_dot_product_attention lives in sdpa.ts, the engine's in attention.ts). */
import type { Backend, OpCall, OpKernelTable, Tensor } from '@fastkernels/core';
import { pagedDecodeAttention, varlenPrefillAttention } from './attention.js';
import { scaledDotProductAttention, type SdpaOptions } from './sdpa.js';

export function registerAttentionKernels(table: OpKernelTable, backend: Backend): void {
  table.register('scaled_dot_product_attention', (c: OpCall<SdpaOptions>) => {
    const [q, k, v, mask] = c.inputs as [Tensor, Tensor, Tensor, Tensor | null];
    return scaledDotProductAttention(backend, q, k, v, { ...c.attrs, attn_mask: mask ?? null });
  });
  table.register('paged_decode_attention', (c: OpCall<{ scale: number; sliding_window: number; v_head_dim: number | null }>) => {
    const [q, kc, vc, bt, sl, sinks] = c.inputs as (Tensor | null)[];
    return pagedDecodeAttention(backend, q!, kc!, vc!, bt!, sl!, c.attrs.scale, c.attrs.sliding_window, sinks ?? null, c.attrs.v_head_dim ?? q!.shape[2]!);
  });
  table.register('varlen_prefill_attention', (c: OpCall<{ scale: number; causal: boolean; sliding_window: number }>) => {
    const [q, k, v, cq, ck, sinks] = c.inputs as (Tensor | null)[];
    return varlenPrefillAttention(backend, q!, k!, v!, cq!, ck!, c.attrs.scale, c.attrs.causal, c.attrs.sliding_window, sinks ?? null);
  });
}
