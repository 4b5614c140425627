/**
 * The CUDA backend's op surface. Implemented here: fill, copy (strided, with dtype conversion), add and
 * mul (broadcasting), matmul (cuBLASLt, batched). The rest is the next issue and throws a clear error.
 */
import { Tensor, elementAccessor, formatShape, numel, shapesEqual, type DType, type Ops, type SampleHint } from '@fastkernels/core';
import { DEFAULT_WORKSPACE_BYTES, fillLtParams, LT_PARAM_COUNT, matrixLayout, type GemmDesc } from './blaslt.js';
import { CudaKernel } from './kernel.js';
import { KERNEL_SOURCES } from './kernel-sources.generated.js';
import { captureHooks, type CudaRuntime } from './runtime.js';
import * as activation from './ops/activation/activation.js';
import * as attention from './ops/attention/attention.js';
import { SpineContext } from './ops/launch/context.js';
import * as embedding from './ops/embedding/embedding.js';
import * as kvcache from './ops/kvcache/kvcache.js';
import * as linear from './ops/matmul/linear.js';
import * as norm from './ops/norm/rms-norm.js';
import * as rotary from './ops/rotary/rotary.js';
import * as rotaryKv from './ops/rotary/rotary-kv.js';
import * as sampler from './ops/sampling/sampler.js';
import * as softmax from './ops/reduction/softmax.js';
import { COPY_THREADS, encodeCopyGeometry, planCopy, ROWS_GEO_BYTES, TRANSPOSE_GEO_BYTES, type CopyPlan } from './ops/layout/copy-plan.js';
import { broadcastShapes, broadcastStrides, coalesce, encodeStrided, STRIDED_STRUCT_BYTES } from './strided.js';

/** The C++ type of each dtype in kernels/elementwise.cu. */
export const CUDA_CTYPE: Readonly<Record<DType, string>> = {
  f64: 'double', f32: 'float', f16: '__half', bf16: '__nv_bfloat16', fp8e4m3: '__nv_fp8_e4m3', fp8e5m2: '__nv_fp8_e5m2',
  i64: 'long long', i32: 'int', i16: 'short', i8: 'signed char', u8: 'unsigned char', bool: 'fk_bool_t',
};

/** float accumulation, except where float would lose exactness (f64, i64, i32 operands). */
export function accType(...dtypes: DType[]): 'double' | 'float' {
  return dtypes.some((d) => d === 'f64' || d === 'i64' || d === 'i32') ? 'double' : 'float';
}

/** Device address of a tensor's first element. */
export function ptrOf(t: Tensor): number {
  const p = t.storage.devicePtr;
  if (p === undefined) throw new TypeError(`${t} is not a CUDA tensor`);
  return p + t.offset * t.itemsize;
}

const THREADS = 256;

export interface GemmOptions {
  readonly transA?: boolean;
  readonly transB?: boolean;
  readonly bias?: Tensor | null;
  readonly alpha?: number;
  readonly beta?: number;
}

export class CudaOps implements Ops {
  private readonly kernels = new Map<string, CudaKernel>();
  private readonly structBuf = new Uint8Array(STRIDED_STRUCT_BYTES);
  private readonly ltParams = new Float64Array(LT_PARAM_COUNT);
  private readonly workspaces = new Map<number, { ptr: number; bytes: number }>();

  constructor(private readonly runtime: () => CudaRuntime) {
    captureHooks.push((rt) => {
      if (rt === this.runtime()) this.workspace(rt);
    });
  }

  // ------------------------------------------------------------------ elementwise

  fill(dst: Tensor, value: number): void {
    const rt = this.runtime();
    const n = dst.numel;
    if (n === 0) return;
    if (dst.isContiguous()) {
      const size = dst.itemsize;
      if (size <= 4) {
        // One memset with the element's bit pattern (exactly the value a store would write).
        const bytes = new Uint8Array(4);
        elementAccessor(dst.dtype, bytes).set(0, value);
        const bits = size === 4 ? new DataView(bytes.buffer).getUint32(0, true) : size === 2 ? new DataView(bytes.buffer).getUint16(0, true) : bytes[0]!;
        rt.memset(ptrOf(dst), bits, n, size as 1 | 2 | 4);
        return;
      }
      if (value === 0 && !Object.is(value, -0)) {
        rt.memset(ptrOf(dst), 0, n * size, 1);
        return;
      }
    }
    const c = coalesce(dst.shape, [dst.strides]);
    const k = this.kernel('fk_fill', dst.dtype, dst.dtype, dst.dtype, accType(dst.dtype));
    k.launch(this.grid(n), THREADS, 0, [ptrOf(dst), encodeStrided(this.structBuf, c.shape, c.strides, n), value]);
  }

