/**
 * The matmul group: matmul (torch.matmul with 1-D operands and broadcast batch dims), bmm, baddbmm, linear with an
 * activation epilogue, linear_silu_and_mul (the gated-MLP fusion of the Llama path), einsum over explicit index letters, grouped_gemm (the MoE expert GEMM), fused_moe_gemm (vLLM's fused_moe_kernel over moe_align's blocks) and moe_align (that block layout). Operands share one
 * float dtype (torch does not promote inside matmuls); results are in that dtype, computed wider and rounded once.
 */
import { z } from 'zod';
import { DTYPE_INFO, type DType } from '../dtype.js';
import { formatShape, type Shape } from '../shape.js';
import { Tensor } from '../tensor.js';
import { deviceArange } from './arange.js';
import { broadcastShapesOf } from './broadcast.js';
import { OpScope, callOp, callOp1, defineOp, meta, opError, type MetaArg, type TensorMeta } from './registry.js';

const noAttrs = z.object({}).strict();

/** The one float dtype every given tensor argument has (an OpError naming the first that differs). */
export function commonFloatDType(op: string, args: readonly (readonly [string, MetaArg])[]): DType {
  let d: DType | undefined;
  let first = '';
  for (const [name, a] of args) {
    if (a === null || typeof a === 'number') continue;
    const t = a as TensorMeta;
    if (DTYPE_INFO[t.dtype].kind !== 'float') opError(op, `${name} must be a float tensor, got ${t.dtype}`);
    if (d === undefined) {
      d = t.dtype;
      first = name;
    } else if (t.dtype !== d) opError(op, `${first} is ${d} but ${name} is ${t.dtype}; cast them to one dtype`);
  }
  return d!;
}

/** Whether `shape` expands to `target` (right-aligned; each dim equal or 1; no more dims than target). */
export function expandsTo(shape: Shape, target: Shape): boolean {
  const lead = target.length - shape.length;
  return lead >= 0 && shape.every((d, k) => d === 1 || d === target[lead + k]);
}

/** torch.matmul's output shape (1-D operands are promoted and the added dim removed). */
export function matmulShape(op: string, a: Shape, b: Shape): number[] {
  if (a.length < 1 || b.length < 1) opError(op, `both arguments need at least 1 dim, got input ${formatShape(a)} and other ${formatShape(b)}`);
  const A = a.length === 1 ? [1, a[0]!] : a;
  const B = b.length === 1 ? [b[0]!, 1] : b;
  const K = A[A.length - 1]!;
  if (B[B.length - 2] !== K) opError(op, `input ${formatShape(a)} and other ${formatShape(b)} cannot be multiplied (${K} != ${B[B.length - 2]})`);
  const batch = broadcastShapesOf(op, [A.slice(0, -2), B.slice(0, -2)], ['batch dims of input', 'batch dims of other']);
  const out = [...batch];
  if (a.length > 1) out.push(A[A.length - 2]!);
  if (b.length > 1) out.push(B[B.length - 1]!);
  return out;
}

defineOp({
  name: 'matmul',
  group: 'matmul',
  doc: 'torch.matmul: 1-D x 1-D is a dot product; a 1-D input is a row vector, a 1-D other a column vector (the added dim is removed); dims before the last two broadcast.',
  inputs: [{ name: 'input', dtypes: 'float' }, { name: 'other', dtypes: 'float' }],
  attrs: noAttrs,
  infer: ([a, b]) => {
    const dtype = commonFloatDType('matmul', [['input', a!], ['other', b!]]);
    return [meta(matmulShape('matmul', (a as TensorMeta).shape, (b as TensorMeta).shape), dtype)];
  },
  // Ops.matmul is the rank >= 2 case with broadcast batch dims
  viaOps: (ops, call) => {
    const [a, b] = call.inputs as [Tensor, Tensor];
    return a.rank >= 2 && b.rank >= 2 ? [ops.matmul(a, b)] : undefined;
  },
  // 1-D operands: the rank >= 2 product of their row / column views, then the added dim dropped (a view)
  decompose: (call) => {
    const [a, b] = call.inputs as [Tensor, Tensor];
    const a2 = a.rank === 1 ? a.unsqueeze(0) : a;
    const b2 = b.rank === 1 ? b.unsqueeze(1) : b;
    try {
      const r = callOp1('matmul', [a2, b2]);
      const out = r.reshape(call.outputs[0]!.shape);
      r.dispose();
      return [out];
    } finally {
      if (a2 !== a) a2.dispose();
      if (b2 !== b) b2.dispose();
    }
  },
});

