/**
 * The matmul group in float64 (PyTorch semantics): matmul with 1-D operands and broadcast batch dims, bmm,
 * baddbmm, linear with an activation epilogue, einsum over explicit index letters, and a grouped GEMM for MoE.
 * Inputs of any strides are gathered to row-major float64; outputs are fresh contiguous tensors rounded once.
 */
import { einsumPlan, formatShape, type Backend, type DType, type Tensor } from '@fastkernels/core';
import { geluErf, geluTanh, silu } from '../math.js';
import { broadcastShapes, expectFloat, gather, gatherBroadcast, gatherInts, output, StridedView } from '../strided.js';

/** torch refuses mixed-dtype matmuls; so do we (the caller casts first). */
function sameDType(what: string, ...ts: [string, Tensor][]): DType {
  const [n0, t0] = ts[0]!;
  for (const [name, t] of ts) {
    expectFloat(t, what, name);
    if (t.dtype !== t0.dtype) throw new TypeError(`${what}: ${n0} is ${t0.dtype} but ${name} is ${t.dtype}; cast them to one dtype`);
  }
  return t0.dtype;
}

/** C[b] += A[b] B[b] for row-major [nb, M, K] x [nb, K, N]; each C[m, n] sums in increasing k. */
function gemmInto(C: Float64Array, A: Float64Array, B: Float64Array, nb: number, M: number, K: number, N: number, alpha = 1): void {
  // Four rows of A at a time share each streamed row of B (a quarter of the B reads; float64 sums in k order as before)
  const acc = [new Float64Array(N), new Float64Array(N), new Float64Array(N), new Float64Array(N)] as const;
  for (let bi = 0; bi < nb; bi++) {
    const a0 = bi * M * K;
    const b0 = bi * K * N;
    const c0 = bi * M * N;
    for (let m = 0; m < M; m += 4) {
      const rows = Math.min(4, M - m);
      for (const r of acc) r.fill(0);
      const [r0, r1, r2, r3] = acc;
      for (let k = 0; k < K; k++) {
        const br = b0 + k * N;
        const av0 = A[a0 + m * K + k]!;
        const av1 = rows > 1 ? A[a0 + (m + 1) * K + k]! : 0;
        const av2 = rows > 2 ? A[a0 + (m + 2) * K + k]! : 0;
        const av3 = rows > 3 ? A[a0 + (m + 3) * K + k]! : 0;
        for (let n = 0; n < N; n++) {
          const bv = B[br + n]!;
          r0[n]! += av0 * bv;
          r1[n]! += av1 * bv;
          r2[n]! += av2 * bv;
          r3[n]! += av3 * bv;
        }
      }
      for (let r = 0; r < rows; r++) {
        const ar = acc[r]!;
        for (let n = 0; n < N; n++) C[c0 + (m + r) * N + n]! += alpha * ar[n]!;
      }
    }
  }
}

/**
 * torch.matmul(input, other): 1-D x 1-D is a dot product (0-d result); a 1-D input is a row vector and a 1-D
 * other a column vector, the added dim removed afterwards; dims before the last two broadcast.
 */
export function matmul(backend: Backend, input: Tensor, other: Tensor): Tensor {
  const what = 'matmul';
  if (input.rank < 1 || other.rank < 1) throw new RangeError(`${what}: both arguments need at least 1 dim, got input ${formatShape(input.shape)} and other ${formatShape(other.shape)}`);
  const dtype = sameDType(what, ['input', input], ['other', other]);
  const a = input.rank === 1 ? input.unsqueeze(0) : input;
  const b = other.rank === 1 ? other.unsqueeze(1) : other;
  try {
    const M = a.shape[a.rank - 2]!;
    const K = a.shape[a.rank - 1]!;
    const N = b.shape[b.rank - 1]!;
    if (b.shape[b.rank - 2] !== K) throw new RangeError(`${what}: input ${formatShape(input.shape)} and other ${formatShape(other.shape)} cannot be multiplied (${K} != ${b.shape[b.rank - 2]})`);
    const batch = broadcastShapes(a.shape.slice(0, -2), b.shape.slice(0, -2), `${what} (batch dims of input ${formatShape(input.shape)} and other ${formatShape(other.shape)})`);
    const nb = batch.reduce((p, d) => p * d, 1);
    const C = new Float64Array(nb * M * N);
    gemmInto(C, gatherBroadcast(a, [...batch, M, K], what), gatherBroadcast(b, [...batch, K, N], what), nb, M, K, N);
    const shape = [...batch];
    if (input.rank > 1) shape.push(M);
    if (other.rank > 1) shape.push(N);
    return output(backend, shape, dtype, C, what);
  } finally {
    if (a !== input) a.dispose();
    if (b !== other) b.dispose();
  }
}

