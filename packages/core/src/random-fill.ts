import type { Backend } from './backend.js';
import { DTYPE_INFO, type DType } from './dtype.js';
import type { Rng } from './rng.js';
import type { Shape } from './shape.js';
import { Tensor } from './tensor.js';

/**
 * Seeded normal tensors for task inputs and parameters. Small tensors are drawn on the host from the Rng
 * stream (as always); large ones, on a backend with harness kernels, are generated on the device from a seed
 * drawn from the same stream: host generation of a 1 GiB embedding table takes tens of seconds.
 */
export const DEVICE_FILL_MIN_NUMEL = 1 << 16;

function deviceFill(t: Tensor, rng: Rng, scale: number, mean: number): boolean {
  const k = t.backend.harnessKernels;
  if (!k || t.numel < DEVICE_FILL_MIN_NUMEL || DTYPE_INFO[t.dtype].kind !== 'float' || !t.isContiguous()) return false;
  return k.fillNormal(t, rng.nextU32(), scale, mean);
}

/** A new tensor of mean + scale * N(0, 1) values. */
export function normalTensor(backend: Backend, shape: Shape, dtype: DType, rng: Rng, options: { scale?: number; mean?: number; device?: number } = {}): Tensor {
  const scale = options.scale ?? 1;
  const mean = options.mean ?? 0;
  const device = options.device ?? 0;
  const numel = shape.reduce((a, b) => a * b, 1);
  if (backend.harnessKernels && numel >= DEVICE_FILL_MIN_NUMEL && DTYPE_INFO[dtype].kind === 'float') {
    const t = Tensor.empty(backend, shape, dtype, { device });
    if (deviceFill(t, rng, scale, mean)) return t;
    t.dispose();
  }
  const v = rng.fillNormal(numel, scale);
  if (mean !== 0) for (let i = 0; i < v.length; i++) v[i]! += mean;
  return Tensor.fromArray(backend, v, shape, dtype, { device });
}

/** Overwrite `t` (a parameter) with mean + scale * N(0, 1) values. */
export function fillNormal_(t: Tensor, rng: Rng, scale = 1, mean = 0): void {
  if (deviceFill(t, rng, scale, mean)) return;
  const v = normalTensor(t.backend, t.shape, t.dtype, rng, { scale, mean, device: t.device });
  t.copy_(v);
  v.dispose();
}
