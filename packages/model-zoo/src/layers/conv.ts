/**
 * torch.nn.Conv1d / Conv2d / Conv3d and ConvTranspose1d / 2d / 3d over the op registry (F.conv{n}d,
 * F.conv_transpose{n}d). PyTorch's constructor arguments, in order, and parameter names: weight
 * [out, in / groups, *k] (transposed: [in, out / groups, *k]), bias [out].
 */
import { CHANNELS_LAST_ORDER, F, Module, type Tensor } from '@fastkernels/core';
import { positiveInt } from './linear.js';

export type IntOrTuple = number | readonly number[];
export type ConvPadding = IntOrTuple | 'same' | 'valid';
export type PaddingMode = 'zeros' | 'reflect' | 'replicate' | 'circular';
type Nd = 1 | 2 | 3;

/** An int or a tuple of n ints, as torch's _ntuple. */
function ntuple(layer: string, name: string, v: IntOrTuple, n: number, min: number): number[] {
  const t = typeof v === 'number' ? new Array<number>(n).fill(v) : [...v];
  if (t.length !== n || t.some((x) => !Number.isInteger(x) || x < min)) throw new RangeError(`${layer}: ${name} must be an int >= ${min} or a tuple of ${n}, got ${JSON.stringify(v)}`);
  return t;
}

function channels(layer: string, inChannels: number, outChannels: number, groups: number): void {
  positiveInt(layer, 'in_channels', inChannels);
  positiveInt(layer, 'out_channels', outChannels);
  positiveInt(layer, 'groups', groups);
  if (inChannels % groups !== 0) throw new RangeError(`${layer}: in_channels ${inChannels} must be divisible by groups ${groups}`);
  if (outChannels % groups !== 0) throw new RangeError(`${layer}: out_channels ${outChannels} must be divisible by groups ${groups}`);
}

abstract class ConvNd extends Module {
  /** [out, in / groups, *k]; contiguous, or channels-last after toChannelsLast(). */
  weight: Tensor;
  readonly bias: Tensor | null;
  readonly kernelSize: number[];
  readonly stride: number[];
  readonly padding: number[] | 'same' | 'valid';
  readonly dilation: number[];
  constructor(
    readonly nd: Nd,
    readonly inChannels: number,
    readonly outChannels: number,
    kernelSize: IntOrTuple,
    stride: IntOrTuple,
    padding: ConvPadding,
    dilation: IntOrTuple,
    readonly groups: number,
    bias: boolean,
    readonly paddingMode: PaddingMode,
  ) {
    super();
    const layer = `Conv${nd}d`;
    channels(layer, inChannels, outChannels, groups);
    this.kernelSize = ntuple(layer, 'kernel_size', kernelSize, nd, 1);
    this.stride = ntuple(layer, 'stride', stride, nd, 1);
    this.dilation = ntuple(layer, 'dilation', dilation, nd, 1);
    if (padding === 'same' || padding === 'valid') {
      if (padding === 'same' && this.stride.some((s) => s !== 1)) throw new RangeError(`${layer}: padding='same' is not supported for strided convolutions`);
      this.padding = padding;
    } else this.padding = ntuple(layer, 'padding', padding, nd, 0);
    if (!['zeros', 'reflect', 'replicate', 'circular'].includes(paddingMode)) throw new RangeError(`${layer}: padding_mode must be 'zeros', 'reflect', 'replicate' or 'circular', got '${paddingMode}'`);
    this.weight = this.parameter('weight', [outChannels, inChannels / groups, ...this.kernelSize]);
    this.bias = bias ? this.parameter('bias', [outChannels]) : null;
  }

  forward(x: Tensor): Tensor {
    const conv = [F.conv1d, F.conv2d, F.conv3d][this.nd - 1]!;
    const opts = { stride: this.stride, dilation: this.dilation, groups: this.groups };
    if (this.paddingMode === 'zeros') return conv(x, this.weight, this.bias, { ...opts, padding: this.padding });
    // As torch: pad with the mode first ([last_left, last_right, prev_left, ...]), then convolve without padding.
    const padded = F.pad(x, this.reversedPadding(), this.paddingMode);
    try {
      return conv(padded, this.weight, this.bias, { ...opts, padding: 0 });
    } finally {
      padded.dispose();
    }
  }