function bmmShapes(what: string, b1: Tensor, b2: Tensor, n1: string, n2: string): [number, number, number, number] {
  if (b1.rank !== 3 || b2.rank !== 3) throw new RangeError(`${what}: ${n1} and ${n2} must be 3-D, got ${formatShape(b1.shape)} and ${formatShape(b2.shape)}`);
  const [B, M, K] = b1.shape as [number, number, number];
  if (b2.shape[0] !== B || b2.shape[1] !== K) throw new RangeError(`${what}: ${n2} ${formatShape(b2.shape)} must be [${B}, ${K}, p] for ${n1} ${formatShape(b1.shape)}`);
  return [B, M, K, b2.shape[2]!];
}

/** torch.bmm(input [b, n, m], mat2 [b, m, p]) -> [b, n, p]; no broadcasting, as in torch. */
export function bmm(backend: Backend, input: Tensor, mat2: Tensor): Tensor {
  const dtype = sameDType('bmm', ['input', input], ['mat2', mat2]);
  const [B, M, K, N] = bmmShapes('bmm', input, mat2, 'input', 'mat2');
  const C = new Float64Array(B * M * N);
  gemmInto(C, gather(input, 'bmm'), gather(mat2, 'bmm'), B, M, K, N);
  return output(backend, [B, M, N], dtype, C, 'bmm');
}

/**
 * torch.baddbmm(input, batch1, batch2, beta=1, alpha=1) = beta * input + alpha * batch1 @ batch2; input broadcasts to
 * [b, n, p]. With beta = 0 input is not read (its NaN/Inf do not propagate), as torch documents.
 */
export function baddbmm(backend: Backend, input: Tensor, batch1: Tensor, batch2: Tensor, options: { beta?: number; alpha?: number } = {}): Tensor {
  const what = 'baddbmm';
  const { beta = 1, alpha = 1 } = options;
  const dtype = sameDType(what, ['input', input], ['batch1', batch1], ['batch2', batch2]);
  const [B, M, K, N] = bmmShapes(what, batch1, batch2, 'batch1', 'batch2');
  let C: Float64Array;
  try {
    C = gatherBroadcast(input, [B, M, N], what);
  } catch {
    throw new RangeError(`${what}: input ${formatShape(input.shape)} does not broadcast to [${B}, ${M}, ${N}]`);
  }
  if (beta === 0) C.fill(0);
  else if (beta !== 1) for (let i = 0; i < C.length; i++) C[i]! *= beta;
  gemmInto(C, gather(batch1, what), gather(batch2, what), B, M, K, N, alpha);
  return output(backend, [B, M, N], dtype, C, what);
}

export const ACTIVATIONS = ['none', 'relu', 'gelu', 'gelu_tanh', 'silu'] as const;
export type Activation = (typeof ACTIVATIONS)[number];

export function activationFn(activation: Activation, what: string): (v: number) => number {
  switch (activation) {
    case 'none': return (v) => v;
    case 'relu': return (v) => (v > 0 ? v : Number.isNaN(v) ? v : 0);
    case 'gelu': return geluErf;
    case 'gelu_tanh': return geluTanh;
    case 'silu': return silu;
    default: throw new RangeError(`${what}: activation must be one of ${ACTIVATIONS.join(', ')}, got '${String(activation)}'`);
  }
}

/**
 * F.linear(input [..., in], weight [out, in], bias [out]) followed by an activation epilogue (cuBLASLt's
 * bias + RELU / GELU epilogues; silu for completeness). The activation applies to the float64 sum, so the only
 * rounding is the store. A 1-D input gives a 1-D output, as in torch.
 */
export function linear(backend: Backend, input: Tensor, weight: Tensor, bias: Tensor | null = null, options: { activation?: Activation } = {}): Tensor {
  const what = 'linear';
  const act = activationFn(options.activation ?? 'none', what);
  const dtype = bias ? sameDType(what, ['input', input], ['weight', weight], ['bias', bias]) : sameDType(what, ['input', input], ['weight', weight]);
  if (weight.rank !== 2) throw new RangeError(`${what}: weight must be [out_features, in_features], got ${formatShape(weight.shape)}`);
  const [N, K] = weight.shape as [number, number];
  if (input.rank < 1 || input.shape[input.rank - 1] !== K) throw new RangeError(`${what}: input ${formatShape(input.shape)} last dim must equal in_features ${K} of weight ${formatShape(weight.shape)}`);
  if (bias && (bias.rank !== 1 || bias.shape[0] !== N)) throw new RangeError(`${what}: bias ${formatShape(bias.shape)} must be [${N}] for weight ${formatShape(weight.shape)}`);
  const X = gather(input, what);
  const rows = input.shape.slice(0, -1).reduce((p, d) => p * d, 1);
  const bv = bias ? gather(bias, what) : null;
  // the weight is read one row at a time through its strides, never gathered whole
  const W = new StridedView(weight, what);
  const [ws0, ws1] = W.strides as [number, number];
  const wrow = new Float64Array(K);
  const Y = new Float64Array(rows * N);
  for (let n = 0; n < N; n++) {
    for (let k = 0; k < K; k++) wrow[k] = W.acc.get(W.offset + n * ws0 + k * ws1);
    const b = bv ? bv[n]! : 0;
    for (let r = 0; r < rows; r++) {
      let s = 0;
      for (let k = 0; k < K; k++) s += X[r * K + k]! * wrow[k]!;
      Y[r * N + n] = act(s + b);
    }
  }
  return output(backend, [...input.shape.slice(0, -1), N], dtype, Y, what);
}

