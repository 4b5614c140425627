import { CudaKernel, type CudaKernelSpec } from '../kernel.js';
import type { CudaOps } from '../ops.js';
import type { CudaRuntime } from '../runtime.js';

/**
 * What the spine kernels (rms_norm, attention, ...) need from the backend: the runtime (device
 * properties, current stream), the generic ops (copy, fill, gemm) and one cache of compiled kernels,
 * keyed by source file, entry and compile options, so each specialisation is compiled once.
 */
export class SpineContext {
  private readonly kernels = new Map<string, CudaKernel>();

  constructor(
    private readonly runtimeFn: () => CudaRuntime,
    readonly ops: CudaOps,
  ) {}

  get runtime(): CudaRuntime {
    return this.runtimeFn();
  }

  /** Streaming multiprocessors of the current device (grids are sized from it). */
  get multiprocessors(): number {
    return this.runtime.properties().multiprocessors;
  }

  kernel(spec: CudaKernelSpec): CudaKernel {
    const key = `${spec.name ?? ''}|${spec.entry}|${(spec.options ?? []).join(' ')}`;
    let k = this.kernels.get(key);
    if (!k) {
      k = new CudaKernel(spec);
      this.kernels.set(key, k);
    }
    return k;
  }
}

/** Thrown by ops whose CUDA kernel has not landed yet (never a silent fallback). */
export function notYet(op: string): never {
  throw new Error(`${op} is not yet implemented on the CUDA backend`);
}
