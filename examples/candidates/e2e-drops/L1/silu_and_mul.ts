// DELIBERATELY BROKEN (wrong output): SwiGLU with the halves swapped, silu(up) * gate instead of
// silu(gate) * up. It runs, is CUDA-graph capturable (two strided copies and the backend's op, no host sync) and
// costs about what the baseline does, but every MLP output is wrong, so greedy tokens stop agreeing.
// Expected in `fastkernels e2e`: dropped with category `incorrect` (found by bisection: nothing throws).
// Expected in `fastkernels bench`: INCORRECT_NUMERICAL.
import { Module, Tensor } from '@fastkernels/core';

export class SiluAndMul extends Module {
  forward(x: Tensor): Tensor {
    const { backend } = this.ctx;
    const last = x.shape.length - 1;
    const d = x.shape[last]! / 2;
    const swapped = Tensor.empty(backend, x.shape, x.dtype, { device: x.device });
    backend.ops.copy(swapped.narrow(last, 0, d), x.narrow(last, d, d)); // up first
    backend.ops.copy(swapped.narrow(last, d, d), x.narrow(last, 0, d)); // then gate
    const y = backend.ops.siluAndMul(swapped);
    swapped.dispose();
    return y;
  }
}
