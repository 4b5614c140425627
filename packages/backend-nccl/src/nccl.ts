/**
 * NCCL through the addon: library probing, unique ids and communicators with bounded waits.
 *
 * NcclCommunicator.init creates a non-blocking communicator (ncclConfig_t.blocking = 0, NCCL >= 2.14) unless asked
 * for a blocking one. Non-blocking, every call that answers ncclInProgress is followed by a poll of
 * ncclCommGetAsyncError with a deadline, and a deadline that passes aborts the communicator (ncclCommAbort) and
 * throws NcclTimeoutError, so neither init nor a first connecting collective can hang.
 * initDistributed (the ranks of `fastkernels launch`) asks for a blocking one, the fast path (see there).
 * Either way synchronize() polls cuStreamQuery and ncclCommGetAsyncError together with the deadline, so a peer
 * that dies mid-collective ends in a clear error, not a hang.
 */
import { CudaRuntime, ptrOf } from '@fastkernels/backend-cuda';
import { Tensor, setting, type Collectives, type DType, type ReduceOp } from '@fastkernels/core';
import { formatNcclNotFound, ncclLibraryCandidates } from './discovery.js';
import { NcclError, NcclTimeoutError, makeNcclError } from './errors.js';
import { tryLoadNcclAddon, type NcclAddon, type WaitResult } from './native.js';

export const NCCL_UNIQUE_ID_BYTES = 128;
const IN_PROGRESS = 7;

/** ncclDataType_t per dtype (i16 has none; bool travels as u8 and cannot be reduced). */
export const NCCL_DTYPE: Readonly<Partial<Record<DType, number>>> = {
  i8: 0, u8: 1, bool: 1, i32: 2, i64: 4, f16: 6, f32: 7, f64: 8, bf16: 9, fp8e4m3: 10, fp8e5m2: 11,
};

export type { Collectives, ReduceOp };
export const NCCL_REDUCE_OP: Readonly<Record<ReduceOp, number>> = { sum: 0, prod: 1, max: 2, min: 3, avg: 4 };

/** NCCL's version code as "2.27.3" (codes below 2.9 use the old X*1000 + Y*100 + Z form). */
export function formatNcclVersion(code: number): string {
  if (code < 10000) return `${Math.floor(code / 1000)}.${Math.floor((code % 1000) / 100)}.${code % 100}`;
  return `${Math.floor(code / 10000)}.${Math.floor((code % 10000) / 100)}.${code % 100}`;
}

/** Default deadline for waits (init, collectives in progress, synchronize): FASTKERNELS_NCCL_TIMEOUT_MS or 300 s. */
export function defaultTimeoutMs(env: Readonly<Record<string, string | undefined>> = process.env): number {
  return setting('FASTKERNELS_NCCL_TIMEOUT_MS', env);
}

export interface NcclProbe {
  readonly available: boolean;
  readonly reason?: string;
  /** The libnccl that loaded, its version ("2.27.3") and whether non-blocking communicators are supported. */
  readonly library?: string;
  readonly version?: string;
  readonly nonBlocking?: boolean;
  /** libcuda as loaded by backend-cuda, when the driver is usable. */
  readonly libcuda?: string;
}

let probed: NcclProbe | undefined;
let addonRef: NcclAddon | undefined;

/**
 * Whether NCCL can be used here: the addon loads, libnccl.so.2 is found, and the CUDA driver works (with a
 * device). Never throws; cached. The reason names every place libnccl was looked for, or why CUDA is unusable.
 */
export function probeNccl(): NcclProbe {
  return (probed ??= probeUncached());
}

/** Forget the cached probe (tests). */
export function resetNcclProbe(): void {
  probed = undefined;
}

function probeUncached(): NcclProbe {
  const { addon, error } = tryLoadNcclAddon();
  if (!addon) return { available: false, reason: error };
  addon.setErrorFactory(makeNcclError);
  const c = ncclLibraryCandidates();
  const r = addon.loadLibrary('nccl', c.candidates);
  if (!r.ok) return { available: false, reason: formatNcclNotFound(r.tried, c.searchedDirs) };
  let version: string;
  try {
    version = formatNcclVersion(addon.version());
  } catch (e) {
    return { available: false, reason: `${r.path} loaded but ncclGetVersion failed: ${(e as Error).message}`, library: r.path };
  }
  const nonBlocking = addon.loaded().nonBlocking;
  const cuda = CudaRuntime.probe();
  if (!cuda.available) return { available: false, reason: `NCCL ${version} (${r.path}) found, but CUDA is not usable: ${cuda.reason}`, library: r.path, version, nonBlocking };
  const d = addon.loadLibrary('cuda', [cuda.libcuda!, 'libcuda.so.1']);
  if (!d.ok) return { available: false, reason: `libcuda could not be opened by the NCCL addon: ${d.tried.map((t) => `${t.path} (${t.error})`).join('; ')}`, library: r.path, version, nonBlocking };
  addonRef = addon;
  return { available: true, library: r.path, version, nonBlocking, libcuda: d.path };
}

