import type { CompareStats } from './compare.js';
import type { DType } from './dtype.js';
import type { Ops } from './ops.js';
import type { OpKernelTable } from './ops/registry.js';
import type { Tolerance } from './task.js';
import type { Tensor } from './tensor.js';

/** A device a backend can place tensors on. */
export interface DeviceInfo {
  readonly backend: string;
  readonly index: number;
  readonly name: string;
  /** Total memory in bytes (host memory for the CPU backend). */
  readonly totalMemory: number;
  /** Streaming multiprocessors, or CPU cores. */
  readonly multiprocessors: number;
  /** Last-level cache size in bytes (the L2 on a GPU); used to size cache flushes. */
  readonly l2CacheBytes: number;
  /** e.g. '9.0' for an H200; absent on the CPU. */
  readonly computeCapability?: string;
  readonly extra?: Readonly<Record<string, string | number | boolean>>;
}

export interface BackendAvailability {
  readonly available: boolean;
  /** Why not, in words a user can act on (which libraries were tried where). */
  readonly reason?: string;
  readonly details?: Readonly<Record<string, string | number | boolean>>;
}

export type KernelLanguage = 'typescript' | 'cuda' | 'triton';

export interface BackendCapabilities {
  readonly graphs: boolean;
  readonly collectives: boolean;
  readonly kernelLanguages: readonly KernelLanguage[];
}

/**
 * Memory owned by a backend. Tensors are views over a storage; the storage is
 * reference-counted so views can be disposed independently of their base.
 */
export interface Storage {
  readonly backend: Backend;
  readonly device: number;
  readonly byteLength: number;
  /** Host bytes for host-resident backends (CPU); undefined for device memory. */
  readonly hostBytes?: Uint8Array;
  /** Device address for device-resident backends; a plain number (addresses fit in 2^53). */
  readonly devicePtr?: number;
  retain(): void;
  /** Returns memory to the backend when the count reaches zero. */
  release(): void;
  readonly released: boolean;
}

/** Times work on the backend's current stream (device events on a GPU, a monotonic clock on the CPU). */
export interface Timer {
  start(): void;
  stop(): void;
  /** Milliseconds between start and stop; synchronises as needed. */
  elapsedMs(): number;
}

export interface AllocateOptions {
  /** Fill the new memory with a byte pattern (0xff makes every float NaN), so unwritten outputs are caught. */
  readonly poison?: number;
}

export interface Backend {
  readonly name: string;
  availability(): BackendAvailability;
  devices(): readonly DeviceInfo[];
  readonly capabilities: BackendCapabilities;
  /** The op surface modules call. */
  readonly ops: Ops;
  /**
   * Optional: the kernels this backend has for the op registry (ops/registry.ts, docs/ops.md). Without it every op
   * runs through its Ops route or its decomposition.
   */
  readonly opKernels?: OpKernelTable;
  allocate(byteLength: number, device: number, options?: AllocateOptions): Storage;
  /** Copy host bytes into a storage at a byte offset. */
  write(dst: Storage, byteOffset: number, src: Uint8Array): void;
  /** Copy bytes out of a storage to the host. */
  read(src: Storage, byteOffset: number, byteLength: number): Uint8Array;
  /** Device-to-device byte copy within this backend. */
  copyBytes(dst: Storage, dstOffset: number, src: Storage, srcOffset: number, byteLength: number): void;
  synchronize(device?: number): void;
  createTimer(device?: number): Timer;
  /** Versions of the driver and libraries, recorded with every result. */
  versions(): Readonly<Record<string, string>>;
  /**
   * Optional device-side helpers for the bench harness. Without them the harness fills, compares and
   * checks inputs on the host, which at production shapes (a 1 GiB table, a 235M-element output) costs
   * seconds per call; a device backend provides them so a full sweep stays within minutes.
   */
  readonly harnessKernels?: HarnessKernels;
}

/**
 * What a backend may do on the device for the harness. Each method answers `undefined`/`false` when it
 * cannot handle the dtype or layout, and the harness then falls back to the host.
 */
export interface HarnessKernels {
  /** Fill `t` (a float tensor) with mean + scale * N(0, 1) values derived from (seed, element index) alone. */
  fillNormal(t: Tensor, seed: number, scale: number, mean: number): boolean;
  /** The statistics `compareStatsHost` computes, element for element the same verdicts (see compare.ts). */
  compareStats(actual: Tensor, expected: Tensor, tol: Tolerance): CompareStats | undefined;
  /** How many (16-byte words of) bytes differ between a[aOff, aOff + n) and b[bOff, bOff + n): 0 when equal. */
  countDifferentBytes(a: Storage, aOff: number, b: Storage, bOff: number, byteLength: number): number;
}

/** What a kernel language helper produces: something a module can launch on a backend. */
export interface Kernel {
  readonly language: KernelLanguage;
  readonly entry: string;
  readonly source: string;
}

export type { DType };
