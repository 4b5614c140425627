/**
 * How the PyTorch worker sees the harness's tensors: each storage is described once (a buffer id and how to open
 * it), then named by id. Two kinds:
 *  - CPU backend: a file per storage in the worker's /dev/shm folder that the worker maps MAP_SHARED
 *    (torch.frombuffer over an mmap: the worker makes no copy). Node has no mmap, so the host writes the storage's
 *    bytes into the file before a call and reads them back after it (that is what lets the harness see an input the
 *    candidate wrote to, as on the GPU); both copies are outside the worker's clock.
 *  - CUDA backend: a CUDA IPC handle of the storage's allocation, opened once by the worker and wrapped with
 *    __cuda_array_interface__ (torch.as_tensor): the very device memory, no copy anywhere. The handle comes from the
 *    backend's `ipcHandle(storage)` (the addon's cuMemGetAddressRange + cuIpcGetMemHandle). Before each call the
 *    harness's device is synchronised (its copies into the inputs run on its own stream, which the worker cannot
 *    wait on); the worker synchronises its device before it answers. Not yet run on a GPU.
 */
import { closeSync, ftruncateSync, openSync, readSync, unlinkSync, writeSync } from 'node:fs';
import type { Backend, Storage, Tensor } from '@fastkernels/core';

/** A buffer as the worker opens it. */
export type BufferDesc =
  | { readonly kind: 'shm'; readonly path: string; readonly bytes: number }
  | { readonly kind: 'cuda_ipc'; readonly handle: string; readonly bytes: number; readonly offset: number };

/** A tensor as the worker views it. */
export interface TensorDesc {
  readonly buf: number;
  /** Present the first time the worker sees this buffer. */
  readonly buffer?: BufferDesc;
  readonly dtype: string;
  readonly shape: readonly number[];
  readonly strides: readonly number[];
  /** In elements. */
  readonly offset: number;
  /** Bytes of the storage the view lies in. */
  readonly storage_bytes: number;
  /** Where the storage starts in the buffer (CUDA: in the IPC allocation). */
  readonly byte_offset?: number;
}

/** The device-memory export the CUDA path needs from a backend. */
export interface IpcExportable {
  /** The 64-byte CUDA IPC handle (hex) of the allocation holding `storage`, and where the storage starts in it. */
  ipcHandle(storage: Storage): { handle: string; allocationBytes: number; offset: number };
}

export interface BufferExporter {
  /** The tensor's description; the first time for a storage, with how to open it. */
  describe(t: Tensor): TensorDesc;
  /** Before a call: make the worker's view of these storages current (CPU: write the files). */
  push(ts: readonly (Tensor | null | undefined)[]): void;
  /** After a call: bring what the worker wrote back (CPU: read the files). */
  pull(ts: readonly (Tensor | null | undefined)[]): void;
  /** Buffer ids whose storages were released since the last call (the worker drops them). */
  takeReleased(): number[];
  dispose(): void;
}

/** The exporter for a backend, or a message saying why this backend cannot share buffers with the worker yet. */
export function exporterFor(backend: Backend, path: (name: string) => string): BufferExporter | string {
  if (backend.name === 'cpu') return new ShmExporter(path);
  if (typeof (backend as unknown as Partial<IpcExportable>).ipcHandle === 'function') return new CudaIpcExporter(backend as Backend & IpcExportable);
  return `the ${backend.name} backend cannot export its buffers to the PyTorch worker yet (it needs ipcHandle: cuIpcGetMemHandle in the CUDA addon; see the README, "PyTorch candidates")`;
}

/** CPU: a file per storage in /dev/shm. */
class ShmExporter implements BufferExporter {
  private nextId = 1;
  private readonly ids = new WeakMap<Storage, { id: number; fd: number; path: string }>();
  private readonly open = new Map<number, { fd: number; path: string }>();
  private released: number[] = [];
  private readonly finalizer = new FinalizationRegistry<number>((id) => this.drop(id));

