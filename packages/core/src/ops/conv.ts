/**
 * The conv & pool group, PyTorch's F.* semantics: conv1d/2d/3d (stride, padding int | tuple | 'same' | 'valid', dilation,
 * groups incl. depthwise, bias), conv_transpose1d/2d/3d (output_padding), max_pool{1,2,3}d (+ _with_indices),
 * avg_pool{1,2,3}d, adaptive_avg_pool{1,2,3}d, adaptive_max_pool{1,2,3}d (+ _with_indices), and conv2d_act (conv2d then SiLU /
 * ReLU, one fused op). Inputs are [N, C, *spatial]
 * or unbatched [C, *spatial] with any strides: channels-last is a memory format, not another op.
 */
import { z } from 'zod';
import { formatShape } from '../shape.js';
import type { Tensor } from '../tensor.js';
import { commonFloatDType } from './matmul.js';
import { callOp, callOp1, defineOp, meta, opError, type TensorMeta } from './registry.js';

const intOrTuple = z.union([z.number().int(), z.array(z.number().int())]);
type IntOrTuple = z.output<typeof intOrTuple>;
type Nd = 1 | 2 | 3;

function tuple(op: string, name: string, v: IntOrTuple, n: number, min: number): number[] {
  const t = typeof v === 'number' ? new Array<number>(n).fill(v) : [...v];
  if (t.length !== n || t.some((x) => x < min)) opError(op, `${name} must be an int >= ${min} or a tuple of ${n} of them, got ${JSON.stringify(v)}`);
  return t;
}

/** Splits [N, C, *spatial] / [C, *spatial] into its parts (an OpError for other ranks). */
function spatialOf(op: string, x: TensorMeta, nd: Nd): { lead: number[]; C: number; sp: number[] } {
  const r = x.shape.length;
  if (r !== nd + 1 && r !== nd + 2) opError(op, `expected a ${nd + 2}-D input [N, C, ${['L', 'H, W', 'D, H, W'][nd - 1]}] or ${nd + 1}-D (unbatched), got ${formatShape(x.shape)}`);
  const batched = r === nd + 2;
  return { lead: batched ? [x.shape[0]!] : [], C: x.shape[batched ? 1 : 0]!, sp: x.shape.slice(-nd) };
}

const convAttrs = z
  .object({
    stride: intOrTuple.default(1),
    padding: z.union([intOrTuple, z.enum(['same', 'valid'])]).default(0),
    dilation: intOrTuple.default(1),
    groups: z.number().int().min(1).default(1),
  })
  .strict();
type ConvAttrs = z.output<typeof convAttrs>;

/** conv{nd}d's output shape; 'same' pads dilation * (k - 1) per dim (stride 1 only, as torch). */
export function convOutputShape(op: string, nd: Nd, x: TensorMeta, w: TensorMeta, a: ConvAttrs): number[] {
  const { lead, C, sp } = spatialOf(op, x, nd);
  if (w.shape.length !== nd + 2) opError(op, `weight must be ${nd + 2}-D [C_out, C_in / groups, *kernel], got ${formatShape(w.shape)}`);
  const [Cout, Cg] = w.shape as [number, number];
  if (C % a.groups !== 0 || Cout % a.groups !== 0) opError(op, `in_channels ${C} and out_channels ${Cout} must both be divisible by groups ${a.groups}`);
  if (Cg * a.groups !== C) opError(op, `given groups=${a.groups}, weight ${formatShape(w.shape)} expects input ${formatShape(x.shape)} to have ${Cg * a.groups} channels, but it has ${C}`);
  const k = w.shape.slice(2);
  const stride = tuple(op, 'stride', a.stride, nd, 1);
  const dil = tuple(op, 'dilation', a.dilation, nd, 1);
  let total: number[];
  if (a.padding === 'valid') total = new Array<number>(nd).fill(0);
  else if (a.padding === 'same') {
    if (stride.some((s) => s !== 1)) opError(op, `padding='same' is not supported for strided convolutions (stride ${JSON.stringify(stride)})`);
    total = k.map((kk, i) => dil[i]! * (kk - 1));
  } else total = tuple(op, 'padding', a.padding, nd, 0).map((p) => 2 * p);
  const out = sp.map((s, i) => Math.floor((s + total[i]! - dil[i]! * (k[i]! - 1) - 1) / stride[i]!) + 1);
  if (out.some((o) => o <= 0)) opError(op, `input ${formatShape(x.shape)} (padded) is smaller than the dilated kernel ${formatShape(k)}: output size ${formatShape(out)}`);
  return [...lead, Cout, ...out];
}

