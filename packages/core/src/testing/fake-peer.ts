import { Tensor } from '../tensor.js';
import type { Collectives, ReduceOp } from '../tensor-parallel/group.js';

/**
 * Rank 0 of a world of 2 whose (imaginary) peer contributes fixed values to every reduction, on host tensors: tests of
 * what ranks agree on (bench groups, e2e runs) give it the peer's side of each all-reduce. All-gathers are not modelled.
 */
export class FakePeer implements Collectives {
  readonly rank = 0;
  readonly world = 2;
  constructor(private readonly peer: readonly number[]) {}
  allReduce(t: Tensor, options: { op?: ReduceOp } = {}): Tensor {
    const v = t.toFloat64Array();
    const f = options.op === 'max' ? Math.max : options.op === 'min' ? Math.min : (a: number, b: number) => a + b;
    t.copy_(Tensor.fromArray(t.backend, [...v].map((x, i) => f(x, this.peer[i]!)), t.shape, t.dtype));
    return t;
  }
  allGatherInto(): void {
    throw new Error('FakePeer models all-reduces only; use HostCollectives (backend-nccl) for a real group of threads');
  }
}
