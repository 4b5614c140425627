/**
 * The CUDA runtime: library loading, devices and primary contexts, streams, events, the caching
 * allocator, host<->device copies, NVRTC compilation with a disk cache, modules and kernel launches,
 * CUDA graphs. One instance per process (CudaRuntime.get()), created on first use.
 */
import { LaunchBuffer, type ArgLayout, type ArgValue } from './args.js';
import { CachingAllocator, GraphPool, type DeviceBlock } from './allocator.js';
import { CubinCache, compileCacheKey } from './cache.js';
import { archFor, CudaCompileError, formatCompileError, nvrtcOptions, parseCompileLog } from './compile.js';
import { cudaIncludeDirs, defaultDiscoveryEnv, formatNotFound, libraryCandidates, type CudaLibraryKind, type DiscoveryEnv } from './discovery.js';
import { CudaError, CudaFatalError, makeCudaError, type CudaLibrary } from './errors.js';
import { loadAddon, tryLoadAddon, type NativeAddon, type NativeDeviceProps } from './native.js';
import { TensorMapCache, type TensorMapSpec } from './tensor-map.js';
import { activateDeviceTuning } from './tuning/load.js';

export const CU_FUNC_ATTRIBUTE = { MAX_THREADS_PER_BLOCK: 0, SHARED_SIZE_BYTES: 1, CONST_SIZE_BYTES: 2, LOCAL_SIZE_BYTES: 3, NUM_REGS: 4, MAX_DYNAMIC_SHARED_SIZE_BYTES: 8 } as const;
const CU_STREAM_NON_BLOCKING = 1;
const CU_EVENT_DISABLE_TIMING = 2;

export interface ProbeResult {
  readonly available: boolean;
  readonly reason?: string;
  readonly driverVersion?: number;
  readonly deviceCount?: number;
  readonly libcuda?: string;
}

export interface DeviceProperties extends NativeDeviceProps {
  readonly ordinal: number;
  readonly computeCapability: string;
  readonly arch: string;
}

interface DeviceState {
  readonly ordinal: number;
  readonly ctx: number;
  readonly props: DeviceProperties;
  readonly defaultStream: number;
  stream: number;
  readonly allocator: CachingAllocator;
}

export interface CompileOptions {
  /** Display name in errors (default: the entry or 'kernel.cu'). */
  readonly name?: string;
  /** Extra NVRTC options (-D..., --use_fast_math, -maxrregcount=...). */
  readonly options?: readonly string[];
  /** In-memory headers: include name -> source. */
  readonly headers?: Readonly<Record<string, string>>;
  /** Bypass the disk cache (still writes to it). */
  readonly noCache?: boolean;
  /** Skip the in-process module map (the disk cache still answers): for tests of the disk cache. */
  readonly noMemoryCache?: boolean;
}

export interface CompiledModule {
  readonly module: number;
  readonly key: string;
  readonly fromCache: boolean;
  readonly compileMs: number;
  function(entry: string): number;
}

export type Dim3 = number | readonly [number, number?, number?];

let errorTarget: CudaRuntime | undefined;

export class CudaRuntime {
  private static instance: CudaRuntime | undefined;
  private static probed: ProbeResult | undefined;

  readonly addon: NativeAddon;
  readonly driverVersion: number;
  readonly libraries: { cuda: string; nvrtc?: string; cublasLt?: string };
  private readonly devicesState = new Map<number, DeviceState>();
  private current!: DeviceState;
  private readonly launchBuf = new LaunchBuffer();
  private readonly discovery: DiscoveryEnv;
  private nvrtcVer: string | undefined;
  private includeDirsCache: { found: string[]; searched: string[] } | undefined;
  readonly cubinCache = new CubinCache();
  private readonly modules = new Map<string, CompiledModule>();
  private readonly eventPool: number[] = [];
  private readonly fencePool: number[] = [];
  /** Set when a sticky error destroyed the context. */
  lost: CudaFatalError | undefined;
  private capturingStream: number | undefined;

  /**
   * Whether a usable driver and device exist. Never throws; cached. The reason names every place
   * libcuda.so.1 was looked for.
   */
  static probe(): ProbeResult {
    if (CudaRuntime.probed) return CudaRuntime.probed;
    CudaRuntime.probed = probeUncached();
    return CudaRuntime.probed;
  }

