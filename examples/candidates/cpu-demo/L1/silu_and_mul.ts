// A WRONG SiluAndMul: it uses the GELU sigmoid approximation's constant, sigmoid(1.702 * g), where
// SiLU is g * sigmoid(g). It runs fine and returns the right shape, but the values are off.
// Expected: INCORRECT_NUMERICAL.
import { Module, Tensor } from '@fastkernels/core';

export class SiluAndMul extends Module {
  constructor() {
    super();
  }

  forward(x: Tensor): Tensor {
    const twoD = x.shape[x.shape.length - 1]!;
    const d = twoD / 2;
    const X = x.toFloat64Array();
    const rows = X.length / twoD;
    const out = new Float64Array(rows * d);
    for (let r = 0; r < rows; r++) {
      for (let j = 0; j < d; j++) {
        const g = X[r * twoD + j]!;
        const u = X[r * twoD + d + j]!;
        out[r * d + j] = (g / (1 + Math.exp(-1.702 * g))) * u; // bug: SiLU has no 1.702
      }
    }
    return Tensor.fromArray(this.ctx.backend, out, [...x.shape.slice(0, -1), d], x.dtype, { device: x.device });
  }
}
