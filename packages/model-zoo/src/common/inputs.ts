import { Tensor, fillNormal_, normalTensor, type ExecutionContext, type DType, type Rng, type Module } from '@fastkernels/core';

/** Helpers shared by task input builders. Large random tensors are generated on the device where it can (core's random-fill). */
export function randn(ctx: ExecutionContext, rng: Rng, shape: readonly number[], dtype: DType, scale = 1): Tensor {
  return normalTensor(ctx.backend, shape, dtype, rng, { scale, device: ctx.device });
}

export function fromInts(ctx: ExecutionContext, values: readonly number[], shape: readonly number[], dtype: DType = 'i64'): Tensor {
  return Tensor.fromArray(ctx.backend, values, shape, dtype, { device: ctx.device });
}

/** Give every floating parameter N(mean, scale^2) values. */
export function initNormal(module: Module, rng: Rng, scale = 1, mean = 0): void {
  for (const [, p] of module.namedParameters()) {
    if (p.dtype === 'i64' || p.dtype === 'i32' || p.dtype === 'bool' || p.dtype === 'u8') continue;
    fillNormal_(p, rng, scale, mean);
  }
}

/** Bytes of a tensor of this shape and dtype. */
export function bytesOf(shape: readonly number[], itemsize: number): number {
  return shape.reduce((a, b) => a * b, 1) * itemsize;
}
