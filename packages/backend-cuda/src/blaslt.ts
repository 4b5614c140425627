/**
 * Matrix products through cuBLASLt (fp32 accumulation, CUBLAS_COMPUTE_32F).
 *
 * cuBLASLt is column-major; our tensors are row-major. A row-major X[r, c] with leading dimension ld is
 * the column-major Xᵀ[c, r] with the same ld, so C[M,N] = op(A)·op(B) is computed as
 * Cᵀ[N,M] = op(B)ᵀ·op(A)ᵀ: cuBLAS's (m, n, k) = (N, M, K), its A operand is our B and its B operand our A,
 * with the transposes carried over. The bias epilogue then adds a vector of length N (cuBLAS's m) to
 * every row of our C, which is Linear's bias.
 */
import type { DType } from '@fastkernels/core';

/** cudaDataType values. */
export const CUDA_R: Readonly<Partial<Record<DType, number>>> = { f32: 0, f64: 1, f16: 2, bf16: 14, fp8e4m3: 28, fp8e5m2: 29 };
export const CUBLAS_COMPUTE_32F = 68;
export const EPILOGUE_DEFAULT = 1;
export const EPILOGUE_BIAS = 4;
/** cublasLtEpilogue_t: RELU / GELU (cuBLASLt's GELU is the tanh approximation, torch's gelu(approximate='tanh')), with or without the BIAS bit. */
export const EPILOGUE_RELU = 2;
export const EPILOGUE_RELU_BIAS = 6;
export const EPILOGUE_GELU = 32;
export const EPILOGUE_GELU_BIAS = 36;
export const LT_PARAM_COUNT = 34;
export const DEFAULT_WORKSPACE_BYTES = 32 * 1024 * 1024;

/** A row-major GEMM: out[b] = alpha * op(A[b]) @ op(B[b]) + beta * out[b] (+ bias), all in elements. */
export interface GemmDesc {
  readonly m: number;
  readonly n: number;
  readonly k: number;
  readonly batch: number;
  /** A is stored [K, M] (row-major) and used transposed. */
  readonly transA: boolean;
  /** B is stored [N, K] (row-major) and used transposed (a Linear weight). */
  readonly transB: boolean;
  readonly dtypeA: DType;
  readonly dtypeB: DType;
  readonly dtypeOut: DType;
  readonly a: number;
  readonly b: number;
  readonly out: number;
  /** Device pointer of a [N] vector in the output dtype, or 0. */
  readonly bias: number;
  readonly lda: number;
  readonly ldb: number;
  readonly ldc: number;
  /** Batch strides in elements (0 broadcasts one matrix to every batch). */
  readonly strideA: number;
  readonly strideB: number;
  readonly strideC: number;
  readonly alpha: number;
  readonly beta: number;
  /** cublasLtEpilogue_t; default BIAS when `bias` is set, else DEFAULT. A bias epilogue needs `bias`. */
  readonly epilogue?: number;
  /**
   * beta's input C when it is not the output (out-of-place D = alpha·AB + beta·C): its pointer, leading dimension and
   * batch stride in elements, laid out like the output (row-major rows). Default: C is the output (ldc, strideC).
   */
  readonly cPtr?: number;
  readonly cLd?: number;
  readonly cStride?: number;
}

/** Largest power of two (<= 256) dividing an address: the alignment cuBLASLt may assume. */
export function ptrAlignment(ptr: number): number {
  let a = 256;
  while (a > 1 && ptr % a !== 0) a /= 2;
  return a;
}

function dataType(d: DType, role: string): number {
  const t = CUDA_R[d];
  if (t === undefined || d === 'f64' || d === 'fp8e4m3' || d === 'fp8e5m2') throw new TypeError(`cuBLASLt matmul: ${role} dtype ${d} is not supported (bf16, f16, f32)`);
  return t;
}

/** Fill the parameter block native ltMatmul reads (layout: native/addon.cc LtMatmul). */
export function fillLtParams(p: Float64Array, g: GemmDesc, workspace: number, workspaceBytes: number, stream: number): Float64Array {
  p[0] = g.transB ? 1 : 0; // cuBLAS A = our B
  p[1] = g.transA ? 1 : 0; // cuBLAS B = our A
  p[2] = g.n;
  p[3] = g.m;
  p[4] = g.k;
  p[5] = dataType(g.dtypeB, 'B');
  p[6] = dataType(g.dtypeA, 'A');
  p[7] = dataType(g.dtypeOut, 'output');
  p[8] = p[7]!;
  p[9] = CUBLAS_COMPUTE_32F;
  p[10] = g.ldb;
  p[11] = g.lda;
  const cPtr = g.cPtr || g.out;
  p[12] = g.cPtr ? g.cLd! : g.ldc;
  p[13] = g.ldc;
  p[14] = g.strideB;
  p[15] = g.strideA;
  p[16] = g.cPtr ? g.cStride! : g.strideC;
  p[17] = g.strideC;
  p[18] = g.batch;
  p[19] = g.epilogue ?? (g.bias ? EPILOGUE_BIAS : EPILOGUE_DEFAULT);
  p[20] = ptrAlignment(g.b);
  p[21] = ptrAlignment(g.a);
  p[22] = ptrAlignment(cPtr);
  p[23] = ptrAlignment(g.out);
  p[24] = workspaceBytes;
  p[25] = g.b;
  p[26] = g.a;
  p[27] = cPtr;
  p[28] = g.out;
  p[29] = g.bias;
  p[30] = g.alpha;
  p[31] = g.beta;
  p[32] = workspace;
  p[33] = stream;
  return p;
}

/**
 * How a [rows, cols] matrix view maps to cuBLAS: row-major with leading dimension ld (element (r, c) at
 * r*ld + c), or transposed storage (element (r, c) at c*ld + r). Undefined when neither fits (copy it).
 */
export function matrixLayout(rows: number, cols: number, strideRow: number, strideCol: number): { trans: boolean; ld: number } | undefined {
  if (strideCol === 1 || cols === 1) {
    const ld = rows === 1 ? Math.max(cols, 1) : strideRow;
    if (ld >= Math.max(cols, 1)) return { trans: false, ld };
  }
  if (strideRow === 1 || rows === 1) {
    const ld = cols === 1 ? Math.max(rows, 1) : strideCol;
    if (ld >= Math.max(rows, 1)) return { trans: true, ld };
  }
  return undefined;
}
