/**
 * Loads the prebuilt addon (fastkernels_nccl.node). Places, in order:
 *  1. $FASTKERNELS_NCCL_ADDON (a file path);
 *  2. <module dir>/../build/Release/fastkernels_nccl.node (the package layout: src/ or dist/ beside build/);
 *  3. <module dir>/fastkernels_nccl.node (the bundle layout: the .node next to the bundled .mjs);
 *  4. <module dir>/../fastkernels_nccl.node (bundled test chunks one folder below the bundle root);
 *  5. beside $FASTKERNELS_CUDA_ADDON (the GPU-host bundle ships both addons in one folder).
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setting } from '@fastkernels/core';

export const NCCL_ADDON_FILE = 'fastkernels_nccl.node';

export interface LoadResult {
  readonly ok: boolean;
  readonly path?: string;
  readonly tried: readonly { path: string; error: string }[];
}

export interface WaitResult {
  readonly status: 'done' | 'timeout' | 'nccl' | 'cuda';
  readonly code: number;
  readonly name?: string;
}

/** The addon's functions (native/addon.cc). Communicators, pointers and streams are plain numbers. */
export interface NcclAddon {
  readonly abiVersion: number;
  readonly uniqueIdBytes: number;
  loadLibrary(kind: 'nccl' | 'cuda', candidates: string[]): LoadResult;
  loaded(): { nccl: string | null; cuda: string | null; nonBlocking: boolean };
  setErrorFactory(f: (lib: string, fn: string, code: number, name: string, desc: string, lastError: string) => Error): void;
  version(): number;
  errorString(code: number): { name: string; description: string };
  hasCurrentContext(): boolean;
  getUniqueId(): Uint8Array;
  commInitRank(nranks: number, rank: number, id: Uint8Array, blocking?: boolean): { comm: number; status: number };
  commGetAsyncError(comm: number): number;
  lastError(comm?: number): string;
  commAbort(comm: number): number;
  commFinalize(comm: number): number;
  commDestroy(comm: number): number;
  commInfo(comm: number): { count: number; device: number; rank: number };
  allReduce(comm: number, send: number, recv: number, count: number, dtype: number, op: number, stream: number): number;
  broadcast(comm: number, send: number, recv: number, count: number, dtype: number, root: number, stream: number): number;
  reduceScatter(comm: number, send: number, recv: number, recvCount: number, dtype: number, op: number, stream: number): number;
  allGather(comm: number, send: number, recv: number, sendCount: number, dtype: number, stream: number): number;
  allToAll(comm: number, send: number, recv: number, countPerPeer: number, dtype: number, elementBytes: number, nranks: number, stream: number): number;
  send(comm: number, ptr: number, count: number, dtype: number, peer: number, stream: number): number;
  recv(comm: number, ptr: number, count: number, dtype: number, peer: number, stream: number): number;
  groupStart(): number;
  groupEnd(): number;
  waitStream(comm: number, stream: number, timeoutMs: number, pollUs?: number): WaitResult;
  waitComm(comm: number, timeoutMs: number, pollUs?: number): WaitResult;
}

/** Where the addon is looked for, in order (exported for tests and error messages). */
export function ncclAddonCandidates(moduleDir: string = here(), env: Readonly<Record<string, string | undefined>> = process.env): string[] {
  const out: string[] = [];
  const add = (p: string) => {
    if (!out.includes(p)) out.push(p);
  };
  const pinned = setting('FASTKERNELS_NCCL_ADDON', env);
  if (pinned) add(resolve(pinned));
  add(join(moduleDir, '..', 'build', 'Release', NCCL_ADDON_FILE));
  add(join(moduleDir, NCCL_ADDON_FILE));
  add(join(moduleDir, '..', NCCL_ADDON_FILE));
  const cudaAddon = setting('FASTKERNELS_CUDA_ADDON', env);
  if (cudaAddon) add(join(dirname(resolve(cudaAddon)), NCCL_ADDON_FILE));
  return out;
}

function here(): string {
  return dirname(fileURLToPath(import.meta.url));
}

let cached: { addon?: NcclAddon; error?: string } | undefined;

/** The addon, or a message naming every place it was looked for. Never throws. */
export function tryLoadNcclAddon(): { addon?: NcclAddon; error?: string } {
  if (cached) return cached;
  const req = createRequire(import.meta.url);
  const tried: string[] = [];
  for (const p of ncclAddonCandidates()) {
    if (!existsSync(p)) {
      tried.push(`${p} (absent)`);
      continue;
    }
    try {
      cached = { addon: req(p) as NcclAddon };
      return cached;
    } catch (e) {
      tried.push(`${p} (${(e as Error).message.split('\n')[0]})`);
    }
  }
  cached = {
    error:
      `the NCCL addon ${NCCL_ADDON_FILE} was not found or failed to load (tried: ${tried.join('; ')}). ` +
      'Build it with `npm run build:native -w @fastkernels/backend-nccl`, or set FASTKERNELS_NCCL_ADDON=<path>.',
  };
  return cached;
}