function bmmShape(op: string, b1: TensorMeta, b2: TensorMeta, n1: string, n2: string): [number, number, number] {
  if (b1.shape.length !== 3 || b2.shape.length !== 3) opError(op, `${n1} and ${n2} must be 3-D, got ${formatShape(b1.shape)} and ${formatShape(b2.shape)}`);
  const [B, M, K] = b1.shape as [number, number, number];
  if (b2.shape[0] !== B || b2.shape[1] !== K) opError(op, `${n2} ${formatShape(b2.shape)} must be [${B}, ${K}, p] for ${n1} ${formatShape(b1.shape)}`);
  return [B, M, b2.shape[2]!];
}

defineOp({
  name: 'bmm',
  group: 'matmul',
  doc: 'torch.bmm(input [b, n, m], mat2 [b, m, p]) -> [b, n, p]; no broadcasting.',
  inputs: [{ name: 'input', dtypes: 'float' }, { name: 'mat2', dtypes: 'float' }],
  attrs: noAttrs,
  infer: ([a, b]) => [meta(bmmShape('bmm', a as TensorMeta, b as TensorMeta, 'input', 'mat2'), commonFloatDType('bmm', [['input', a!], ['mat2', b!]]))],
  viaOps: (ops, call) => [ops.matmul(call.inputs[0] as Tensor, call.inputs[1] as Tensor)],
});

defineOp({
  name: 'baddbmm',
  group: 'matmul',
  doc: 'torch.baddbmm: beta * input + alpha * (batch1 @ batch2); input broadcasts to [b, n, p]; with beta = 0 input is not read (NaN in it does not propagate).',
  inputs: [{ name: 'input', dtypes: 'float' }, { name: 'batch1', dtypes: 'float' }, { name: 'batch2', dtypes: 'float' }],
  attrs: z.object({ beta: z.number().default(1), alpha: z.number().default(1) }).strict(),
  infer: ([i, b1, b2]) => {
    const dtype = commonFloatDType('baddbmm', [['input', i!], ['batch1', b1!], ['batch2', b2!]]);
    const shape = bmmShape('baddbmm', b1 as TensorMeta, b2 as TensorMeta, 'batch1', 'batch2');
    // input must expand to [b, n, p] (right-aligned, each dim equal or 1), not merely broadcast with it
    const is = (i as TensorMeta).shape;
    if (!expandsTo(is, shape)) opError('baddbmm', `input ${formatShape(is)} does not broadcast to ${formatShape(shape)}`);
    return [meta(shape, dtype)];
  },
  // bmm, then beta * input + alpha * product with elementwise ops (each rounds to the dtype)
  decompose: (call) => {
    const [input, b1, b2] = call.inputs as [Tensor, Tensor, Tensor];
    const { beta, alpha } = call.attrs;
    const mm = callOp1('bmm', [b1, b2]);
    if (beta === 0) {
      if (alpha === 1) return [mm];
      try {
        return [callOp1('mul', [mm, alpha])];
      } finally {
        mm.dispose();
      }
    }
    const scaled = beta === 1 ? input : callOp1('mul', [input, beta]);
    try {
      return [callOp1('add', [scaled, mm], { alpha })];
    } finally {
      mm.dispose();
      if (scaled !== input) scaled.dispose();
    }
  },
});

export const LINEAR_ACTIVATIONS = ['none', 'relu', 'gelu', 'gelu_tanh', 'silu'] as const;
export type LinearActivation = (typeof LINEAR_ACTIVATIONS)[number];
const linearAttrs = z.object({ activation: z.enum(LINEAR_ACTIVATIONS).default('none') }).strict();

