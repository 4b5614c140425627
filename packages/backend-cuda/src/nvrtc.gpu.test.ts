import { Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { CudaCompileError } from './compile.js';
import { cudaKernel } from './kernel.js';
import { KERNEL_SOURCES } from './kernel-sources.generated.js';
import { gpu, randomValues, upload } from './gpu-test-util.js';

const G = { tags: ['gpu'] };

describe('NVRTC compile and launch', () => {
  it('compiles a kernel for the device arch and launches it with typed arguments', G, () => {
    const b = gpu();
    const n = 10_000;
    const a = upload(randomValues(n, 5, 'f32'), [n], 'f32');
    const out = Tensor.empty(b, [n], 'f32');
    const k = cudaKernel({ source: KERNEL_SOURCES['runtime.cu']!, entry: 'fk_axpi' });
    expect(k.signature).toEqual(['ptr', 'ptr', 'f32', 'i64']);
    k.launch(Math.ceil(n / 256), 256, 0, [out, a, 2, n]);
    const got = out.toFloat64Array();
    const src = a.toFloat64Array();
    for (let i = 0; i < n; i++) expect(got[i]).toBe(Math.fround(Math.fround(src[i]! * 2) + i));
    expect(b.runtime.properties().arch).toMatch(/^sm_\d+a?$/);
    const occ = k.occupancy(256);
    expect(occ.activeBlocksPerSM).toBeGreaterThan(0);
    expect(k.attributes().numRegs).toBeGreaterThan(0);
  });

  it('reports a compile error with the log and the failing source line', G, () => {
    const source = ['extern "C" __global__ void broken(float* x) {', '  int i = threadIdx.x;', '  x[i] = undefined_name * 2.0f;', '}'].join('\n');
    let err: unknown;
    try {
      cudaKernel({ source, entry: 'broken', name: 'broken.cu' }).compile();
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(CudaCompileError);
    const e = err as CudaCompileError;
    expect(e.line).toBe(3);
    expect(e.message).toMatch(/identifier "undefined_name" is undefined/);
    expect(e.message).toContain('> 3 |   x[i] = undefined_name * 2.0f;');
  });

  it('hits the disk cache on the second compile', G, () => {
    const rt = gpu().runtime;
    const source = `// unique ${process.pid}-${Date.now()}\n${KERNEL_SOURCES['runtime.cu']}`;
    const first = rt.compile(source, { noMemoryCache: true });
    expect(first.fromCache).toBe(false);
    const hits = rt.cubinCache.hits;
    const second = rt.compile(source, { noMemoryCache: true });
    expect(second.fromCache).toBe(true);
    expect(rt.cubinCache.hits).toBe(hits + 1);
    console.log(`     first compile ${first.compileMs.toFixed(0)} ms; cache dir ${rt.cubinCache.dir}`);
  });

  it('compiles off the JS thread (async) and includes cuda_bf16.h / cuda_fp8.h', G, async () => {
    const source = `#include <cuda_bf16.h>
#include <cuda_fp8.h>
extern "C" __global__ void cvt(__nv_bfloat16* out, const float* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __float2bfloat16_rn(float(__nv_fp8_e4m3(in[i])));
}`;
    const k = await cudaKernel({ source, entry: 'cvt' }).compileAsync();
    expect(k.compiled).toBe(true);
    const inp = upload([1, 2.5, 300, 1000], [4], 'f32');
    const out = Tensor.empty(gpu(), [4], 'bf16');
    k.launch(1, 32, 0, [out, inp, 4]);
    expect(Array.from(out.toFloat64Array())).toEqual([1, 2.5, 288, 448]);
  });

  it('launches with more than 48 KiB of dynamic shared memory (opt-in limit)', G, () => {
    const b = gpu();
    const optin = b.runtime.properties().sharedPerBlockOptin;
    const bytes = Math.min(optin, 200 * 1024);
    // Integer sums: a float32 accumulation of ~1e9 would round and hide nothing but noise.
    const source = `extern "C" __global__ void smem(unsigned long long* out, int n) {
  extern __shared__ int buf[];
  for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] = i;
  __syncthreads();
  unsigned long long s = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) s += (unsigned long long)buf[n - 1 - i];
  atomicAdd(out, s);
}`;
    const k = cudaKernel({ source, entry: 'smem' });
    const n = bytes / 4;
    const out = Tensor.zeros(b, [1], 'i64');
    k.launch(1, 256, bytes, [out, n]);
    expect(out.toFloat64Array()[0]).toBe((n * (n - 1)) / 2);
  });
});
