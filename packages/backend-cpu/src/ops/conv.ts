/**
 * Convolutions in float64 with PyTorch's semantics (F.conv1d/2d/3d, F.conv_transpose1d/2d/3d): NCL / NCHW / NCDHW
 * inputs (or unbatched CL / CHW / CDHW), any strides (channels-last is a memory format, read through the strides),
 * zero padding. Every rank runs one 3-D loop nest: a 1-D or 2-D problem gets leading spatial dims of size 1.
 */
import { formatShape, type Backend, type DType, type Tensor } from '@fastkernels/core';
import { expectFloat, gather, output } from '../strided.js';

export type IntOrTuple = number | readonly number[];

/** An int or a tuple of `n` positive (or non-negative) ints, as torch's _single/_pair/_triple. */
export function ntuple(what: string, name: string, v: IntOrTuple, n: number, min: number): number[] {
  const t = typeof v === 'number' ? new Array<number>(n).fill(v) : [...v];
  if (t.length !== n || t.some((x) => !Number.isInteger(x) || x < min)) {
    throw new RangeError(`${what}: ${name} must be an int >= ${min} or a tuple of ${n} of them, got ${JSON.stringify(v)}`);
  }
  return t;
}

/** 1-D / 2-D spatial lists padded on the left to three dims (size 1, stride 1, pad 0, dilation 1). */
export function to3(v: readonly number[], fill: number): [number, number, number] {
  const out = [...new Array<number>(3 - v.length).fill(fill), ...v];
  return out as [number, number, number];
}

/** The input as [N, C, D, H, W] float64 values plus whether it was unbatched; checks its rank and dtype. */
export function readSpatial(what: string, input: Tensor, nd: number): { X: Float64Array; N: number; C: number; S: [number, number, number]; batched: boolean } {
  expectFloat(input, what, 'input');
  if (input.rank !== nd + 1 && input.rank !== nd + 2) {
    const names = ['L', 'H, W', 'D, H, W'][nd - 1];
    throw new RangeError(`${what}: expected a ${nd + 2}-D input [N, C, ${names}] or ${nd + 1}-D [C, ${names}], got ${formatShape(input.shape)}`);
  }
  const batched = input.rank === nd + 2;
  const shape = batched ? input.shape : [1, ...input.shape];
  return { X: gather(input, what), N: shape[0]!, C: shape[1]!, S: to3(shape.slice(2), 1), batched };
}

function sameDType(what: string, input: Tensor, weight: Tensor, bias: Tensor | null): DType {
  expectFloat(weight, what, 'weight');
  if (weight.dtype !== input.dtype || (bias && bias.dtype !== input.dtype)) {
    throw new TypeError(`${what}: input (${input.dtype}), weight (${weight.dtype})${bias ? ` and bias (${bias.dtype})` : ''} must have one dtype`);
  }
  return input.dtype;
}

export interface ConvOptions {
  readonly stride?: IntOrTuple;
  /** An int, a tuple, 'valid' (no padding) or 'same' (output size = input size; stride 1 only, as in torch). */
  readonly padding?: IntOrTuple | 'same' | 'valid';
  readonly dilation?: IntOrTuple;
  readonly groups?: number;
}

/**
 * F.conv{nd}d(input, weight [C_out, C_in / groups, *k], bias [C_out]). 'same' pads dilation * (k - 1) in total per dim,
 * the extra element on the right as torch does when it is odd.
 */
