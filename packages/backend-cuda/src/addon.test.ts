import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CudaBackend, cudaPlugin } from './index.js';
import { addonCandidates, tryLoadAddon } from './native.js';

const driverPresent = existsSync('/dev/nvidiactl');

describe('native addon on a CPU machine', () => {
  it('builds and loads (fastkernels_cuda.node)', () => {
    const r = tryLoadAddon();
    expect(r.error).toBeUndefined();
    expect(r.addon?.abiVersion).toBe(1);
    expect(typeof r.addon?.launch).toBe('function');
  });

  it('looks for the addon in the env override, the package layout, then the bundle layout', () => {
    const c = addonCandidates('/x/dist', { FASTKERNELS_CUDA_ADDON: '/opt/a.node' });
    expect(c).toEqual(['/opt/a.node', '/x/build/Release/fastkernels_cuda.node', '/x/dist/fastkernels_cuda.node']);
  });

  it.skipIf(driverPresent)('reports "no driver" without throwing, listing every place tried', () => {
    const b = new CudaBackend();
    const a = b.availability();
    expect(a.available).toBe(false);
    expect(a.reason).toMatch(/^libcuda\.so\.1 not found \(tried: libcuda\.so\.1 /);
    expect(a.reason).toContain('/usr/local/cuda/lib64');
    expect(b.devices()).toEqual([]);
    expect(b.versions().cuda).toMatch(/^unavailable: /);
    expect(() => b.allocate(16, 0)).toThrow(/CUDA is not available: libcuda\.so\.1 not found/);
  });

  it('a missing library in the candidate list is reported with the loader error', () => {
    const { addon } = tryLoadAddon();
    const r = addon!.loadLibrary('cublasLt', ['/nonexistent/libcublasLt.so.13']);
    expect(r.ok).toBe(false);
    expect(r.tried[0]!.path).toBe('/nonexistent/libcublasLt.so.13');
    expect(r.tried[0]!.error).toMatch(/No such file/);
  });

  it('the plugin constructs the backend lazily and the unimplemented ops say so', () => {
    expect(cudaPlugin.name).toBe('backend-cuda');
    const b = new CudaBackend();
    expect(b.name).toBe('cuda');
    // rmsNorm is implemented (src/ops/norm/rms-norm.ts): without a GPU it fails on its (missing) arguments, not with notYet
    expect(() => (b.ops as unknown as { rmsNorm(): void }).rmsNorm()).toThrow();
    expect(() => (b.ops as unknown as { pagedDecodeAttention(): void }).pagedDecodeAttention()).toThrow(); // implemented (ops/attention/attention.ts): fails on its missing arguments
  });
});
