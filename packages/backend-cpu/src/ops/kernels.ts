/** The cpu backend's op-registry kernels (float64), one register function per op group. */
import type { Backend, OpKernelTable } from '@fastkernels/core';
import { registerElementwiseKernels } from './generic-elementwise.js';
import { registerLayoutKernels } from './layout.js';
import { registerNormKernels } from './generic-norm.js';
import { registerReductionKernels } from './reduction.js';
import { registerMatmulKernels } from './matmul-kernels.js';
import { registerConvKernels } from './conv-kernels.js';
import { registerAttentionKernels } from './attention-kernels.js';
import { registerQuantKernels } from './quant-kernels.js';
import { registerRecurrentKernels } from './recurrent-kernels.js';

export function registerCpuKernels(table: OpKernelTable, backend: Backend): void {
  registerElementwiseKernels(table, backend);
  registerReductionKernels(table, backend);
  registerLayoutKernels(table, backend);
  registerNormKernels(table, backend);
  registerMatmulKernels(table, backend);
  registerConvKernels(table, backend);
  registerAttentionKernels(table, backend);
  registerQuantKernels(table, backend);
  registerRecurrentKernels(table, backend);
}