  copy(dst: Tensor, src: Tensor): void {
    if (!shapesEqual(dst.shape, src.shape)) throw new RangeError(`copy: shape ${formatShape(src.shape)} into ${formatShape(dst.shape)}`);
    const n = dst.numel;
    if (n === 0) return;
    const rt = this.runtime();
    if (dst.dtype === src.dtype && dst.isContiguous() && src.isContiguous()) {
      rt.copyDtoD(ptrOf(dst), ptrOf(src), n * dst.itemsize);
      return;
    }
    if (dst.dtype === src.dtype && this.permuteCopy(dst, src)) return;
    const c = coalesce(dst.shape, [dst.strides, src.strides]);
    const k = this.kernel('fk_copy', dst.dtype, src.dtype, src.dtype, accType(dst.dtype, src.dtype));
    k.launch(this.grid(n), THREADS, 0, [ptrOf(dst), ptrOf(src), encodeStrided(this.structBuf, c.shape, c.strides, n)]);
  }

  /** A same-dtype copy on kernels/permute_copy.cu's vectorised rows / tiled transpose (ops/layout/copy-plan.ts); false: fk_copy's case. */
  private permuteCopy(dst: Tensor, src: Tensor): boolean {
    const rt = this.runtime();
    const [d, s] = [ptrOf(dst), ptrOf(src)];
    const plan = planCopy(dst.shape, dst.itemsize, { strides: dst.strides, ptr: d }, { strides: src.strides, ptr: s }, rt.properties().multiprocessors);
    this.lastCopyPath = plan.kind;
    if (plan.kind === 'generic') return false;
    if (plan.kind === 'memcpy') {
      rt.copyDtoD(d, s, dst.numel * dst.itemsize);
      return true;
    }
    const rows = plan.kind === 'rows';
    const entry = rows ? 'fk_copy_rows' : 'fk_copy_transpose';
    const options = [`-DFK_ELEM_BYTES=${dst.itemsize}`, `-DFK_INDEX=${rows ? plan.index : 'long long'}`];
    const key = `${entry}|${options.join(' ')}`;
    let k = this.kernels.get(key);
    if (!k) {
      const geo = { struct: rows ? ROWS_GEO_BYTES : TRANSPOSE_GEO_BYTES, align: 8 };
      this.kernels.set(key, (k = new CudaKernel({ source: KERNEL_SOURCES['permute_copy.cu']!, entry, name: 'permute_copy.cu', signature: ['ptr', 'ptr', geo], options })));
    }
    const buf = rows ? (this.rowsGeoBuf ??= new Uint8Array(ROWS_GEO_BYTES)) : (this.transposeGeoBuf ??= new Uint8Array(TRANSPOSE_GEO_BYTES));
    k.launch(plan.grid, COPY_THREADS, 0, [d, s, encodeCopyGeometry(buf, plan)]);
    return true;
  }
  /** The path the last same-dtype strided copy took (memcpy, rows, transpose, generic): for tests and the ops bench. */
  lastCopyPath: CopyPlan['kind'] | null = null;
  private rowsGeoBuf: Uint8Array | undefined;
  private transposeGeoBuf: Uint8Array | undefined;

  add(a: Tensor, b: Tensor): Tensor {
    return this.binary('fk_add', a, b);
  }

  mul(a: Tensor, b: Tensor): Tensor {
    return this.binary('fk_mul', a, b);
  }

  private binary(entry: 'fk_add' | 'fk_mul', a: Tensor, b: Tensor): Tensor {
    const shape = broadcastShapes(a.shape, b.shape);
    const out = Tensor.empty(a.backend, shape, a.dtype, { device: a.device });
    const n = numel(shape);
    if (n === 0) return out;
    const c = coalesce(shape, [out.strides, broadcastStrides(a.shape, a.strides, shape), broadcastStrides(b.shape, b.strides, shape)]);
    const k = this.kernel(entry, a.dtype, a.dtype, b.dtype, accType(a.dtype, b.dtype));
    k.launch(this.grid(n), THREADS, 0, [ptrOf(out), ptrOf(a), ptrOf(b), encodeStrided(this.structBuf, c.shape, c.strides, n)]);
    return out;
  }

