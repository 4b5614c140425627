import { OpKernelTable } from '@fastkernels/core';
import type { AllocateOptions, Backend, BackendAvailability, BackendCapabilities, DeviceInfo, Ops, Storage, Timer } from '@fastkernels/core';
import { cpuDeviceInfo } from './device.js';
import { CpuHarnessKernels } from './harness-kernels.js';
import { createCpuOps } from './ops/index.js';
import { registerCpuKernels } from './ops/kernels.js';
import { CpuStorage } from './storage.js';
import { CpuTimer } from './timer.js';

export interface CpuBackendOptions {
  /**
   * Byte pattern for every allocation that does not ask for its own poison, outputs of ops
   * included (0xff makes every float NaN). Lets a harness catch outputs an op leaves unwritten.
   */
  readonly defaultPoison?: number;
}

export interface CpuMemoryStats {
  readonly liveStorages: number;
  readonly liveBytes: number;
  readonly peakBytes: number;
}

/** The reference backend: host memory and every op in plain TypeScript, accumulating in float64. */
export class CpuBackend implements Backend {
  readonly name = 'cpu';
  readonly capabilities: BackendCapabilities = Object.freeze({ graphs: false, collectives: false, kernelLanguages: Object.freeze(['typescript'] as const) });
  readonly ops: Ops;
  /** Float64 kernels of every op in the op registry (docs/ops.md). */
  readonly opKernels: OpKernelTable = new OpKernelTable('cpu');
  /** The harness's backend-side checks (host loops here; see harness-kernels.ts). */
  readonly harnessKernels: CpuHarnessKernels = new CpuHarnessKernels(this);
  private deviceList: readonly DeviceInfo[] | undefined;
  private live = 0;
  private liveBytes = 0;
  private peakBytes = 0;

  constructor(private readonly options: CpuBackendOptions = {}) {
    this.ops = createCpuOps(this);
    registerCpuKernels(this.opKernels, this);
  }

  availability(): BackendAvailability {
    return { available: true };
  }

  devices(): readonly DeviceInfo[] {
    return (this.deviceList ??= Object.freeze([cpuDeviceInfo()]));
  }

  allocate(byteLength: number, device: number, options: AllocateOptions = {}): CpuStorage {
    this.checkDevice(device);
    const storage = new CpuStorage(this, byteLength, options.poison ?? this.options.defaultPoison, (s) => {
      this.live--;
      this.liveBytes -= s.byteLength;
    });
    this.live++;
    this.liveBytes += byteLength;
    this.peakBytes = Math.max(this.peakBytes, this.liveBytes);
    return storage;
  }

  write(dst: Storage, byteOffset: number, src: Uint8Array): void {
    const bytes = this.own(dst, 'write');
    checkRange('write', byteOffset, src.byteLength, dst.byteLength);
    bytes.set(src, byteOffset);
  }

  read(src: Storage, byteOffset: number, byteLength: number): Uint8Array {
    const bytes = this.own(src, 'read');
    checkRange('read', byteOffset, byteLength, src.byteLength);
    return bytes.slice(byteOffset, byteOffset + byteLength);
  }

  copyBytes(dst: Storage, dstOffset: number, src: Storage, srcOffset: number, byteLength: number): void {
    const d = this.own(dst, 'copyBytes dst');
    const s = this.own(src, 'copyBytes src');
    checkRange('copyBytes dst', dstOffset, byteLength, dst.byteLength);
    checkRange('copyBytes src', srcOffset, byteLength, src.byteLength);
    if (d === s) d.copyWithin(dstOffset, srcOffset, srcOffset + byteLength); // memmove semantics on overlap
    else d.set(s.subarray(srcOffset, srcOffset + byteLength), dstOffset);
  }

  /** CPU ops finish before they return. */
  synchronize(device = 0): void {
    this.checkDevice(device);
  }

  createTimer(device = 0): Timer {
    this.checkDevice(device);
    return new CpuTimer();
  }

  versions(): Readonly<Record<string, string>> {
    return { node: process.version };
  }

  /** Live allocations (for leak checks in tests and the harness). */
  memoryStats(): CpuMemoryStats {
    return { liveStorages: this.live, liveBytes: this.liveBytes, peakBytes: this.peakBytes };
  }

  private own(storage: Storage, what: string): Uint8Array {
    if (!(storage instanceof CpuStorage) || storage.backend !== this) throw new TypeError(`cpu ${what}: storage belongs to backend '${storage.backend.name}', not this cpu backend`);
    return storage.live(`cpu ${what}`);
  }

  private checkDevice(device: number): void {
    if (device !== 0) throw new RangeError(`cpu backend has one device (0), got device ${device}`);
  }
}

function checkRange(what: string, offset: number, length: number, size: number): void {
  if (!Number.isInteger(offset) || !Number.isInteger(length) || offset < 0 || length < 0 || offset + length > size) {
    throw new RangeError(`cpu ${what}: bytes [${offset}, ${offset + length}) out of range for a storage of ${size} bytes`);
  }
}