defineOp({
  name: 'linear',
  group: 'matmul',
  doc: "F.linear(input [..., in], weight [out, in], bias [out]) = input @ weight^T + bias, then an activation epilogue (cuBLASLt's bias + RELU / GELU; 'none' by default) applied before the single rounding.",
  inputs: [{ name: 'input', dtypes: 'float' }, { name: 'weight', dtypes: 'float' }, { name: 'bias', optional: true, dtypes: 'float' }],
  attrs: linearAttrs,
  infer: ([x, w, b]) => {
    const dtype = commonFloatDType('linear', [['input', x!], ['weight', w!], ['bias', b ?? null]]);
    const xs = (x as TensorMeta).shape;
    const ws = (w as TensorMeta).shape;
    if (ws.length !== 2) opError('linear', `weight must be [out_features, in_features], got ${formatShape(ws)}`);
    if (xs.length < 1 || xs[xs.length - 1] !== ws[1]) opError('linear', `input ${formatShape(xs)} last dim must equal in_features ${ws[1]} of weight ${formatShape(ws)}`);
    if (b) {
      const bs = (b as TensorMeta).shape;
      if (bs.length !== 1 || bs[0] !== ws[0]) opError('linear', `bias ${formatShape(bs)} must be [${ws[0]}] for weight ${formatShape(ws)}`);
    }
    return [meta([...xs.slice(0, -1), ws[0]!], dtype)];
  },
  viaOps: (ops, call) => (call.attrs.activation === 'none' ? [ops.linear(call.inputs[0] as Tensor, call.inputs[1] as Tensor, call.inputs[2] as Tensor | null)] : undefined),
  // the epilogue as a separate elementwise op (one extra rounding to the dtype in between)
  decompose: (call) => {
    const [x, w, b] = call.inputs as [Tensor, Tensor, Tensor | null];
    const y = callOp1('linear', [x, w, b], { activation: 'none' });
    const act = call.attrs.activation;
    if (act === 'none') return [y];
    try {
      return [act === 'gelu' || act === 'gelu_tanh' ? callOp1('gelu', [y], { approximate: act === 'gelu' ? 'none' : 'tanh' }) : callOp1(act, [y])];
    } finally {
      y.dispose();
    }
  },
});

defineOp({
  name: 'linear_silu_and_mul',
  group: 'matmul',
  doc: "silu_and_mul(linear(input, weight, bias)) for a gated MLP's merged gate | up projection weight [2d, K] -> [..., d] (the Llama path's Ops.linearSiluAndMul).",
  inputs: [{ name: 'input', dtypes: 'float' }, { name: 'weight', dtypes: 'float' }, { name: 'bias', optional: true, dtypes: 'float' }],
  attrs: z.object({}).strict(),
  infer: ([x, w, b]) => {
    const op = 'linear_silu_and_mul';
    const dtype = commonFloatDType(op, [['input', x!], ['weight', w!], ['bias', b ?? null]]);
    const xs = (x as TensorMeta).shape;
    const ws = (w as TensorMeta).shape;
    if (ws.length !== 2 || ws[0]! % 2 !== 0) opError(op, `weight must be [2d, in_features] (an even number of rows), got ${formatShape(ws)}`);
    if (xs.length < 1 || xs[xs.length - 1] !== ws[1]) opError(op, `input ${formatShape(xs)} last dim must equal in_features ${ws[1]} of weight ${formatShape(ws)}`);
    if (b && ((b as TensorMeta).shape.length !== 1 || (b as TensorMeta).shape[0] !== ws[0])) opError(op, `bias ${formatShape((b as TensorMeta).shape)} must be [${ws[0]}]`);
    return [meta([...xs.slice(0, -1), ws[0]! / 2], dtype)];
  },
  // the fused Ops method is optional and may decline (null): then the decomposition runs
  viaOps: (ops, call) => {
    const r = ops.linearSiluAndMul?.(call.inputs[0] as Tensor, call.inputs[1] as Tensor, (call.inputs[2] ?? null) as Tensor | null);
    return r ? [r] : undefined;
  },
  decompose: (call) => {
    const y = callOp1('linear', [call.inputs[0]!, call.inputs[1]!, call.inputs[2] ?? null]);
    try {
      return [callOp1('silu_and_mul', [y])];
    } finally {
      y.dispose();
    }
  },
});

// ---------------------------------------------------------------------------------------------
// einsum

/** A resolved einsum: every operand's labels (ellipsis dims become '.0', '.1', ... right-aligned), the output labels, label sizes. */
export interface EinsumPlan {
  readonly inputs: readonly (readonly string[])[];
  readonly output: readonly string[];
  readonly sizes: ReadonlyMap<string, number>;
  readonly outShape: readonly number[];
}

const ELL = '...';

function parseTerm(op: string, term: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < term.length; ) {
    if (term.startsWith(ELL, i)) {
      if (out.includes(ELL)) opError(op, 'more than one ellipsis in a term');
      out.push(ELL);
      i += 3;
    } else if (/[A-Za-z]/.test(term[i]!)) out.push(term[i++]!);
    else if (term[i] === ' ') i++;
    else opError(op, `invalid subscript '${term[i]}' (letters and '...' only)`);
  }
  return out;
}

/**
 * torch.einsum's rules: letters and one '...' per term; a letter repeated in a term takes the diagonal; letters absent
 * from the output are summed; without '->' the output is the ellipsis then the letters seen once, alphabetically;
 * size-1 dims broadcast against their label's size, ellipsis dims broadcast numpy-style.
 */