  // ------------------------------------------------------------------ matmul

  matmul(a: Tensor, b: Tensor, options: { outDType?: DType } = {}): Tensor {
    if (a.rank < 2 || b.rank < 2) throw new RangeError(`matmul needs rank >= 2 operands, got ${formatShape(a.shape)} and ${formatShape(b.shape)}`);
    const [M, K] = [a.shape[a.rank - 2]!, a.shape[a.rank - 1]!];
    const [K2, N] = [b.shape[b.rank - 2]!, b.shape[b.rank - 1]!];
    if (K !== K2) throw new RangeError(`matmul: inner dimensions differ: ${formatShape(a.shape)} @ ${formatShape(b.shape)}`);
    const batchShape = broadcastShapes(a.shape.slice(0, -2), b.shape.slice(0, -2));
    const outDType = options.outDType ?? a.dtype;
    for (const [role, d] of [['a', a.dtype], ['output', outDType]] as const) {
      if (d !== 'f32' && d !== 'f16' && d !== 'bf16') throw new TypeError(`matmul on the CUDA backend: ${role} dtype ${d} is not supported (bf16, f16, f32 via cuBLASLt)`);
    }
    const out = Tensor.empty(a.backend, [...batchShape, M, N], outDType, { device: a.device });
    if (out.numel === 0) return out;
    if (K === 0) {
      this.fill(out, 0);
      return out;
    }
    // Operands in a's dtype; matrices cuBLAS can read in place are not copied.
    const temps: Tensor[] = [];
    const bb = b.dtype === a.dtype ? b : track(temps, b.to(a.dtype));
    const A = this.gemmOperand(a, batchShape, temps);
    const B = this.gemmOperand(bb, batchShape, temps);
    const batch = numel(batchShape);
    try {
      this.gemm({
        m: M, n: N, k: K, batch, transA: A.trans, transB: B.trans, dtypeA: a.dtype, dtypeB: a.dtype, dtypeOut: outDType,
        a: A.ptr, b: B.ptr, out: ptrOf(out), bias: 0, lda: A.ld, ldb: B.ld, ldc: N, strideA: A.stride, strideB: B.stride, strideC: M * N, alpha: 1, beta: 0,
      });
    } finally {
      for (const t of temps) t.dispose();
    }
    return out;
  }

  /**
   * out = alpha * op(a) @ op(b) + beta * out + bias, straight to cuBLASLt (the path Linear takes:
   * `gemmInto(out, x, weight, { transB: true, bias })`). a, b and out must be rank-2 or rank-3 (batched) views
   * cuBLAS can address; bias is [N] in out's dtype.
   */
  gemmInto(out: Tensor, a: Tensor, b: Tensor, o: GemmOptions = {}): Tensor {
    const batched = out.rank === 3;
    const M = out.shape[out.rank - 2]!;
    const N = out.shape[out.rank - 1]!;
    const K = o.transA ? a.shape[a.rank - 2]! : a.shape[a.rank - 1]!;
    const batch = batched ? out.shape[0]! : 1;
    const la = this.layoutOf(a, 'a');
    const lb = this.layoutOf(b, 'b');
    if (!out.isContiguous()) throw new Error('gemmInto: the output must be contiguous');
    if (o.bias && (o.bias.numel !== N || o.bias.dtype !== out.dtype || !o.bias.isContiguous())) throw new Error(`gemmInto: bias must be a contiguous [${N}] ${out.dtype} tensor`);
    this.gemm({
      m: M, n: N, k: K, batch, transA: la.trans !== !!o.transA, transB: lb.trans !== !!o.transB, dtypeA: a.dtype, dtypeB: b.dtype, dtypeOut: out.dtype,
      a: ptrOf(a), b: ptrOf(b), out: ptrOf(out), bias: o.bias ? ptrOf(o.bias) : 0, lda: la.ld, ldb: lb.ld, ldc: N,
      strideA: a.rank === 3 ? a.strides[0]! : 0, strideB: b.rank === 3 ? b.strides[0]! : 0, strideC: M * N, alpha: o.alpha ?? 1, beta: o.beta ?? 0,
    });
    return out;
  }