  /** The process-wide runtime on device 0; throws with the probe's reason when CUDA is unusable. */
  static get(): CudaRuntime {
    if (CudaRuntime.instance) return CudaRuntime.instance;
    const p = CudaRuntime.probe();
    if (!p.available) throw new Error(`CUDA is not available: ${p.reason}`);
    CudaRuntime.instance = new CudaRuntime(loadAddon(), p.driverVersion!, p.libcuda!);
    return CudaRuntime.instance;
  }

  static peek(): CudaRuntime | undefined {
    return CudaRuntime.instance;
  }

  private constructor(addon: NativeAddon, driverVersion: number, libcuda: string, discovery: DiscoveryEnv = defaultDiscoveryEnv()) {
    this.addon = addon;
    this.driverVersion = driverVersion;
    this.libraries = { cuda: libcuda };
    this.discovery = discovery;
    errorTarget = this;
    addon.setLaunchBuffer(this.launchBuf.buffer);
    this.setDevice(0);
    // the kernel launch choices of this device's tuning file (device 0's name: a host's GPUs are of one kind)
    activateDeviceTuning(this.current.props.name);
  }

  // -------------------------------------------------------------------------------------- devices

  get deviceCount(): number {
    return this.addon.deviceCount();
  }

  get device(): number {
    return this.current.ordinal;
  }

  /** Retain device `ordinal`'s primary context and make it current (streams and allocator per device). */
  setDevice(ordinal: number): void {
    let st = this.devicesState.get(ordinal);
    if (!st) {
      const n = this.addon.deviceCount();
      if (!Number.isInteger(ordinal) || ordinal < 0 || ordinal >= n) throw new RangeError(`CUDA device ${ordinal} does not exist (${n} device${n === 1 ? '' : 's'})`);
      const ctx = this.addon.primaryCtxRetain(ordinal);
      this.addon.ctxSetCurrent(ctx);
      const raw = this.addon.deviceProperties(ordinal);
      const props: DeviceProperties = { ...raw, ordinal, computeCapability: `${raw.major}.${raw.minor}`, arch: archFor(raw.major, raw.minor) };
      const stream = this.addon.streamCreate(CU_STREAM_NON_BLOCKING);
      const addon = this.addon;
      const allocator = new CachingAllocator({
        alloc: (bytes) => addon.memAllocOrNull(bytes),
        free: (ptr) => addon.memFree(ptr),
        synchronize: () => addon.ctxSynchronize(),
      });
      st = { ordinal, ctx, props, defaultStream: stream, stream, allocator };
      this.devicesState.set(ordinal, st);
    } else {
      this.addon.ctxSetCurrent(st.ctx);
    }
    this.current = st;
  }

  properties(ordinal = this.device): DeviceProperties {
    if (ordinal === this.device) return this.current.props;
    const st = this.devicesState.get(ordinal);
    if (st) return st.props;
    const raw = this.addon.deviceProperties(ordinal);
    return { ...raw, ordinal, computeCapability: `${raw.major}.${raw.minor}`, arch: archFor(raw.major, raw.minor) };
  }

  memInfo(): { free: number; total: number } {
    return this.addon.memGetInfo();
  }

  // -------------------------------------------------------------------------------------- streams and events

  /** The stream every op, copy and timer of this device uses. */
  get stream(): number {
    return this.current.stream;
  }

  get defaultStream(): number {
    return this.current.defaultStream;
  }

  createStream(): number {
    return this.addon.streamCreate(CU_STREAM_NON_BLOCKING);
  }

  destroyStream(s: number): void {
    if (s === this.current.defaultStream) throw new Error('cannot destroy the default stream');
    this.addon.streamDestroy(s);
  }

  /** Run fn with `stream` as the current stream. */
  withStream<T>(stream: number, fn: () => T): T {
    const prev = this.current.stream;
    this.current.stream = stream;
    try {
      return fn();
    } finally {
      this.current.stream = prev;
    }
  }

  /** Wait on the host for the current stream (or all streams with `device: true`). */
  synchronize(opts: { device?: boolean } = {}): void {
    this.assertNotCapturing('synchronize()');
    if (opts.device) this.addon.ctxSynchronize();
    else this.addon.streamSynchronize(this.current.stream);
    if (opts.device) this.current.allocator.onSynchronize();
  }

