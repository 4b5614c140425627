import { F, Module, type Tensor } from '@fastkernels/core';

/** torch.nn.Linear(in_features, out_features, bias=True): y = x W^T + b; weight [out, in], bias [out]. */
export class Linear extends Module {
  readonly weight: Tensor;
  readonly bias: Tensor | null;
  constructor(
    readonly inFeatures: number,
    readonly outFeatures: number,
    bias = true,
  ) {
    super();
    positiveInt('Linear', 'in_features', inFeatures);
    positiveInt('Linear', 'out_features', outFeatures);
    this.weight = this.parameter('weight', [outFeatures, inFeatures]);
    this.bias = bias ? this.parameter('bias', [outFeatures]) : null;
  }

  forward(x: Tensor): Tensor {
    return F.linear(x, this.weight, this.bias);
  }
}

/** A constructor argument check with PyTorch's argument name in the message. */
export function positiveInt(layer: string, name: string, v: number): void {
  if (!Number.isInteger(v) || v <= 0) throw new RangeError(`${layer}: ${name} must be a positive integer, got ${v}`);
}
