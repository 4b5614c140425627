/**
 * torch.nn normalisation layers over the op registry: LayerNorm, GroupNorm, BatchNorm1d/2d/3d (inference: the running
 * statistics), RMSNorm. Parameter names are PyTorch's (weight, bias, running_mean, running_var) and start at PyTorch's
 * deterministic init (weight 1, bias 0, running_var 1), so a tree that is not loaded still computes the identity norm.
 */
import { F, Module, formatShape, type Tensor } from '@fastkernels/core';
import { positiveInt } from './linear.js';

function shapeOf(layer: string, s: number | readonly number[]): number[] {
  const shape = typeof s === 'number' ? [s] : [...s];
  if (shape.length === 0 || shape.some((d) => !Number.isInteger(d) || d <= 0)) throw new RangeError(`${layer}: normalized_shape must be a positive int or a non-empty list of them, got ${JSON.stringify(s)}`);
  return shape;
}

/** torch.nn.LayerNorm(normalized_shape, eps=1e-5, elementwise_affine=True, bias=True) over the trailing dims. */
export class LayerNorm extends Module {
  readonly normalizedShape: number[];
  readonly weight: Tensor | null;
  readonly bias: Tensor | null;
  constructor(
    normalizedShape: number | readonly number[],
    readonly eps = 1e-5,
    readonly elementwiseAffine = true,
    bias = true,
  ) {
    super();
    this.normalizedShape = shapeOf('LayerNorm', normalizedShape);
    this.weight = elementwiseAffine ? this.parameter('weight', this.normalizedShape).fill_(1) : null;
    this.bias = elementwiseAffine && bias ? this.parameter('bias', this.normalizedShape) : null;
  }

  forward(x: Tensor): Tensor {
    return F.layerNorm(x, this.normalizedShape, this.weight, this.bias, this.eps);
  }
}

/** torch.nn.GroupNorm(num_groups, num_channels, eps=1e-5, affine=True) over [N, C, *]. */
export class GroupNorm extends Module {
  readonly weight: Tensor | null;
  readonly bias: Tensor | null;
  constructor(
    readonly numGroups: number,
    readonly numChannels: number,
    readonly eps = 1e-5,
    readonly affine = true,
  ) {
    super();
    positiveInt('GroupNorm', 'num_groups', numGroups);
    positiveInt('GroupNorm', 'num_channels', numChannels);
    if (numChannels % numGroups !== 0) throw new RangeError(`GroupNorm: num_channels ${numChannels} must be divisible by num_groups ${numGroups}`);
    this.weight = affine ? this.parameter('weight', [numChannels]).fill_(1) : null;
    this.bias = affine ? this.parameter('bias', [numChannels]) : null;
  }

  forward(x: Tensor): Tensor {
    return F.groupNorm(x, this.numGroups, this.weight, this.bias, this.eps);
  }
}

abstract class BatchNormNd extends Module {
  readonly weight: Tensor | null;
  readonly bias: Tensor | null;
  readonly runningMean: Tensor;
  readonly runningVar: Tensor;
  constructor(
    private readonly layer: string,
    private readonly ranks: readonly number[],
    readonly numFeatures: number,
    readonly eps: number,
    readonly momentum: number,
    readonly affine: boolean,
    trackRunningStats: boolean,
  ) {
    super();
    positiveInt(layer, 'num_features', numFeatures);
    // Without running statistics torch normalises by the batch's own, even in eval: a training-time form we do not run.
    if (!trackRunningStats) throw new RangeError(`${layer}: track_running_stats=False (batch statistics) is not supported: this layer is the inference form over running_mean / running_var`);
    this.weight = affine ? this.parameter('weight', [numFeatures]).fill_(1) : null;
    this.bias = affine ? this.parameter('bias', [numFeatures]) : null;
    this.runningMean = this.parameter('running_mean', [numFeatures]);
    this.runningVar = this.parameter('running_var', [numFeatures]).fill_(1);
  }

  forward(x: Tensor): Tensor {
    if (!this.ranks.includes(x.rank)) throw new RangeError(`${this.layer}: expected a ${this.ranks.join('-D or ')}-D input, got ${formatShape(x.shape)}`);
    return F.batchNorm(x, this.runningMean, this.runningVar, this.weight, this.bias, false, this.momentum, this.eps);
  }
}

/** torch.nn.BatchNorm1d(num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True), eval mode: [N, C] or [N, C, L]. */
export class BatchNorm1d extends BatchNormNd {
  constructor(numFeatures: number, eps = 1e-5, momentum = 0.1, affine = true, trackRunningStats = true) {
    super('BatchNorm1d', [2, 3], numFeatures, eps, momentum, affine, trackRunningStats);
  }
}

/** torch.nn.BatchNorm2d(num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True), eval mode: [N, C, H, W]. */
export class BatchNorm2d extends BatchNormNd {
  constructor(numFeatures: number, eps = 1e-5, momentum = 0.1, affine = true, trackRunningStats = true) {
    super('BatchNorm2d', [4], numFeatures, eps, momentum, affine, trackRunningStats);
  }
}

/** torch.nn.BatchNorm3d(num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True), eval mode: [N, C, D, H, W]. */
export class BatchNorm3d extends BatchNormNd {
  constructor(numFeatures: number, eps = 1e-5, momentum = 0.1, affine = true, trackRunningStats = true) {
    super('BatchNorm3d', [5], numFeatures, eps, momentum, affine, trackRunningStats);
  }
}

/** torch.nn.RMSNorm(normalized_shape, eps=None, elementwise_affine=True); eps None is torch.finfo(x.dtype).eps. */
export class RMSNorm extends Module {
  readonly normalizedShape: number[];
  readonly weight: Tensor | null;
  constructor(
    normalizedShape: number | readonly number[],
    readonly eps: number | null = null,
    readonly elementwiseAffine = true,
  ) {
    super();
    this.normalizedShape = shapeOf('RMSNorm', normalizedShape);
    this.weight = elementwiseAffine ? this.parameter('weight', this.normalizedShape).fill_(1) : null;
  }

  forward(x: Tensor): Tensor {
    return F.rmsNorm(x, this.normalizedShape, this.weight, this.eps);
  }
}
