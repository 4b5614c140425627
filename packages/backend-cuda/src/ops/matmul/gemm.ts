/**
 * One strided-batched cuBLASLt GEMM from tensors: out[..., M, N] = alpha * a[..., M, K] @ b[..., K, N] + beta * C
 * (+ bias, + epilogue). layout.ts plans the addressing; operands it cannot address are materialised here (a contiguous
 * copy, expanded to out's batch only when the batch dims do not flatten). Numerics: CUBLAS_COMPUTE_32F with f32 scale
 * for bf16 / f16 / f32 alike — f32 inputs stay full f32 (no TF32), as PyTorch's default
 * (torch.backends.cuda.matmul.allow_tf32 = False, fp32_precision 'ieee'). cuBLASLt descriptors, layouts and the
 * heuristic's algorithm are cached per key in the addon (native/addon.cc LtMatmul); the runner reuses one descriptor
 * object and one plan, so a call that needs no copy allocates nothing here.
 */
import { Tensor } from '@fastkernels/core';
import { EPILOGUE_DEFAULT, type GemmDesc } from '../../blaslt.js';
import { CudaError, CudaFatalError } from '../../errors.js';
import { newGemmPlan, planC, planGemm, type GemmPlan } from './layout.js';

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/** What the runner needs of the backend's op surface (CudaOps; a recording fake in the CPU tests). */
export interface GemmOps {
  gemm(g: GemmDesc): void;
  copy(dst: Tensor, src: Tensor): void;
  fill(dst: Tensor, value: number): void;
}

export interface GemmExtras {
  readonly alpha?: number;
  readonly beta?: number;
  /** beta's input, already expanded to out's shape (a view); null: C is out itself (its current values). */
  readonly c?: Tensor | null;
  /** [N] contiguous in out's dtype, for a bias epilogue. */
  readonly bias?: Tensor | null;
  /** cublasLtEpilogue_t (blaslt.ts EPILOGUE_*); default DEFAULT, or BIAS with a bias. */
  readonly epilogue?: number;
}

const NONE: GemmExtras = {};

export const devicePtr = (t: Tensor): number => t.storage.devicePtr! + t.offset * t.itemsize;

export class StridedGemm {
  /** The last call's plan (read by the CPU tests). */
  readonly plan: GemmPlan = newGemmPlan();
  private readonly desc: Mutable<GemmDesc> = {
    m: 0, n: 0, k: 0, batch: 1, transA: false, transB: false, dtypeA: 'bf16', dtypeB: 'bf16', dtypeOut: 'bf16', a: 0, b: 0, out: 0, bias: 0,
    lda: 0, ldb: 0, ldc: 0, strideA: 0, strideB: 0, strideC: 0, alpha: 1, beta: 0, epilogue: EPILOGUE_DEFAULT, cPtr: 0, cLd: 0, cStride: 0,
  };

  private readonly cLayout = { ld: 0, stride: 0 };
  /** Whether C may be read apart from D (cleared if cuBLASLt ever finds no algorithm for that: see gemmCApart). */
  private cApart = true;

  /**
   * An out-of-place GEMM (C's layout apart from D's, C's batch stride possibly 0). Should cuBLASLt refuse it (its
   * heuristic reports before anything is launched, so nothing is lost), fall back for good to what torch.baddbmm does:
   * C copied into the output, then beta * out.
   */
  private gemmCApart(ops: GemmOps, d: Mutable<GemmDesc>, out: Tensor, c: Tensor): void {
    try {
      ops.gemm(d);
    } catch (e) {
      // a cuBLASLt refusal (descriptor, layout or heuristic: NOT_SUPPORTED / INVALID_VALUE), never a CUDA error
      if (!(e instanceof CudaError) || e instanceof CudaFatalError || e.library !== 'cublasLt') throw e;
      this.cApart = false;
      d.cPtr = 0;
      ops.copy(out, c);
      ops.gemm(d);
    }
  }

  /** out = alpha * a @ b + beta * C (+ bias, epilogue). Shapes are the op's (already inferred); K = 0 gives zeros. */
  run(ops: GemmOps, out: Tensor, a: Tensor, b: Tensor, x: GemmExtras = NONE): void {
    if (out.numel === 0) return;
    const K = a.shape[a.rank - 1]!;
    if (K === 0) {
      ops.fill(out, 0); // callers with beta, a bias or an epilogue decline K = 0 (their decompositions take it)
      return;
    }
    const g = this.plan;
    let temps: Tensor[] | null = null;
    try {
      if (!planGemm(a.shape, a.strides, b.shape, b.strides, out.shape, out.strides, g)) {
        throw new Error(`cuBLASLt GEMM: output ${out.shape} with strides ${out.strides} is not addressable (unit column stride, one batch stride)`);
      }
      if (g.a.copy || g.b.copy) {
        temps = [];
        if (g.a.copy) a = materialise(ops, a, out, g.a.expand, temps);
        if (g.b.copy) b = materialise(ops, b, out, g.b.expand, temps);
        planGemm(a.shape, a.strides, b.shape, b.strides, out.shape, out.strides, g);
      }
      const d = this.desc;
      d.m = g.m;
      d.n = g.n;
      d.k = g.k;
      d.batch = g.batch;
      d.transA = g.a.trans;
      d.transB = g.b.trans;
      d.dtypeA = a.dtype;
      d.dtypeB = b.dtype;
      d.dtypeOut = out.dtype;
      d.a = devicePtr(a);
      d.b = devicePtr(b);
      d.out = devicePtr(out);
      d.lda = g.a.ld;
      d.ldb = g.b.ld;
      d.ldc = g.ldc;
      d.strideA = g.a.stride;
      d.strideB = g.b.stride;
      d.strideC = g.strideC;
      d.alpha = x.alpha ?? 1;
      d.beta = x.beta ?? 0;
      d.bias = x.bias ? devicePtr(x.bias) : 0;
      d.epilogue = x.epilogue ?? EPILOGUE_DEFAULT;
      d.cPtr = 0;
      const c = d.beta !== 0 ? (x.c ?? null) : null;
      if (c) {
        // C read in place when cuBLASLt can address it like the output (the fold never applies: b is batched here)
        if (!g.folded && this.cApart && planC(c.shape, c.strides, this.cLayout)) {
          d.cPtr = devicePtr(c);
          d.cLd = this.cLayout.ld;
          d.cStride = this.cLayout.stride;
        } else ops.copy(out, c); // else beta * C in place, as torch.baddbmm does (C copied into the result first)
      }
      if (d.cPtr) this.gemmCApart(ops, d, out, c!);
      else ops.gemm(d);
    } finally {
      if (temps) for (const t of temps) t.dispose();
    }
  }
}

/** A contiguous copy of a GEMM operand (expanded to out's batch dims when its batch strides do not flatten). */
function materialise(ops: GemmOps, t: Tensor, out: Tensor, expand: boolean, temps: Tensor[]): Tensor {
  const src = expand ? t.expand([...out.shape.slice(0, -2), t.shape[t.rank - 2]!, t.shape[t.rank - 1]!]) : t;
  try {
    const c = Tensor.empty(t.backend, src.shape, t.dtype, { device: t.device });
    temps.push(c);
    ops.copy(c, src);
    return c;
  } finally {
    if (src !== t) src.dispose();
  }
}