/** The loaded addon; throws with the probe's reason when NCCL is unusable. */
export function ncclAddon(): NcclAddon {
  const p = probeNccl();
  if (!p.available || !addonRef) throw new Error(`NCCL is not available: ${p.reason}`);
  return addonRef;
}

/** A new NCCL unique id (128 bytes). The process that creates it hosts NCCL's bootstrap root: make it rank 0. */
export function ncclUniqueId(): Uint8Array {
  return new Uint8Array(ncclAddon().getUniqueId());
}

export interface CommInitOptions {
  readonly rank: number;
  readonly world: number;
  /** The 128-byte id every rank received from the rendezvous. */
  readonly id: Uint8Array;
  /** Deadline for init and for every later wait (default FASTKERNELS_NCCL_TIMEOUT_MS or 300 s). */
  readonly timeoutMs?: number;
  /** Use a blocking communicator: calls return once enqueued (no helper thread); init and a first connecting collective are not bounded. Default false. */
  readonly blocking?: boolean;
}

/**
 * One NCCL communicator on the current CUDA device, driven on the runtime's current stream (or an explicit one).
 * Tensors must be contiguous CUDA tensors. Collectives are asynchronous on the stream; synchronize() waits
 * with a deadline.
 */
export class NcclCommunicator implements Collectives, Disposable {
  private aborted: string | undefined;
  private destroyed = false;

  private constructor(
    private readonly addon: NcclAddon,
    readonly handle: number,
    readonly rank: number,
    readonly world: number,
    readonly timeoutMs: number,
  ) {}

  /**
   * Create the communicator: every rank calls this with the same id. Resolves when all ranks have joined; a
   * rank that never joins ends in NcclTimeoutError after `timeoutMs` (the communicator is aborted).
   */
  static async init(opts: CommInitOptions): Promise<NcclCommunicator> {
    const addon = ncclAddon();
    const { rank, world, id } = opts;
    const timeoutMs = opts.timeoutMs ?? defaultTimeoutMs();
    if (!Number.isInteger(world) || world < 1 || !Number.isInteger(rank) || rank < 0 || rank >= world) throw new RangeError(`NCCL init: rank ${rank} of world ${world}`);
    if (!(id instanceof Uint8Array) || id.byteLength !== NCCL_UNIQUE_ID_BYTES) throw new TypeError(`NCCL init: the unique id must be ${NCCL_UNIQUE_ID_BYTES} bytes`);
    CudaRuntime.get(); // a current context on this thread (NCCL uses the current device)
    if (!addon.hasCurrentContext()) throw new Error('NCCL init: no CUDA context is current on this thread');
    const r = addon.commInitRank(world, rank, id, opts.blocking ?? false);
    const comm = new NcclCommunicator(addon, r.comm, rank, world, timeoutMs);
    if (r.status === IN_PROGRESS) {
      const deadline = Date.now() + timeoutMs;
      let delay = 1;
      for (;;) {
        const e = addon.commGetAsyncError(r.comm);
        if (e === 0) break;
        if (e !== IN_PROGRESS) comm.fail('ncclCommInitRank', e);
        if (Date.now() >= deadline) {
          comm.abort('init timed out');
          throw new NcclTimeoutError(`NCCL communicator init (ncclCommInitRank)`, timeoutMs, rank, world);
        }
        await new Promise((res) => setTimeout(res, delay));
        delay = Math.min(20, delay * 2);
      }
    }
    return comm;
  }

  /** The CUDA device NCCL bound this communicator to. */
  get device(): number {
    return this.addon.commInfo(this.handle).device;
  }

  get isAborted(): boolean {
    return this.aborted !== undefined;
  }

  // ------------------------------------------------------------------------------------------ raw pointers

  allReducePtr(send: number, recv: number, count: number, dtype: DType, op: ReduceOp = 'sum', stream = currentStream()): void {
    this.live();
    this.settle('ncclAllReduce', this.addon.allReduce(this.handle, send, recv, count, ncclType(dtype, true), NCCL_REDUCE_OP[op], stream));
  }

