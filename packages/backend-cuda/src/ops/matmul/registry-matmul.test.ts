/**
 * The matmul group's registry kernels on a fake device with a recording cuBLASLt binding (CudaOps.gemm faked): which
 * GEMM descriptor each call produces (transposes, leading dims, batch strides, alpha / beta, C read in place, bias and
 * activation epilogues), which calls copy first, which run the generated activation pass, and which decline to the
 * next route. The numbers are checked on the GPU (cublaslt-matmul.gpu.test.ts).
 */
import { Tensor, callOp1, opRoute, type DType } from '@fastkernels/core';
import { describe, expect, it, vi } from 'vitest';
import { fake } from '../../../test/ops-fake.js';
import { makeCudaError } from '../../errors.js';
import { EPILOGUE_BIAS, EPILOGUE_DEFAULT, EPILOGUE_GELU, EPILOGUE_RELU_BIAS, type GemmDesc } from '../../blaslt.js';
import { registerGeneratedKernels } from '../register.js';
import { GeneratedCopy } from './copy.js';

/** The matmul kernels' copies (generated identity kernels on the GPU), recorded per device() instead of launched. */
let copies: [Tensor, Tensor][] = [];
vi.spyOn(GeneratedCopy.prototype, 'copy').mockImplementation((d: Tensor, s: Tensor) => void copies.push([d, s]));

const ptr = (t: Tensor) => t.storage.devicePtr! + t.offset * t.itemsize;

function device() {
  const f = fake();
  const gemms: GemmDesc[] = [];
  const linears: Tensor[][] = [];
  const ops = f.backend.ops as unknown as Record<string, unknown>;
  ops.gemm = (g: GemmDesc) => gemms.push({ ...g });
  ops.linear = (x: Tensor, w: Tensor, b: Tensor | null) => {
    linears.push([x, w, ...(b ? [b] : [])]);
    return Tensor.empty(f.backend, [...x.shape.slice(0, -1), w.shape[0]!], x.dtype);
  };
  registerGeneratedKernels(f.backend.opKernels!, f.runtime, f.cache);
  copies = [];
  return { ...f, copies, gemms, linears, t: (shape: number[], dtype: DType = 'bf16') => f.t(shape, dtype) };
}

describe('matmul / bmm', () => {
  it('bmm: one strided-batched GEMM, operands in place, f32 output type kept', () => {
    const f = device();
    const [a, b] = [f.t([4, 8, 16], 'f32'), f.t([4, 16, 32], 'f32')];
    expect(opRoute('bmm', [a, b])).toEqual({ via: 'kernel' });
    const y = callOp1('bmm', [a, b]);
    expect(f.gemms).toHaveLength(1);
    expect(f.gemms[0]).toMatchObject({
      m: 8, n: 32, k: 16, batch: 4, transA: false, transB: false, lda: 16, ldb: 32, ldc: 32, strideA: 128, strideB: 512, strideC: 256,
      alpha: 1, beta: 0, a: ptr(a), b: ptr(b), out: ptr(y), dtypeA: 'f32', dtypeOut: 'f32', epilogue: EPILOGUE_DEFAULT, cPtr: 0,
    });
    expect(f.copies).toHaveLength(0);
  });

  it("attention scores q @ k^T with k^T a view: b transposed by layout, no copy", () => {
    const f = device();
    const [q, k] = [f.t([24, 64, 128]), f.t([24, 64, 128])];
    const kt = k.transpose(1, 2);
    callOp1('bmm', [q, kt]);
    expect(f.gemms[0]).toMatchObject({ transB: true, ldb: 128, strideB: 64 * 128, b: ptr(k) });
    expect(f.copies).toHaveLength(0);
  });

  it('matmul: a shared 2-D right operand folds the batch into M; a partly broadcast one is copied expanded', () => {
    const f = device();
    callOp1('matmul', [f.t([2, 3, 8, 16]), f.t([16, 32])]);
    expect(f.gemms[0]).toMatchObject({ m: 48, batch: 1, strideB: 0 });
    callOp1('matmul', [f.t([2, 3, 8, 16]), f.t([3, 16, 32])]);
    expect(f.copies).toHaveLength(1);
    expect(f.copies[0]![0].shape).toEqual([2, 3, 16, 32]);
    expect(f.gemms[1]).toMatchObject({ batch: 6, strideB: 512, b: ptr(f.copies[0]![0]) });
  });

  it('1-D operands take the decomposition (unsqueeze, then this kernel); f64 declines', () => {
    const f = device();
    expect(opRoute('matmul', [f.t([16]), f.t([16, 32])])).not.toEqual({ via: 'kernel' }); // viaOps declines 1-D, then the decomposition
    expect(callOp1('matmul', [f.t([16]), f.t([16, 32])]).shape).toEqual([32]);
    expect(f.gemms[0]).toMatchObject({ m: 1, n: 32, k: 16 });
    expect(opRoute('bmm', [f.t([2, 3, 4], 'f64'), f.t([2, 4, 5], 'f64')])).toEqual({ via: 'ops' });
  });
});

