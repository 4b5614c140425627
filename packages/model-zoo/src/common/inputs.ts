import { Tensor, type ExecutionContext, type DType, type Rng, type Module } from '@fastkernels/core';

/** Helpers shared by task input builders. */
export function randn(ctx: ExecutionContext, rng: Rng, shape: readonly number[], dtype: DType, scale = 1): Tensor {
  const n = shape.reduce((a, b) => a * b, 1);
  return Tensor.fromArray(ctx.backend, rng.fillNormal(n, scale), shape, dtype, { device: ctx.device });
}

export function fromInts(ctx: ExecutionContext, values: readonly number[], shape: readonly number[], dtype: DType = 'i64'): Tensor {
  return Tensor.fromArray(ctx.backend, values, shape, dtype, { device: ctx.device });
}

/** Give every floating parameter N(mean, scale^2) values. */
export function initNormal(module: Module, rng: Rng, scale = 1, mean = 0): void {
  for (const [, p] of module.namedParameters()) {
    if (p.dtype === 'i64' || p.dtype === 'i32' || p.dtype === 'bool' || p.dtype === 'u8') continue;
    const v = rng.fillNormal(p.numel, scale);
    if (mean !== 0) for (let i = 0; i < v.length; i++) v[i]! += mean;
    const t = Tensor.fromArray(p.backend, v, p.shape, p.dtype, { device: p.device });
    p.copy_(t);
    t.dispose();
  }
}

/** Bytes of a tensor of this shape and dtype. */
export function bytesOf(shape: readonly number[], itemsize: number): number {
  return shape.reduce((a, b) => a * b, 1) * itemsize;
}