const convTAttrs = z
  .object({
    stride: intOrTuple.default(1),
    padding: intOrTuple.default(0),
    output_padding: intOrTuple.default(0),
    groups: z.number().int().min(1).default(1),
    dilation: intOrTuple.default(1),
  })
  .strict();
type ConvTAttrs = z.output<typeof convTAttrs>;

/** conv_transpose{nd}d's output shape: (in - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1. */
export function convTransposeOutputShape(op: string, nd: Nd, x: TensorMeta, w: TensorMeta, a: ConvTAttrs): number[] {
  const { lead, C, sp } = spatialOf(op, x, nd);
  if (w.shape.length !== nd + 2) opError(op, `weight must be ${nd + 2}-D [C_in, C_out / groups, *kernel], got ${formatShape(w.shape)}`);
  if (w.shape[0] !== C) opError(op, `weight ${formatShape(w.shape)} expects ${w.shape[0]} input channels, but input ${formatShape(x.shape)} has ${C}`);
  if (C % a.groups !== 0) opError(op, `in_channels ${C} must be divisible by groups ${a.groups}`);
  const k = w.shape.slice(2);
  const stride = tuple(op, 'stride', a.stride, nd, 1);
  const dil = tuple(op, 'dilation', a.dilation, nd, 1);
  const pad = tuple(op, 'padding', a.padding, nd, 0);
  const opad = tuple(op, 'output_padding', a.output_padding, nd, 0);
  opad.forEach((p, i) => {
    if (p >= stride[i]! && p >= dil[i]!) opError(op, `output_padding ${JSON.stringify(opad)} must be smaller than either stride ${JSON.stringify(stride)} or dilation ${JSON.stringify(dil)}`);
  });
  const out = sp.map((s, i) => (s - 1) * stride[i]! - 2 * pad[i]! + dil[i]! * (k[i]! - 1) + opad[i]! + 1);
  if (out.some((o) => o <= 0)) opError(op, `input ${formatShape(x.shape)} gives a non-positive output size ${formatShape(out)}`);
  return [...lead, w.shape[1]! * a.groups, ...out];
}

function checkBias(op: string, b: TensorMeta | null, cout: number): void {
  if (b && (b.shape.length !== 1 || b.shape[0] !== cout)) opError(op, `bias ${formatShape(b.shape)} must be [${cout}]`);
}

for (const nd of [1, 2, 3] as const) {
  const name = `conv${nd}d`;
  defineOp({
    name,
    group: 'conv',
    doc: `F.${name}(input, weight [C_out, C_in / groups, *k], bias [C_out], stride, padding (int, tuple, 'same', 'valid'), dilation, groups); zero padding.`,
    inputs: [{ name: 'input', dtypes: 'float' }, { name: 'weight', dtypes: 'float' }, { name: 'bias', optional: true, dtypes: 'float' }],
    attrs: convAttrs,
    infer: ([x, w, b], a) => {
      const dtype = commonFloatDType(name, [['input', x!], ['weight', w!], ['bias', b ?? null]]);
      const shape = convOutputShape(name, nd, x as TensorMeta, w as TensorMeta, a);
      checkBias(name, b as TensorMeta | null, (w as TensorMeta).shape[0]!);
      return [meta(shape, dtype)];
    },
  });
  const tname = `conv_transpose${nd}d`;
  defineOp({
    name: tname,
    group: 'conv',
    doc: `F.${tname}(input, weight [C_in, C_out / groups, *k], bias [C_out], stride, padding, output_padding, groups, dilation): the gradient of ${name} with respect to its input.`,
    inputs: [{ name: 'input', dtypes: 'float' }, { name: 'weight', dtypes: 'float' }, { name: 'bias', optional: true, dtypes: 'float' }],
    attrs: convTAttrs,
    infer: ([x, w, b], a) => {
      const dtype = commonFloatDType(tname, [['input', x!], ['weight', w!], ['bias', b ?? null]]);
      const shape = convTransposeOutputShape(tname, nd, x as TensorMeta, w as TensorMeta, a);
      checkBias(tname, b as TensorMeta | null, (w as TensorMeta).shape[1]! * a.groups);
      return [meta(shape, dtype)];
    },
  });
}