  /** One cuBLASLt call (the plan for the shape is cached in the addon). */
  gemm(g: GemmDesc): void {
    const rt = this.runtime();
    rt.ensureLibrary('cublasLt');
    const ws = this.workspace(rt);
    rt.addon.ltMatmul(fillLtParams(this.ltParams, g, ws.ptr, ws.bytes, rt.stream));
  }

  private layoutOf(t: Tensor, role: string): { trans: boolean; ld: number } {
    const l = matrixLayout(t.shape[t.rank - 2]!, t.shape[t.rank - 1]!, t.strides[t.rank - 2]!, t.strides[t.rank - 1]!);
    if (!l) throw new Error(`gemmInto: operand ${role} ${formatShape(t.shape)} with strides ${formatShape(t.strides)} is not addressable by cuBLAS; make it contiguous`);
    return l;
  }

  private gemmOperand(t: Tensor, batchShape: readonly number[], temps: Tensor[]): { ptr: number; trans: boolean; ld: number; stride: number } {
    const r = t.rank;
    const rows = t.shape[r - 2]!;
    const cols = t.shape[r - 1]!;
    const tb = t.shape.slice(0, -2);
    const tbStrides = t.strides.slice(0, -2);
    const batch = numel(batchShape);
    // Batch addressing: one matrix for all (stride 0), or a uniform stride over the flattened batch.
    let stride: number | undefined;
    if (numel(tb) === 1 || batch === 1) stride = 0;
    else if (shapesEqual(tb, batchShape)) {
      const c = coalesce(tb, [tbStrides]);
      if (c.shape.length === 1) stride = c.strides[0]![0]!;
    }
    const l = matrixLayout(rows, cols, t.strides[r - 2]!, t.strides[r - 1]!);
    if (stride !== undefined && l) return { ptr: ptrOf(t), trans: l.trans, ld: l.ld, stride };
    // Materialise: expand to the full batch and copy contiguous.
    const full = t.expand([...batchShape, rows, cols]);
    const c = track(temps, full.contiguous());
    full.dispose();
    return { ptr: ptrOf(c), trans: false, ld: cols, stride: batch === 1 ? 0 : rows * cols };
  }

  private workspace(rt: CudaRuntime): { ptr: number; bytes: number } {
    let ws = this.workspaces.get(rt.stream);
    if (!ws) {
      const block = rt.allocate(DEFAULT_WORKSPACE_BYTES);
      ws = { ptr: block.ptr, bytes: DEFAULT_WORKSPACE_BYTES };
      this.workspaces.set(rt.stream, ws);
    }
    return ws;
  }

  // ------------------------------------------------------------------ helpers

  private grid(n: number): number {
    const sms = this.runtime().properties().multiprocessors;
    return Math.max(1, Math.min(Math.ceil(n / THREADS), sms * 32));
  }

  /** The elementwise kernel specialised for (dst, src, src2, acc) types; compiled once, cached on disk. */
  private kernel(entry: string, dst: DType, src: DType, src2: DType, acc: string): CudaKernel {
    const key = `${entry}|${dst}|${src}|${src2}|${acc}`;
    let k = this.kernels.get(key);
    if (!k) {
      k = new CudaKernel({
        source: KERNEL_SOURCES['elementwise.cu']!,
        entry,
        name: 'elementwise.cu',
        signature: ELEMENTWISE_SIGNATURES[entry]!,
        options: [`-DFK_DST=${CUDA_CTYPE[dst]}`, `-DFK_SRC=${CUDA_CTYPE[src]}`, `-DFK_SRC2=${CUDA_CTYPE[src2]}`, `-DFK_ACC=${acc}`],
      });
      this.kernels.set(key, k);
    }
    return k;
  }

  // ------------------------------------------------------------------ the L1 decoder spine (src/ops/<group>/: activation, attention, embedding, kvcache, matmul/linear, norm, reduction/softmax, rotary, sampling)

  /** What spine kernels need from the backend: the runtime, the generic ops (copy, gemm) and a kernel cache. */
  get spine(): SpineContext {
    return (this.spineCtx ??= new SpineContext(this.runtime, this));
  }
  private spineCtx: SpineContext | undefined;

