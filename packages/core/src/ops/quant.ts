/**
 * The quant group: fp8 e4m3 per-tensor quantise (vLLM scaled_fp8_quant: static or dynamic scale), dequantise,
 * per-token-group quantise (vLLM per_token_group_quant_fp8), the fp8 GEMM (torch._scaled_mm with per-tensor or
 * per-row / per-column scales), and OCP MXFP4 (gpt-oss `*_blocks` u8 [..., G, 16] + `*_scales` u8 [..., G]: 32 fp4 e2m1
 * values per block, two per byte with the low nibble first, one e8m0 scale 2^(s - 127) per block) dequantise, linear
 * and the MoE expert GEMM. Quantised values saturate to +-448 and round to nearest even.
 */
import { z } from 'zod';
import { DTYPE_INFO, FP8_E4M3_MAX, type DType } from '../dtype.js';
import { formatShape } from '../shape.js';
import type { Tensor } from '../tensor.js';
import { expandsTo } from './matmul.js';
import { dtypeSchema } from './elementwise.js';
import { OpScope, callOp, callOp1, defineOp, meta, opError, type TensorMeta } from './registry.js';

const FP8: readonly DType[] = ['fp8e4m3', 'fp8e5m2'];
const floatDType = dtypeSchema.refine((d) => DTYPE_INFO[d].kind === 'float', { message: 'must be a float dtype' });
const shapeOf = (t: unknown) => (t as TensorMeta).shape;

defineOp({
  name: 'scaled_fp8_quant',
  group: 'quant',
  doc: 'vLLM scaled_fp8_quant(input, scale=None): q = fp8e4m3(clamp(input / scale, -448, 448)); without a scale (dynamic) scale = max(amax|input| / 448, 1/(448*512)). Returns [q, scale f32 [1]].',
  inputs: [{ name: 'input', dtypes: 'float' }, { name: 'scale', optional: true, dtypes: 'float' }],
  attrs: z.object({}).strict(),
  outputs: ['out', 'scale'],
  infer: ([x, s]) => {
    if (s && shapeOf(s).reduce((p, d) => p * d, 1) !== 1) opError('scaled_fp8_quant', `scale must hold one element (per-tensor), got ${formatShape(shapeOf(s))}`);
    return [meta(shapeOf(x), 'fp8e4m3'), meta([1], 'f32')];
  },
});

defineOp({
  name: 'fp8_dequant',
  group: 'quant',
  doc: 'input (fp8) * scale in output_dtype (default bf16); scale is per-tensor or any shape that broadcasts to input (per-token [T, 1], per-channel [1, N]).',
  inputs: [{ name: 'input', dtypes: FP8 }, { name: 'scale', dtypes: 'float' }],
  attrs: z.object({ output_dtype: floatDType.default('bf16') }).strict(),
  infer: ([x, s], a) => {
    const xs = shapeOf(x);
    if (!expandsTo(shapeOf(s), xs)) opError('fp8_dequant', `scale ${formatShape(shapeOf(s))} does not broadcast to input ${formatShape(xs)}`);
    return [meta(xs, a.output_dtype)];
  },
  // where a backend has no kernel (CUDA): widen to float32 (the converting copy), multiply by the scale, narrow
  decompose: (call) => {
    const [x, scale] = call.inputs as [Tensor, Tensor];
    const s = new OpScope();
    try {
      const y = s.op('mul', [s.op('to', [x], { dtype: 'f32' }), scale]);
      return s.keep([call.attrs.output_dtype === y.dtype ? y : s.op('to', [y], { dtype: call.attrs.output_dtype })]);
    } catch (e) {
      s.dispose();
      throw e;
    }
  },
});

/**
 * 2^ceil(log2(s)) of positive f32 scales, exactly (UE8M0: the exponent byte alone). log(s) / ln 2 can land a hair off
 * an integer (an exact power of two reading 3.0000002 would round up to the next one), so the estimated exponent is
 * corrected by one in each direction against the exact powers: e - 1 where 2^(e-1) >= s, e + 1 where 2^e < s.
 */
function ue8m0RoundUp(s: OpScope, scale: Tensor): Tensor {
  const e0 = s.op('ceil', [s.op('div', [s.op('log', [scale]), Math.LN2])]);
  const down = s.op('sub', [e0, 1]);
  const e1 = s.op('where', [s.op('ge', [s.op('pow', [2, down]), scale]), down, e0]);
  const e = s.op('where', [s.op('lt', [s.op('pow', [2, e1]), scale]), s.op('add', [e1, 1]), e1]);
  return s.op('pow', [2, e]);
}