export function einsumPlan(equation: string, shapes: readonly Shape[]): EinsumPlan {
  const op = `einsum('${equation}')`;
  const [lhs, rhs, extra] = equation.split('->');
  if (extra !== undefined) opError(op, "more than one '->'");
  const terms = lhs!.split(',').map((t) => parseTerm(op, t));
  if (terms.length !== shapes.length) opError(op, `names ${terms.length} operands but ${shapes.length} were given`);
  let outTerm: string[];
  if (rhs === undefined) {
    const count = new Map<string, number>();
    for (const t of terms) for (const l of t) if (l !== ELL) count.set(l, (count.get(l) ?? 0) + 1);
    const once = [...count].filter(([, c]) => c === 1).map(([l]) => l).sort();
    outTerm = terms.some((t) => t.includes(ELL)) ? [ELL, ...once] : once;
  } else {
    outTerm = parseTerm(op, rhs);
    outTerm.forEach((l, i) => {
      if (outTerm.indexOf(l) !== i) opError(op, `output subscript '${l}' appears more than once`);
      if (l !== ELL && !terms.some((t) => t.includes(l))) opError(op, `output subscript '${l}' appears in no input`);
    });
  }
  let ellShape: number[] = [];
  const ellDims = terms.map((t, i) => {
    const rank = shapes[i]!.length;
    const nLetters = t.filter((l) => l !== ELL).length;
    const n = t.includes(ELL) ? rank - nLetters : 0;
    if (n < 0 || (!t.includes(ELL) && rank !== nLetters)) opError(op, `operand ${i} ${formatShape(shapes[i]!)} has ${rank} dims but its subscripts name ${nLetters}`);
    if (n > 0) {
      const start = t.indexOf(ELL);
      ellShape = broadcastShapesOf(op, [ellShape, shapes[i]!.slice(start, start + n)], ['ellipsis dims', `ellipsis dims of operand ${i}`]);
    }
    return n;
  });
  const nEll = ellShape.length;
  const sizes = new Map<string, number>();
  for (let j = 0; j < nEll; j++) sizes.set(`.${j}`, ellShape[j]!);
  const inputs = terms.map((t, i) => t.flatMap((l) => (l === ELL ? Array.from({ length: ellDims[i]! }, (_, j) => `.${nEll - ellDims[i]! + j}`) : [l])));
  inputs.forEach((labels, i) => {
    labels.forEach((l, d) => {
      if (l.startsWith('.')) return;
      const size = shapes[i]![d]!;
      const have = sizes.get(l);
      if (have === undefined || have === 1) sizes.set(l, size);
      else if (size !== have && size !== 1) opError(op, `subscript '${l}' has size ${size} in operand ${i} ${formatShape(shapes[i]!)} but ${have} elsewhere`);
    });
  });
  const output = outTerm.flatMap((l) => (l === ELL ? Array.from({ length: nEll }, (_, j) => `.${j}`) : [l]));
  return { inputs, output, sizes, outShape: output.map((l) => sizes.get(l)!) };
}

defineOp({
  name: 'einsum',
  group: 'matmul',
  doc: "torch.einsum(equation, *operands) over explicit letters and '...': repeated letters take diagonals, letters absent from the output are summed, size-1 dims broadcast.",
  inputs: [{ name: 'operands', variadic: true, dtypes: 'float' }],
  attrs: z.object({ equation: z.string() }).strict(),
  infer: (ops, a) => {
    if (ops.length === 0) opError('einsum', 'needs at least one operand');
    const dtype = commonFloatDType('einsum', ops.map((t, i) => [`operand ${i}`, t] as const));
    return [meta(einsumPlan(a.equation, ops.map((t) => (t as TensorMeta).shape)).outShape, dtype)];
  },
});

// ---------------------------------------------------------------------------------------------
// grouped GEMM (MoE)

