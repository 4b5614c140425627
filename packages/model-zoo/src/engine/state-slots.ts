import type { Sequence } from './sequence.js';

/**
 * The state pool's allocator: one slot per running sequence (vLLM's mamba cache keeps one state block per request), from a
 * free list, lowest ids first. A sequence takes a slot when the scheduler admits it and gives it back when it leaves the
 * running set — finished, aborted or preempted (preemption recomputes: the prompt and the generated tokens are prefilled
 * again into a fresh slot, so no state has to be saved).
 */
export class StateSlotManager {
  private readonly free: number[];

  constructor(readonly numSlots: number) {
    if (!Number.isInteger(numSlots) || numSlots < 1) throw new RangeError(`StateSlotManager: numSlots must be a positive integer, got ${numSlots}`);
    this.free = Array.from({ length: numSlots }, (_, i) => numSlots - 1 - i);
  }

  get numFreeSlots(): number {
    return this.free.length;
  }

  get numUsedSlots(): number {
    return this.numSlots - this.free.length;
  }

  /** Give the sequence a slot (it must hold none). */
  allocate(seq: Sequence): void {
    if (seq.stateSlot >= 0) throw new Error(`sequence ${seq.seqId} already holds state slot ${seq.stateSlot}`);
    const s = this.free.pop();
    if (s === undefined) throw new Error(`StateSlotManager: no free state slot for sequence ${seq.seqId} (${this.numSlots} slots)`);
    seq.stateSlot = s;
  }

  /** Return the sequence's slot, if it holds one. */
  deallocate(seq: Sequence): void {
    if (seq.stateSlot < 0) return;
    this.free.push(seq.stateSlot);
    seq.stateSlot = -1;
  }
}
