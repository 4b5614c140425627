/**
 * The in-process cache of generated kernels, by the generator's key (expression, dtypes, class). Compiling goes
 * through CudaKernel -> CudaRuntime.compile, whose disk cache is keyed by the sha256 of the generated source (with the
 * options, arch and NVRTC version), so a source generated again in another process loads its cubin from disk.
 */
import { CudaKernel } from '../kernel.js';
import type { GeneratedKernel } from './elementwise-source.js';

export class GenKernelCache {
  private readonly kernels = new Map<string, CudaKernel>();

  /** The kernel for `key`, generating its source on the first ask (compiled on first launch). */
  kernel(key: string, generate: () => GeneratedKernel, name: string): CudaKernel {
    let k = this.kernels.get(key);
    if (!k) {
      const g = generate();
      k = new CudaKernel({ source: g.source, entry: g.entry, signature: g.signature, name: `${name}.cu` });
      this.kernels.set(key, k);
    }
    return k;
  }

  get size(): number {
    return this.kernels.size;
  }
}