describe('baddbmm', () => {
  it('a full input is C read in place (out-of-place D), with beta and alpha', () => {
    const f = device();
    const [i, b1, b2] = [f.t([4, 8, 32]), f.t([4, 8, 16]), f.t([4, 16, 32])];
    const y = callOp1('baddbmm', [i, b1, b2], { beta: 0.5, alpha: 2 });
    expect(f.gemms[0]).toMatchObject({ alpha: 2, beta: 0.5, cPtr: ptr(i), cLd: 32, cStride: 256, out: ptr(y) });
    expect(f.copies).toHaveLength(0);
  });

  it('a [1, M, N] input is C with batch stride 0; a row [N] with beta 1 is the bias epilogue', () => {
    const f = device();
    const [b1, b2] = [f.t([4, 8, 16]), f.t([4, 16, 32])];
    const i1 = f.t([1, 8, 32]);
    callOp1('baddbmm', [i1, b1, b2], { beta: 0.25 });
    expect(f.gemms[0]).toMatchObject({ beta: 0.25, cPtr: ptr(i1), cLd: 32, cStride: 0 });
    const row = f.t([32]);
    callOp1('baddbmm', [row, b1, b2]);
    expect(f.gemms[1]).toMatchObject({ beta: 0, bias: ptr(row), epilogue: EPILOGUE_BIAS, cPtr: 0 });
    expect(f.copies).toHaveLength(0);
  });

  it('a broadcast row with beta != 1 (or a [1] input) is copied into the output, then beta * out', () => {
    const f = device();
    const [b1, b2] = [f.t([4, 8, 16]), f.t([4, 16, 32])];
    const y = callOp1('baddbmm', [f.t([32]), b1, b2], { beta: 0.5 });
    expect(f.copies).toHaveLength(1);
    expect(f.copies[0]![0]).toBe(y);
    expect(f.gemms[0]).toMatchObject({ beta: 0.5, cPtr: 0, out: ptr(y) });
  });

  it('if cuBLASLt refuses C apart from D, the input is copied into the output from then on', () => {
    const f = device();
    const ops = f.backend.ops as unknown as Record<string, unknown>;
    ops.gemm = (g: GemmDesc) => {
      if (g.cPtr) throw makeCudaError('cublasLt', 'cublasLtMatmulAlgoGetHeuristic', 15, 'CUBLAS_STATUS_NOT_SUPPORTED', 'no algorithm');
      f.gemms.push({ ...g });
    };
    const [b1, b2] = [f.t([4, 8, 16]), f.t([4, 16, 32])];
    const y = callOp1('baddbmm', [f.t([1, 8, 32]), b1, b2], { beta: 0.5 });
    expect(f.copies).toHaveLength(1);
    expect(f.gemms[0]).toMatchObject({ beta: 0.5, cPtr: 0, out: ptr(y) });
    callOp1('baddbmm', [f.t([4, 8, 32]), b1, b2], { beta: 0.5 });
    expect(f.copies).toHaveLength(2);
    ops.gemm = () => {
      throw makeCudaError('cuda', 'cuLaunchKernel', 700, 'CUDA_ERROR_ILLEGAL_ADDRESS', 'sticky');
    };
    expect(() => callOp1('bmm', [b1, b2])).toThrow(/ILLEGAL_ADDRESS/);
  });

  it('beta 0 does not read the input; K = 0 takes the decomposition', () => {
    const f = device();
    callOp1('baddbmm', [f.t([4, 8, 32]), f.t([4, 8, 16]), f.t([4, 16, 32])], { beta: 0, alpha: 3 });
    expect(f.gemms[0]).toMatchObject({ beta: 0, alpha: 3, cPtr: 0, bias: 0 });
    expect(opRoute('baddbmm', [f.t([4, 8, 32]), f.t([4, 8, 0]), f.t([4, 0, 32])], {})).toEqual({ via: 'decomposition' });
  });
});