export function convNd(backend: Backend, nd: 1 | 2 | 3, input: Tensor, weight: Tensor, bias: Tensor | null = null, options: ConvOptions = {}): Tensor {
  const what = `conv${nd}d`;
  const dtype = sameDType(what, input, weight, bias);
  const { X, N, C, S, batched } = readSpatial(what, input, nd);
  const groups = options.groups ?? 1;
  if (!Number.isInteger(groups) || groups < 1) throw new RangeError(`${what}: groups must be a positive int, got ${groups}`);
  if (weight.rank !== nd + 2) throw new RangeError(`${what}: weight must be ${nd + 2}-D [C_out, C_in / groups, *kernel], got ${formatShape(weight.shape)}`);
  const Cout = weight.shape[0]!;
  const Cg = weight.shape[1]!;
  if (C % groups !== 0 || Cout % groups !== 0) throw new RangeError(`${what}: in_channels ${C} and out_channels ${Cout} must both be divisible by groups ${groups}`);
  if (Cg * groups !== C) {
    throw new RangeError(`${what}: given groups=${groups}, weight ${formatShape(weight.shape)} expects input ${formatShape(input.shape)} to have ${Cg * groups} channels, but it has ${C}`);
  }
  if (bias && (bias.rank !== 1 || bias.shape[0] !== Cout)) throw new RangeError(`${what}: bias ${formatShape(bias.shape)} must be [${Cout}]`);
  const kernel = weight.shape.slice(2);
  const stride = ntuple(what, 'stride', options.stride ?? 1, nd, 1);
  const dilation = ntuple(what, 'dilation', options.dilation ?? 1, nd, 1);
  const pad = options.padding ?? 0;
  let padL: number[];
  let padR: number[];
  if (pad === 'valid') {
    padL = padR = new Array<number>(nd).fill(0);
  } else if (pad === 'same') {
    if (stride.some((s) => s !== 1)) throw new RangeError(`${what}: padding='same' is not supported for strided convolutions (stride ${JSON.stringify(stride)})`);
    const total = kernel.map((k, i) => dilation[i]! * (k - 1));
    padL = total.map((t) => Math.floor(t / 2));
    padR = total.map((t, i) => t - padL[i]!);
  } else if (typeof pad === 'string') {
    throw new RangeError(`${what}: padding must be an int, a tuple, 'same' or 'valid', got '${pad}'`);
  } else {
    padL = padR = ntuple(what, 'padding', pad, nd, 0);
  }
  const spatial = S.slice(3 - nd);
  const outSp = spatial.map((s, i) => Math.floor((s + padL[i]! + padR[i]! - dilation[i]! * (kernel[i]! - 1) - 1) / stride[i]!) + 1);
  if (outSp.some((o) => o <= 0)) {
    throw new RangeError(`${what}: input ${formatShape(input.shape)} padded by ${JSON.stringify(padL)} is smaller than the dilated kernel ${formatShape(kernel)} (output size ${formatShape(outSp)})`);
  }
  const W = gather(weight, what);
  const bv = bias ? gather(bias, what) : null;
  const [KD, KH, KW] = to3(kernel, 1);
  const [sd, sh, sw] = to3(stride, 1);
  const [dd, dh, dw] = to3(dilation, 1);
  const [pd, ph, pw] = to3(padL, 0);
  const [ID, IH, IW] = S;
  const [OD, OH, OW] = to3(outSp, 1);
  const Coutg = Cout / groups;
  const Y = new Float64Array(N * Cout * OD * OH * OW);
  const inPlane = ID * IH * IW;
  const kVol = KD * KH * KW;
  for (let n = 0; n < N; n++) {
    for (let oc = 0; oc < Cout; oc++) {
      const g = Math.floor(oc / Coutg);
      const b = bv ? bv[oc]! : 0;
      let yo = (n * Cout + oc) * OD * OH * OW;
      for (let od = 0; od < OD; od++) {
        for (let oh = 0; oh < OH; oh++) {
          for (let ow = 0; ow < OW; ow++, yo++) {
            let s = 0;
            for (let ic = 0; ic < Cg; ic++) {
              const x0 = (n * C + g * Cg + ic) * inPlane;
              const w0 = (oc * Cg + ic) * kVol;
              for (let kd = 0; kd < KD; kd++) {
                const id = od * sd - pd + kd * dd;
                if (id < 0 || id >= ID) continue;
                for (let kh = 0; kh < KH; kh++) {
                  const ih = oh * sh - ph + kh * dh;
                  if (ih < 0 || ih >= IH) continue;
                  const xr = x0 + (id * IH + ih) * IW;
                  const wr = w0 + (kd * KH + kh) * KW;
                  for (let kw = 0; kw < KW; kw++) {
                    const iw = ow * sw - pw + kw * dw;
                    if (iw >= 0 && iw < IW) s += X[xr + iw]! * W[wr + kw]!;
                  }
                }
              }
            }
            Y[yo] = s + b;
          }
        }
      }
    }
  }
  const shape = [N, Cout, ...outSp];
  return output(backend, batched ? shape : shape.slice(1), dtype, Y, what);
}

export const conv1d = (backend: Backend, input: Tensor, weight: Tensor, bias: Tensor | null = null, options: ConvOptions = {}): Tensor => convNd(backend, 1, input, weight, bias, options);
export const conv2d = (backend: Backend, input: Tensor, weight: Tensor, bias: Tensor | null = null, options: ConvOptions = {}): Tensor => convNd(backend, 2, input, weight, bias, options);
export const conv3d = (backend: Backend, input: Tensor, weight: Tensor, bias: Tensor | null = null, options: ConvOptions = {}): Tensor => convNd(backend, 3, input, weight, bias, options);

export interface ConvTransposeOptions {
  readonly stride?: IntOrTuple;
  readonly padding?: IntOrTuple;
  /** Extra size on one side of the output; each must be smaller than its stride or its dilation (torch's rule). */
  readonly output_padding?: IntOrTuple;
  readonly groups?: number;
  readonly dilation?: IntOrTuple;
}

/**
 * F.conv_transpose{nd}d(input, weight [C_in, C_out / groups, *k], bias [C_out]): the gradient of conv{nd}d with
 * respect to its input. Output size (in - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1.
 * Computed as a scatter: input element i adds x * w[k] to output position i * stride - padding + k * dilation.
 */
