/**
 * A head start for the device: before a profiled forward, queue enough large matmuls that the device is still busy
 * with them when the host has launched the whole forward. The forward's kernels then run back to back, so the events
 * around each module measure device time alone, not the gaps where an eager device waits for the next launch (what a
 * CUDA-graph replay never has). Useful only where launches are asynchronous and the forward does not wait on the
 * host on the way (the vision runner's forwardInPlace: no upload, no read-back); a synchronous copy inside the
 * forward drains the queue and the gaps come back, which `held` reports.
 */
import { Tensor, type Backend, type Timer } from '@fastkernels/core';

/** Matmul side: 8192^3 in bf16 is ~1.1 TFLOP, about 2 ms on an H100: a long lead in few launches. */
const SIDE = 8192;
/** At most this many matmuls queued (a launch queue that fills only blocks the host while the device is busy). */
const MOST = 1024;

export class HeadStart {
  private readonly x: Tensor;
  private readonly timer: Timer;
  private count = 1;
  /** Device ms of one queued head start (after calibrate). */
  leadMs = 0;

  constructor(
    private readonly backend: Backend,
    private readonly device: number,
    side = SIDE,
  ) {
    this.x = Tensor.zeros(backend, [side, side], 'bf16', { device });
    this.timer = backend.createTimer(device);
  }

  /** Size the head start to about `targetMs` of device time (one matmul timed after a warm-up). */
  calibrate(targetMs: number): void {
    this.count = 1;
    this.queue();
    this.backend.synchronize(this.device);
    const one = this.timeQueue();
    this.count = Math.max(1, Math.min(MOST, Math.ceil(targetMs / Math.max(one, 1e-3))));
    this.leadMs = this.timeQueue();
  }

  /**
   * Queue the head start, then `launch` (the forward, launched behind it). Returns whether the device was still busy
   * with the head start when `launch` returned on the host (no launch gap could open), and the head start's device ms.
   */
  run(launch: () => void): { held: boolean; leadMs: number } {
    const t0 = performance.now();
    this.timer.start();
    this.queue();
    this.timer.stop();
    launch();
    const hostMs = performance.now() - t0;
    this.backend.synchronize(this.device);
    const leadMs = this.timer.elapsedMs();
    return { held: leadMs > hostMs, leadMs };
  }

  dispose(): void {
    this.x.dispose();
  }

  private queue(): void {
    for (let i = 0; i < this.count; i++) this.backend.ops.matmul(this.x, this.x).dispose();
  }

  private timeQueue(): number {
    this.backend.synchronize(this.device);
    this.timer.start();
    this.queue();
    this.timer.stop();
    this.backend.synchronize(this.device);
    return this.timer.elapsedMs();
  }
}