// ---------------------------------------------------------------------------------------------
// conv + activation (the conv blocks of CNNs: YOLO's Conv = SiLU(conv(x) + folded BatchNorm bias))

export const CONV_ACTIVATIONS = ['silu', 'relu'] as const;
export type ConvActivation = (typeof CONV_ACTIVATIONS)[number];
const convActAttrs = convAttrs.extend({ activation: z.enum(CONV_ACTIVATIONS) }).strict();

defineOp({
  name: 'conv2d_act',
  group: 'conv',
  doc: "activation(F.conv2d(input, weight, bias, stride, padding, dilation, groups)), activation 'silu' or 'relu': one fused kernel where a backend has it (cuDNN's conv -> bias -> pointwise graph), else conv2d then the activation op.",
  inputs: [{ name: 'input', dtypes: 'float' }, { name: 'weight', dtypes: 'float' }, { name: 'bias', optional: true, dtypes: 'float' }],
  attrs: convActAttrs,
  infer: ([x, w, b], a) => {
    const dtype = commonFloatDType('conv2d_act', [['input', x!], ['weight', w!], ['bias', b ?? null]]);
    const shape = convOutputShape('conv2d_act', 2, x as TensorMeta, w as TensorMeta, a);
    checkBias('conv2d_act', b as TensorMeta | null, (w as TensorMeta).shape[0]!);
    return [meta(shape, dtype)];
  },
  // the activation as a separate elementwise op (the conv output rounded to the dtype in between, as torch eager)
  decompose: (call) => {
    const { activation, ...conv } = call.attrs;
    const y = callOp1('conv2d', [call.inputs[0]!, call.inputs[1]!, call.inputs[2] ?? null], conv);
    try {
      return [callOp1(activation, [y])];
    } finally {
      y.dispose();
    }
  },
});

// ---------------------------------------------------------------------------------------------
// pooling

/** torch's pooling_output_shape: with ceil_mode the last window must still start inside the input or left padding. */
export function pooledSize(op: string, size: number, k: number, pad: number, stride: number, dilation: number, ceil: boolean): number {
  let out = Math.floor((size + 2 * pad - dilation * (k - 1) - 1 + (ceil ? stride - 1 : 0)) / stride) + 1;
  if (ceil && (out - 1) * stride >= size + pad) out--;
  if (out < 1) opError(op, `output size is too small (input ${size}, kernel ${k}, padding ${pad}, stride ${stride}, dilation ${dilation} give ${out})`);
  return out;
}

const stridesOpt = z.union([intOrTuple, z.null()]).default(null);
const maxPoolAttrs = z
  .object({ kernel_size: intOrTuple, stride: stridesOpt, padding: intOrTuple.default(0), dilation: intOrTuple.default(1), ceil_mode: z.boolean().default(false) })
  .strict();
type MaxPoolAttrs = z.output<typeof maxPoolAttrs>;
const avgPoolAttrs = z
  .object({
    kernel_size: intOrTuple,
    stride: stridesOpt,
    padding: intOrTuple.default(0),
    ceil_mode: z.boolean().default(false),
    count_include_pad: z.boolean().default(true),
    divisor_override: z.number().nullable().default(null),
  })
  .strict();

function poolShape(op: string, nd: Nd, x: TensorMeta, a: { kernel_size: IntOrTuple; stride: IntOrTuple | null; padding: IntOrTuple; dilation?: IntOrTuple; ceil_mode: boolean }): number[] {
  const { lead, C, sp } = spatialOf(op, x, nd);
  const k = tuple(op, 'kernel_size', a.kernel_size, nd, 1);
  const s = a.stride === null || (Array.isArray(a.stride) && a.stride.length === 0) ? k : tuple(op, 'stride', a.stride, nd, 1);
  const p = tuple(op, 'padding', a.padding, nd, 0);
  const d = tuple(op, 'dilation', a.dilation ?? 1, nd, 1);
  p.forEach((pi, i) => {
    if (pi > Math.floor(k[i]! / 2)) opError(op, `padding ${JSON.stringify(p)} should be at most half of kernel_size ${JSON.stringify(k)}`);
  });
  return [...lead, C, ...sp.map((size, i) => pooledSize(op, size, k[i]!, p[i]!, s[i]!, d[i]!, a.ceil_mode))];
}