  acquireEvent(timing = true): number {
    if (timing && this.eventPool.length) return this.eventPool.pop()!;
    return this.addon.eventCreate(timing ? 0 : CU_EVENT_DISABLE_TIMING);
  }

  releaseEvent(e: number): void {
    this.eventPool.push(e);
  }

  /**
   * A marker of the work queued so far on the current stream: the returned wait() blocks the host until that work is
   * done (not what is queued after it), e.g. an async download the next step must not wait behind.
   */
  fence(): () => void {
    const e = this.fencePool.pop() ?? this.addon.eventCreate(CU_EVENT_DISABLE_TIMING);
    this.addon.eventRecord(e, this.current.stream);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.addon.eventSynchronize(e);
      this.fencePool.push(e);
    };
  }

  /** Make `waiter` wait for the work queued so far on `stream`. */
  streamWait(waiter: number, stream: number): void {
    const e = this.addon.eventCreate(CU_EVENT_DISABLE_TIMING);
    this.addon.eventRecord(e, stream);
    this.addon.streamWaitEvent(waiter, e);
    this.addon.eventDestroy(e);
  }

  // -------------------------------------------------------------------------------------- memory

  get allocator(): CachingAllocator {
    return this.current.allocator;
  }

  allocate(bytes: number): DeviceBlock {
    return this.current.allocator.allocate(bytes, this.current.stream);
  }

  free(block: DeviceBlock): void {
    this.current.allocator.release(block);
  }

  /** Page-locked host memory (for async copies); freed when the returned view is collected. */
  allocPinned(bytes: number): Uint8Array {
    return new Uint8Array(this.addon.memAllocHost(bytes));
  }

  /** Host -> device; synchronous unless `async` (then `src` must be pinned memory from allocPinned). */
  copyHtoD(dst: number, src: ArrayBufferView, bytes = src.byteLength, async = false): void {
    if (!async) this.assertNotCapturing('a synchronous host-to-device copy');
    this.addon.memcpyHtoD(dst, src, bytes, this.current.stream, !async);
  }

  /** Device -> host; synchronous unless `async` (then `dst` must be pinned and is valid after a sync). */
  copyDtoH(dst: ArrayBufferView, src: number, bytes = dst.byteLength, async = false): void {
    if (!async) this.assertNotCapturing('a synchronous device-to-host copy (it waits on the host)');
    this.addon.memcpyDtoH(dst, src, bytes, this.current.stream, !async);
  }

  /** Device -> device on the current stream (asynchronous). */
  copyDtoD(dst: number, src: number, bytes: number): void {
    if (bytes > 0) this.addon.memcpyDtoD(dst, src, bytes, this.current.stream);
  }

  memset(dst: number, value: number, count: number, elementBytes: 1 | 2 | 4 = 1): void {
    if (count > 0) this.addon.memset(dst, value >>> 0, count, elementBytes, this.current.stream);
  }

  // -------------------------------------------------------------------------------------- NVRTC

  /** NVRTC's version as "major.minor" (loads NVRTC on first use). */
  nvrtcVersion(): string {
    if (!this.nvrtcVer) {
      this.ensureLibrary('nvrtc');
      const [a, b] = this.addon.nvrtcVersion();
      this.nvrtcVer = `${a}.${b}`;
    }
    return this.nvrtcVer;
  }

  includeDirs(): { found: string[]; searched: string[] } {
    return (this.includeDirsCache ??= cudaIncludeDirs(this.discovery));
  }

  /** The NVRTC options and cache key for a source on the current device. */
  compilePlan(source: string, opts: CompileOptions = {}): { name: string; options: string[]; key: string; arch: string } {
    const arch = this.current.props.arch;
    const options = nvrtcOptions(arch, this.includeDirs().found, opts.options ?? []);
    const name = opts.name ?? 'kernel.cu';
    const key = compileCacheKey({ source, options, arch, nvrtcVersion: this.nvrtcVersion(), headers: opts.headers });
    return { name, options, key, arch };
  }

  /** Compile on the JS thread (cached on disk and in memory) and load the module. */
  compile(source: string, opts: CompileOptions = {}): CompiledModule {
    const plan = this.compilePlan(source, opts);
    const hit = this.cached(plan.key, opts);
    if (hit) return hit;
    const t0 = performance.now();
    const h = opts.headers ?? {};
    const r = this.addon.nvrtcCompileSync(source, plan.name, plan.options, Object.keys(h), Object.values(h));
    return this.finishCompile(source, plan, r, performance.now() - t0);
  }

  /** Compile off the JS thread (a libuv worker), then load the module on the JS thread. */
  async compileAsync(source: string, opts: CompileOptions = {}): Promise<CompiledModule> {
    const plan = this.compilePlan(source, opts);
    const hit = this.cached(plan.key, opts);
    if (hit) return hit;
    const t0 = performance.now();
    const h = opts.headers ?? {};
    const r = await this.addon.nvrtcCompileAsync(source, plan.name, plan.options, Object.keys(h), Object.values(h));
    return this.finishCompile(source, plan, r, performance.now() - t0);
  }

  private cached(key: string, opts: CompileOptions): CompiledModule | undefined {
    const mem = opts.noMemoryCache ? undefined : this.modules.get(key);
    if (mem) return mem;
    if (opts.noCache) return undefined;
    const cubin = this.cubinCache.get(key);
    if (!cubin) return undefined;
    return this.loadModule(cubin, key, true, 0);
  }

  private finishCompile(source: string, plan: { name: string; key: string; arch: string }, r: import('./native.js').CompileOutput, ms: number): CompiledModule {
    if (!r.ok || !r.cubin) {
      const inc = this.includeDirs();
      const note = /cannot open source file|could not open source file/.test(r.log)
        ? `CUDA include dirs passed: ${inc.found.join(', ') || 'none found'} (searched: ${inc.searched.join(', ')}); set FASTKERNELS_CUDA_INCLUDE_DIRS or CUDA_HOME`
        : '';
      const status = `${r.statusName || 'status ' + r.status}${r.stage && r.stage !== 'nvrtcCompileProgram' ? ' in ' + r.stage : ''}`;
      const errs = parseCompileLog(r.log, plan.name);
      throw new CudaCompileError(formatCompileError(plan.name, source, r.log, status, note), plan.name, r.log, errs[0]?.line);
    }
    this.cubinCache.put(plan.key, r.cubin);
    return this.loadModule(r.cubin, plan.key, false, ms);
  }

  /** Load a cubin or PTX image (PTX is JIT-compiled by the driver). */
  loadModule(image: Uint8Array, key = '', fromCache = false, compileMs = 0): CompiledModule {
    const module = this.addon.moduleLoadData(image);
    const fns = new Map<string, number>();
    const addon = this.addon;
    const mod: CompiledModule = {
      module,
      key,
      fromCache,
      compileMs,
      function(entry: string): number {
        let f = fns.get(entry);
        if (f === undefined) fns.set(entry, (f = addon.moduleGetFunction(module, entry)));
        return f;
      },
    };
    if (key) this.modules.set(key, mod);
    return mod;
  }

  // -------------------------------------------------------------------------------------- launch

  /**
   * Launch `func` on the current stream (or `stream`). One N-API call; the arguments are packed into
   * the shared staging buffer by `layout` (see args.ts).
   */
  /**
   * Kernels launched through launch() so far (any stream, captured or not): a kernel's launch number tells whether
   * another of ours came after it (SpineContext.noteKvWrite). Launches outside it (cuBLASLt, copies, NCCL) are not
   * counted: none of them lets a PDL successor start before it has finished.
   */
  launches = 0;

  launch(func: number, grid: Dim3, block: Dim3, sharedBytes: number, layout: ArgLayout, args: readonly ArgValue[], stream = this.current.stream, flags = 0): void {
    this.launches++;
    const g0 = typeof grid === 'number' ? grid : grid[0];
    const g1 = typeof grid === 'number' ? 1 : (grid[1] ?? 1);
    const g2 = typeof grid === 'number' ? 1 : (grid[2] ?? 1);
    const b0 = typeof block === 'number' ? block : block[0];
    const b1 = typeof block === 'number' ? 1 : (block[1] ?? 1);
    const b2 = typeof block === 'number' ? 1 : (block[2] ?? 1);
    this.launchBuf.packDims(func, stream, g0, g1, g2, b0, b1, b2, sharedBytes, layout, args, flags);
    this.addon.launch();
  }

  setMaxDynamicShared(func: number, bytes: number): void {
    const optin = this.current.props.sharedPerBlockOptin;
    if (bytes > optin) throw new RangeError(`${bytes} bytes of dynamic shared memory requested; this device allows ${optin} per block`);
    this.addon.funcSetAttribute(func, CU_FUNC_ATTRIBUTE.MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes);
  }

  // -------------------------------------------------------------------------------------- TMA tensor maps

  private readonly tensorMaps = new TensorMapCache();

  /**
   * Why TMA tensor maps cannot be encoded here (an addon built before tensorMapEncodeTiled), or null. A driver without
   * cuTensorMapEncodeTiled (before CUDA 12.0) shows when a map is encoded: tensorMap throws saying so.
   */
  tensorMapUnavailable(): string | null {
    return this.addon.tensorMapEncodeTiled ? null : 'this build of the addon has no tensorMapEncodeTiled (rebuild it: npm run build:native -w @fastkernels/backend-cuda)';
  }

  /** The 128 bytes of a tensor map, a kernel's TENSOR_MAP_ARG (cached by the map's description, address included). */
  tensorMap(spec: TensorMapSpec): Uint8Array {
    const unavailable = this.tensorMapUnavailable();
    if (unavailable !== null) throw new Error(`TMA tensor maps are unavailable: ${unavailable}`);
    const addon = this.addon;
    return this.tensorMaps.get((...a) => addon.tensorMapEncodeTiled!(...a), spec);
  }

  // -------------------------------------------------------------------------------------- graphs

  get capturing(): boolean {
    return this.capturingStream !== undefined;
  }

  /** Reserve memory for allocations made during capture (see CachingAllocator). */
  createGraphPool(bytes: number): GraphPool {
    return this.current.allocator.createGraphPool(bytes);
  }

  /**
   * Capture the work `fn` queues on the current stream into a CUDA graph (nothing executes). Allocations
   * inside come from `pool` (or a new pool of `poolBytes`); a host sync or an allocation without a pool
   * throws. Returns the instantiated graph.
   */
  capture(fn: () => void, opts: { pool?: GraphPool; poolBytes?: number } = {}): CudaGraph {
    const pool = opts.pool ?? (opts.poolBytes ? this.createGraphPool(opts.poolBytes) : null);
    const graph = this.captureRaw(fn, pool);
    let exec: number;
    try {
      exec = this.addon.graphInstantiate(graph);
    } catch (e) {
      this.addon.graphDestroy(graph);
      throw e;
    }
    return new CudaGraph(this, graph, exec, pool, this.current.stream, !opts.pool);
  }

  /** @internal */
  captureRaw(fn: () => void, pool: GraphPool | null): number {
    if (this.capturingStream !== undefined) throw new Error('a CUDA graph capture is already in progress');
    for (const h of captureHooks) h(this);
    const stream = this.current.stream;
    const alloc = this.current.allocator;
    alloc.beginCapture(pool);
    this.capturingStream = stream;
    try {
      this.addon.streamBeginCapture(stream, 0 /* GLOBAL */);
    } catch (e) {
      alloc.endCapture();
      this.capturingStream = undefined;
      throw e;
    }
    let failure: unknown;
    try {
      fn();
    } catch (e) {
      failure = e;
    }
    let graph = 0;
    try {
      graph = this.addon.streamEndCapture(stream);
    } catch (e) {
      failure ??= e;
    } finally {
      alloc.endCapture();
      this.capturingStream = undefined;
    }
    if (failure !== undefined) {
      if (graph) this.addon.graphDestroy(graph);
      throw failure;
    }
    return graph;
  }

  assertNotCapturing(what: string): void {
    if (this.capturingStream !== undefined) {
      throw new Error(`${what} is not allowed during CUDA graph capture: it would synchronize with the host. Move it before or after the captured region.`);
    }
  }

  // -------------------------------------------------------------------------------------- libraries

  /** dlopen NVRTC or cuBLASLt on first use; the error lists every place tried. */
  ensureLibrary(kind: Exclude<CudaLibraryKind, 'cuda'>): string {
    const have = this.libraries[kind];
    if (have) return have;
    const c = libraryCandidates(kind, this.discovery);
    const r = this.addon.loadLibrary(kind, c.candidates, c.preload);
    if (!r.ok) throw new Error(`${kind === 'nvrtc' ? 'NVRTC' : 'cuBLASLt'}: ${formatNotFound(kind, r.tried, c.searchedDirs)}`);
    this.libraries[kind] = r.path!;
    return r.path!;
  }
}

