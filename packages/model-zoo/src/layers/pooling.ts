/** torch.nn pooling layers over the op registry (F.max_pool2d, F.avg_pool2d, F.adaptive_avg_pool2d); no parameters. */
import { F, Module, type Tensor } from '@fastkernels/core';
import type { IntOrTuple } from './conv.js';

const list = (v: IntOrTuple): number | number[] => (typeof v === 'number' ? v : [...v]);

/** torch.nn.MaxPool2d(kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False). */
export class MaxPool2d extends Module {
  constructor(
    readonly kernelSize: IntOrTuple,
    readonly stride: IntOrTuple | null = null,
    readonly padding: IntOrTuple = 0,
    readonly dilation: IntOrTuple = 1,
    readonly returnIndices = false,
    readonly ceilMode = false,
  ) {
    super();
  }

  forward(x: Tensor): Tensor | [Tensor, Tensor] {
    const opts = { stride: this.stride === null ? null : list(this.stride), padding: list(this.padding), dilation: list(this.dilation), ceil_mode: this.ceilMode };
    return this.returnIndices ? F.maxPool2dWithIndices(x, list(this.kernelSize), opts) : F.maxPool2d(x, list(this.kernelSize), opts);
  }
}

/** torch.nn.AvgPool2d(kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None). */
export class AvgPool2d extends Module {
  constructor(
    readonly kernelSize: IntOrTuple,
    readonly stride: IntOrTuple | null = null,
    readonly padding: IntOrTuple = 0,
    readonly ceilMode = false,
    readonly countIncludePad = true,
    readonly divisorOverride: number | null = null,
  ) {
    super();
  }

  forward(x: Tensor): Tensor {
    return F.avgPool2d(x, list(this.kernelSize), {
      stride: this.stride === null ? null : list(this.stride), padding: list(this.padding), ceil_mode: this.ceilMode, count_include_pad: this.countIncludePad, divisor_override: this.divisorOverride,
    });
  }
}

/** torch.nn.AdaptiveAvgPool2d(output_size): an int, or [H, W] where null keeps the input's size. */
export class AdaptiveAvgPool2d extends Module {
  constructor(readonly outputSize: number | readonly (number | null)[]) {
    super();
  }

  forward(x: Tensor): Tensor {
    return F.adaptiveAvgPool2d(x, typeof this.outputSize === 'number' ? this.outputSize : [...this.outputSize]);
  }
}

/** torch.nn.Flatten(start_dim=1, end_dim=-1): a view when the input's strides allow, as torch. */
export class Flatten extends Module {
  constructor(
    readonly startDim = 1,
    readonly endDim = -1,
  ) {
    super();
  }

  forward(x: Tensor): Tensor {
    return F.flatten(x, this.startDim, this.endDim);
  }
}
