import type { Timer } from '@fastkernels/core';

/** Wall-clock timer on the monotonic high-resolution clock (CPU work is synchronous, so no sync is needed). */
export class CpuTimer implements Timer {
  private t0: bigint | undefined;
  private t1: bigint | undefined;

  start(): void {
    this.t1 = undefined;
    this.t0 = process.hrtime.bigint();
  }

  stop(): void {
    if (this.t0 === undefined) throw new Error('timer stopped before it was started');
    this.t1 = process.hrtime.bigint();
  }

  elapsedMs(): number {
    if (this.t0 === undefined || this.t1 === undefined) throw new Error('elapsedMs() needs start() and stop() first');
    return Number(this.t1 - this.t0) / 1e6;
  }
}
