import { Module, type Tensor } from '@fastkernels/core';

/**
 * torch.nn.Dropout(p=0.5, inplace=False) in eval mode: the identity. Inference never trains, so forward returns its
 * input as is (the same tensor, as PyTorch does in eval).
 */
export class Dropout extends Module {
  constructor(
    readonly p = 0.5,
    readonly inplace = false,
  ) {
    super();
    if (!(p >= 0 && p <= 1)) throw new RangeError(`Dropout: p must be in [0, 1], got ${p}`);
  }

  forward(x: Tensor): Tensor {
    return x;
  }
}

/** torch.nn.Identity(): returns its input. */
export class Identity extends Module {
  forward(x: Tensor): Tensor {
    return x;
  }
}
