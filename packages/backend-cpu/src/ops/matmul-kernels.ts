/** The matmul group's float64 kernels in the cpu op table (the functions live in matmul-general.ts). */
import type { Backend, FusedMoeGemmAttrs, LinearActivation, MoeAlignAttrs, OpCall, OpKernelTable, Tensor } from '@fastkernels/core';
import { linearSiluAndMul } from './activation.js';
import { baddbmm, bmm, einsum, groupedGemm, linear, matmul } from './matmul-general.js';
import { fusedMoeGemm, moeAlign } from './moe-gemm.js';

export function registerMatmulKernels(table: OpKernelTable, backend: Backend): void {
  const t = (call: { readonly inputs: readonly unknown[] }, i: number) => call.inputs[i] as Tensor;
  const opt = (call: { readonly inputs: readonly unknown[] }, i: number) => (call.inputs[i] ?? null) as Tensor | null;
  table.register('matmul', (c) => matmul(backend, t(c, 0), t(c, 1)));
  table.register('bmm', (c) => bmm(backend, t(c, 0), t(c, 1)));
  table.register('baddbmm', (c: OpCall<{ beta: number; alpha: number }>) => baddbmm(backend, t(c, 0), t(c, 1), t(c, 2), c.attrs));
  table.register('linear', (c: OpCall<{ activation: LinearActivation }>) => linear(backend, t(c, 0), t(c, 1), opt(c, 2), c.attrs));
  table.register('linear_silu_and_mul', (c) => linearSiluAndMul(backend, t(c, 0), t(c, 1), opt(c, 2)));
  table.register('einsum', (c: OpCall<{ equation: string }>) => einsum(backend, c.attrs.equation, ...(c.inputs as Tensor[])));
  table.register('grouped_gemm', (c) =>
    groupedGemm(backend, t(c, 0), t(c, 1), { offsets: opt(c, 2) ?? undefined, expertIds: opt(c, 3) ?? undefined, bias: opt(c, 4) }),
  );
  table.register('moe_align', (c: OpCall<MoeAlignAttrs>) =>
    moeAlign(backend, t(c, 0), c.attrs.block_size, c.attrs.num_experts, c.outputs[0]!.shape[0]!, c.outputs[1]!.shape[0]!),
  );
  table.register('fused_moe_gemm', (c: OpCall<FusedMoeGemmAttrs>) => fusedMoeGemm(backend, t(c, 0), t(c, 1), opt(c, 2), t(c, 3), t(c, 4), t(c, 5), c.attrs));
}