  broadcastPtr(send: number, recv: number, count: number, dtype: DType, root: number, stream = currentStream()): void {
    this.live();
    this.checkRank(root, 'broadcast root');
    this.settle('ncclBroadcast', this.addon.broadcast(this.handle, send, recv, count, ncclType(dtype, false), root, stream));
  }

  reduceScatterPtr(send: number, recv: number, recvCount: number, dtype: DType, op: ReduceOp = 'sum', stream = currentStream()): void {
    this.live();
    this.settle('ncclReduceScatter', this.addon.reduceScatter(this.handle, send, recv, recvCount, ncclType(dtype, true), NCCL_REDUCE_OP[op], stream));
  }

  allGatherPtr(send: number, recv: number, sendCount: number, dtype: DType, stream = currentStream()): void {
    this.live();
    this.settle('ncclAllGather', this.addon.allGather(this.handle, send, recv, sendCount, ncclType(dtype, false), stream));
  }

  allToAllPtr(send: number, recv: number, countPerPeer: number, dtype: DType, elementBytes: number, stream = currentStream()): void {
    this.live();
    this.settle('ncclGroupEnd (all-to-all)', this.addon.allToAll(this.handle, send, recv, countPerPeer, ncclType(dtype, false), elementBytes, this.world, stream));
  }

  // ------------------------------------------------------------------------------------------ tensors

  /** In-place all-reduce of a contiguous CUDA tensor (torch.distributed.all_reduce). Returns `t`. */
  allReduce(t: Tensor, options: { op?: ReduceOp; out?: Tensor } = {}): Tensor {
    contiguous(t, 'allReduce');
    const out = options.out ?? t;
    sameSize(out, t, t.numel, 'allReduce out');
    this.allReducePtr(ptrOf(t), ptrOf(out), t.numel, t.dtype, options.op ?? 'sum');
    return out;
  }

  /** In-place broadcast of `t` from `root`. */
  broadcast(t: Tensor, root = 0): Tensor {
    contiguous(t, 'broadcast');
    this.broadcastPtr(ptrOf(t), ptrOf(t), t.numel, t.dtype, root);
    return t;
  }

  /** `output` [world * n] <- every rank's `input` [n], in rank order. */
  allGatherInto(output: Tensor, input: Tensor): void {
    contiguous(input, 'allGather input');
    contiguous(output, 'allGather output');
    sameSize(output, input, input.numel * this.world, 'allGather output');
    this.allGatherPtr(ptrOf(input), ptrOf(output), input.numel, input.dtype);
  }

  /** All-gather along dim 0: input [n, ...] -> [world * n, ...]. */
  allGather(input: Tensor): Tensor {
    const out = Tensor.empty(input.backend, [input.shape[0]! * this.world, ...input.shape.slice(1)], input.dtype, { device: input.device });
    this.allGatherInto(out, input);
    return out;
  }

  /** Reduce-scatter along dim 0: input [world * n, ...] -> this rank's reduced block [n, ...]. */
  reduceScatter(input: Tensor, options: { op?: ReduceOp; out?: Tensor } = {}): Tensor {
    contiguous(input, 'reduceScatter input');
    if (input.rank === 0 || input.shape[0]! % this.world !== 0) throw new RangeError(`reduceScatter: dim 0 (${input.shape[0]}) is not a multiple of the world size ${this.world}`);
    const out = options.out ?? Tensor.empty(input.backend, [input.shape[0]! / this.world, ...input.shape.slice(1)], input.dtype, { device: input.device });
    contiguous(out, 'reduceScatter out');
    sameSize(out, input, input.numel / this.world, 'reduceScatter out');
    this.reduceScatterPtr(ptrOf(input), ptrOf(out), out.numel, input.dtype, options.op ?? 'sum');
    return out;
  }

  /** All-to-all along dim 0: block p of `input` goes to rank p; block p of the result came from rank p. */
  allToAll(input: Tensor, options: { out?: Tensor } = {}): Tensor {
    contiguous(input, 'allToAll input');
    if (input.rank === 0 || input.shape[0]! % this.world !== 0) throw new RangeError(`allToAll: dim 0 (${input.shape[0]}) is not a multiple of the world size ${this.world}`);
    const out = options.out ?? Tensor.empty(input.backend, input.shape, input.dtype, { device: input.device });
    contiguous(out, 'allToAll out');
    sameSize(out, input, input.numel, 'allToAll out');
    this.allToAllPtr(ptrOf(input), ptrOf(out), input.numel / this.world, input.dtype, input.itemsize);
    return out;
  }