defineOp({
  name: 'grouped_gemm',
  group: 'matmul',
  doc:
    "out[t] = input[t] @ weight[e(t)]^T (+ bias[e(t)]) for input [T, K], weight [E, N, K] (vLLM fused_moe's w13 / w2 layout). " +
    'Rows pick their expert by offsets [E + 1] (tokens sorted by expert: rows offsets[e]..offsets[e+1] use expert e, rows past ' +
    'offsets[E] are padding and give zeros; torch._grouped_mm offs with a leading 0) or by expert_ids [T] (-1: no local expert, a zero row). Exactly one is given.',
  inputs: [
    { name: 'input', dtypes: 'float' },
    { name: 'weight', dtypes: 'float' },
    { name: 'offsets', optional: true, dtypes: 'int' },
    { name: 'expert_ids', optional: true, dtypes: 'int' },
    { name: 'bias', optional: true, dtypes: 'float' },
  ],
  attrs: noAttrs,
  infer: ([x, w, offs, ids, b]) => {
    const op = 'grouped_gemm';
    const dtype = commonFloatDType(op, [['input', x!], ['weight', w!], ['bias', b ?? null]]);
    const xs = (x as TensorMeta).shape;
    const ws = (w as TensorMeta).shape;
    if (xs.length !== 2) opError(op, `input must be [T, K], got ${formatShape(xs)}`);
    if (ws.length !== 3) opError(op, `weight must be [E, N, K], got ${formatShape(ws)}`);
    const [E, N, K] = ws as [number, number, number];
    if (xs[1] !== K) opError(op, `weight ${formatShape(ws)} has K = ${K} but input ${formatShape(xs)} has K = ${xs[1]}`);
    if ((offs === null) === (ids === null)) opError(op, 'give exactly one of offsets [E + 1] and expert_ids [T]');
    if (offs && ((offs as TensorMeta).shape.length !== 1 || (offs as TensorMeta).shape[0] !== E + 1)) opError(op, `offsets ${formatShape((offs as TensorMeta).shape)} must be [${E + 1}] (E + 1)`);
    if (ids && ((ids as TensorMeta).shape.length !== 1 || (ids as TensorMeta).shape[0] !== xs[0])) opError(op, `expert_ids ${formatShape((ids as TensorMeta).shape)} must be [${xs[0]}]`);
    if (b && ((b as TensorMeta).shape.length !== 2 || (b as TensorMeta).shape[0] !== E || (b as TensorMeta).shape[1] !== N)) opError(op, `bias ${formatShape((b as TensorMeta).shape)} must be [${E}, ${N}]`);
    return [meta([xs[0]!, N], dtype)];
  },
  // one linear per run of rows sharing an expert (the routing is read on the host), copied into a zeroed output
  decompose: (call) => {
    const [x, w, offs, ids, bias] = call.inputs as [Tensor, Tensor, Tensor | null, Tensor | null, Tensor | null];
    const { shape, dtype } = call.outputs[0]!;
    const runs = expertRuns(x.shape[0]!, w.shape[0]!, offs ? offs.toFloat64Array() : null, ids ? ids.toFloat64Array() : null);
    const out = Tensor.zeros(call.backend, shape, dtype, { device: x.device });
    for (const [e, start, n] of runs) {
      const views = [x.narrow(0, start, n), w.select(0, e), bias ? bias.select(0, e) : null] as const;
      const y = callOp1('linear', [...views]);
      const dst = out.narrow(0, start, n);
      dst.copy_(y);
      for (const v of [...views, y, dst]) v?.dispose();
    }
    return [out];
  },
});

/** [expert, first row, rows] runs of a grouped GEMM's routing, validated as the kernels do (-1 ids and padding rows skipped). */
export function expertRuns(T: number, E: number, offsets: Float64Array | null, ids: Float64Array | null): [number, number, number][] {
  const op = 'grouped_gemm';
  const runs: [number, number, number][] = [];
  if (offsets) {
    if (offsets[0] !== 0) opError(op, `offsets[0] must be 0, got ${offsets[0]}`);
    for (let e = 0; e < E; e++) {
      const [a, b] = [offsets[e]!, offsets[e + 1]!];
      if (b < a) opError(op, `offsets must be non-decreasing, got offsets[${e}] = ${a} > offsets[${e + 1}] = ${b}`);
      if (b > T) opError(op, `offsets[${e + 1}] = ${b} exceeds the ${T} input rows`);
      if (b > a) runs.push([e, a, b - a]);
    }
    return runs;
  }
  for (let t = 0; t < T; t++) {
    const e = ids![t]!;
    if (e < -1 || e >= E || !Number.isInteger(e)) opError(op, `expert_ids[${t}] = ${e} is out of range for ${E} experts (-1 skips a row)`);
    if (e < 0) continue;
    const last = runs[runs.length - 1];
    if (last && last[0] === e && last[1] + last[2] === t) last[2]++;
    else runs.push([e, t, 1]);
  }
  return runs;
}

// ---------------------------------------------------------------------------------------------
// fused MoE GEMM (vLLM's fused_moe_kernel over moe_align's blocks)

const fusedMoeAttrs = z.object({ top_k: z.number().int().min(1), mul_routed_weight: z.boolean().default(false) }).strict();
export type FusedMoeGemmAttrs = z.infer<typeof fusedMoeAttrs>;