/** Things to prepare before any capture (e.g. the cuBLASLt workspace), registered by other modules. */
export const captureHooks: ((rt: CudaRuntime) => void)[] = [];

/** An instantiated CUDA graph: replay() launches it; recapture() re-records and updates it in place. */
export class CudaGraph {
  private destroyed = false;
  constructor(
    private readonly rt: CudaRuntime,
    private graph: number,
    private exec: number,
    readonly pool: GraphPool | null,
    readonly stream: number,
    private readonly ownsPool: boolean,
  ) {}

  get nodeCount(): number {
    return this.rt.addon.graphNodeCount(this.graph);
  }

  /**
   * The graph's edges counted by "type/from port": "0/0" is a full-completion dependency, "1/1" and "1/2" are
   * programmatic ones (a LAUNCH_PDL kernel captured after another kernel). null where the driver cannot say.
   */
  edgeKinds(): Record<string, number> | null {
    return this.rt.addon.graphEdgeKinds(this.graph);
  }

  /** Launch the graph on `stream` (default: the stream it was captured on). */
  replay(stream = this.stream): void {
    if (this.destroyed) throw new Error('replay of a destroyed CUDA graph');
    this.rt.addon.graphLaunch(this.exec, stream);
  }

  /**
   * Capture `fn` again with the same pool (same addresses) and update the executable graph in place
   * when the topology is unchanged; otherwise re-instantiate. Returns 'updated' or 'reinstantiated'.
   */
  recapture(fn: () => void): 'updated' | 'reinstantiated' {
    const g = this.rt.withStream(this.stream, () => this.rt.captureRaw(fn, this.pool));
    const ok = this.rt.addon.graphExecUpdate(this.exec, g);
    this.rt.addon.graphDestroy(this.graph);
    this.graph = g;
    if (ok) return 'updated';
    this.rt.addon.graphExecDestroy(this.exec);
    this.exec = this.rt.addon.graphInstantiate(g);
    return 'reinstantiated';
  }

  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.rt.addon.graphExecDestroy(this.exec);
    this.rt.addon.graphDestroy(this.graph);
    if (this.ownsPool) this.pool?.destroy();
  }

  [Symbol.dispose](): void {
    this.destroy();
  }
}

