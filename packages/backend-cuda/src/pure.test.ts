import { describe, expect, it } from 'vitest';
import { fillLtParams, matrixLayout, ptrAlignment } from './blaslt.js';
import { archFor, formatCompileError, nvrtcOptions, parseCompileLog } from './compile.js';
import { CudaError, CudaFatalError, makeCudaError } from './errors.js';
import { KERNEL_SOURCES } from './kernel-sources.generated.js';
import { broadcastShapes, broadcastStrides, coalesce, encodeStrided, STRIDED_STRUCT_BYTES } from './strided.js';
// @ts-expect-error -- a plain .mjs build script
import { renderKernelSources } from '../scripts/embed-kernels.mjs';
import { readFileSync } from 'node:fs';

describe('NVRTC options and errors', () => {
  it('targets sm_90a on compute capability 9.0 and plain sm_XY elsewhere', () => {
    expect(archFor(9, 0)).toBe('sm_90a');
    expect(archFor(8, 9)).toBe('sm_89');
    expect(archFor(10, 0)).toBe('sm_100a');
    expect(nvrtcOptions('sm_90a', ['/inc'])).toEqual(['--gpu-architecture=sm_90a', '-std=c++17', '-default-device', '-lineinfo', '-I/inc']);
    expect(nvrtcOptions('sm_90a', [], ['-std=c++20', '-DX=1'])).toEqual(['--gpu-architecture=sm_90a', '-default-device', '-lineinfo', '-std=c++20', '-DX=1']);
  });

  it('shows the failing source line from the log', () => {
    const src = 'extern "C" __global__ void k(float* x) {\n  x[0] = y;\n}\n';
    const log = 'k.cu(2): error: identifier "y" is undefined\n\n1 error detected in the compilation of "k.cu".\n';
    expect(parseCompileLog(log, 'k.cu')).toEqual([{ line: 2, message: 'identifier "y" is undefined' }]);
    const msg = formatCompileError('k.cu', src, log, 'NVRTC_ERROR_COMPILATION');
    expect(msg).toContain('NVRTC failed to compile k.cu (NVRTC_ERROR_COMPILATION)');
    expect(msg).toContain('at k.cu:2: identifier "y" is undefined');
    expect(msg).toContain('> 2 |   x[0] = y;');
  });
});

describe('errors', () => {
  it('sticky driver errors become CudaFatalError saying the context is lost', () => {
    for (const code of [700, 715, 716, 719]) {
      const e = makeCudaError('cuda', 'cuStreamSynchronize', code, 'CUDA_ERROR_X', 'desc');
      expect(e).toBeInstanceOf(CudaFatalError);
      expect(e.message).toMatch(/context is lost/);
    }
    const oom = makeCudaError('cuda', 'cuMemAlloc', 2, 'CUDA_ERROR_OUT_OF_MEMORY', 'out of memory');
    expect(oom).toBeInstanceOf(CudaError);
    expect(oom).not.toBeInstanceOf(CudaFatalError);
    expect(oom.message).toBe('cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory');
    expect(makeCudaError('cuda', 'cuStreamSynchronize', 900, 'CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED', 'x').message).toMatch(/not allowed during CUDA graph capture/);
    expect(makeCudaError('cublasLt', 'cublasLtMatmul', 700, 'X', 'y')).not.toBeInstanceOf(CudaFatalError);
  });
});

