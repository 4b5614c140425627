/**
 * Quantisation in float64: fp8 e4m3 per-tensor (static / dynamic scale) and per-token-group quantise as vLLM's
 * scaled_fp8_quant / per_token_group_quant_fp8 compute them, dequantise, an fp8 GEMM with per-tensor / per-row scales
 * (torch._scaled_mm), and OCP MXFP4 (gpt-oss `blocks` + `scales`) dequantise and a linear layer over MXFP4 weights.
 */
import { DTYPE_INFO, FP8_E4M3_MAX, formatShape, type Backend, type DType, type Tensor } from '@fastkernels/core';
import { broadcastStrides, expectFloat, gather, gatherLayout, output, StridedView } from '../strided.js';
import { expertGemm, expertRows } from './matmul-general.js';

/**
 * Smallest dynamic scale: vLLM's per-token kernels floor the scale at 1 / (448 * 512) so an all-zero row does not
 * divide by zero; we apply the same floor to the per-tensor dynamic scale (vLLM leaves it 0 there and gets NaN).
 */
export const FP8_MIN_SCALE = 1 / (FP8_E4M3_MAX * 512);

function expectDType(t: Tensor, allowed: readonly DType[], what: string, name: string): void {
  if (!allowed.includes(t.dtype)) throw new TypeError(`${what}: ${name} must be ${allowed.join(' or ')}, got ${t.dtype}`);
}

/**
 * x / scale clamped to the e4m3 range (rounding to nearest even happens on store). NaN stays NaN. Callers round the
 * quotient to float32 first, as vLLM's kernels divide: with bf16 inputs x / scale often sits within a float32 ulp of an
 * e4m3 tie, and the float32 quotient decides which way it rounds.
 */
const toE4m3Range = (v: number): number => (v > FP8_E4M3_MAX ? FP8_E4M3_MAX : v < -FP8_E4M3_MAX ? -FP8_E4M3_MAX : v);

/** A per-tensor scale: a tensor of one element (shape [] or [1]). */
function scalarOf(t: Tensor, what: string, name: string): number {
  expectFloat(t, what, name);
  if (t.numel !== 1) throw new RangeError(`${what}: ${name} must hold one element (per-tensor), got ${formatShape(t.shape)}`);
  return gather(t, what)[0]!;
}

/**
 * vLLM ops.scaled_fp8_quant(input, scale=None): with a scale (static) q = fp8(clamp(input / scale)); without one
 * (dynamic) scale = amax(|input|) / 448 first. Returns [q (fp8e4m3, input's shape), scale (f32 [1])].
 */
export function scaledFp8Quant(backend: Backend, input: Tensor, options: { scale?: Tensor | null } = {}): [Tensor, Tensor] {
  const what = 'scaled_fp8_quant';
  expectFloat(input, what, 'input');
  const X = gather(input, what);
  let scale: number;
  if (options.scale) {
    scale = scalarOf(options.scale, what, 'scale');
    if (!(scale > 0)) throw new RangeError(`${what}: a static scale must be positive, got ${scale}`);
  } else {
    let amax = 0;
    for (let i = 0; i < X.length; i++) amax = Math.max(amax, Math.abs(X[i]!));
    // the scale is a float32 in vLLM; dividing by its rounded value keeps q and scale consistent
    scale = Math.fround(Math.max(amax / FP8_E4M3_MAX, FP8_MIN_SCALE));
  }
  for (let i = 0; i < X.length; i++) X[i] = toE4m3Range(Math.fround(X[i]! / scale));
  const q = output(backend, input.shape, 'fp8e4m3', X, what);
  return [q, output(backend, [1], 'f32', Float64Array.of(scale), what)];
}

/**
 * x = q * scale in `output_dtype` (default bf16): scale is per-tensor (one element) or any shape that broadcasts to q
 * (per-token [T, 1], per-channel [1, N], per-group after an expand).
 */
export function fp8Dequant(backend: Backend, q: Tensor, scale: Tensor, options: { output_dtype?: DType } = {}): Tensor {
  const what = 'fp8_dequant';
  expectDType(q, ['fp8e4m3', 'fp8e5m2'], what, 'input');
  expectFloat(scale, what, 'scale');
  const outDType = options.output_dtype ?? 'bf16';
  if (DTYPE_INFO[outDType].kind !== 'float') throw new TypeError(`${what}: output_dtype must be a float type, got ${outDType}`);
  const Q = gather(q, what);
  let S: Float64Array;
  try {
    S = gatherLayout(scale, q.shape, broadcastStrides(scale, q.shape, what), scale.offset, what);
  } catch {
    throw new RangeError(`${what}: scale ${formatShape(scale.shape)} does not broadcast to input ${formatShape(q.shape)}`);
  }
  for (let i = 0; i < Q.length; i++) Q[i]! *= S[i]!;
  return output(backend, q.shape, outDType, Q, what);
}

