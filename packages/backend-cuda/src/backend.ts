/** `CudaBackend implements Backend`: device storage, copies, timers and the op surface on the CUDA runtime. */
import { OpKernelTable, type AllocateOptions, type Backend, type BackendAvailability, type BackendCapabilities, type DeviceInfo, type Storage, type Timer } from '@fastkernels/core';
import type { DeviceBlock } from './allocator.js';
import { CudaHarnessKernels } from './harness-kernels.js';
import { CudaOps } from './ops.js';
import { cudnnAddon, cudnnVersionEntries, loadCudnn } from './ops/conv/cudnn-library.js';
import { registerGeneratedKernels, type GeneratedOps } from './ops/register.js';
import { CudaRuntime, formatCudaVersion } from './runtime.js';
import { cudaTuning, effectiveTuning, type EffectiveTuning } from './tuning/load.js';

/** Device memory from the caching allocator, reference-counted; the last release returns it to the cache. */
export class CudaStorage implements Storage {
  private refs = 1;
  private block: DeviceBlock | undefined;

  constructor(
    readonly backend: CudaBackend,
    readonly device: number,
    readonly byteLength: number,
    block: DeviceBlock,
    private readonly onFree: (b: DeviceBlock) => void,
  ) {
    this.block = block;
    leakGuard.register(this, { block, onFree, bytes: byteLength }, this);
  }

  get devicePtr(): number {
    if (!this.block) throw new Error(`use of a released CUDA storage (${this.byteLength} bytes)`);
    return this.block.ptr;
  }

  get released(): boolean {
    return this.block === undefined;
  }

  get refCount(): number {
    return this.refs;
  }

  retain(): void {
    if (!this.block) throw new Error(`retain of a released CUDA storage (${this.byteLength} bytes)`);
    this.refs++;
  }

  release(): void {
    if (!this.block) throw new Error(`double release of a CUDA storage (${this.byteLength} bytes)`);
    if (--this.refs > 0) return;
    const b = this.block;
    this.block = undefined;
    leakGuard.unregister(this);
    this.onFree(b);
  }
}

let leakWarned = false;
/** A backstop only: storages must be released explicitly (dispose / using). */
const leakGuard = new FinalizationRegistry<{ block: DeviceBlock; onFree: (b: DeviceBlock) => void; bytes: number }>((h) => {
  if (!leakWarned) {
    leakWarned = true;
    process.emitWarning(`a CUDA storage of ${h.bytes} bytes was garbage-collected without release(); dispose tensors explicitly (further leaks are not reported)`);
  }
  try {
    if (h.block.live) h.onFree(h.block);
  } catch {
    /* the context may be gone */
  }
});

/** Elapsed time between two events recorded on the current stream. */
export class CudaTimer implements Timer {
  private readonly e0: number;
  private readonly e1: number;
  private started = false;
  private stopped = false;
  private stream = 0;

  constructor(private readonly rt: CudaRuntime) {
    this.e0 = rt.acquireEvent();
    this.e1 = rt.acquireEvent();
    timerRegistry.register(this, { rt, events: [this.e0, this.e1] });
  }

  start(): void {
    this.stream = this.rt.stream;
    this.rt.addon.eventRecord(this.e0, this.stream);
    this.started = true;
    this.stopped = false;
  }

  stop(): void {
    if (!this.started) throw new Error('timer stopped before it was started');
    this.rt.addon.eventRecord(this.e1, this.stream);
    this.stopped = true;
  }

  elapsedMs(): number {
    if (!this.stopped) throw new Error('elapsedMs() needs start() and stop() first');
    this.rt.addon.eventSynchronize(this.e1);
    return this.rt.addon.eventElapsed(this.e0, this.e1);
  }
}
const timerRegistry = new FinalizationRegistry<{ rt: CudaRuntime; events: number[] }>((h) => h.events.forEach((e) => h.rt.releaseEvent(e)));

export class CudaBackend implements Backend {
  readonly name = 'cuda';
  readonly capabilities: BackendCapabilities = { graphs: true, collectives: false, kernelLanguages: ['cuda'] };
  private opsImpl: CudaOps | undefined;
  /** Device-side fills and comparisons for the bench harness (nothing is compiled until first use). */
  readonly harnessKernels: CudaHarnessKernels = new CudaHarnessKernels(this);
  /** The op registry's kernels (generated elementwise, reductions, norms: src/ops/register.ts); CUDA is touched at the first call. */
  readonly opKernels: OpKernelTable = new OpKernelTable('cuda');
  readonly generatedOps: GeneratedOps = registerGeneratedKernels(this.opKernels, () => this.runtime);

  /** Cheap: nothing is loaded until availability(), devices() or the first allocation. */
  constructor() {}

  /** The process-wide CUDA runtime (initialises the driver on first use; throws when unavailable). */
  get runtime(): CudaRuntime {
    return CudaRuntime.get();
  }

  get ops(): CudaOps {
    return (this.opsImpl ??= new CudaOps(() => this.runtime));
  }

  /** The tuning in force for this backend's device, with where each value came from (starts the runtime: the device picks the file). */
  tuning(): EffectiveTuning {
    void this.runtime;
    return effectiveTuning();
  }

  /** The engine's launch choices from the tuning in force (engine.chainDecode), read by LLMEngine's defaults. */
  get engineTuning(): { readonly chainDecode: boolean } {
    return cudaTuning().engine;
  }

  availability(): BackendAvailability {
    const p = CudaRuntime.probe();
    if (!p.available) return { available: false, reason: p.reason ?? 'CUDA unavailable' };
    return { available: true, details: { driver: formatCudaVersion(p.driverVersion!), devices: p.deviceCount!, libcuda: p.libcuda! } };
  }