const outputSize = z.union([z.number().int().min(0), z.array(z.number().int().min(0).nullable())]);

function adaptiveShape(op: string, nd: Nd, x: TensorMeta, size: z.output<typeof outputSize>): number[] {
  const { lead, C, sp } = spatialOf(op, x, nd);
  if (sp.some((d) => d === 0)) opError(op, `input ${formatShape(x.shape)} has an empty spatial dim`);
  const raw = typeof size === 'number' ? new Array<number>(nd).fill(size) : size;
  if (raw.length !== nd) opError(op, `output_size must be an int or a tuple of ${nd}, got ${JSON.stringify(size)}`);
  return [...lead, C, ...raw.map((o, i) => (o === null ? sp[i]! : o))];
}

for (const nd of [1, 2, 3] as const) {
  const floatIn = [{ name: 'input', dtypes: 'float' as const }];
  const mp = `max_pool${nd}d`;
  defineOp({
    name: mp,
    group: 'conv',
    doc: `F.${mp}(input, kernel_size, stride=kernel_size, padding (at most half the kernel; -inf), dilation, ceil_mode); NaN propagates.`,
    inputs: floatIn,
    attrs: maxPoolAttrs,
    infer: ([x], a) => [meta(poolShape(mp, nd, x as TensorMeta, a), (x as TensorMeta).dtype)],
    decompose: (call) => {
      const [out, idx] = callOp(`${mp}_with_indices`, call.inputs, call.attrs);
      idx!.dispose();
      return [out!];
    },
  });
  defineOp({
    name: `${mp}_with_indices`,
    group: 'conv',
    doc: `${mp} with return_indices=True: also the i64 index of each maximum, flat over its input plane (as torch).`,
    inputs: floatIn,
    attrs: maxPoolAttrs,
    outputs: ['out', 'indices'],
    infer: ([x], a: MaxPoolAttrs) => {
      const shape = poolShape(mp, nd, x as TensorMeta, a);
      return [meta(shape, (x as TensorMeta).dtype), meta(shape, 'i64')];
    },
  });
  const ap = `avg_pool${nd}d`;
  defineOp({
    name: ap,
    group: 'conv',
    doc: `F.${ap}(input, kernel_size, stride=kernel_size, padding, ceil_mode, count_include_pad${nd > 1 ? ', divisor_override' : ''}).`,
    inputs: floatIn,
    attrs: avgPoolAttrs,
    infer: ([x], a) => {
      if (a.divisor_override !== null && (nd === 1 || a.divisor_override === 0)) opError(ap, nd === 1 ? 'has no divisor_override (as torch)' : 'divisor_override must not be zero');
      return [meta(poolShape(ap, nd, x as TensorMeta, a), (x as TensorMeta).dtype)];
    },
  });
  const aap = `adaptive_avg_pool${nd}d`;
  defineOp({
    name: aap,
    group: 'conv',
    doc: `F.${aap}(input, output_size): window o covers [floor(o * I / O), ceil((o + 1) * I / O)); null in output_size keeps that dim.`,
    inputs: floatIn,
    attrs: z.object({ output_size: outputSize }).strict(),
    infer: ([x], a) => [meta(adaptiveShape(aap, nd, x as TensorMeta, a.output_size), (x as TensorMeta).dtype)],
  });
  const amp = `adaptive_max_pool${nd}d`;
  defineOp({
    name: amp,
    group: 'conv',
    doc: `F.${amp}(input, output_size): the maximum of each adaptive window.`,
    inputs: floatIn,
    attrs: z.object({ output_size: outputSize }).strict(),
    infer: ([x], a) => [meta(adaptiveShape(amp, nd, x as TensorMeta, a.output_size), (x as TensorMeta).dtype)],
    decompose: (call) => {
      const [out, idx] = callOp(`${amp}_with_indices`, call.inputs, call.attrs);
      idx!.dispose();
      return [out!];
    },
  });
  defineOp({
    name: `${amp}_with_indices`,
    group: 'conv',
    doc: `${amp} with return_indices=True: also the i64 index of each maximum, flat over its input plane.`,
    inputs: floatIn,
    attrs: z.object({ output_size: outputSize }).strict(),
    outputs: ['out', 'indices'],
    infer: ([x], a) => {
      const shape = adaptiveShape(amp, nd, x as TensorMeta, a.output_size);
      return [meta(shape, (x as TensorMeta).dtype), meta(shape, 'i64')];
    },
  });
}