/**
 * vLLM per_token_group_quant_fp8(x, group_size, eps=1e-10, scale_ue8m0=False): every run of group_size elements along
 * the last dim gets scale = max(amax, eps) / 448 (rounded up to a power of two with scale_ue8m0, DeepSeek's UE8M0
 * scales) and q = fp8(clamp(x / scale)). Returns [q (fp8e4m3, x's shape), scales (f32 [..., H / group_size], row-major)].
 */
export function perTokenGroupQuantFp8(backend: Backend, x: Tensor, groupSize: number, options: { eps?: number; scale_ue8m0?: boolean } = {}): [Tensor, Tensor] {
  const what = 'per_token_group_quant_fp8';
  expectFloat(x, what, 'x');
  const { eps = 1e-10, scale_ue8m0 = false } = options;
  if (x.rank < 1) throw new RangeError(`${what}: x must have a last dim to group, got ${formatShape(x.shape)}`);
  const H = x.shape[x.rank - 1]!;
  if (!Number.isInteger(groupSize) || groupSize < 1 || H % groupSize !== 0) throw new RangeError(`${what}: the last dim of x ${formatShape(x.shape)} must be divisible by group_size ${groupSize}`);
  const X = gather(x, what);
  const nGroups = X.length / groupSize;
  const scales = new Float64Array(nGroups);
  for (let g = 0; g < nGroups; g++) {
    let amax = 0;
    for (let i = g * groupSize; i < (g + 1) * groupSize; i++) amax = Math.max(amax, Math.abs(X[i]!));
    let s = Math.fround(Math.max(amax, eps) / FP8_E4M3_MAX);
    if (scale_ue8m0) s = 2 ** Math.ceil(Math.log2(s));
    scales[g] = s;
    for (let i = g * groupSize; i < (g + 1) * groupSize; i++) X[i] = toE4m3Range(Math.fround(X[i]! / s));
  }
  const q = output(backend, x.shape, 'fp8e4m3', X, what);
  return [q, output(backend, [...x.shape.slice(0, -1), H / groupSize], 'f32', scales, what)];
}

/**
 * torch._scaled_mm(a [M, K], b [K, N], scale_a, scale_b, bias, out_dtype): (a * scale_a) @ (b * scale_b) + bias with
 * fp8 operands. scale_a is per-tensor (one element) or per-row [M, 1]; scale_b per-tensor or per-column [1, N]. b is
 * usually the transpose of a row-major [N, K] weight (column-major), which is just its strides here.
 */
export function scaledMm(backend: Backend, a: Tensor, b: Tensor, scaleA: Tensor, scaleB: Tensor, options: { bias?: Tensor | null; out_dtype?: DType } = {}): Tensor {
  const what = 'scaled_mm';
  expectDType(a, ['fp8e4m3', 'fp8e5m2'], what, 'a');
  expectDType(b, ['fp8e4m3', 'fp8e5m2'], what, 'b');
  if (a.rank !== 2 || b.rank !== 2 || a.shape[1] !== b.shape[0]) throw new RangeError(`${what}: a ${formatShape(a.shape)} and b ${formatShape(b.shape)} must be [M, K] and [K, N]`);
  const [M, K] = a.shape as [number, number];
  const N = b.shape[1]!;
  const outDType = options.out_dtype ?? 'bf16';
  if (DTYPE_INFO[outDType].kind !== 'float') throw new TypeError(`${what}: out_dtype must be a float type, got ${outDType}`);
  const rowScale = (s: Tensor, n: number, name: string, perShape: string): Float64Array => {
    expectDType(s, ['f32'], what, name);
    if (s.numel === 1) return new Float64Array(n).fill(gather(s, what)[0]!);
    const ok = name === 'scale_a' ? s.rank === 2 && s.shape[0] === n && s.shape[1] === 1 : s.rank === 2 && s.shape[0] === 1 && s.shape[1] === n;
    if (!ok) throw new RangeError(`${what}: ${name} ${formatShape(s.shape)} must be one element (per-tensor) or ${perShape}`);
    return gather(s, what);
  };
  const sa = rowScale(scaleA, M, 'scale_a', `[${M}, 1] (per-row)`);
  const sb = rowScale(scaleB, N, 'scale_b', `[1, ${N}] (per-column)`);
  const bias = options.bias ?? null;
  if (bias && (bias.rank !== 1 || bias.shape[0] !== N)) throw new RangeError(`${what}: bias ${formatShape(bias.shape)} must be [${N}]`);
  const bv = bias ? gather(bias, what) : null;
  const A = gather(a, what);
  const B = gather(b, what);
  const Y = new Float64Array(M * N);
  const acc = new Float64Array(N);
  for (let m = 0; m < M; m++) {
    acc.fill(0);
    for (let k = 0; k < K; k++) {
      const av = A[m * K + k]!;
      for (let n = 0; n < N; n++) acc[n]! += av * B[k * N + n]!;
    }
    for (let n = 0; n < N; n++) Y[m * N + n] = acc[n]! * sa[m]! * sb[n]! + (bv ? bv[n]! : 0);
  }
  return output(backend, [M, N], outDType, Y, what);
}