  devices(): readonly DeviceInfo[] {
    if (!CudaRuntime.probe().available) return [];
    const rt = this.runtime;
    const out: DeviceInfo[] = [];
    for (let i = 0; i < rt.deviceCount; i++) {
      const p = rt.properties(i);
      out.push({
        backend: 'cuda',
        index: i,
        name: p.name,
        totalMemory: p.totalMemory,
        multiprocessors: p.multiprocessors,
        l2CacheBytes: p.l2CacheBytes,
        computeCapability: p.computeCapability,
        extra: {
          arch: p.arch,
          sharedPerBlock: p.sharedPerBlock,
          sharedPerBlockOptin: p.sharedPerBlockOptin,
          sharedPerMultiprocessor: p.sharedPerMultiprocessor,
          maxThreadsPerBlock: p.maxThreadsPerBlock,
          warpSize: p.warpSize,
          clockRateKHz: p.clockRateKHz,
          memoryClockRateKHz: p.memoryClockRateKHz,
          memoryBusWidth: p.memoryBusWidth,
          pciBusId: p.pciBusId,
        },
      });
    }
    return out;
  }

  allocate(byteLength: number, device: number, options: AllocateOptions = {}): CudaStorage {
    const rt = this.onDevice(device);
    const block = rt.allocate(byteLength);
    const alloc = rt.allocator;
    const s = new CudaStorage(this, device, byteLength, block, (b) => alloc.release(b));
    if (options.poison !== undefined) rt.memset(block.ptr, options.poison & 0xff, byteLength, 1);
    return s;
  }

  write(dst: Storage, byteOffset: number, src: Uint8Array): void {
    this.checkRange(dst, byteOffset, src.byteLength, 'write');
    const rt = this.onDevice(dst.device);
    rt.copyHtoD(dst.devicePtr! + byteOffset, src, src.byteLength);
  }

  read(src: Storage, byteOffset: number, byteLength: number): Uint8Array {
    this.checkRange(src, byteOffset, byteLength, 'read');
    const rt = this.onDevice(src.device);
    const out = new Uint8Array(byteLength);
    if (byteLength > 0) rt.copyDtoH(out, src.devicePtr! + byteOffset, byteLength);
    return out;
  }

  copyBytes(dst: Storage, dstOffset: number, src: Storage, srcOffset: number, byteLength: number): void {
    this.checkRange(dst, dstOffset, byteLength, 'copyBytes destination');
    this.checkRange(src, srcOffset, byteLength, 'copyBytes source');
    this.onDevice(dst.device).copyDtoD(dst.devicePtr! + dstOffset, src.devicePtr! + srcOffset, byteLength);
  }

  /**
   * The CUDA IPC handle of the allocation holding a storage, for another process to map (the PyTorch candidate
   * worker: cuIpcOpenMemHandle, then the storage's bytes at `offset`). The allocation may hold other storages (the
   * caching allocator's slabs): the other process must touch only the bytes it is told about.
   */
  ipcHandle(storage: Storage): { handle: string; allocationBytes: number; offset: number } {
    const rt = this.onDevice(storage.device);
    const fn = rt.addon.ipcHandle;
    if (!fn) throw new Error('this build of the CUDA addon has no ipcHandle: rebuild it (npm run build:native -w @fastkernels/backend-cuda)');
    const ptr = storage.devicePtr!;
    const h = fn.call(rt.addon, ptr);
    return { handle: h.handle, allocationBytes: h.size, offset: ptr - h.base };
  }

  synchronize(device?: number): void {
    const rt = device === undefined ? this.runtime : this.onDevice(device);
    rt.synchronize({ device: true });
  }

  createTimer(device?: number): Timer {
    return new CudaTimer(device === undefined ? this.runtime : this.onDevice(device));
  }

  versions(): Readonly<Record<string, string>> {
    const v: Record<string, string> = {};
    const p = CudaRuntime.probe();
    if (!p.available) return { cuda: `unavailable: ${p.reason}` };
    const rt = this.runtime;
    v.driver = formatCudaVersion(rt.driverVersion);
    v.libcuda = rt.libraries.cuda;
    try {
      v.nvrtc = rt.nvrtcVersion();
      v.libnvrtc = rt.libraries.nvrtc!;
    } catch (e) {
      v.nvrtc = `unavailable: ${(e as Error).message}`;
    }
    try {
      rt.ensureLibrary('cublasLt');
      const lt = rt.addon.ltVersion();
      v.cublasLt = `${Math.floor(lt / 10000)}.${Math.floor((lt % 10000) / 100)}.${lt % 100}`;
      v.libcublasLt = rt.libraries.cublasLt!;
    } catch (e) {
      v.cublasLt = `unavailable: ${(e as Error).message}`;
    }
    Object.assign(v, cudnnVersionEntries(loadCudnn(cudnnAddon(rt.addon)))); // doctor's cuDNN line: version and file, or what was tried
    const d = rt.properties();
    v.device = d.name;
    v.computeCapability = d.computeCapability;
    v.arch = d.arch;
    v.addonAbi = String(rt.addon.abiVersion);
    return v;
  }

  private onDevice(device: number): CudaRuntime {
    const rt = this.runtime;
    if (rt.device !== device) rt.setDevice(device);
    return rt;
  }

  private checkRange(s: Storage, off: number, n: number, what: string): void {
    if (s.backend !== this) throw new TypeError(`${what}: storage belongs to backend '${s.backend.name}', not cuda`);
    if (off < 0 || n < 0 || off + n > s.byteLength) throw new RangeError(`${what}: bytes [${off}, ${off + n}) outside a storage of ${s.byteLength} bytes`);
  }
}
