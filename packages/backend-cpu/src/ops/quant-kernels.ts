/** The quant group's float64 kernels in the cpu op table (the functions live in quant.ts). */
import type { Backend, DType, OpCall, OpKernelTable, Tensor } from '@fastkernels/core';
import { fp8Dequant, mxfp4Dequant, mxfp4GroupedGemm, mxfp4Linear, perTokenGroupQuantFp8, scaledFp8Quant, scaledMm } from './quant.js';

export function registerQuantKernels(table: OpKernelTable, backend: Backend): void {
  const ins = (c: { readonly inputs: readonly unknown[] }) => c.inputs as readonly (Tensor | null)[];
  table.register('scaled_fp8_quant', (c) => scaledFp8Quant(backend, ins(c)[0]!, { scale: ins(c)[1] ?? null }));
  table.register('fp8_dequant', (c: OpCall<{ output_dtype: DType }>) => fp8Dequant(backend, ins(c)[0]!, ins(c)[1]!, c.attrs));
  table.register('per_token_group_quant_fp8', (c: OpCall<{ group_size: number; eps: number; scale_ue8m0: boolean }>) =>
    perTokenGroupQuantFp8(backend, ins(c)[0]!, c.attrs.group_size, c.attrs),
  );
  table.register('scaled_mm', (c: OpCall<{ out_dtype: DType }>) => {
    const [a, b, sa, sb, bias] = ins(c);
    return scaledMm(backend, a!, b!, sa!, sb!, { bias, out_dtype: c.attrs.out_dtype });
  });
  table.register('mxfp4_dequant', (c: OpCall<{ dtype: DType }>) => mxfp4Dequant(backend, ins(c)[0]!, ins(c)[1]!, c.attrs));
  table.register('mxfp4_linear', (c) => mxfp4Linear(backend, ins(c)[0]!, ins(c)[1]!, ins(c)[2]!, ins(c)[3] ?? null));
  table.register('mxfp4_grouped_gemm', (c) => {
    const [x, blocks, scales, offsets, ids, bias] = ins(c);
    return mxfp4GroupedGemm(backend, x!, blocks!, scales!, { offsets: offsets ?? undefined, expertIds: ids ?? undefined, bias });
  });
}