// ---------------------------------------------------------------------------------------------
// MXFP4 (OCP Microscaling: 32-element blocks of fp4 e2m1 values sharing one e8m0 power-of-two scale)

/** fp4 e2m1 code -> value (bit 3 the sign, then 2 exponent bits and 1 mantissa bit, bias 1). */
export const FP4_E2M1_VALUES: readonly number[] = Object.freeze([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0, -0.5, -1, -1.5, -2, -3, -4, -6]);

/** e8m0 scale byte -> 2^(byte - 127); 255 is NaN in the OCP spec. */
export const e8m0ToNumber = (byte: number): number => (byte === 255 ? NaN : 2 ** (byte - 127));

export const MXFP4_BLOCK = 32;

interface Mxfp4Weights {
  readonly lead: number[]; // dims before the block dims
  readonly G: number; // blocks per row
  readonly view: StridedView;
  readonly scales: StridedView;
}

function checkMxfp4(what: string, blocks: Tensor, scales: Tensor): Mxfp4Weights {
  expectDType(blocks, ['u8'], what, 'blocks');
  expectDType(scales, ['u8'], what, 'scales');
  if (blocks.rank < 2 || blocks.shape[blocks.rank - 1] !== MXFP4_BLOCK / 2) throw new RangeError(`${what}: blocks must be [..., G, 16] (32 fp4 values packed two per byte), got ${formatShape(blocks.shape)}`);
  const lead = blocks.shape.slice(0, -1);
  if (scales.rank !== lead.length || scales.shape.some((d, i) => d !== lead[i])) throw new RangeError(`${what}: scales ${formatShape(scales.shape)} must be [${lead.join(', ')}] (one per block of blocks ${formatShape(blocks.shape)})`);
  return { lead: lead.slice(0, -1), G: lead[lead.length - 1]!, view: new StridedView(blocks, what), scales: new StridedView(scales, what) };
}

/** Decode one row (G blocks) of MXFP4 into out[0 .. 32 G): byte j of a block holds element 2j (low nibble) and 2j + 1 (high), as gpt-oss packs them. */
function decodeRow(w: Mxfp4Weights, rowIndex: number[], out: Float64Array): void {
  const bs = w.view.strides;
  const ss = w.scales.strides;
  const r = rowIndex.length;
  const bBase = w.view.at(...rowIndex);
  const sBase = w.scales.at(...rowIndex);
  for (let g = 0; g < w.G; g++) {
    const scale = e8m0ToNumber(w.scales.acc.get(sBase + g * ss[r]!));
    for (let j = 0; j < MXFP4_BLOCK / 2; j++) {
      const byte = w.view.acc.get(bBase + g * bs[r]! + j * bs[r + 1]!);
      out[g * MXFP4_BLOCK + 2 * j] = FP4_E2M1_VALUES[byte & 0x0f]! * scale;
      out[g * MXFP4_BLOCK + 2 * j + 1] = FP4_E2M1_VALUES[byte >> 4]! * scale;
    }
  }
}

function* rowIndices(lead: readonly number[]): Generator<number[]> {
  const n = lead.reduce((p, d) => p * d, 1);
  for (let i = 0; i < n; i++) {
    const idx = new Array<number>(lead.length);
    let rem = i;
    for (let d = lead.length - 1; d >= 0; d--) {
      idx[d] = rem % lead[d]!;
      rem = Math.floor(rem / lead[d]!);
    }
    yield idx;
  }
}

