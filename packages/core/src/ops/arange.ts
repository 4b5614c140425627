/**
 * torch.arange(n) built on the device from registry ops (a fill, cumsum, a subtraction): no host upload, so a forward
 * that needs row indices stays capturable in a CUDA graph (Tensor.fromArray is a synchronous copy, which fails a
 * capture).
 */
import { Tensor } from '../tensor.js';
import type { Backend } from '../backend.js';
import { callOp1 } from './registry.js';

/** [0, 1, ..., n - 1] as i64 on `backend`'s `device`. */
export function deviceArange(backend: Backend, n: number, device = 0): Tensor {
  const ones = Tensor.empty(backend, [n], 'i64', { device });
  backend.ops.fill(ones, 1);
  try {
    if (n === 0) return ones.clone();
    const upTo = callOp1('cumsum', [ones], { dim: 0 });
    try {
      return callOp1('sub', [upTo, 1]);
    } finally {
      upTo.dispose();
    }
  } finally {
    ones.dispose();
  }
}
