import { CudaKernel, type CudaKernelSpec } from '../../kernel.js';
import type { CudaOps } from '../../ops.js';
import { captureHooks, type CudaRuntime } from '../../runtime.js';

const keyOf = (spec: CudaKernelSpec) => `${spec.name ?? ''}|${spec.entry}|${(spec.options ?? []).join(' ')}`;

/**
 * What the spine kernels (rms_norm, attention, ...) need from the backend: the runtime (device
 * properties, current stream), the generic ops (copy, fill, gemm) and one cache of compiled kernels,
 * keyed by source file, entry and compile options, so each specialisation is compiled once.
 */
export class SpineContext {
  private readonly kernels = new Map<string, CudaKernel>();
  /** Builds a graph capture will want (the PDL builds of kernels run eagerly), compiled before the next capture. */
  private readonly beforeCapture = new Map<string, CudaKernelSpec>();
  /** Eager kernels whose capture build is queued or compiled already (one WeakSet lookup per eager launch after that). */
  private readonly captureBuildSeen = new WeakSet<CudaKernel>();

  constructor(
    private readonly runtimeFn: () => CudaRuntime,
    readonly ops: CudaOps,
  ) {
    // a module must not be loaded while a stream is captured: compile what the capture will launch first
    captureHooks.push((rt) => {
      if (this.beforeCapture.size > 0 && rt === this.runtimeFn()) this.compileForCapture();
    });
  }

  get runtime(): CudaRuntime {
    return this.runtimeFn();
  }

  /** The last paged KV-cache write: its caches' addresses, tokens written and launch number (runtime.launches after it). */
  private kvWrite: { k: number; v: number; tokens: number; launch: number; rt: CudaRuntime } | null = null;

  /** A spine kernel just wrote `tokens` tokens (one a sequence) into the caches at k and v (storeKvcache, rotaryStoreKvcache). */
  noteKvWrite(k: number, v: number, tokens: number): void {
    const rt = this.runtime;
    this.kvWrite = { k, v, tokens, launch: rt.launches, rt };
  }

  /**
   * Whether the kernel launched last was a KV-cache write of `tokens` tokens into the caches at k and v, and nothing of
   * ours launched since: then a decode over those caches for `tokens` sequences may read them before its PDL wait,
   * all but the row that write produced (FK_EARLY_KV: the newest key of each sequence, loaded after the wait).
   */
  followsKvWrite(k: number, v: number, tokens: number): boolean {
    const w = this.kvWrite;
    return w !== null && w.rt === this.runtime && w.launch === w.rt.launches && w.k === k && w.v === v && w.tokens === tokens;
  }

  /** Streaming multiprocessors of the current device (grids are sized from it). */
  get multiprocessors(): number {
    return this.runtime.properties().multiprocessors;
  }

  kernel(spec: CudaKernelSpec): CudaKernel {
    const key = keyOf(spec);
    let k = this.kernels.get(key);
    if (!k) {
      k = new CudaKernel(spec);
      this.kernels.set(key, k);
    }
    return k;
  }

  /**
   * Compile `captureSpec()` (the build of `eager` a capture launches) before the next graph capture starts, not now: a
   * process that never captures never needs it. Asked once per eager kernel.
   */
  compileBeforeCapture(eager: CudaKernel, captureSpec: () => CudaKernelSpec): void {
    if (this.captureBuildSeen.has(eager)) return;
    this.captureBuildSeen.add(eager);
    const spec = captureSpec();
    const key = keyOf(spec);
    if (!this.kernels.get(key)?.compiled) this.beforeCapture.set(key, spec);
  }

  /** Compile every build compileBeforeCapture asked for (the capture hook; public for tests). */
  compileForCapture(): void {
    for (const spec of this.beforeCapture.values()) this.kernel(spec).compile();
    this.beforeCapture.clear();
  }
}

/** Thrown by ops whose CUDA kernel has not landed yet (never a silent fallback). */
export function notYet(op: string): never {
  throw new Error(`${op} is not yet implemented on the CUDA backend`);
}
