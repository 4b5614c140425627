/**
 * conv1d / conv2d / conv3d and conv_transpose1d / 2d / 3d as CUDA registry kernels (conv-kernels.ts: cuDNN, else the
 * implicit-GEMM fallback). Registered only for ops core declares; nothing touches CUDA before the first call.
 */
import { hasOp, type OpCall, type OpKernelTable, type Tensor } from '@fastkernels/core';
import type { CudaRuntime } from '../../runtime.js';
import type { GenKernelCache } from '../gen-cache.js';
import { ConvKernels } from './conv-kernels.js';
import type { ConvAttrsIn, Nd } from './plan.js';

type TransposeAttrs = ConvAttrsIn & { readonly output_padding: number | readonly number[] };

export function registerConvKernels(table: OpKernelTable, runtime: () => CudaRuntime, cache: GenKernelCache): ConvKernels {
  const conv = new ConvKernels(runtime, cache);
  for (const nd of [1, 2, 3] as Nd[]) {
    for (const transposed of [false, true]) {
      const name = transposed ? `conv_transpose${nd}d` : `conv${nd}d`;
      if (!hasOp(name)) continue;
      table.register(
        name,
        (call: OpCall<ConvAttrsIn | TransposeAttrs>) => {
          const [x, w, b] = call.inputs as [Tensor, Tensor, Tensor | null];
          return conv.run(nd, transposed, x, w, b ?? null, call.outputs[0]!.shape, call.attrs);
        },
        (call: OpCall<ConvAttrsIn | TransposeAttrs>) => {
          const [x, w] = call.inputs as [Tensor, Tensor];
          return conv.supports(nd, transposed, x, w, call.outputs[0]!.shape, call.attrs);
        },
      );
    }
  }
  return conv;
}
