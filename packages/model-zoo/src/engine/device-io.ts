import type { Backend, Tensor } from '@fastkernels/core';

/**
 * What the engine needs of a backend beyond core's Backend, found by capability (model-zoo does not import a
 * GPU backend): CUDA graphs (capture + replay over a shared graph pool) and asynchronous host-to-device copies
 * from page-locked staging memory. `stepIoFor(backend)` returns the CUDA implementation when the backend says
 * `capabilities.graphs` and exposes a runtime with those methods (backend-cuda's CudaBackend.runtime), else the
 * portable one (plain Uint8Arrays, synchronous backend.write, no graphs).
 */
export interface CapturedGraph {
  replay(): void;
  destroy(): void;
}

export interface GraphRuntime {
  /** Memory for allocations made during capture; one pool is shared by every bucket (graphs replay one at a time). */
  createPool(bytes: number): unknown;
  capture(fn: () => void, pool: unknown): CapturedGraph;
  /** Bytes reserved for a pool (rounded), for the memory budget. */
  poolBytes(pool: unknown): number;
  /** Most bytes any one capture took from the pool (for calibrating the estimate), where the runtime tracks it. */
  poolPeakBytes?(pool: unknown): number;
  /**
   * Run fn eagerly and return the pool bytes a capture of the same allocations would take (the allocator replays them
   * through the pool's reuse rules), where the runtime can tell; sizes a pool from the warm-up run instead of a guess.
   */
  measurePoolBytes?(fn: () => void): number;
  destroyPool(pool: unknown): void;
}

export interface StepIo {
  /** Staging memory for step metadata (page-locked when uploads are asynchronous). */
  hostBuffer(bytes: number): Uint8Array;
  /** Copy bytes into a tensor's storage at its offset; asynchronous (stream-ordered) when `async`. */
  upload(dst: Tensor, src: Uint8Array, byteLength: number): void;
  /** Whether upload returns before the copy ran (then the staging buffer must not be rewritten until a sync). */
  readonly async: boolean;
  /**
   * Copy `byteLength` bytes of a tensor's storage (from its offset) into `dst` (from hostBuffer), in stream order; the
   * returned wait() returns once `dst` holds them, without waiting for work queued after the copy (at once when the
   * copy was synchronous).
   */
  download(src: Tensor, dst: Uint8Array, byteLength: number): () => void;
  /** Graph capture, when the backend has it. */
  readonly graphs: GraphRuntime | null;
  /** Device memory in use / total, when the backend can tell (for the memory budget). */
  memoryInfo(): { allocatedBytes: number; peakBytes: number; reservedBytes: number; totalBytes: number; resetPeak(): void } | null;
}

/** The subset of backend-cuda's CudaRuntime used here (duck-typed). */
interface CudaRuntimeLike {
  createGraphPool(bytes: number): { size: number; destroy(): void };
  capture(fn: () => void, opts: { pool?: unknown }): CapturedGraph;
  allocPinned(bytes: number): Uint8Array;
  copyHtoD(dst: number, src: ArrayBufferView, bytes?: number, async?: boolean): void;
  copyDtoH(dst: ArrayBufferView, src: number, bytes?: number, async?: boolean): void;
  fence(): () => void;
  allocator: { stats(): { allocated: number; peak: number; reserved: number }; resetPeak(): void; measurePoolBytes?(fn: () => void): number };
  withStream?: unknown;
}

function cudaRuntimeOf(backend: Backend): CudaRuntimeLike | null {
  if (!backend.capabilities.graphs) return null;
  let rt: unknown;
  try {
    rt = (backend as unknown as { runtime?: unknown }).runtime;
  } catch {
    return null;
  }
  const r = rt as Partial<CudaRuntimeLike> | undefined;
  if (!r || typeof r.capture !== 'function' || typeof r.createGraphPool !== 'function' || typeof r.allocPinned !== 'function' || typeof r.copyHtoD !== 'function' || typeof r.copyDtoH !== 'function' || typeof r.fence !== 'function') return null;
  return r as CudaRuntimeLike;
}

export function stepIoFor(backend: Backend, options: { graphs?: boolean } = {}): StepIo {
  const rt = cudaRuntimeOf(backend);
  const total = () => backend.devices()[0]?.totalMemory ?? 0;
  if (!rt) {
    return {
      hostBuffer: (n) => new Uint8Array(n),
      upload: (dst, src, n) => backend.write(dst.storage, dst.offset * dst.itemsize, n === src.byteLength ? src : src.subarray(0, n)),
      async: false,
      download: (src, dst, n) => {
        if (n > 0) dst.set(backend.read(src.storage, src.offset * src.itemsize, n));
        return () => {};
      },
      graphs: null,
      memoryInfo: () => null,
    };
  }
  const graphs: GraphRuntime = {
    createPool: (bytes) => rt.createGraphPool(bytes),
    capture: (fn, pool) => rt.capture(fn, { pool }),
    poolBytes: (pool) => (pool as { size: number }).size,
    poolPeakBytes: (pool) => (pool as { peak: number }).peak,
    destroyPool: (pool) => (pool as { destroy(): void }).destroy(),
  };
  if (typeof rt.allocator.measurePoolBytes === 'function') graphs.measurePoolBytes = (fn) => rt.allocator.measurePoolBytes!(fn);
  return {
    hostBuffer: (n) => rt.allocPinned(Math.max(n, 8)),
    upload: (dst, src, n) => {
      if (n > 0) rt.copyHtoD(dst.storage.devicePtr! + dst.offset * dst.itemsize, src, n, true);
    },
    async: true,
    download: (src, dst, n) => {
      if (n > 0) rt.copyDtoH(dst, src.storage.devicePtr! + src.offset * src.itemsize, n, true);
      return rt.fence();
    },
    graphs: options.graphs === false ? null : graphs,
    memoryInfo: () => {
      // Live values, read at each access: the engine resets the peak, runs a forward, then reads peakBytes from the
      // same object. A snapshot here made every H200 start-up (runs 6-10) report an activation peak of 0.0 MiB.
      const stats = () => rt.allocator.stats();
      return {
        get allocatedBytes() {
          return stats().allocated;
        },
        get peakBytes() {
          return stats().peak;
        },
        get reservedBytes() {
          return stats().reserved;
        },
        get totalBytes() {
          return total();
        },
        resetPeak: () => rt.allocator.resetPeak(),
      };
    },
  };
}

/**
 * Graph emulation for backends without graphs (tests on the CPU): capture runs fn once (as a real capture runs the
 * host code), replay runs it again. Everything the bucketed decode path does around graphs — static buffers,
 * padding, bucket choice, outputs copied into static tensors — runs unchanged, so the CPU tests cover it.
 */
export class EmulatedGraphRuntime implements GraphRuntime {
  captures = 0;
  replays = 0;
  createPool(bytes: number): unknown {
    return { bytes };
  }
  capture(fn: () => void): CapturedGraph {
    fn();
    this.captures++;
    return {
      replay: () => {
        this.replays++;
        fn();
      },
      destroy: () => {},
    };
  }
  poolBytes(pool: unknown): number {
    return (pool as { bytes: number }).bytes;
  }
  destroyPool(): void {}
}
