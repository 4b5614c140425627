import { CpuBackend } from '@fastkernels/backend-cpu';
import type { Backend } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { stepIoFor } from './device-io.js';

/** A backend that looks like the CUDA one to stepIoFor: graphs on, a runtime with an allocator whose peak moves. */
function fakeCudaBackend() {
  const stats = { allocated: 100, peak: 100, reserved: 200 };
  const runtime = {
    createGraphPool: () => ({ size: 0, destroy() {} }),
    capture: () => ({ replay() {}, destroy() {} }),
    allocPinned: (n: number) => new Uint8Array(n),
    copyHtoD: () => {},
    copyDtoH: () => {},
    fence: () => () => {},
    allocator: { stats: () => ({ ...stats }), resetPeak: () => void (stats.peak = stats.allocated) },
  };
  const cpu = new CpuBackend();
  const backend = new Proxy(cpu, {
    get(target, key, receiver) {
      if (key === 'capabilities') return { ...target.capabilities, graphs: true };
      if (key === 'runtime') return runtime;
      return Reflect.get(target, key, receiver);
    },
  }) as unknown as Backend;
  return { backend, stats };
}

describe('stepIoFor(...).memoryInfo on a CUDA-like backend', () => {
  it('reads the allocator at each access: a peak reached after the call is seen (the activation profile relies on it)', () => {
    const { backend, stats } = fakeCudaBackend();
    const mem = stepIoFor(backend).memoryInfo();
    expect(mem).not.toBeNull();
    mem!.resetPeak();
    expect(mem!.peakBytes).toBe(100);
    // a forward pass allocates and frees 5000 bytes
    stats.allocated = 5100;
    stats.peak = 5100;
    stats.allocated = 100;
    expect(mem!.peakBytes).toBe(5100);
    expect(mem!.allocatedBytes).toBe(100);
    expect(mem!.reservedBytes).toBe(200);
  });
});
