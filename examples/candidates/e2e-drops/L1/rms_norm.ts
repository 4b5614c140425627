// BREAKS CUDA-GRAPH CAPTURE: a correct RMSNorm that first reads one value of its input back to the host (a
// "NaN guard" written the naive way: a synchronous device-to-host copy inside forward). Eagerly (prefill) that
// only costs a sync per call and the output is right; inside the engine's decode-graph capture the copy is not
// allowed (it would wait on the host), so capture fails.
// Expected in `fastkernels e2e --backend cuda` (CUDA graphs on): dropped with category `compile` (capture
// phase), blamed from the error. On the CPU (no graphs) it is a slow but correct kernel and is kept.
import { Module, type Tensor } from '@fastkernels/core';

export class RMSNorm extends Module {
  readonly weight: Tensor;

  constructor(
    readonly hiddenSize: number,
    readonly eps = 1e-6,
  ) {
    super();
    this.weight = this.parameter('weight', [hiddenSize]);
  }

  forward(x: Tensor, residual?: Tensor | null): Tensor | [Tensor, Tensor] {
    // the host sync: one element of x, copied to the host and checked there
    const first = x.narrow(0, 0, 1).narrow(x.shape.length - 1, 0, 1).contiguous();
    const v = first.toFloat64Array()[0]!;
    first.dispose();
    if (Number.isNaN(v)) throw new Error('RMSNorm: NaN input');
    const ops = this.ctx.backend.ops;
    return residual ? ops.fusedAddRmsNorm(x, residual, this.weight, this.eps) : ops.rmsNorm(x, this.weight, this.eps);
  }
}