// ---------------------------------------------------------------------------------------------
// einsum

/**
 * torch.einsum over explicit letters and one '...' per term (core's einsumPlan resolves the labels and sizes): naive
 * but exact, one float64 sum per output element over every summed label, in row-major label order.
 */
export function einsum(backend: Backend, equation: string, ...operands: Tensor[]): Tensor {
  const what = `einsum('${equation}')`;
  if (operands.length === 0) throw new RangeError(`${what}: needs at least one operand`);
  const dtype = sameDType(what, ...operands.map((t, i) => [`operand ${i}`, t] as [string, Tensor]));
  const { inputs: opLabels, output: outLabels, sizes, outShape } = einsumPlan(equation, operands.map((t) => t.shape));
  const sumLabels = [...sizes.keys()].filter((l) => !outLabels.includes(l));
  const loop = [...outLabels, ...sumLabels];
  const loopSize = loop.map((l) => sizes.get(l)!);
  // per operand, the stride of each loop label in its gathered row-major values (0 where absent or broadcast)
  const data = operands.map((t) => gather(t, what));
  const loopStrides = operands.map((t, i) => {
    const rowStrides: number[] = [];
    let s = 1;
    for (let d = t.rank - 1; d >= 0; d--) {
      rowStrides[d] = s;
      s *= t.shape[d]!;
    }
    return loop.map((l) => opLabels[i]!.reduce((acc, ol, d) => (ol === l && t.shape[d] !== 1 ? acc + rowStrides[d]! : acc), 0));
  });
  const nOut = outShape.reduce((p, d) => p * d, 1);
  const nSum = sumLabels.reduce((p, l) => p * sizes.get(l)!, 1);
  const Y = new Float64Array(nOut);
  if (nOut > 0 && nSum > 0) {
    const nOps = operands.length;
    const idx = new Array<number>(loop.length).fill(0);
    const offs = new Array<number>(nOps).fill(0);
    const nOutDims = outLabels.length;
    // an odometer over the loop labels that moves every operand's offset with it
    const advance = (from: number, to: number): void => {
      for (let d = from; d >= to; d--) {
        idx[d]!++;
        for (let i = 0; i < nOps; i++) offs[i]! += loopStrides[i]![d]!;
        if (idx[d]! < loopSize[d]!) return;
        for (let i = 0; i < nOps; i++) offs[i]! -= loopStrides[i]![d]! * loopSize[d]!;
        idx[d] = 0;
      }
    };
    for (let o = 0; o < nOut; o++) {
      let s = 0;
      for (let r = 0; r < nSum; r++) {
        let p = 1;
        for (let i = 0; i < nOps; i++) p *= data[i]![offs[i]!]!;
        s += p;
        advance(loop.length - 1, nOutDims);
      }
      Y[o] = s;
      advance(nOutDims - 1, 0);
    }
  }
  return output(backend, outShape, dtype, Y, 'einsum');
}

// ---------------------------------------------------------------------------------------------
// grouped GEMM (MoE)

export interface GroupedGemmOptions {
  /**
   * Tokens sorted by expert: rows offsets[e] .. offsets[e + 1] of input use expert e. Shape [E + 1], integer,
   * offsets[0] = 0, non-decreasing; rows from offsets[E] to the end are padding and come out as zeros.
   */
  readonly offsets?: Tensor;
  /** Or one expert id per row [T] (integer); -1 marks a row no local expert takes (a zero row), as vLLM's expert_map. */
  readonly expertIds?: Tensor;
  /** Per-expert bias [E, N]. */
  readonly bias?: Tensor | null;
}

/**
 * y[t] = input[t] @ weight[e(t)]^T (+ bias[e(t)]): the expert GEMM of a MoE layer. weight is [E, N, K] in the linear
 * layout vLLM's fused_moe keeps (w13_weight [E, 2I, H], w2_weight [E, H, I]). Rows pick their expert either by
 * `offsets` (the grouped-GEMM form: tokens sorted by expert, like torch._grouped_mm's offs with a leading 0) or by
 * `expertIds` (one id per row, like fused_moe's sorted_token_ids/expert_ids after moe_align). Exactly one is given.
 */
