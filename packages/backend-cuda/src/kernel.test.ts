import { describe, expect, it } from 'vitest';
import { CudaKernel } from './kernel.js';

// The host side of CudaKernel with a stand-in runtime (no GPU): which driver calls it makes, in which order.
function kernelWithRuntime() {
  const calls: string[] = [];
  const runtime = {
    setMaxDynamicShared: (f: number, bytes: number) => calls.push(`attr ${f} ${bytes}`),
    addon: { occupancy: (f: number, block: number, shared: number) => (calls.push(`occupancy ${f} ${block} ${shared}`), { activeBlocksPerSM: 2, suggestedBlockSize: block, minGridSize: 1 }) },
    launch: (f: number, _g: unknown, _b: unknown, shared: number) => calls.push(`launch ${f} ${shared}`),
  };
  const k = new CudaKernel({ entry: 'k', source: 'extern "C" __global__ void k(float* p) {}' });
  Object.assign(k as unknown as Record<string, unknown>, { func: 7, rt: runtime });
  return { k, calls };
}

describe('CudaKernel dynamic shared memory', () => {
  it('an occupancy query above the default allowance enables the size first, once per new maximum', () => {
    const { k, calls } = kernelWithRuntime();
    expect(k.occupancy(256, 64 << 10).activeBlocksPerSM).toBe(2);
    k.occupancy(256, 32 << 10);
    k.launch(1, 256, 64 << 10, [0]);
    k.launch(1, 256, 96 << 10, [0]);
    expect(calls).toEqual([
      'attr 7 65536', 'occupancy 7 256 65536',
      'occupancy 7 256 32768',
      'launch 7 65536',
      'attr 7 98304', 'launch 7 98304',
    ]);
  });
});