export function convTransposeNd(backend: Backend, nd: 1 | 2 | 3, input: Tensor, weight: Tensor, bias: Tensor | null = null, options: ConvTransposeOptions = {}): Tensor {
  const what = `conv_transpose${nd}d`;
  const dtype = sameDType(what, input, weight, bias);
  const { X, N, C, S, batched } = readSpatial(what, input, nd);
  const groups = options.groups ?? 1;
  if (!Number.isInteger(groups) || groups < 1) throw new RangeError(`${what}: groups must be a positive int, got ${groups}`);
  if (weight.rank !== nd + 2) throw new RangeError(`${what}: weight must be ${nd + 2}-D [C_in, C_out / groups, *kernel], got ${formatShape(weight.shape)}`);
  if (weight.shape[0] !== C) throw new RangeError(`${what}: weight ${formatShape(weight.shape)} expects ${weight.shape[0]} input channels, but input ${formatShape(input.shape)} has ${C}`);
  if (C % groups !== 0) throw new RangeError(`${what}: in_channels ${C} must be divisible by groups ${groups}`);
  const Coutg = weight.shape[1]!;
  const Cout = Coutg * groups;
  if (bias && (bias.rank !== 1 || bias.shape[0] !== Cout)) throw new RangeError(`${what}: bias ${formatShape(bias.shape)} must be [${Cout}]`);
  const kernel = weight.shape.slice(2);
  const stride = ntuple(what, 'stride', options.stride ?? 1, nd, 1);
  const dilation = ntuple(what, 'dilation', options.dilation ?? 1, nd, 1);
  const padding = ntuple(what, 'padding', options.padding ?? 0, nd, 0);
  const outPad = ntuple(what, 'output_padding', options.output_padding ?? 0, nd, 0);
  outPad.forEach((p, i) => {
    if (p >= stride[i]! && p >= dilation[i]!) throw new RangeError(`${what}: output_padding ${JSON.stringify(outPad)} must be smaller than either stride ${JSON.stringify(stride)} or dilation ${JSON.stringify(dilation)}`);
  });
  const spatial = S.slice(3 - nd);
  const outSp = spatial.map((s, i) => (s - 1) * stride[i]! - 2 * padding[i]! + dilation[i]! * (kernel[i]! - 1) + outPad[i]! + 1);
  if (outSp.some((o) => o <= 0)) throw new RangeError(`${what}: input ${formatShape(input.shape)} gives a non-positive output size ${formatShape(outSp)}`);
  const W = gather(weight, what);
  const bv = bias ? gather(bias, what) : null;
  const [KD, KH, KW] = to3(kernel, 1);
  const [sd, sh, sw] = to3(stride, 1);
  const [dd, dh, dw] = to3(dilation, 1);
  const [pd, ph, pw] = to3(padding, 0);
  const [ID, IH, IW] = S;
  const [OD, OH, OW] = to3(outSp, 1);
  const Cg = C / groups;
  const outPlane = OD * OH * OW;
  const Y = new Float64Array(N * Cout * outPlane);
  const kVol = KD * KH * KW;
  for (let n = 0; n < N; n++) {
    for (let ic = 0; ic < C; ic++) {
      const g = Math.floor(ic / Cg);
      let xi = (n * C + ic) * ID * IH * IW;
      for (let id = 0; id < ID; id++) {
        for (let ih = 0; ih < IH; ih++) {
          for (let iw = 0; iw < IW; iw++, xi++) {
            const xv = X[xi]!;
            for (let j = 0; j < Coutg; j++) {
              const oc = g * Coutg + j;
              const y0 = (n * Cout + oc) * outPlane;
              const w0 = (ic * Coutg + j) * kVol;
              for (let kd = 0; kd < KD; kd++) {
                const od = id * sd - pd + kd * dd;
                if (od < 0 || od >= OD) continue;
                for (let kh = 0; kh < KH; kh++) {
                  const oh = ih * sh - ph + kh * dh;
                  if (oh < 0 || oh >= OH) continue;
                  const yr = y0 + (od * OH + oh) * OW;
                  const wr = w0 + (kd * KH + kh) * KW;
                  for (let kw = 0; kw < KW; kw++) {
                    const ow = iw * sw - pw + kw * dw;
                    if (ow >= 0 && ow < OW) Y[yr + ow]! += xv * W[wr + kw]!;
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  if (bv) for (let n = 0; n < N; n++) for (let oc = 0; oc < Cout; oc++) for (let p = 0; p < outPlane; p++) Y[(n * Cout + oc) * outPlane + p]! += bv[oc]!;
  const shape = [N, Cout, ...outSp];
  return output(backend, batched ? shape : shape.slice(1), dtype, Y, what);
}

export const convTranspose1d = (backend: Backend, input: Tensor, weight: Tensor, bias: Tensor | null = null, options: ConvTransposeOptions = {}): Tensor =>
  convTransposeNd(backend, 1, input, weight, bias, options);
export const convTranspose2d = (backend: Backend, input: Tensor, weight: Tensor, bias: Tensor | null = null, options: ConvTransposeOptions = {}): Tensor =>
  convTransposeNd(backend, 2, input, weight, bias, options);
export const convTranspose3d = (backend: Backend, input: Tensor, weight: Tensor, bias: Tensor | null = null, options: ConvTransposeOptions = {}): Tensor =>
  convTransposeNd(backend, 3, input, weight, bias, options);
