/**
 * The recurrent group's registry kernels on CUDA: fused_recurrent_gla and chunk_gla (gla.ts); fused_recurrent_gated_delta_rule,
 * chunk_gated_delta_rule, fused_recurrent_kda, chunk_kda, causal_conv1d and causal_conv1d_update (gdn.ts). What they decline (f64,
 * K past 1024, a pool whose slots are not contiguous) says why; chunk_gla then runs its decomposition (the recurrent
 * op), fused_recurrent_gla fails with the reason.
 */
import { hasOp, type OpKernelTable } from '@fastkernels/core';
import type { CudaRuntime } from '../../runtime.js';
import type { GenKernelCache } from '../gen-cache.js';
import { GdnKernels } from './gdn.js';
import { GlaKernels } from './gla.js';

export function registerRecurrentKernels(table: OpKernelTable, cache: GenKernelCache, runtime: () => CudaRuntime): GlaKernels {
  const gla = new GlaKernels(cache, runtime);
  for (const op of ['fused_recurrent_gla', 'chunk_gla'] as const) if (hasOp(op)) table.register(op, gla.run(op), gla.supports(op));
  // Qwen3-Next's gated DeltaNet and Kimi-Linear's KDA (gdn.ts, one source generator); a chunk_gated_delta_rule /
  // chunk_kda the chunked kernel declines runs the recurrent one
  const gdn = new GdnKernels(cache, runtime);
  for (const op of ['fused_recurrent_gated_delta_rule', 'chunk_gated_delta_rule', 'fused_recurrent_kda', 'chunk_kda', 'causal_conv1d', 'causal_conv1d_update'] as const) if (hasOp(op)) table.register(op, gdn.run(op), gdn.supports(op));
  return gla;
}