// ---------------------------------------------------------------------------------------------
// typed front ends

type ConvOpts = { stride?: IntOrTuple; padding?: IntOrTuple | 'same' | 'valid'; dilation?: IntOrTuple; groups?: number };
type ConvActOpts = ConvOpts & { activation: ConvActivation };
type ConvTOpts = { stride?: IntOrTuple; padding?: IntOrTuple; output_padding?: IntOrTuple; groups?: number; dilation?: IntOrTuple };
type MaxPoolOpts = { stride?: IntOrTuple | null; padding?: IntOrTuple; dilation?: IntOrTuple; ceil_mode?: boolean };
type AvgPoolOpts = { stride?: IntOrTuple | null; padding?: IntOrTuple; ceil_mode?: boolean; count_include_pad?: boolean; divisor_override?: number | null };
type OutSize = number | (number | null)[];

const conv = (name: string) => (input: Tensor, weight: Tensor, bias: Tensor | null = null, opts: ConvOpts = {}): Tensor => callOp1(name, [input, weight, bias], opts);
const convT = (name: string) => (input: Tensor, weight: Tensor, bias: Tensor | null = null, opts: ConvTOpts = {}): Tensor => callOp1(name, [input, weight, bias], opts);
const maxPool = (name: string) => (input: Tensor, kernel_size: IntOrTuple, opts: MaxPoolOpts = {}): Tensor => callOp1(name, [input], { kernel_size, ...opts });
const maxPoolIdx = (name: string) => (input: Tensor, kernel_size: IntOrTuple, opts: MaxPoolOpts = {}): [Tensor, Tensor] => callOp(name, [input], { kernel_size, ...opts }) as [Tensor, Tensor];
const avgPool = (name: string) => (input: Tensor, kernel_size: IntOrTuple, opts: AvgPoolOpts = {}): Tensor => callOp1(name, [input], { kernel_size, ...opts });
const adaptive = (name: string) => (input: Tensor, output_size: OutSize): Tensor => callOp1(name, [input], { output_size });
const adaptiveIdx = (name: string) => (input: Tensor, output_size: OutSize): [Tensor, Tensor] => callOp(name, [input], { output_size }) as [Tensor, Tensor];

export const convFunctions = {
  conv1d: conv('conv1d'), conv2d: conv('conv2d'), conv3d: conv('conv3d'),
  /** activation(conv2d(...)) in one op (fused where the backend can). */
  conv2dAct: (input: Tensor, weight: Tensor, bias: Tensor | null, opts: ConvActOpts): Tensor => callOp1('conv2d_act', [input, weight, bias], opts),
  convTranspose1d: convT('conv_transpose1d'), convTranspose2d: convT('conv_transpose2d'), convTranspose3d: convT('conv_transpose3d'),
  maxPool1d: maxPool('max_pool1d'), maxPool2d: maxPool('max_pool2d'), maxPool3d: maxPool('max_pool3d'),
  maxPool1dWithIndices: maxPoolIdx('max_pool1d_with_indices'), maxPool2dWithIndices: maxPoolIdx('max_pool2d_with_indices'), maxPool3dWithIndices: maxPoolIdx('max_pool3d_with_indices'),
  avgPool1d: avgPool('avg_pool1d'), avgPool2d: avgPool('avg_pool2d'), avgPool3d: avgPool('avg_pool3d'),
  adaptiveAvgPool1d: adaptive('adaptive_avg_pool1d'), adaptiveAvgPool2d: adaptive('adaptive_avg_pool2d'), adaptiveAvgPool3d: adaptive('adaptive_avg_pool3d'),
  adaptiveMaxPool1d: adaptive('adaptive_max_pool1d'), adaptiveMaxPool2d: adaptive('adaptive_max_pool2d'), adaptiveMaxPool3d: adaptive('adaptive_max_pool3d'),
  adaptiveMaxPool1dWithIndices: adaptiveIdx('adaptive_max_pool1d_with_indices'), adaptiveMaxPool2dWithIndices: adaptiveIdx('adaptive_max_pool2d_with_indices'),
  adaptiveMaxPool3dWithIndices: adaptiveIdx('adaptive_max_pool3d_with_indices'),
};

