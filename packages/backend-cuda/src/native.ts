/**
 * Loads the prebuilt addon (fastkernels_cuda.node). Places, in order:
 *  1. $FASTKERNELS_CUDA_ADDON (a file path);
 *  2. <module dir>/../build/Release/fastkernels_cuda.node (the package layout: src/ or dist/ beside build/);
 *  3. <module dir>/fastkernels_cuda.node (the bundle layout: the .node next to the bundled .mjs).
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { setting } from '@fastkernels/core';
import { fileURLToPath } from 'node:url';

export const ADDON_FILE = 'fastkernels_cuda.node';

export interface LoadResult {
  readonly ok: boolean;
  readonly path?: string;
  readonly tried: readonly { path: string; error: string }[];
}

export interface CompileOutput {
  readonly ok: boolean;
  readonly status: number;
  readonly statusName: string;
  readonly stage: string;
  readonly log: string;
  readonly cubin?: Uint8Array;
  readonly ptx?: string;
}

export interface NativeDeviceProps {
  name: string;
  totalMemory: number;
  multiprocessors: number;
  l2CacheBytes: number;
  major: number;
  minor: number;
  sharedPerBlock: number;
  sharedPerBlockOptin: number;
  sharedPerMultiprocessor: number;
  maxThreadsPerBlock: number;
  maxThreadsPerMultiprocessor: number;
  registersPerBlock: number;
  warpSize: number;
  clockRateKHz: number;
  memoryClockRateKHz: number;
  memoryBusWidth: number;
  pciBusId: number;
}

/** The addon's functions (native/addon.cc). Handles and device pointers are plain numbers. */
export interface NativeAddon {
  readonly abiVersion: number;
  loadLibrary(kind: 'cuda' | 'nvrtc' | 'cublasLt', candidates: string[], preload?: string[]): LoadResult;
  loaded(): { cuda: string | null; nvrtc: string | null; cublasLt: string | null };
  setErrorFactory(f: (lib: string, fn: string, code: number, name: string, desc: string) => Error): void;
  init(): number;
  deviceCount(): number;
  deviceProperties(ordinal: number): NativeDeviceProps;
  primaryCtxRetain(ordinal: number): number;
  primaryCtxRelease(ordinal: number): void;
  ctxSetCurrent(ctx: number): void;
  ctxSynchronize(): void;
  memGetInfo(): { free: number; total: number };
  streamCreate(flags?: number): number;
  streamDestroy(s: number): void;
  streamSynchronize(s: number): void;
  streamQuery(s: number): boolean;
  streamWaitEvent(s: number, e: number): void;
  eventCreate(flags?: number): number;
  eventDestroy(e: number): void;
  eventRecord(e: number, s: number): void;
  eventSynchronize(e: number): void;
  eventElapsed(start: number, end: number): number;
  memAlloc(bytes: number): number;
  memAllocOrNull(bytes: number): number | null;
  memFree(ptr: number): void;
  memAllocHost(bytes: number): ArrayBuffer;
  /** The CUDA IPC handle (hex) of the allocation holding ptr, its base and size (absent from addons built before it). */
  ipcHandle?(ptr: number): { handle: string; base: number; size: number };
  memcpyHtoD(dst: number, src: ArrayBufferView, bytes: number, stream: number, sync: boolean): void;
  memcpyDtoH(dst: ArrayBufferView, src: number, bytes: number, stream: number, sync: boolean): void;
  memcpyDtoD(dst: number, src: number, bytes: number, stream: number): void;
  memset(dst: number, value: number, count: number, elementBytes: 1 | 2 | 4, stream: number): void;
  moduleLoadData(image: Uint8Array): number;
  moduleUnload(m: number): void;
  moduleGetFunction(m: number, name: string): number;
  funcSetAttribute(f: number, attr: number, value: number): void;
  funcGetAttribute(f: number, attr: number): number;
  occupancy(f: number, blockSize: number, dynamicSharedBytes: number): { activeBlocksPerSM: number; suggestedBlockSize: number; minGridSize: number };
  setLaunchBuffer(buf: ArrayBuffer): { maxArgs: number; argBase: number };
  launch(): void;
  /**
   * cuTensorMapEncodeTiled: the 128-byte CUtensorMap (rank = dims.length; strides of dims 1 .. rank - 1 in bytes; enum
   * values as src/tensor-map.ts names them). Throws when the driver lacks the entry (before CUDA 12.0). Absent from
   * addons built before it.
   */
  tensorMapEncodeTiled?(
    dataType: number, address: number, dims: number[], stridesBytes: number[], box: number[], elementStrides: number[],
    interleave: number, swizzle: number, l2Promotion: number, oobFill: number,
  ): ArrayBuffer;
  streamBeginCapture(s: number, mode?: number): void;
  streamEndCapture(s: number): number;
  streamCaptureStatus(s: number): number;
  graphInstantiate(g: number): number;
  graphLaunch(exec: number, s: number): void;
  graphExecUpdate(exec: number, g: number): boolean;
  graphNodeCount(g: number): number;
  /** Edge counts by "type/from port" ("0/0" full completion, "1/1" and "1/2" programmatic); null without cuGraphGetEdges_v2. */
  graphEdgeKinds(g: number): Record<string, number> | null;
  graphDestroy(g: number): void;
  graphExecDestroy(exec: number): void;
  nvrtcVersion(): [number, number];
  nvrtcCompileSync(source: string, name: string, options: string[], headerNames?: string[], headerSources?: string[], wantPtx?: boolean): CompileOutput;
  nvrtcCompileAsync(source: string, name: string, options: string[], headerNames?: string[], headerSources?: string[], wantPtx?: boolean): Promise<CompileOutput>;
  ltVersion(): number;
  ltMatmul(params: Float64Array): void;
  ltPlanCount(): number;
  ltClearPlans(): void;
}

/** Where the addon is looked for, in order (exported for tests and error messages). */
export function addonCandidates(moduleDir: string = here(), env: Readonly<Record<string, string | undefined>> = process.env): string[] {
  const out: string[] = [];
  const pinned = setting('FASTKERNELS_CUDA_ADDON', env);
  if (pinned) out.push(resolve(pinned));
  out.push(join(moduleDir, '..', 'build', 'Release', ADDON_FILE));
  out.push(join(moduleDir, ADDON_FILE));
  return out;
}

function here(): string {
  return dirname(fileURLToPath(import.meta.url));
}

let cached: { addon?: NativeAddon; error?: string } | undefined;

/** The addon, or a message naming every place it was looked for. Never throws. */
export function tryLoadAddon(): { addon?: NativeAddon; error?: string } {
  if (cached) return cached;
  const req = createRequire(import.meta.url);
  const tried: string[] = [];
  for (const p of addonCandidates()) {
    if (!existsSync(p)) {
      tried.push(`${p} (absent)`);
      continue;
    }
    try {
      const addon = req(p) as NativeAddon;
      cached = { addon };
      return cached;
    } catch (e) {
      tried.push(`${p} (${(e as Error).message.split('\n')[0]})`);
    }
  }
  cached = {
    error: `the CUDA addon ${ADDON_FILE} was not found or failed to load (tried: ${tried.join('; ')}). ` +
      'Build it with `npm run build:native -w @fastkernels/backend-cuda`, or set FASTKERNELS_CUDA_ADDON=<path>.',
  };
  return cached;
}

export function loadAddon(): NativeAddon {
  const r = tryLoadAddon();
  if (!r.addon) throw new Error(r.error);
  return r.addon;
}