describe('cuBLASLt row-major mapping', () => {
  it('computes C^T = B^T A^T: swaps operands, m<->n, carries transposes, bias per N', () => {
    const p = fillLtParams(new Float64Array(34), {
      m: 3, n: 5, k: 7, batch: 2, transA: false, transB: true, dtypeA: 'bf16', dtypeB: 'bf16', dtypeOut: 'f32',
      a: 0x1000, b: 0x2080, out: 0x3000, bias: 0x4000, lda: 7, ldb: 7, ldc: 5, strideA: 21, strideB: 0, strideC: 15, alpha: 1, beta: 0,
    }, 0x9000, 1 << 25, 77);
    expect([...p.slice(0, 5)]).toEqual([1, 0, 5, 3, 7]);
    expect([...p.slice(5, 10)]).toEqual([14, 14, 0, 0, 68]);
    expect([...p.slice(10, 19)]).toEqual([7, 7, 5, 5, 0, 21, 15, 15, 2]);
    expect(p[19]).toBe(4); // bias epilogue
    expect([...p.slice(20, 24)]).toEqual([128, 256, 256, 256]);
    expect([...p.slice(25, 34)]).toEqual([0x2080, 0x1000, 0x3000, 0x3000, 0x4000, 1, 0, 0x9000, 77]);
    expect(() => fillLtParams(new Float64Array(34), { m: 1, n: 1, k: 1, batch: 1, transA: false, transB: false, dtypeA: 'f64', dtypeB: 'f64', dtypeOut: 'f64', a: 0, b: 0, out: 0, bias: 0, lda: 1, ldb: 1, ldc: 1, strideA: 0, strideB: 0, strideC: 0, alpha: 1, beta: 0 }, 0, 0, 0)).toThrow(/dtype f64 is not supported/);
  });

  it('recognises row-major, transposed and padded matrix views', () => {
    expect(matrixLayout(4, 8, 8, 1)).toEqual({ trans: false, ld: 8 });
    expect(matrixLayout(4, 8, 16, 1)).toEqual({ trans: false, ld: 16 });
    expect(matrixLayout(4, 8, 1, 4)).toEqual({ trans: true, ld: 4 });
    expect(matrixLayout(4, 8, 0, 1)).toBeUndefined();
    expect(matrixLayout(4, 8, 16, 2)).toBeUndefined();
    expect(ptrAlignment(0x7f0000000100)).toBe(256);
    expect(ptrAlignment(0x7f0000000102)).toBe(2);
  });
});

describe('strided elementwise helpers', () => {
  it('coalesces contiguous dims and drops size-1 dims', () => {
    expect(coalesce([2, 3, 4], [[12, 4, 1]])).toEqual({ shape: [24], strides: [[1]] });
    expect(coalesce([2, 3, 4], [[12, 4, 1], [1, 8, 2]])).toEqual({ shape: [2, 12], strides: [[12, 1], [1, 2]] });
    expect(coalesce([2, 3, 4], [[12, 4, 1], [1, 2, 6]])).toEqual({ shape: [2, 3, 4], strides: [[12, 4, 1], [1, 2, 6]] });
    expect(coalesce([2, 1, 4], [[4, 4, 1], [4, 99, 1]])).toEqual({ shape: [8], strides: [[1], [1]] });
    expect(coalesce([], [[]])).toEqual({ shape: [1], strides: [[0]] });
  });

  it('broadcasts shapes and strides', () => {
    expect(broadcastShapes([4, 1, 3], [5, 1])).toEqual([4, 5, 3]);
    expect(() => broadcastShapes([2, 3], [4, 3])).toThrow(/do not broadcast/);
    expect(broadcastStrides([5, 1], [1, 1], [4, 5, 3])).toEqual([0, 1, 0]);
  });

  it('encodes the FkStrided struct (208 bytes)', () => {
    const b = encodeStrided(new Uint8Array(STRIDED_STRUCT_BYTES), [3, 4], [[4, 1], [1, 3]], 12);
    const v = new DataView(b.buffer);
    expect([v.getInt32(0, true), v.getInt32(8, true), v.getInt32(48, true), v.getInt32(56, true), v.getInt32(96, true), v.getInt32(104, true)]).toEqual([3, 4, 4, 1, 1, 3]);
    expect([v.getInt32(192, true), v.getInt32(200, true)]).toEqual([12, 2]);
    expect(() => encodeStrided(new Uint8Array(208), [1, 2, 3, 4, 5, 6, 7], [], 1)).toThrow(/exceeds the kernels' limit of 6/);
  });

  it('embeds kernels/*.cu with local headers inlined (run npm run embed-kernels after editing a kernel)', () => {
    const here = new URL('.', import.meta.url).pathname;
    expect(readFileSync(`${here}kernel-sources.generated.ts`, 'utf8')).toBe(renderKernelSources());
    for (const f of ['elementwise.cu', 'runtime.cu', 'norm.cu', 'activation.cu', 'rotary.cu', 'embedding.cu', 'softmax.cu', 'kvcache.cu', 'sampler.cu', 'harness.cu']) {
      expect(Object.keys(KERNEL_SOURCES)).toContain(f);
    }
    for (const [f, src] of Object.entries(KERNEL_SOURCES)) {
      expect(src, f).not.toMatch(/^#include "/m); // NVRTC gets no include path: every local header is inlined
    }
    for (const f of ['norm.cu', 'activation.cu', 'rotary.cu', 'softmax.cu']) {
      expect(KERNEL_SOURCES[f]!.match(/float fk_f\(float x\)/g)?.length, f).toBe(1); // fk_vec.cuh, exactly once
    }
  });
});