  constructor(private readonly path: (name: string) => string) {}

  private entry(s: Storage): { id: number; fd: number; path: string; fresh: boolean } {
    const hit = this.ids.get(s);
    if (hit) return { ...hit, fresh: false };
    const id = this.nextId++;
    const path = this.path(`b${id}`);
    const fd = openSync(path, 'w+', 0o600);
    ftruncateSync(fd, s.byteLength);
    const e = { id, fd, path };
    this.ids.set(s, e);
    this.open.set(id, { fd, path });
    this.finalizer.register(s, id);
    return { ...e, fresh: true };
  }

  describe(t: Tensor): TensorDesc {
    const e = this.entry(t.storage);
    return {
      buf: e.id,
      ...(e.fresh ? { buffer: { kind: 'shm' as const, path: e.path, bytes: t.storage.byteLength } } : {}),
      dtype: t.dtype, shape: t.shape, strides: t.strides, offset: t.offset, storage_bytes: t.storage.byteLength,
    };
  }

  push(ts: readonly (Tensor | null | undefined)[]): void {
    for (const t of ts) {
      if (!t) continue;
      const bytes = hostBytesOf(t.storage);
      writeAllAt(this.entry(t.storage).fd, bytes);
    }
  }

  pull(ts: readonly (Tensor | null | undefined)[]): void {
    for (const t of ts) {
      if (!t) continue;
      const bytes = hostBytesOf(t.storage);
      const fd = this.entry(t.storage).fd;
      let got = 0;
      while (got < bytes.byteLength) {
        const k = readSync(fd, bytes, got, bytes.byteLength - got, got);
        if (k === 0) break;
        got += k;
      }
    }
  }

  private drop(id: number): void {
    const e = this.open.get(id);
    if (!e) return;
    this.open.delete(id);
    this.released.push(id);
    try {
      closeSync(e.fd);
      unlinkSync(e.path);
    } catch {
      // the folder is gone already
    }
  }

  takeReleased(): number[] {
    const r = this.released;
    this.released = [];
    return r;
  }

  dispose(): void {
    for (const id of [...this.open.keys()]) this.drop(id);
  }
}

function hostBytesOf(s: Storage): Uint8Array {
  if (!s.hostBytes) throw new Error('a CPU storage without host bytes');
  return s.hostBytes;
}

function writeAllAt(fd: number, bytes: Uint8Array): void {
  let off = 0;
  while (off < bytes.byteLength) off += writeSync(fd, bytes, off, bytes.byteLength - off, off);
}

/** CUDA: IPC handles of the allocations (the worker opens each allocation once). */
class CudaIpcExporter implements BufferExporter {
  private nextId = 1;
  private readonly ids = new WeakMap<Storage, number>();
  constructor(private readonly backend: Backend & IpcExportable) {}

  describe(t: Tensor): TensorDesc {
    let id = this.ids.get(t.storage);
    let buffer: BufferDesc | undefined;
    if (id === undefined) {
      id = this.nextId++;
      this.ids.set(t.storage, id);
      const h = this.backend.ipcHandle(t.storage);
      // the worker opens each allocation once (by handle); the buffer is the storage's bytes within it
      buffer = { kind: 'cuda_ipc', handle: h.handle, bytes: t.storage.byteLength, offset: h.offset };
    }
    return {
      buf: id,
      ...(buffer ? { buffer } : {}),
      dtype: t.dtype, shape: t.shape, strides: t.strides, offset: t.offset, storage_bytes: t.storage.byteLength,
    };
  }

  push(ts: readonly (Tensor | null | undefined)[]): void {
    // shared device memory: only the harness's pending writes (on its stream) must land before the worker reads
    const t = ts.find((x) => x);
    this.backend.synchronize(t?.device);
  }

  pull(): void {
    // the worker synchronised its device before answering
  }

  takeReleased(): number[] {
    return [];
  }

  dispose(): void {}
}