defineOp({
  name: 'fused_moe_gemm',
  group: 'matmul',
  doc:
    "vLLM's fused_moe_kernel (invoke_fused_moe_kernel, unquantised): the expert GEMM over moe_align's block-padded slots. " +
    'sorted_token_ids [P] is cut into NB = expert_ids.numel blocks of P / NB entries; block b uses expert expert_ids[b] and is skipped ' +
    'when its first entry is at or past num_tokens_post_padded[0]. An entry s in [0, M * top_k) writes out.view(M * top_k, N)[s] = ' +
    'input[s // top_k] @ weight[e]^T, times topk_weights.flatten()[s] when mul_routed_weight, rounded once; other entries are padding; ' +
    'expert -1 (or >= E) writes zero rows (vLLM\'s expert_map). Slots no processed entry names are zero on the CPU and left unwritten ' +
    "by device kernels (vLLM's torch.empty; moe_align names every slot once).",
  inputs: [
    { name: 'input', dtypes: 'float' },
    { name: 'weight', dtypes: 'float' },
    { name: 'topk_weights', optional: true, dtypes: 'float' },
    { name: 'sorted_token_ids', dtypes: 'int' },
    { name: 'expert_ids', dtypes: 'int' },
    { name: 'num_tokens_post_padded', dtypes: 'int' },
  ],
  attrs: fusedMoeAttrs,
  infer: ([x, w, tw, sorted, experts, post], a) => {
    const op = 'fused_moe_gemm';
    const dtype = commonFloatDType(op, [['input', x!], ['weight', w!]]);
    const xs = (x as TensorMeta).shape;
    const ws = (w as TensorMeta).shape;
    if (xs.length !== 2) opError(op, `input must be [M, K], got ${formatShape(xs)}`);
    if (ws.length !== 3) opError(op, `weight must be [E, N, K], got ${formatShape(ws)}`);
    if (xs[1] !== ws[2]) opError(op, `weight ${formatShape(ws)} has K = ${ws[2]} but input ${formatShape(xs)} has K = ${xs[1]}`);
    const ss = (sorted as TensorMeta).shape;
    const es = (experts as TensorMeta).shape;
    if (ss.length !== 1) opError(op, `sorted_token_ids must be 1-D, got ${formatShape(ss)}`);
    if (es.length !== 1) opError(op, `expert_ids must be 1-D, got ${formatShape(es)}`);
    if (es[0] === 0 ? ss[0] !== 0 : ss[0]! % es[0]! !== 0) opError(op, `sorted_token_ids ${formatShape(ss)} does not make ${es[0]} whole blocks (expert_ids ${formatShape(es)})`);
    const ps = (post as TensorMeta).shape;
    if (ps.reduce((p, d) => p * d, 1) !== 1) opError(op, `num_tokens_post_padded must hold one value, got ${formatShape(ps)}`);
    const slots = xs[0]! * a.top_k;
    if (a.mul_routed_weight) {
      if (tw === null) opError(op, 'mul_routed_weight needs topk_weights');
      const n = (tw as TensorMeta).shape.reduce((p, d) => p * d, 1);
      if (n !== slots) opError(op, `topk_weights ${formatShape((tw as TensorMeta).shape)} must hold M * top_k = ${slots} weights`);
    }
    return [meta([xs[0]!, a.top_k, ws[1]!], dtype)];
  },
  // gather the slots' rows, grouped_gemm with one expert id per row (-1: skipped or padding), scale, scatter back
  decompose: (call) => {
    const [x, w, tw, sorted, experts, post] = call.inputs as [Tensor, Tensor, Tensor | null, Tensor, Tensor, Tensor];
    const { top_k: topK, mul_routed_weight: mul } = call.attrs as FusedMoeGemmAttrs;
    const [M, , N] = call.outputs[0]!.shape as [number, number, number];
    const P = sorted.shape[0]!;
    const NB = experts.shape[0]!;
    const slots = M * topK;
    const dev = { device: x.device };
    const out = Tensor.zeros(call.backend, [slots + 1, N], call.outputs[0]!.dtype, dev); // + a spare row for padding
    if (P === 0 || slots === 0) return [keepSlots(out, slots, M, topK, N)];
    const bs = P / NB;
    const s = new OpScope();
    try {
      const ids = s.op('to', [sorted], { dtype: 'i64' });
      // each entry's block start, built on the device (a host upload would fail a CUDA graph capture)
      const blockStart = s.op('mul', [s.op('div', [s.own(deviceArange(call.backend, P, x.device)), bs], { rounding_mode: 'floor' }), bs]);
      const live = s.op('lt', [blockStart, s.op('to', [s.own(post.reshape([1]))], { dtype: 'i64' })]);
      const valid = s.op('logical_and', [live, s.op('logical_and', [s.op('ge', [ids, 0]), s.op('lt', [ids, slots])])]);
      const safe = s.op('where', [valid, ids, 0]);
      const rows = s.op('index_select', [x, s.op('div', [safe, topK], { rounding_mode: 'floor' })], { dim: 0 });
      const rowExpert = s.op('reshape', [s.op('contiguous', [s.own(experts.view(NB, 1).expand(NB, bs))])], { shape: [P] });
      const e = s.op('to', [rowExpert], { dtype: 'i64' });
      const inRange = s.op('logical_and', [valid, s.op('logical_and', [s.op('ge', [e, 0]), s.op('lt', [e, w.shape[0]!])])]);
      let y = s.op('grouped_gemm', [rows, w, null, s.op('where', [inRange, e, -1]), null]);
      if (mul) {
        const wt = s.op('index_select', [s.own(tw!.reshape([slots])), safe], { dim: 0 });
        y = s.op('to', [s.op('mul', [y, s.own(wt.view(P, 1))])], { dtype: y.dtype });
      }
      const dest = s.op('where', [valid, ids, slots]);
      const filled = callOp1('scatter', [out, s.own(dest.view(P, 1).expand(P, N)), y], { dim: 0 });
      out.dispose();
      s.dispose();
      return [keepSlots(filled, slots, M, topK, N)];
    } catch (err) {
      s.dispose();
      out.dispose();
      throw err;
    }
  },
});

