/**
 * The tensor-parallel group (vLLM's get_tp_group()): this rank, the world size and the collectives. It lives in core
 * because model-zoo's parallel layers and engine read it while backend-nccl implements it (model-zoo must not import
 * backend-nccl: it depends on core only). World 1 is the identity (no communicator needed), so every
 * layer runs on any backend, CPU included. Layers take the current group when they are constructed (as Module takes
 * the current execution context).
 */
import type { Backend } from '../backend.js';
import { normalizeDim } from '../shape.js';
import { Tensor } from '../tensor.js';

export type ReduceOp = 'sum' | 'prod' | 'max' | 'min' | 'avg';

/** The collectives the tensor-parallel layers need (backend-nccl's NcclCommunicator implements it; tests may fake it). */
export interface Collectives {
  readonly rank: number;
  readonly world: number;
  /** In-place reduction of `t` over all ranks. */
  allReduce(t: Tensor, options?: { op?: ReduceOp }): Tensor;
  /** `output` [world * n] <- the `input` [n] of every rank, in rank order (both contiguous). */
  allGatherInto(output: Tensor, input: Tensor): void;
  /**
   * Wait for the queued collectives with a deadline, turning a dead or hung peer into an error instead of a hang
   * (NCCL's synchronize). Collectives that complete when called (host fakes) leave it out.
   */
  synchronize?(options?: { timeoutMs?: number }): void;
}

export class TensorParallelGroup {
  constructor(
    readonly rank: number,
    readonly world: number,
    readonly comm: Collectives | null = null,
  ) {
    if (!Number.isInteger(world) || world < 1 || !Number.isInteger(rank) || rank < 0 || rank >= world) throw new RangeError(`tensor-parallel group: rank ${rank} of world ${world}`);
    if (comm && (comm.rank !== rank || comm.world !== world)) throw new RangeError(`tensor-parallel group: the communicator is rank ${comm.rank} of ${comm.world}, not ${rank} of ${world}`);
  }

  static single(): TensorParallelGroup {
    return SINGLE;
  }

  /** The group of a launched rank (backend-nccl's initDistributed() result). */
  static of(d: { rank: number; world: number; comm: Collectives }): TensorParallelGroup {
    return new TensorParallelGroup(d.rank, d.world, d.comm);
  }

  private collectives(what: string): Collectives {
    if (!this.comm) throw new Error(`${what} across ${this.world} ranks needs a communicator: build the group from initDistributed()`);
    return this.comm;
  }

  /** Sum `t` over the group in place (contiguous tensors; others go through a contiguous copy). Returns `t`. */
  allReduce_(t: Tensor): Tensor {
    if (this.world === 1) return t;
    const comm = this.collectives('all-reduce');
    if (t.isContiguous()) return comm.allReduce(t);
    const c = t.contiguous();
    comm.allReduce(c);
    t.copy_(c);
    c.dispose();
    return t;
  }

  /**
   * Concatenate every rank's `t` along `dim` in rank order (vLLM's tensor_model_parallel_all_gather). World 1
   * returns `t` itself; otherwise a new contiguous tensor.
   */
  allGather(t: Tensor, dim = -1): Tensor {
    if (this.world === 1) return t;
    const comm = this.collectives('all-gather');
    const d = normalizeDim(dim, t.rank);
    const src = t.contiguous();
    const buf = Tensor.empty(t.backend, [this.world, ...t.shape], t.dtype, { device: t.device });
    comm.allGatherInto(buf, src);
    src.dispose();
    if (d === 0) {
      const out = buf.view([this.world * t.shape[0]!, ...t.shape.slice(1)]);
      buf.dispose();
      return out;
    }
    // buf [W, d0, .., dk, ..] -> [d0, .., W, dk, ..] -> [d0, .., W * dk, ..]
    const order = [...Array(t.rank + 1).keys()].slice(1);
    order.splice(d, 0, 0);
    const moved = buf.permute(order);
    const shape = [...t.shape];
    shape[d] = shape[d]! * this.world;
    const out = moved.reshape(shape);
    moved.dispose();
    buf.dispose();
    return out;
  }

  /** This rank's equal chunk of `t` along `dim` (a view; vLLM's split_tensor_along_last_dim()[rank]). */
  split(t: Tensor, dim = -1): Tensor {
    const d = normalizeDim(dim, t.rank);
    const n = t.shape[d]!;
    if (n % this.world !== 0) throw new RangeError(`cannot split dim ${d} of size ${n} over ${this.world} ranks`);
    const part = n / this.world;
    return t.narrow(d, this.rank * part, part);
  }

  /**
   * Combine small host integers over the group, element by element (`max`, `min` or `sum`), so every rank reads the
   * same values and takes the same decision: the engine's KV block count, whether a decode-graph capture worked on
   * every rank, whether a run passed its deadline, a run's outcome. The values travel as an i32 tensor on `on`'s
   * backend and device (NCCL moves device memory); the call waits for the result (synchronize first, so a dead peer is
   * the communicator's error, not a hang). Every rank must call it at the same point, like any collective. World 1
   * returns the values. Values must be int32.
   */
  agree(values: readonly number[], op: 'max' | 'min' | 'sum', on: { readonly backend: Backend; readonly device: number }): number[] {
    for (const v of values) if (!Number.isInteger(v) || v < -(2 ** 31) || v >= 2 ** 31) throw new RangeError(`agree: ${v} is not an int32`);
    if (this.world === 1 || values.length === 0) return [...values];
    const comm = this.collectives('agree');
    const t = Tensor.fromArray(on.backend, values, [values.length], 'i32', { device: on.device });
    try {
      comm.allReduce(t, { op });
      comm.synchronize?.();
      return [...t.toFloat64Array()];
    } finally {
      t.dispose();
    }
  }

  /**
   * Wait for this rank's queued collectives (a no-op at world 1 and for host collectives). Call it before reading a
   * result on the host, so a peer that died ends in the communicator's error within its deadline, not in a hang.
   */
  synchronize(): void {
    if (this.world > 1) this.comm?.synchronize?.();
  }
}

const SINGLE = new TensorParallelGroup(0, 1, null);
const stack: TensorParallelGroup[] = [];
let global: TensorParallelGroup = SINGLE;

/** The group layers built now will use: the innermost withTensorParallelGroup, else the process-wide one. */
export function currentTensorParallelGroup(): TensorParallelGroup {
  return stack[stack.length - 1] ?? global;
}

/** Set the process-wide group (a launched rank does this once after initDistributed). */
export function setTensorParallelGroup(g: TensorParallelGroup): void {
  global = g;
}

/** Build modules with `g` as the current group. */
export function withTensorParallelGroup<T>(g: TensorParallelGroup, fn: () => T): T {
  stack.push(g);
  try {
    return fn();
  } finally {
    stack.pop();
  }
}

/** vLLM's divide(): exact integer division or a clear error. */
export function divide(numerator: number, denominator: number, what = 'size'): number {
  if (numerator % denominator !== 0) throw new RangeError(`${what} ${numerator} is not divisible by the tensor-parallel size ${denominator}`);
  return numerator / denominator;
}