defineOp({
  name: 'per_token_group_quant_fp8',
  group: 'quant',
  doc: 'vLLM per_token_group_quant_fp8(x, group_size, eps, scale_ue8m0): each run of group_size elements of the last dim gets scale = max(amax, eps) / 448 (a power of two, rounded up, with scale_ue8m0) and q = fp8e4m3(clamp(x / scale)). Returns [q, scales f32 [..., H / group_size]] (row-major scales).',
  inputs: [{ name: 'x', dtypes: 'float' }],
  attrs: z.object({ group_size: z.number().int().min(1), eps: z.number().default(1e-10), scale_ue8m0: z.boolean().default(false) }).strict(),
  outputs: ['out', 'scale'],
  infer: ([x], a) => {
    const xs = shapeOf(x);
    const H = xs[xs.length - 1];
    if (H === undefined || H % a.group_size !== 0) opError('per_token_group_quant_fp8', `the last dim of x ${formatShape(xs)} must be divisible by group_size ${a.group_size}`);
    return [meta(xs, 'fp8e4m3'), meta([...xs.slice(0, -1), H / a.group_size], 'f32')];
  },
  // where a backend has no kernel (CUDA): float32 groups [..., G, group_size], amax, scale = max(amax, eps) / 448
  // (UE8M0: rounded up to a power of two, ue8m0RoundUp), q = fp8(clamp(x / scale)) through the converting copy (round
  // to nearest even).
  decompose: (call) => {
    const [x] = call.inputs as [Tensor];
    const { group_size, eps, scale_ue8m0 } = call.attrs;
    const lead = x.shape.slice(0, -1);
    const groups = x.shape[x.shape.length - 1]! / group_size;
    const s = new OpScope();
    try {
      const xg = s.own(s.op('to', [x], { dtype: 'f32' }).view([...lead, groups, group_size]));
      const amax = s.op('amax', [s.op('abs', [xg])], { dim: -1, keepdim: true });
      const raw = s.op('div', [s.op('maximum', [amax, eps]), FP8_E4M3_MAX]);
      const scale = scale_ue8m0 ? ue8m0RoundUp(s, raw) : raw;
      const q = s.op('to', [s.op('clamp', [s.op('div', [xg, scale]), -FP8_E4M3_MAX, FP8_E4M3_MAX])], { dtype: 'fp8e4m3' });
      return s.keep([s.own(q.view([...lead, groups * group_size])), s.own(scale.view([...lead, groups]))]);
    } catch (e) {
      s.dispose();
      throw e;
    }
  },
});

defineOp({
  name: 'scaled_mm',
  group: 'quant',
  doc: 'torch._scaled_mm(a [M, K] fp8, b [K, N] fp8, scale_a, scale_b, bias, out_dtype=bf16) = (a * scale_a) @ (b * scale_b) + bias; scale_a f32 per-tensor or per-row [M, 1], scale_b f32 per-tensor or per-column [1, N]; b is typically a column-major view of an [N, K] weight.',
  inputs: [{ name: 'a', dtypes: FP8 }, { name: 'b', dtypes: FP8 }, { name: 'scale_a', dtypes: ['f32'] }, { name: 'scale_b', dtypes: ['f32'] }, { name: 'bias', optional: true, dtypes: 'float' }],
  attrs: z.object({ out_dtype: floatDType.default('bf16') }).strict(),
  infer: ([a, b, sa, sb, bias], at) => {
    const op = 'scaled_mm';
    const [as, bs] = [shapeOf(a), shapeOf(b)];
    if (as.length !== 2 || bs.length !== 2 || as[1] !== bs[0]) opError(op, `a ${formatShape(as)} and b ${formatShape(bs)} must be [M, K] and [K, N]`);
    const [M, N] = [as[0]!, bs[1]!];
    const n1 = (s: readonly number[]) => s.reduce((p, d) => p * d, 1) === 1;
    const sas = shapeOf(sa);
    const sbs = shapeOf(sb);
    if (!n1(sas) && !(sas.length === 2 && sas[0] === M && sas[1] === 1)) opError(op, `scale_a ${formatShape(sas)} must be one element (per-tensor) or [${M}, 1] (per-row)`);
    if (!n1(sbs) && !(sbs.length === 2 && sbs[0] === 1 && sbs[1] === N)) opError(op, `scale_b ${formatShape(sbs)} must be one element (per-tensor) or [1, ${N}] (per-column)`);
    if (bias && (shapeOf(bias).length !== 1 || shapeOf(bias)[0] !== N)) opError(op, `bias ${formatShape(shapeOf(bias))} must be [${N}]`);
    return [meta([M, N], at.out_dtype)];
  },
});