export function groupedGemm(backend: Backend, input: Tensor, weight: Tensor, options: GroupedGemmOptions): Tensor {
  const what = 'groupedGemm';
  const { offsets, expertIds, bias = null } = options;
  const dtype = bias ? sameDType(what, ['input', input], ['weight', weight], ['bias', bias]) : sameDType(what, ['input', input], ['weight', weight]);
  if (input.rank !== 2) throw new RangeError(`${what}: input must be [T, K], got ${formatShape(input.shape)}`);
  if (weight.rank !== 3) throw new RangeError(`${what}: weight must be [E, N, K], got ${formatShape(weight.shape)}`);
  const [T, K] = input.shape as [number, number];
  const [E, N, K2] = weight.shape as [number, number, number];
  if (K2 !== K) throw new RangeError(`${what}: weight ${formatShape(weight.shape)} has K = ${K2} but input ${formatShape(input.shape)} has K = ${K}`);
  if (bias && (bias.rank !== 2 || bias.shape[0] !== E || bias.shape[1] !== N)) throw new RangeError(`${what}: bias ${formatShape(bias.shape)} must be [${E}, ${N}]`);
  const rowsOf = expertRows(what, T, E, offsets, expertIds);
  const W = new StridedView(weight, what);
  const [s0, s1, s2] = W.strides as [number, number, number];
  const Y = expertGemm(gather(input, what), T, K, N, rowsOf, bias ? gather(bias, what) : null, (e, n, row) => {
    for (let k = 0; k < K; k++) row[k] = W.acc.get(W.offset + e * s0 + n * s1 + k * s2);
  });
  return output(backend, [T, N], dtype, Y, what);
}

/** The input rows each expert takes, from offsets [E + 1] or expert ids [T] (exactly one), validated. */
export function expertRows(what: string, T: number, E: number, offsets: Tensor | undefined, expertIds: Tensor | undefined): number[][] {
  if ((offsets === undefined) === (expertIds === undefined)) throw new RangeError(`${what}: give exactly one of offsets [E + 1] and expertIds [T]`);
  const rowsOf: number[][] = Array.from({ length: E }, () => []);
  if (offsets) {
    if (offsets.rank !== 1 || offsets.shape[0] !== E + 1) throw new RangeError(`${what}: offsets ${formatShape(offsets.shape)} must be [${E + 1}] (E + 1) for ${E} experts`);
    const o = gatherInts(offsets, `${what} offsets`);
    if (o[0] !== 0) throw new RangeError(`${what}: offsets[0] must be 0, got ${o[0]}`);
    for (let e = 0; e < E; e++) {
      if (o[e + 1]! < o[e]!) throw new RangeError(`${what}: offsets must be non-decreasing, got offsets[${e}] = ${o[e]} > offsets[${e + 1}] = ${o[e + 1]}`);
      if (o[e + 1]! > T) throw new RangeError(`${what}: offsets[${e + 1}] = ${o[e + 1]} exceeds the ${T} input rows`);
      for (let t = o[e]!; t < o[e + 1]!; t++) rowsOf[e]!.push(t);
    }
    return rowsOf;
  }
  const ids = gatherInts(expertIds!, `${what} expertIds`);
  if (expertIds!.rank !== 1 || ids.length !== T) throw new RangeError(`${what}: expertIds ${formatShape(expertIds!.shape)} must be [${T}]`);
  for (let t = 0; t < T; t++) {
    const e = ids[t]!;
    if (e < -1 || e >= E) throw new RangeError(`${what}: expertIds[${t}] = ${e} is out of range for ${E} experts (-1 skips a row)`);
    if (e >= 0) rowsOf[e]!.push(t);
  }
  return rowsOf;
}

/**
 * Y [T, N] = X [T, K] rows times their expert's weight rows (read one at a time by `readRow(e, n, out)`, so each is
 * decoded once), plus bias [E, N]; rows no expert takes stay zero.
 */
export function expertGemm(X: Float64Array, T: number, K: number, N: number, rowsOf: readonly (readonly number[])[], bias: Float64Array | null, readRow: (e: number, n: number, out: Float64Array) => void): Float64Array {
  const wrow = new Float64Array(K);
  const Y = new Float64Array(T * N);
  rowsOf.forEach((rows, e) => {
    if (rows.length === 0) return;
    for (let n = 0; n < N; n++) {
      readRow(e, n, wrow);
      const b = bias ? bias[e * N + n]! : 0;
      for (const t of rows) {
        let s = 0;
        for (let k = 0; k < K; k++) s += X[t * K + k]! * wrow[k]!;
        Y[t * N + n] = s + b;
      }
    }
  });
  return Y;
}
