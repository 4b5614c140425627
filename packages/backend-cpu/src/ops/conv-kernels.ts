/** The conv & pool group's float64 kernels in the cpu op table (the functions live in conv.ts and pool.ts). */
import type { Backend, OpCall, OpKernelTable, Tensor } from '@fastkernels/core';
import { convNd, convTransposeNd, type ConvOptions, type ConvTransposeOptions } from './conv.js';
import { adaptiveAvgPoolNd, adaptiveMaxPoolNd, adaptiveMaxPoolNdWithIndices, avgPoolNd, maxPoolNd, maxPoolNdWithIndices, type AdaptiveSize, type AvgPoolOptions, type MaxPoolOptions } from './pool.js';

export function registerConvKernels(table: OpKernelTable, backend: Backend): void {
  const x = (call: { readonly inputs: readonly unknown[] }) => call.inputs[0] as Tensor;
  for (const nd of [1, 2, 3] as const) {
    table.register(`conv${nd}d`, (c: OpCall<ConvOptions>) => convNd(backend, nd, x(c), c.inputs[1] as Tensor, (c.inputs[2] ?? null) as Tensor | null, c.attrs));
    table.register(`conv_transpose${nd}d`, (c: OpCall<ConvTransposeOptions>) => convTransposeNd(backend, nd, x(c), c.inputs[1] as Tensor, (c.inputs[2] ?? null) as Tensor | null, c.attrs));
    table.register(`max_pool${nd}d`, (c: OpCall<MaxPoolOptions>) => maxPoolNd(backend, nd, x(c), c.attrs));
    table.register(`max_pool${nd}d_with_indices`, (c: OpCall<MaxPoolOptions>) => maxPoolNdWithIndices(backend, nd, x(c), c.attrs));
    table.register(`avg_pool${nd}d`, (c: OpCall<AvgPoolOptions>) => avgPoolNd(backend, nd, x(c), c.attrs));
    table.register(`adaptive_avg_pool${nd}d`, (c: OpCall<{ output_size: AdaptiveSize }>) => adaptiveAvgPoolNd(backend, nd, x(c), c.attrs.output_size));
    table.register(`adaptive_max_pool${nd}d`, (c: OpCall<{ output_size: AdaptiveSize }>) => adaptiveMaxPoolNd(backend, nd, x(c), c.attrs.output_size));
    table.register(`adaptive_max_pool${nd}d_with_indices`, (c: OpCall<{ output_size: AdaptiveSize }>) => adaptiveMaxPoolNdWithIndices(backend, nd, x(c), c.attrs.output_size));
  }
}