function mxfp4Rows(op: string, blocks: unknown, scales: unknown): number[] {
  const bs = shapeOf(blocks);
  const ss = shapeOf(scales);
  if (bs.length < 2 || bs[bs.length - 1] !== 16) opError(op, `blocks must be [..., G, 16] (32 fp4 values packed two per byte), got ${formatShape(bs)}`);
  const lead = bs.slice(0, -1);
  if (ss.length !== lead.length || ss.some((d, i) => d !== lead[i])) opError(op, `scales ${formatShape(ss)} must be [${lead.join(', ')}] (one per block of blocks ${formatShape(bs)})`);
  return lead;
}

defineOp({
  name: 'mxfp4_dequant',
  group: 'quant',
  doc: 'blocks u8 [..., G, 16] + scales u8 [..., G] -> [..., 32 G] in dtype (default bf16): element 2j of a block is the low nibble of byte j, 2j + 1 the high; value = fp4e2m1 * 2^(scale - 127) (scale 255 is NaN).',
  inputs: [{ name: 'blocks', dtypes: ['u8'] }, { name: 'scales', dtypes: ['u8'] }],
  attrs: z.object({ dtype: floatDType.default('bf16') }).strict(),
  infer: ([b, s], a) => {
    const lead = mxfp4Rows('mxfp4_dequant', b, s);
    return [meta([...lead.slice(0, -1), lead[lead.length - 1]! * 32], a.dtype)];
  },
});

defineOp({
  name: 'mxfp4_linear',
  group: 'quant',
  doc: "F.linear(input [..., K], W, bias) with W in MXFP4: blocks u8 [N, K / 32, 16], scales u8 [N, K / 32]; the weight is dequantised inside (decomposition: mxfp4_dequant to input's dtype, then linear).",
  inputs: [{ name: 'input', dtypes: 'float' }, { name: 'blocks', dtypes: ['u8'] }, { name: 'scales', dtypes: ['u8'] }, { name: 'bias', optional: true, dtypes: 'float' }],
  attrs: z.object({}).strict(),
  infer: ([x, b, s, bias]) => {
    const op = 'mxfp4_linear';
    const lead = mxfp4Rows(op, b, s);
    if (lead.length !== 2) opError(op, `blocks must be [N, K / 32, 16], got ${formatShape(shapeOf(b))}`);
    const [N, G] = lead as [number, number];
    const xs = shapeOf(x);
    if (xs.length < 1 || xs[xs.length - 1] !== 32 * G) opError(op, `input ${formatShape(xs)} last dim must be K = ${32 * G} (32 x ${G} blocks of blocks ${formatShape(shapeOf(b))})`);
    if (bias && (shapeOf(bias).length !== 1 || shapeOf(bias)[0] !== N)) opError(op, `bias ${formatShape(shapeOf(bias))} must be [${N}]`);
    const dtype = (x as TensorMeta).dtype;
    if (bias && (bias as TensorMeta).dtype !== dtype) opError(op, `input is ${dtype} but bias is ${(bias as TensorMeta).dtype}; cast them to one dtype`);
    return [meta([...xs.slice(0, -1), N], dtype)];
  },
  decompose: (call) => {
    const [x, blocks, scales, bias] = call.inputs as [Tensor, Tensor, Tensor, Tensor | null];
    const w = callOp1('mxfp4_dequant', [blocks, scales], { dtype: x.dtype });
    try {
      return [callOp1('linear', [x, w, bias])];
    } finally {
      w.dispose();
    }
  },
});