  // ------------------------------------------------------------------------------------------ waits, errors, teardown

  /**
   * Wait for the work queued on `stream` (default: the current stream), polling ncclCommGetAsyncError as well.
   * A peer failure ends in NcclError, a deadline in NcclTimeoutError; both abort the communicator.
   */
  synchronize(options: { timeoutMs?: number; stream?: number } = {}): void {
    this.live();
    const timeoutMs = options.timeoutMs ?? this.timeoutMs;
    const r = this.addon.waitStream(this.handle, options.stream ?? currentStream(), timeoutMs, 50);
    this.handleWait('synchronize', r, timeoutMs);
  }

  /** Abort the communicator (ncclCommAbort): in-flight NCCL kernels stop; the communicator cannot be used again. */
  abort(reason = 'aborted'): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.aborted ??= reason;
    this.addon.commAbort(this.handle);
  }

  /** Flush and free the communicator (ncclCommFinalize, polled with the deadline, then ncclCommDestroy). */
  destroy(options: { timeoutMs?: number } = {}): void {
    if (this.destroyed) return;
    const timeoutMs = options.timeoutMs ?? this.timeoutMs;
    const st = this.addon.commFinalize(this.handle);
    if (st === IN_PROGRESS) {
      const r = this.addon.waitComm(this.handle, timeoutMs, 200);
      if (r.status !== 'done') {
        this.abort(`finalize ${r.status}`);
        if (r.status === 'timeout') throw new NcclTimeoutError('ncclCommFinalize', timeoutMs, this.rank, this.world);
        return;
      }
    }
    this.destroyed = true;
    this.addon.commDestroy(this.handle);
  }

  [Symbol.dispose](): void {
    if (this.aborted) return;
    try {
      this.destroy();
    } catch {
      this.abort('dispose');
    }
  }

  private settle(func: string, status: number): void {
    if (status !== IN_PROGRESS) return;
    const r = this.addon.waitComm(this.handle, this.timeoutMs, 50);
    this.handleWait(func, r, this.timeoutMs);
  }

  private handleWait(func: string, r: WaitResult, timeoutMs: number): void {
    if (r.status === 'done') return;
    if (r.status === 'timeout') {
      this.abort(`${func} timed out`);
      throw new NcclTimeoutError(func, timeoutMs, this.rank, this.world);
    }
    if (r.status === 'nccl') this.fail(func, r.code);
    this.abort(`${func}: ${r.name}`);
    throw new Error(`${func} on rank ${this.rank} of ${this.world}: CUDA error ${r.name ?? r.code}; the communicator was aborted`);
  }

  private fail(func: string, code: number): never {
    const last = this.addon.lastError(this.handle);
    const s = this.addon.errorString(code);
    this.abort(`${func}: ${s.name}`);
    throw new NcclError(func, code, s.name, s.description, last, `rank ${this.rank} of ${this.world} (communicator aborted)`);
  }

  private live(): void {
    if (this.aborted) throw new Error(`NCCL communicator (rank ${this.rank} of ${this.world}) was aborted (${this.aborted}); create a new one`);
    if (this.destroyed) throw new Error(`NCCL communicator (rank ${this.rank} of ${this.world}) was destroyed`);
  }

  private checkRank(r: number, what: string): void {
    if (!Number.isInteger(r) || r < 0 || r >= this.world) throw new RangeError(`${what} ${r} is not a rank of a world of ${this.world}`);
  }
}

function currentStream(): number {
  return CudaRuntime.get().stream;
}

function ncclType(dtype: DType, reduce: boolean): number {
  const t = NCCL_DTYPE[dtype];
  if (t === undefined || (reduce && dtype === 'bool')) throw new TypeError(`NCCL has no ${reduce ? 'reduction' : 'transfer'} for dtype ${dtype}`);
  return t;
}

function contiguous(t: Tensor, what: string): void {
  if (!t.isContiguous()) throw new RangeError(`${what}: the tensor must be contiguous (call .contiguous() first)`);
}

function sameSize(out: Tensor, like: Tensor, numel: number, what: string): void {
  if (out.dtype !== like.dtype) throw new TypeError(`${what}: dtype ${out.dtype}, expected ${like.dtype}`);
  if (out.numel !== numel) throw new RangeError(`${what}: ${out.numel} elements, expected ${numel}`);
}

/** For tests: the errors' classes and the probe's shape without loading anything. */
export { NcclError, NcclTimeoutError };
