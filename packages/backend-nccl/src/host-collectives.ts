/**
 * Collectives for host tensors (the CPU backend) between the W threads of one process (worker_threads sharing one
 * SharedArrayBuffer): a gloo-like stand-in for NCCL, so a model's ranks run its real tensor-parallel code path
 * (sharded weights, all-reduces, the LM head's all-gather) where there is no GPU. Every call blocks until all ranks
 * have made it, as a collective does; a rank that never comes ends in an error after `timeoutMs` (NCCL's timeout),
 * not a hang. Values travel as float64 (exact for every dtype a host tensor holds) and every rank reduces in rank
 * order, so all ranks get bit-identical results, as NCCL's ring gives.
 *
 *   const shared = HostCollectives.shared(world, maxElements);      // in the parent, handed to every thread
 *   const comm = new HostCollectives(rank, world, shared);           // in each rank's thread
 *   setTensorParallelGroup(new TensorParallelGroup(rank, world, comm));
 */
import { Tensor, type Collectives, type ReduceOp } from '@fastkernels/core';

/** Control words: the barrier's arrival count and its generation. */
const COUNT = 0;
const GEN = 1;
const CONTROL_BYTES = 64;

export class HostCollectives implements Collectives {
  private readonly control: Int32Array;
  private readonly slots: Float64Array;
  readonly maxElements: number;

  /** The buffer the ranks share: room for `maxElements` values from each of `world` ranks. */
  static shared(world: number, maxElements: number): SharedArrayBuffer {
    return new SharedArrayBuffer(CONTROL_BYTES + world * maxElements * 8);
  }

  constructor(
    readonly rank: number,
    readonly world: number,
    shared: SharedArrayBuffer,
    readonly timeoutMs = 60_000,
  ) {
    if (!Number.isInteger(world) || world < 1 || !Number.isInteger(rank) || rank < 0 || rank >= world) throw new RangeError(`host collectives: rank ${rank} of world ${world}`);
    this.control = new Int32Array(shared, 0, CONTROL_BYTES / 4);
    this.maxElements = Math.floor((shared.byteLength - CONTROL_BYTES) / 8 / world);
    this.slots = new Float64Array(shared, CONTROL_BYTES, this.maxElements * world);
  }

  allReduce(t: Tensor, options: { op?: ReduceOp } = {}): Tensor {
    const op = options.op ?? 'sum';
    const n = this.post(t, 'allReduce');
    const out = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      let acc = this.slots[i]!;
      for (let r = 1; r < this.world; r++) acc = combine(op, acc, this.slots[r * this.maxElements + i]!);
      out[i] = op === 'avg' ? acc / this.world : acc;
    }
    this.barrier('allReduce'); // every rank has read before any rank writes its next message
    write(t, out);
    return t;
  }

  allGatherInto(output: Tensor, input: Tensor): void {
    if (output.numel !== input.numel * this.world) throw new RangeError(`allGather output: ${output.numel} elements, expected ${input.numel * this.world}`);
    if (!output.isContiguous()) throw new RangeError('allGather output: the tensor must be contiguous');
    const n = this.post(input, 'allGather');
    const out = new Float64Array(n * this.world);
    for (let r = 0; r < this.world; r++) out.set(this.slots.subarray(r * this.maxElements, r * this.maxElements + n), r * n);
    this.barrier('allGather');
    write(output, out);
  }

  /** Put this rank's values in its slot and wait for the others'. Returns the element count. */
  private post(t: Tensor, what: string): number {
    if (!t.isContiguous()) throw new RangeError(`${what}: the tensor must be contiguous (call .contiguous() first)`);
    const n = t.numel;
    if (n > this.maxElements) throw new RangeError(`${what}: ${n} elements do not fit the shared buffer (${this.maxElements} per rank): make it bigger`);
    this.slots.set(t.toFloat64Array(), this.rank * this.maxElements);
    this.barrier(what);
    return n;
  }

  /** A reusable barrier: the last rank to arrive resets the count and starts the next generation. */
  private barrier(what: string): void {
    const c = this.control;
    const gen = Atomics.load(c, GEN);
    if (Atomics.add(c, COUNT, 1) === this.world - 1) {
      Atomics.store(c, COUNT, 0);
      Atomics.add(c, GEN, 1);
      Atomics.notify(c, GEN);
      return;
    }
    const deadline = Date.now() + this.timeoutMs;
    while (Atomics.load(c, GEN) === gen) {
      const left = deadline - Date.now();
      if (left <= 0 || Atomics.wait(c, GEN, gen, left) === 'timed-out') {
        throw new Error(`${what} on rank ${this.rank} of ${this.world} did not complete within ${(this.timeoutMs / 1000).toFixed(1)} s: a peer rank stopped or hung`);
      }
    }
  }
}

function combine(op: ReduceOp, a: number, b: number): number {
  if (op === 'sum' || op === 'avg') return a + b;
  if (op === 'prod') return a * b;
  return op === 'max' ? Math.max(a, b) : Math.min(a, b);
}

/** Overwrite a contiguous tensor with values (rounded to its dtype). */
function write(t: Tensor, values: Float64Array): void {
  const src = Tensor.fromArray(t.backend, values, t.shape, t.dtype, { device: t.device });
  t.copy_(src);
  src.dispose();
}