function errorFactory(lib: string, fn: string, code: number, name: string, desc: string): Error {
  const e = makeCudaError(lib as CudaLibrary, fn, code, name, desc);
  if (e instanceof CudaFatalError && errorTarget && !errorTarget.lost) errorTarget.lost = e;
  return e;
}

function probeUncached(): ProbeResult {
  const { addon, error } = tryLoadAddon();
  if (!addon) return { available: false, reason: error };
  try {
    addon.setErrorFactory(errorFactory);
    const c = libraryCandidates('cuda');
    const r = addon.loadLibrary('cuda', c.candidates, []);
    if (!r.ok) return { available: false, reason: formatNotFound('cuda', r.tried, c.searchedDirs) };
    let driverVersion: number;
    try {
      driverVersion = addon.init();
    } catch (e) {
      return { available: false, reason: `${r.path} loaded but cuInit failed: ${(e as Error).message}`, libcuda: r.path };
    }
    const deviceCount = addon.deviceCount();
    if (deviceCount === 0) return { available: false, reason: `${r.path}: no CUDA devices`, driverVersion, deviceCount, libcuda: r.path };
    return { available: true, driverVersion, deviceCount, libcuda: r.path };
  } catch (e) {
    return { available: false, reason: e instanceof CudaError ? e.message : `CUDA probe failed: ${(e as Error).message}` };
  }
}

export function formatCudaVersion(v: number): string {
  return `${Math.floor(v / 1000)}.${Math.floor((v % 1000) / 10)}`;
}