// ---------------------------------------------------------------------------------------------
// moe_align (vLLM's moe_align_block_size: the layout fused_moe_gemm reads)

const moeAlignAttrs = z.object({ block_size: z.number().int().min(1), num_experts: z.number().int().min(1) }).strict();
export type MoeAlignAttrs = z.infer<typeof moeAlignAttrs>;

/**
 * moe_align's output sizes (vLLM's pad_sorted_ids): sorted_token_ids holds numel + E (blockSize - 1) entries rounded up to
 * whole blocks (a consumer finds the block size as P / NB), expert_ids one per block.
 */
export function moeAlignSizes(numel: number, numExperts: number, blockSize: number): { maxPadded: number; numBlocks: number } {
  const numBlocks = Math.ceil((numel + numExperts * (blockSize - 1)) / blockSize);
  return { maxPadded: numBlocks * blockSize, numBlocks };
}

defineOp({
  name: 'moe_align',
  group: 'matmul',
  doc:
    "vLLM's moe_align_block_size: the flattened (token, k) slots of topk_ids grouped by expert, each expert's run padded to whole " +
    'blocks of block_size entries. Outputs sorted_token_ids i32 [P] (P = numel + E (block_size - 1) rounded up to whole blocks; ' +
    'within an expert the slots ascend; padding entries hold numel), expert_ids i32 [P / block_size] (-1 for blocks at or past the ' +
    'padded total) and num_tokens_post_padded i32 [1]. Slots whose id is outside [0, num_experts) (-1: an expert another rank ' +
    'serves) are in no block. Decomposition: one_hot counts, cumsum offsets, a stable sort and a scatter, all on the device.',
  inputs: [{ name: 'topk_ids', dtypes: 'int' }],
  outputs: ['sorted_token_ids', 'expert_ids', 'num_tokens_post_padded'],
  attrs: moeAlignAttrs,
  infer: ([ids], a) => {
    const n = (ids as TensorMeta).shape.reduce((p, d) => p * d, 1);
    const { maxPadded, numBlocks } = moeAlignSizes(n, a.num_experts, a.block_size);
    return [meta([maxPadded], 'i32'), meta([numBlocks], 'i32'), meta([1], 'i32')];
  },
  decompose: (call) => {
    const { block_size: bs, num_experts: E } = call.attrs as MoeAlignAttrs;
    const topkIds = call.inputs[0] as Tensor;
    const [P, NB] = [call.outputs[0]!.shape[0]!, call.outputs[1]!.shape[0]!];
    const N = topkIds.numel;
    const dev = topkIds.device;
    const s = new OpScope();
    try {
      const flat = s.op('to', [s.own(topkIds.reshape(N))], { dtype: 'i64' });
      // bucket E: the slots no expert here takes (sorted last, sent to a spare entry P)
      const bucket = s.op('where', [s.op('logical_and', [s.op('ge', [flat, 0]), s.op('lt', [flat, E])]), flat, E]);
      const counts = s.op('sum', [s.op('one_hot', [bucket], { num_classes: E + 1 })], { dim: 0 }); // [E + 1]
      const padded = s.op('mul', [s.op('div', [s.op('add', [counts, bs - 1]), bs], { rounding_mode: 'floor' }), bs]);
      const paddedEnd = s.op('cumsum', [padded], { dim: 0 });
      const paddedStart = s.op('sub', [paddedEnd, padded]);
      const countStart = s.op('sub', [s.op('cumsum', [counts], { dim: 0 }), counts]);
      const [bucketOf, order] = callOp('sort', [bucket], { dim: 0, stable: true }) as [Tensor, Tensor];
      s.own(bucketOf);
      s.own(order);
      // index constants built on the device: a host upload would fail a CUDA graph capture
      const rank = s.own(deviceArange(call.backend, N, dev));
      const place = s.op('add', [s.op('index_select', [paddedStart, bucketOf], { dim: 0 }), s.op('sub', [rank, s.op('index_select', [countStart, bucketOf], { dim: 0 })])]);
      const dest = s.op('where', [s.op('lt', [bucketOf, E]), place, P]);
      const fill = s.op('add', [s.own(Tensor.zeros(call.backend, [P + 1], 'i64', { device: dev })), N]);
      const sorted = s.own(s.op('scatter', [fill, dest, order], { dim: 0 }).narrow(0, 0, P));
      // a block's expert: the experts whose padded run ends at or before the block's start; -1 past the total
      const starts = s.own(s.op('mul', [s.own(deviceArange(call.backend, NB, dev)), bs]).view(NB, 1));
      const ends = s.own(s.own(paddedEnd.narrow(0, 0, E)).view(1, E));
      const before = s.op('sum', [s.op('le', [ends, starts])], { dim: 1 });
      const total = s.own(paddedEnd.narrow(0, E - 1, 1));
      const experts = s.op('where', [s.op('lt', [s.own(starts.view(NB)), total]), before, -1]);
      return s.keep([s.op('to', [sorted], { dtype: 'i32' }), s.op('to', [experts], { dtype: 'i32' }), s.op('to', [total], { dtype: 'i32' })]);
    } catch (e) {
      s.dispose();
      throw e;
    }
  },
});

