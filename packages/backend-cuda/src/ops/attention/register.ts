/**
 * The attention group's registry kernels on CUDA: scaled_dot_product_attention on the flash prefill kernel or the dense
 * tensor-core kernel (dense-sdpa.ts), which declines (with the reason) what it does not take: the registry then
 * decomposes the call. paged_decode_attention and varlen_prefill_attention on the engine's kernels (attention.ts), with
 * their optional sinks (gpt-oss) and the decode's value width (v_head_dim: MLA), which the Ops methods (the ops' viaOps
 * route) do not take.
 */
import { hasOp, type OpCall, type OpKernelTable, type Tensor } from '@fastkernels/core';
import type { GenKernelCache } from '../gen-cache.js';
import { pagedDecodeAttention, spineOf, varlenPrefillAttention } from './attention.js';
import { DenseSdpa } from './dense-sdpa.js';

export function registerAttentionKernels(table: OpKernelTable, cache: GenKernelCache): DenseSdpa {
  const sdpa = new DenseSdpa(cache);
  if (hasOp('scaled_dot_product_attention')) table.register('scaled_dot_product_attention', sdpa.run, sdpa.supports);
  if (hasOp('paged_decode_attention')) {
    table.register('paged_decode_attention', (c: OpCall<{ scale: number; sliding_window: number; v_head_dim: number | null }>) => {
      const [q, kc, vc, bt, sl, sinks] = c.inputs as (Tensor | null)[];
      const spine = spineOf(c.op.name, c.backend);
      return [pagedDecodeAttention(spine, q!, kc!, vc!, bt!, sl!, c.attrs.scale, c.attrs.sliding_window, sinks ?? null, c.attrs.v_head_dim ?? q!.shape[2]!)];
    });
  }
  if (hasOp('varlen_prefill_attention')) {
    table.register('varlen_prefill_attention', (c: OpCall<{ scale: number; causal: boolean; sliding_window: number }>) => {
      const [q, k, v, cq, ck, sinks] = c.inputs as (Tensor | null)[];
      return [varlenPrefillAttention(spineOf(c.op.name, c.backend), q!, k!, v!, cq!, ck!, c.attrs.scale, c.attrs.causal, c.attrs.sliding_window, sinks ?? null)];
    });
  }
  return sdpa;
}