describe('linear', () => {
  it('relu + bias: RELU_BIAS in cuBLASLt, the weight read transposed, leading dims folded into M', () => {
    const f = device();
    const [x, w, b] = [f.t([2, 5, 64]), f.t([96, 64]), f.t([96])];
    const y = callOp1('linear', [x, w, b], { activation: 'relu' });
    expect(y.shape).toEqual([2, 5, 96]);
    expect(f.gemms[0]).toMatchObject({ m: 10, n: 96, k: 64, batch: 1, transB: true, ldb: 64, lda: 64, epilogue: EPILOGUE_RELU_BIAS, bias: ptr(b), b: ptr(w) });
    expect(f.linears).toHaveLength(0);
  });

  it('gelu_tanh without bias: the GELU epilogue; a 1-D input is one row', () => {
    const f = device();
    const y = callOp1('linear', [f.t([64]), f.t([96, 64]), null], { activation: 'gelu_tanh' });
    expect(y.shape).toEqual([96]);
    expect(f.gemms[0]).toMatchObject({ m: 1, n: 96, epilogue: EPILOGUE_GELU, bias: 0 });
  });

  it('an epilogue cuBLASLt refuses falls back to the linear + the generated pass, from then on', () => {
    const f = device();
    const ops = f.backend.ops as unknown as Record<string, unknown>;
    let tries = 0;
    ops.gemm = () => {
      tries++;
      throw makeCudaError('cublasLt', 'cublasLtMatmulAlgoGetHeuristic', 15, 'CUBLAS_STATUS_NOT_SUPPORTED', 'no algorithm');
    };
    const [x, w, b] = [f.t([3, 64], 'f32'), f.t([96, 64], 'f32'), f.t([96], 'f32')];
    expect(callOp1('linear', [x, w, b], { activation: 'gelu_tanh' }).shape).toEqual([3, 96]);
    callOp1('linear', [x, w, b], { activation: 'gelu_tanh' });
    expect(tries).toBe(1);
    expect(f.linears).toHaveLength(2);
    expect(f.cache.launches.map((l) => l.source.includes('tanhf'))).toEqual([true, true]);
  });

  it("'none' is the Llama path's linear; silu and erf gelu add one generated elementwise pass", () => {
    const f = device();
    const [x, w, b] = [f.t([3, 64]), f.t([96, 64]), f.t([96])];
    callOp1('linear', [x, w, b]);
    expect(f.linears).toHaveLength(1);
    expect(f.cache.launches).toHaveLength(0);
    const y = callOp1('linear', [x, w, b], { activation: 'silu' });
    expect(y.shape).toEqual([3, 96]);
    expect(f.linears).toHaveLength(2);
    expect(f.cache.launches).toHaveLength(1);
    expect(f.cache.launches[0]!.args[0]).toBe(ptr(y));
    callOp1('linear', [x, w, null], { activation: 'gelu' });
    expect(f.cache.launches[1]!.source).toContain('erff');
    expect(f.gemms).toHaveLength(0);
  });
});