  /**
   * Lay the weight out channels-last ([out, *k, in / groups] in memory, the same values), as torch's
   * module.to(memory_format=torch.channels_last) does to 4-d / 5-d weights: on the channels-last path cuDNN takes the
   * filter packed that way, and a contiguous one is repacked on every call (a copy kernel and a temporary a conv, in
   * CUDA graphs too). Conv1d, and a weight already packed so (a 1x1 filter is), stay as they are; true when it changed.
   */
  toChannelsLast(): boolean {
    const w = this.weight;
    const order = CHANNELS_LAST_ORDER[w.rank];
    if (!order || packedInOrder(w, order)) return false;
    const packed = w.permute(order);
    const base = packed.contiguous();
    packed.dispose();
    const inverse = new Array<number>(order.length);
    order.forEach((d, i) => (inverse[d] = i));
    this.weight = this.registerParameter('weight', base.permute(inverse));
    base.dispose();
    w.dispose();
    return true;
  }

  /** torch's _reversed_padding_repeated_twice ('same': the extra element on the right). */
  private reversedPadding(): number[] {
    const out: number[] = [];
    for (let i = this.nd - 1; i >= 0; i--) {
      if (this.padding === 'valid') out.push(0, 0);
      else if (this.padding === 'same') {
        const total = this.dilation[i]! * (this.kernelSize[i]! - 1);
        out.push(Math.floor(total / 2), total - Math.floor(total / 2));
      } else out.push(this.padding[i]!, this.padding[i]!);
    }
    return out;
  }
}

/** Whether t's elements are packed in `order` (outermost dim first), size-1 dims ignored (a 1x1 filter is both layouts). */
function packedInOrder(t: Tensor, order: readonly number[]): boolean {
  let expect = 1;
  for (let i = order.length - 1; i >= 0; i--) {
    const d = order[i]!;
    if (t.shape[d] === 1) continue;
    if (t.strides[d] !== expect) return false;
    expect *= t.shape[d]!;
  }
  return true;
}

/**
 * Every Conv2d / Conv3d of the tree with its weight laid out channels-last (ConvNd.toChannelsLast); how many changed.
 * What a model fed channels-last inputs wants once its weights are final (after a fuse()).
 */
export function convWeightsToChannelsLast(root: Module): number {
  let n = 0;
  for (const [, m] of root.namedModules()) if (m instanceof ConvNd && m.toChannelsLast()) n++;
  return n;
}

/** torch.nn.Conv1d(in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True, padding_mode='zeros'). */
export class Conv1d extends ConvNd {
  constructor(inChannels: number, outChannels: number, kernelSize: IntOrTuple, stride: IntOrTuple = 1, padding: ConvPadding = 0, dilation: IntOrTuple = 1, groups = 1, bias = true, paddingMode: PaddingMode = 'zeros') {
    super(1, inChannels, outChannels, kernelSize, stride, padding, dilation, groups, bias, paddingMode);
  }
}

/** torch.nn.Conv2d(in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True, padding_mode='zeros'). */
export class Conv2d extends ConvNd {
  constructor(inChannels: number, outChannels: number, kernelSize: IntOrTuple, stride: IntOrTuple = 1, padding: ConvPadding = 0, dilation: IntOrTuple = 1, groups = 1, bias = true, paddingMode: PaddingMode = 'zeros') {
    super(2, inChannels, outChannels, kernelSize, stride, padding, dilation, groups, bias, paddingMode);
  }
}