defineOp({
  name: 'mxfp4_grouped_gemm',
  group: 'quant',
  doc:
    "grouped_gemm with MXFP4 experts (gpt-oss's *_blocks / *_scales): input [T, K], blocks u8 [E, N, K / 32, 16], scales u8 [E, N, K / 32], " +
    "offsets [E + 1] or expert_ids [T] (exactly one, as grouped_gemm), bias [E, N]; decomposition: mxfp4_dequant to input's dtype, then grouped_gemm.",
  inputs: [
    { name: 'input', dtypes: 'float' },
    { name: 'blocks', dtypes: ['u8'] },
    { name: 'scales', dtypes: ['u8'] },
    { name: 'offsets', optional: true, dtypes: 'int' },
    { name: 'expert_ids', optional: true, dtypes: 'int' },
    { name: 'bias', optional: true, dtypes: 'float' },
  ],
  attrs: z.object({}).strict(),
  infer: ([x, b, s, offs, ids, bias]) => {
    const op = 'mxfp4_grouped_gemm';
    const lead = mxfp4Rows(op, b, s);
    if (lead.length !== 3) opError(op, `blocks must be [E, N, K / 32, 16], got ${formatShape(shapeOf(b))}`);
    const [E, N, G] = lead as [number, number, number];
    const xs = shapeOf(x);
    if (xs.length !== 2 || xs[1] !== 32 * G) opError(op, `input ${formatShape(xs)} must be [T, ${32 * G}] (32 x ${G} blocks of blocks ${formatShape(shapeOf(b))})`);
    if ((offs === null || offs === undefined) === (ids === null || ids === undefined)) opError(op, 'give exactly one of offsets [E + 1] and expert_ids [T]');
    if (offs && (shapeOf(offs).length !== 1 || shapeOf(offs)[0] !== E + 1)) opError(op, `offsets ${formatShape(shapeOf(offs))} must be [${E + 1}] (E + 1)`);
    if (ids && (shapeOf(ids).length !== 1 || shapeOf(ids)[0] !== xs[0])) opError(op, `expert_ids ${formatShape(shapeOf(ids))} must be [${xs[0]}]`);
    if (bias && (shapeOf(bias).length !== 2 || shapeOf(bias)[0] !== E || shapeOf(bias)[1] !== N)) opError(op, `bias ${formatShape(shapeOf(bias))} must be [${E}, ${N}]`);
    const dtype = (x as TensorMeta).dtype;
    if (bias && (bias as TensorMeta).dtype !== dtype) opError(op, `input is ${dtype} but bias is ${(bias as TensorMeta).dtype}; cast them to one dtype`);
    return [meta([xs[0]!, N], dtype)];
  },
  decompose: (call) => {
    const [x, blocks, scales, offs, ids, bias] = call.inputs as [Tensor, Tensor, Tensor, Tensor | null, Tensor | null, Tensor | null];
    const w = callOp1('mxfp4_dequant', [blocks, scales], { dtype: x.dtype });
    try {
      return [callOp1('grouped_gemm', [x, w, offs ?? null, ids ?? null, bias ?? null])];
    } finally {
      w.dispose();
    }
  },
});

export const quantFunctions = {
  scaledFp8Quant: (input: Tensor, scale: Tensor | null = null): [Tensor, Tensor] => callOp('scaled_fp8_quant', [input, scale]) as [Tensor, Tensor],
  fp8Dequant: (input: Tensor, scale: Tensor, opts: { output_dtype?: DType } = {}): Tensor => callOp1('fp8_dequant', [input, scale], opts),
  perTokenGroupQuantFp8: (x: Tensor, group_size: number, opts: { eps?: number; scale_ue8m0?: boolean } = {}): [Tensor, Tensor] =>
    callOp('per_token_group_quant_fp8', [x], { group_size, ...opts }) as [Tensor, Tensor],
  scaledMm: (a: Tensor, b: Tensor, scale_a: Tensor, scale_b: Tensor, opts: { bias?: Tensor | null; out_dtype?: DType } = {}): Tensor =>
    callOp1('scaled_mm', [a, b, scale_a, scale_b, opts.bias ?? null], opts.out_dtype ? { out_dtype: opts.out_dtype } : {}),
  mxfp4Dequant: (blocks: Tensor, scales: Tensor, opts: { dtype?: DType } = {}): Tensor => callOp1('mxfp4_dequant', [blocks, scales], opts),
  mxfp4Linear: (input: Tensor, blocks: Tensor, scales: Tensor, bias: Tensor | null = null): Tensor => callOp1('mxfp4_linear', [input, blocks, scales, bias]),
  mxfp4GroupedGemm: (input: Tensor, blocks: Tensor, scales: Tensor, routing: { offsets?: Tensor; expertIds?: Tensor }, bias: Tensor | null = null): Tensor =>
    callOp1('mxfp4_grouped_gemm', [input, blocks, scales, routing.offsets ?? null, routing.expertIds ?? null, bias]),
};
