/**
 * `cudaKernel({ source, entry })`: a CUDA C++ kernel compiled with NVRTC for the current device
 * (cached on disk), launched on the current stream with packed arguments.
 */
import type { Kernel } from '@fastkernels/core';
import { LAUNCH_PDL, layoutArgs, parseSignature, type ArgLayout, type ArgType, type ArgValue } from './args.js';
import { CU_FUNC_ATTRIBUTE, CudaRuntime, type CompiledModule, type Dim3 } from './runtime.js';

export interface CudaKernelSpec {
  readonly source: string;
  /** The `extern "C" __global__` function to launch. */
  readonly entry: string;
  /** Name shown in compile errors (default `<entry>.cu`). */
  readonly name?: string;
  /** Argument types; inferred from the entry's parameter list when omitted. */
  readonly signature?: readonly ArgType[];
  /** Extra NVRTC options (-DNAME=value, --use_fast_math, -maxrregcount=N, ...). */
  readonly options?: readonly string[];
  /** In-memory headers (include name -> source). */
  readonly headers?: Readonly<Record<string, string>>;
  /**
   * The kernel was compiled to wait for the kernel before it (kernels/fk_pdl.cuh with FK_PDL=1): launch() then uses
   * LAUNCH_PDL. fileKernel (ops/launch/common.ts) sets it when PDL launches are on now: the tuning's launch.pdl, an sm_90+ device,
   * and a graph capture in progress (or launch.pdlEager).
   */
  readonly pdl?: boolean;
}

export class CudaKernel implements Kernel {
  readonly language = 'cuda' as const;
  readonly entry: string;
  readonly source: string;
  readonly signature: readonly ArgType[];
  readonly layout: ArgLayout;
  private func: number | undefined;
  private mod: CompiledModule | undefined;
  private rt: CudaRuntime | undefined;
  /**
   * Dynamic shared memory the function is enabled for. The default 48 KiB allowance counts static shared
   * memory too, so 48 KiB of dynamic memory plus any static memory already needs the attribute: start at 0
   * and set it on the first launch that asks for dynamic memory.
   */
  private sharedSet = 0;

  constructor(readonly spec: CudaKernelSpec) {
    this.entry = spec.entry;
    this.source = spec.source;
    this.signature = spec.signature ?? parseSignature(spec.source, spec.entry);
    this.layout = layoutArgs(this.signature);
  }

  get compiled(): boolean {
    return this.func !== undefined;
  }

  /** Whether the last compile came from the disk cache. */
  get fromCache(): boolean {
    return this.mod?.fromCache ?? false;
  }

  get runtime(): CudaRuntime {
    return (this.rt ??= CudaRuntime.get());
  }

  /** Compile now on the JS thread (launch() does this on first use). */
  compile(): this {
    if (this.func === undefined) this.bind(this.runtime.compile(this.source, this.compileOptions()));
    return this;
  }

  /** Compile on a worker thread. */
  async compileAsync(): Promise<this> {
    if (this.func === undefined) this.bind(await this.runtime.compileAsync(this.source, this.compileOptions()));
    return this;
  }

  /** The CUfunction handle (compiles on first use). */
  get handle(): number {
    return this.func ?? this.compile().func!;
  }

  /**
   * Launch on the current stream (or `stream`). Dynamic shared memory is enabled for the function
   * automatically (cuFuncSetAttribute MAX_DYNAMIC_SHARED_SIZE_BYTES, once per new maximum) up to the
   * device's opt-in limit. `flags` (args.ts): by default LAUNCH_PDL for a `pdl` kernel, else none.
   */
  launch(grid: Dim3, block: Dim3, sharedBytes: number, args: readonly ArgValue[], stream?: number, flags?: number): void {
    const f = this.allowShared(sharedBytes);
    if (flags === undefined) flags = this.spec.pdl ? LAUNCH_PDL : 0;
    this.rt!.launch(f, grid, block, sharedBytes, this.layout, args, stream, flags);
  }

  /**
   * Blocks of `blockSize` threads with `sharedBytes` of dynamic shared memory an SM holds. The opt-in is made first, as
   * launch makes it: the driver counts no block whose shared memory exceeds the function's allowance, so a query above
   * 48 KB before the first launch would say 0 (and a grid sized from it would be one block an SM).
   */
  occupancy(blockSize: number, sharedBytes = 0): { activeBlocksPerSM: number; suggestedBlockSize: number; minGridSize: number } {
    return this.runtime.addon.occupancy(this.allowShared(sharedBytes), blockSize, sharedBytes);
  }

  /** The function, enabled for `sharedBytes` of dynamic shared memory (the attribute set once per new maximum). */
  private allowShared(sharedBytes: number): number {
    const f = this.handle;
    if (sharedBytes > this.sharedSet) {
      this.runtime.setMaxDynamicShared(f, sharedBytes);
      this.sharedSet = sharedBytes;
    }
    return f;
  }

  attributes(): { numRegs: number; localBytes: number; staticSharedBytes: number; maxThreadsPerBlock: number } {
    const a = this.runtime.addon;
    const f = this.handle;
    return {
      numRegs: a.funcGetAttribute(f, CU_FUNC_ATTRIBUTE.NUM_REGS),
      localBytes: a.funcGetAttribute(f, CU_FUNC_ATTRIBUTE.LOCAL_SIZE_BYTES),
      staticSharedBytes: a.funcGetAttribute(f, CU_FUNC_ATTRIBUTE.SHARED_SIZE_BYTES),
      maxThreadsPerBlock: a.funcGetAttribute(f, CU_FUNC_ATTRIBUTE.MAX_THREADS_PER_BLOCK),
    };
  }

  private compileOptions() {
    return { name: this.spec.name ?? `${this.entry}.cu`, options: this.spec.options, headers: this.spec.headers };
  }

  private bind(mod: CompiledModule): void {
    this.mod = mod;
    this.func = mod.function(this.entry);
  }
}

/** Declare a CUDA kernel for a candidate or a module; nothing is compiled until first use. */
export function cudaKernel(spec: CudaKernelSpec): CudaKernel {
  return new CudaKernel(spec);
}
