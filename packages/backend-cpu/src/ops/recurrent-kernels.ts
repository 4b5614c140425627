/** The recurrent group's float64 kernels in the cpu op table (the functions live in recurrent.ts). */
import type { Backend, OpCall, OpKernelTable, Tensor } from '@fastkernels/core';
import { causalConv1d, causalConv1dUpdate, chunkGla, fusedRecurrentGatedDeltaRule, fusedRecurrentGla, fusedRecurrentKda } from './recurrent.js';

type GlaAttrs = { scale: number | null; output_final_state: boolean };

export function registerRecurrentKernels(table: OpKernelTable, backend: Backend): void {
  const ins = (c: { readonly inputs: readonly unknown[] }) => c.inputs as readonly (Tensor | null)[];
  table.register('causal_conv1d', (c: OpCall<{ activation: 'silu' | 'swish' | null; return_final_states: boolean }>) => {
    const [x, w, bias, init, qsl, idx, his] = ins(c);
    return causalConv1d(backend, x!, w!, { bias, initial_states: init, query_start_loc: qsl, cache_indices: idx, has_initial_state: his, ...c.attrs });
  });
  table.register('causal_conv1d_update', (c: OpCall<{ activation: 'silu' | 'swish' | null }>) => {
    const [x, st, w, bias, idx] = ins(c);
    return causalConv1dUpdate(backend, x!, st!, w!, { bias, activation: c.attrs.activation, conv_state_indices: idx });
  });
  table.register('fused_recurrent_gla', (c: OpCall<GlaAttrs>) => {
    const [q, k, v, g, s0, cu, idx] = ins(c);
    return fusedRecurrentGla(backend, q!, k!, v!, g!, { ...c.attrs, initial_state: s0, cu_seqlens: cu, ssm_state_indices: idx });
  });
  table.register('chunk_gla', (c: OpCall<GlaAttrs & { chunk_size: number }>) => {
    const [q, k, v, g, s0, cu, idx] = ins(c);
    return chunkGla(backend, q!, k!, v!, g!, { ...c.attrs, initial_state: s0, cu_seqlens: cu, ssm_state_indices: idx });
  });
  for (const [name, fn] of [['fused_recurrent_gated_delta_rule', fusedRecurrentGatedDeltaRule], ['fused_recurrent_kda', fusedRecurrentKda]] as const) {
    table.register(name, (c: OpCall<GlaAttrs & { use_qk_l2norm_in_kernel: boolean }>) => {
      const [q, k, v, g, beta, s0, cu, idx] = ins(c);
      return fn(backend, q!, k!, v!, g!, beta!, { ...c.attrs, initial_state: s0, cu_seqlens: cu, ssm_state_indices: idx });
    });
  }
}