describe('einsum', () => {
  it("MLA absorbed 'bhd,hdk->bhk': one GEMM batched over h, a read in place, written straight into the [b, h, k] output", () => {
    const f = device();
    const [q, wk] = [f.t([5, 16, 64]), f.t([16, 64, 32])];
    const y = callOp1('einsum', [q, wk], { equation: 'bhd,hdk->bhk' });
    expect(y.shape).toEqual([5, 16, 32]);
    expect(f.gemms).toHaveLength(1);
    expect(f.gemms[0]).toMatchObject({ m: 5, n: 32, k: 64, batch: 16, lda: 16 * 64, strideA: 64, ldb: 32, strideB: 64 * 32, ldc: 16 * 32, strideC: 32, out: ptr(y) });
    expect(f.copies).toHaveLength(0);
  });

  it("attention scores 'bhqd,bhkd->bhqk': batch b*h merged, k read transposed", () => {
    const f = device();
    const y = callOp1('einsum', [f.t([2, 3, 8, 16]), f.t([2, 3, 10, 16])], { equation: 'bhqd,bhkd->bhqk' });
    expect(y.shape).toEqual([2, 3, 8, 10]);
    expect(f.gemms[0]).toMatchObject({ m: 8, n: 10, k: 16, batch: 6, transB: true, ldb: 16, out: ptr(y) });
    expect(f.copies).toHaveLength(0);
  });

  it("OpenFold3's triangle 'bikc,bjkc->bijc': channel-last operands copied to [b*c, i, k], the result copied once into place", () => {
    const f = device();
    const y = callOp1('einsum', [f.t([2, 6, 7, 4]), f.t([2, 5, 7, 4])], { equation: 'bikc,bjkc->bijc' });
    expect(y.shape).toEqual([2, 6, 5, 4]);
    expect(f.gemms[0]).toMatchObject({ m: 6, n: 5, k: 7, batch: 8 });
    expect(f.copies.map(([d]) => d.shape)).toEqual([[2, 4, 6, 7], [2, 4, 7, 5], [2, 6, 5, 4]]);
    expect(f.copies[2]![0]).toBe(y);
  });

  it('one operand: a diagonal is a strided view; summed letters go through the generated sum; three operands contract pairwise', () => {
    const f = device();
    const x = f.t([6, 6]);
    callOp1('einsum', [x], { equation: 'ii->i' });
    expect(f.copies[0]![1].strides).toEqual([7]);
    callOp1('einsum', [f.t([4, 5, 6])], { equation: 'ijk->ik' });
    expect(f.cache.launches.some((l) => l.entry.includes('reduce'))).toBe(true);
    const y = callOp1('einsum', [f.t([3, 4]), f.t([4, 5]), f.t([5, 6])], { equation: 'ij,jk,kl->il' });
    expect(y.shape).toEqual([3, 6]);
    expect(f.gemms).toHaveLength(2);
    expect(f.gemms[1]!.out).toBe(ptr(y));
  });

  it('every pattern of the GPU test plans and returns the inferred shape', () => {
    const f = device();
    const cases: [string, number[][]][] = [
      ['bhk,hdk->bhd', [[6, 8, 32], [8, 64, 32]]], ['bkic,bkjc->bijc', [[2, 10, 12, 4], [2, 10, 9, 4]]], ['bij,jk->bik', [[3, 7, 20], [20, 11]]],
      ['...ij,...jk->...ik', [[2, 1, 5, 16], [3, 16, 6]]], ['ij,ij->i', [[7, 24], [7, 24]]], ['i,j->ij', [[5], [7]]], ['ij->ji', [[3, 4]]], ['i,i->', [[33], [33]]],
    ];
    for (const [equation, shapes] of cases) {
      const y = callOp1('einsum', shapes.map((s) => f.t(s)), { equation });
      expect(y.isContiguous(), equation).toBe(true);
    }
  });
});