/** torch.nn.Conv3d(in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True, padding_mode='zeros'). */
export class Conv3d extends ConvNd {
  constructor(inChannels: number, outChannels: number, kernelSize: IntOrTuple, stride: IntOrTuple = 1, padding: ConvPadding = 0, dilation: IntOrTuple = 1, groups = 1, bias = true, paddingMode: PaddingMode = 'zeros') {
    super(3, inChannels, outChannels, kernelSize, stride, padding, dilation, groups, bias, paddingMode);
  }
}

abstract class ConvTransposeNd extends Module {
  readonly weight: Tensor;
  readonly bias: Tensor | null;
  readonly kernelSize: number[];
  readonly stride: number[];
  readonly padding: number[];
  readonly outputPadding: number[];
  readonly dilation: number[];
  constructor(
    readonly nd: Nd,
    readonly inChannels: number,
    readonly outChannels: number,
    kernelSize: IntOrTuple,
    stride: IntOrTuple,
    padding: IntOrTuple,
    outputPadding: IntOrTuple,
    readonly groups: number,
    bias: boolean,
    dilation: IntOrTuple,
    paddingMode: PaddingMode,
  ) {
    super();
    const layer = `ConvTranspose${nd}d`;
    channels(layer, inChannels, outChannels, groups);
    if (paddingMode !== 'zeros') throw new RangeError(`${layer}: only padding_mode='zeros' is supported (as in PyTorch), got '${paddingMode}'`);
    this.kernelSize = ntuple(layer, 'kernel_size', kernelSize, nd, 1);
    this.stride = ntuple(layer, 'stride', stride, nd, 1);
    this.padding = ntuple(layer, 'padding', padding, nd, 0);
    this.outputPadding = ntuple(layer, 'output_padding', outputPadding, nd, 0);
    this.dilation = ntuple(layer, 'dilation', dilation, nd, 1);
    this.weight = this.parameter('weight', [inChannels, outChannels / groups, ...this.kernelSize]);
    this.bias = bias ? this.parameter('bias', [outChannels]) : null;
  }

  forward(x: Tensor): Tensor {
    const convT = [F.convTranspose1d, F.convTranspose2d, F.convTranspose3d][this.nd - 1]!;
    return convT(x, this.weight, this.bias, { stride: this.stride, padding: this.padding, output_padding: this.outputPadding, groups: this.groups, dilation: this.dilation });
  }
}

/** torch.nn.ConvTranspose1d(in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1, bias=True, dilation=1, padding_mode='zeros'). */
export class ConvTranspose1d extends ConvTransposeNd {
  constructor(inChannels: number, outChannels: number, kernelSize: IntOrTuple, stride: IntOrTuple = 1, padding: IntOrTuple = 0, outputPadding: IntOrTuple = 0, groups = 1, bias = true, dilation: IntOrTuple = 1, paddingMode: PaddingMode = 'zeros') {
    super(1, inChannels, outChannels, kernelSize, stride, padding, outputPadding, groups, bias, dilation, paddingMode);
  }
}

/** torch.nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1, bias=True, dilation=1, padding_mode='zeros'). */
export class ConvTranspose2d extends ConvTransposeNd {
  constructor(inChannels: number, outChannels: number, kernelSize: IntOrTuple, stride: IntOrTuple = 1, padding: IntOrTuple = 0, outputPadding: IntOrTuple = 0, groups = 1, bias = true, dilation: IntOrTuple = 1, paddingMode: PaddingMode = 'zeros') {
    super(2, inChannels, outChannels, kernelSize, stride, padding, outputPadding, groups, bias, dilation, paddingMode);
  }
}

/** torch.nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1, bias=True, dilation=1, padding_mode='zeros'). */
export class ConvTranspose3d extends ConvTransposeNd {
  constructor(inChannels: number, outChannels: number, kernelSize: IntOrTuple, stride: IntOrTuple = 1, padding: IntOrTuple = 0, outputPadding: IntOrTuple = 0, groups = 1, bias = true, dilation: IntOrTuple = 1, paddingMode: PaddingMode = 'zeros') {
    super(3, inChannels, outChannels, kernelSize, stride, padding, outputPadding, groups, bias, dilation, paddingMode);
  }
}