/** blocks u8 [..., G, 16] + scales u8 [..., G] -> values [..., 32 G] in `dtype` (default bf16), as gpt-oss's convert_moe_packed_tensors. */
export function mxfp4Dequant(backend: Backend, blocks: Tensor, scales: Tensor, options: { dtype?: DType } = {}): Tensor {
  const what = 'mxfp4_dequant';
  const w = checkMxfp4(what, blocks, scales);
  const dtype = options.dtype ?? 'bf16';
  if (DTYPE_INFO[dtype].kind !== 'float') throw new TypeError(`${what}: dtype must be a float type, got ${dtype}`);
  const row = w.G * MXFP4_BLOCK;
  const rows = w.lead.reduce((p, d) => p * d, 1);
  const Y = new Float64Array(rows * row);
  const buf = new Float64Array(row);
  let r = 0;
  for (const idx of rowIndices(w.lead)) {
    decodeRow(w, idx, buf);
    Y.set(buf, r++ * row);
  }
  return output(backend, [...w.lead, row], dtype, Y, what);
}

/**
 * F.linear(input [..., K], W, bias) with W stored as MXFP4: blocks u8 [N, K / 32, 16], scales u8 [N, K / 32]. Each
 * weight row is dequantised on the fly (exactly: fp4 times a power of two) and the dot products sum in float64.
 */
export function mxfp4Linear(backend: Backend, input: Tensor, blocks: Tensor, scales: Tensor, bias: Tensor | null = null): Tensor {
  const what = 'mxfp4_linear';
  expectFloat(input, what, 'input');
  const w = checkMxfp4(what, blocks, scales);
  if (w.lead.length !== 1) throw new RangeError(`${what}: blocks must be [N, K / 32, 16], got ${formatShape(blocks.shape)}`);
  const N = w.lead[0]!;
  const K = w.G * MXFP4_BLOCK;
  if (input.rank < 1 || input.shape[input.rank - 1] !== K) throw new RangeError(`${what}: input ${formatShape(input.shape)} last dim must be K = ${K} (32 x ${w.G} blocks of blocks ${formatShape(blocks.shape)})`);
  if (bias) {
    expectFloat(bias, what, 'bias');
    if (bias.rank !== 1 || bias.shape[0] !== N) throw new RangeError(`${what}: bias ${formatShape(bias.shape)} must be [${N}]`);
  }
  const X = gather(input, what);
  const rows = input.shape.slice(0, -1).reduce((p, d) => p * d, 1);
  const bv = bias ? gather(bias, what) : null;
  const wrow = new Float64Array(K);
  const Y = new Float64Array(rows * N);
  for (let n = 0; n < N; n++) {
    decodeRow(w, [n], wrow);
    for (let r = 0; r < rows; r++) {
      let s = 0;
      for (let k = 0; k < K; k++) s += X[r * K + k]! * wrow[k]!;
      Y[r * N + n] = s + (bv ? bv[n]! : 0);
    }
  }
  return output(backend, [...input.shape.slice(0, -1), N], input.dtype, Y, what);
}

/**
 * The MoE expert GEMM over MXFP4 experts (gpt-oss's `gate_up_proj_blocks` / `down_proj_blocks`): input [T, K], blocks
 * u8 [E, N, K / 32, 16], scales u8 [E, N, K / 32], bias [E, N]; rows choose experts by offsets [E + 1] or expert ids
 * [T] exactly as groupedGemm. Each expert row is dequantised once, on the fly.
 */
export function mxfp4GroupedGemm(backend: Backend, input: Tensor, blocks: Tensor, scales: Tensor, options: { offsets?: Tensor; expertIds?: Tensor; bias?: Tensor | null }): Tensor {
  const what = 'mxfp4_grouped_gemm';
  expectFloat(input, what, 'input');
  const w = checkMxfp4(what, blocks, scales);
  if (w.lead.length !== 2) throw new RangeError(`${what}: blocks must be [E, N, K / 32, 16], got ${formatShape(blocks.shape)}`);
  const [E, N] = w.lead as [number, number];
  const K = w.G * MXFP4_BLOCK;
  if (input.rank !== 2 || input.shape[1] !== K) throw new RangeError(`${what}: input ${formatShape(input.shape)} must be [T, ${K}] (32 x ${w.G} blocks of blocks ${formatShape(blocks.shape)})`);
  const bias = options.bias ?? null;
  if (bias) {
    expectFloat(bias, what, 'bias');
    if (bias.rank !== 2 || bias.shape[0] !== E || bias.shape[1] !== N) throw new RangeError(`${what}: bias ${formatShape(bias.shape)} must be [${E}, ${N}]`);
  }
  const T = input.shape[0]!;
  const rowsOf = expertRows(what, T, E, options.offsets, options.expertIds);
  const Y = expertGemm(gather(input, what), T, K, N, rowsOf, bias ? gather(bias, what) : null, (e, n, row) => decodeRow(w, [e, n], row));
  return output(backend, [T, N], input.dtype, Y, what);
}