  rmsNorm(x: Tensor, weight: Tensor, eps: number): Tensor {
    return norm.rmsNorm(this.spine, x, weight, eps);
  }
  fusedAddRmsNorm(x: Tensor, residual: Tensor, weight: Tensor, eps: number): [Tensor, Tensor] {
    return norm.fusedAddRmsNorm(this.spine, x, residual, weight, eps);
  }
  siluAndMul(x: Tensor): Tensor {
    return activation.siluAndMul(this.spine, x);
  }
  geluAndMul(x: Tensor, approximate: 'none' | 'tanh'): Tensor {
    return activation.geluAndMul(this.spine, x, approximate);
  }
  rotaryEmbedding(positions: Tensor, query: Tensor, key: Tensor | null, cosSinCache: Tensor, headSize: number, isNeoxStyle: boolean): [Tensor, Tensor | null] {
    return rotary.rotaryEmbedding(this.spine, positions, query, key, cosSinCache, headSize, isNeoxStyle);
  }
  embedding(ids: Tensor, weight: Tensor): Tensor {
    return embedding.embedding(this.spine, ids, weight);
  }
  embeddingMasked(ids: Tensor, weight: Tensor, start: number): Tensor {
    return embedding.embeddingMasked(this.spine, ids, weight, start);
  }
  linear(x: Tensor, weight: Tensor, bias: Tensor | null): Tensor {
    return linear.linear(this.spine, x, weight, bias);
  }
  linearSiluAndMul(x: Tensor, weight: Tensor, bias: Tensor | null): Tensor | null {
    return linear.linearSiluAndMul(this.spine, x, weight, bias);
  }
  rmsNormLinear(x: Tensor, residual: Tensor | null, normWeight: Tensor, eps: number, weight: Tensor, bias: Tensor | null, act: 'silu' | null): [Tensor, Tensor | null] | null {
    return linear.rmsNormLinear(this.spine, x, residual, normWeight, eps, weight, bias, act);
  }
  softmax(x: Tensor, dim: number): Tensor {
    return softmax.softmax(this.spine, x, dim);
  }
  storeKvcache_(key: Tensor, value: Tensor, kCache: Tensor, vCache: Tensor, slotMapping: Tensor): void {
    kvcache.storeKvcache(this.spine, key, value, kCache, vCache, slotMapping);
  }
  rotaryStoreKvcache(
    positions: Tensor, query: Tensor, key: Tensor, value: Tensor, cosSinCache: Tensor, headSize: number, isNeoxStyle: boolean,
    kCache: Tensor, vCache: Tensor, slotMapping: Tensor,
  ): [Tensor, Tensor] | null {
    return rotaryKv.rotaryStoreKvcache(this.spine, positions, query, key, value, cosSinCache, headSize, isNeoxStyle, kCache, vCache, slotMapping);
  }
  pagedDecodeAttention(query: Tensor, kCache: Tensor, vCache: Tensor, blockTables: Tensor, seqLens: Tensor, scale: number, slidingWindow: number): Tensor {
    return attention.pagedDecodeAttention(this.spine, query, kCache, vCache, blockTables, seqLens, scale, slidingWindow);
  }
  varlenPrefillAttention(q: Tensor, k: Tensor, v: Tensor, cuSeqlensQ: Tensor, cuSeqlensK: Tensor, scale: number, causal: boolean, slidingWindow: number): Tensor {
    return attention.varlenPrefillAttention(this.spine, q, k, v, cuSeqlensQ, cuSeqlensK, scale, causal, slidingWindow);
  }
  samplePath(B: number, V: number, hint?: SampleHint): string {
    return sampler.chooseSamplerPath(B, V, hint?.sampledRows);
  }
  sample(logits: Tensor, temperature: Tensor, topK: Tensor, topP: Tensor, seeds: Tensor, hint?: SampleHint): Tensor {
    return sampler.sample(this.spine, logits, temperature, topK, topP, seeds, hint);
  }
}

const STRUCT = { struct: STRIDED_STRUCT_BYTES, align: 8 } as const;
const ELEMENTWISE_SIGNATURES: Readonly<Record<string, readonly import('./args.js').ArgType[]>> = {
  fk_fill: ['ptr', STRUCT, 'f64'],
  fk_copy: ['ptr', 'ptr', STRUCT],
  fk_add: ['ptr', 'ptr', 'ptr', STRUCT],
  fk_mul: ['ptr', 'ptr', 'ptr', STRUCT],
};

function track(list: Tensor[], t: Tensor): Tensor {
  list.push(t);
  return t;
}