/** rows [0, slots) of a [slots + 1, N] buffer, viewed [M, top_k, N] (the buffer's handle disposed; the view keeps its storage). */
function keepSlots(buf: Tensor, slots: number, M: number, topK: number, N: number): Tensor {
  const head = buf.narrow(0, 0, slots);
  const v = head.view(M, topK, N);
  head.dispose();
  buf.dispose();
  return v;
}

// ---------------------------------------------------------------------------------------------
// typed front ends

export const matmulFunctions = {
  matmul: (input: Tensor, other: Tensor): Tensor => callOp1('matmul', [input, other]),
  bmm: (input: Tensor, mat2: Tensor): Tensor => callOp1('bmm', [input, mat2]),
  baddbmm: (input: Tensor, batch1: Tensor, batch2: Tensor, opts: { beta?: number; alpha?: number } = {}): Tensor => callOp1('baddbmm', [input, batch1, batch2], opts),
  linear: (input: Tensor, weight: Tensor, bias: Tensor | null = null, opts: { activation?: LinearActivation } = {}): Tensor => callOp1('linear', [input, weight, bias], opts),
  linearSiluAndMul: (input: Tensor, weight: Tensor, bias: Tensor | null = null): Tensor => callOp1('linear_silu_and_mul', [input, weight, bias]),
  einsum: (equation: string, ...operands: Tensor[]): Tensor => callOp1('einsum', operands, { equation }),
  groupedGemm: (input: Tensor, weight: Tensor, routing: { offsets?: Tensor; expertIds?: Tensor }, bias: Tensor | null = null): Tensor =>
    callOp1('grouped_gemm', [input, weight, routing.offsets ?? null, routing.expertIds ?? null, bias]),
  fusedMoeGemm: (
    input: Tensor, weight: Tensor, topkWeights: Tensor | null, sortedTokenIds: Tensor, expertIds: Tensor, numTokensPostPadded: Tensor,
    opts: { top_k: number; mul_routed_weight?: boolean },
  ): Tensor => callOp1('fused_moe_gemm', [input, weight, topkWeights, sortedTokenIds, expertIds, numTokensPostPadded], opts),
  moeAlign: (topkIds: Tensor, opts: { block_size: number; num_experts: number }): [Tensor, Tensor, Tensor] => callOp('moe_align', [topkIds], opts) as [Tensor, Tensor, Tensor],
};
