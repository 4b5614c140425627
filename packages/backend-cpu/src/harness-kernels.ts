import { compareStatsHost, type Backend, type CompareStats, type HarnessKernels, type Storage, type Tensor, type Tolerance } from '@fastkernels/core';

/**
 * The harness-kernel interface on the CPU: the same host loops the harness would run without it, behind the
 * interface a device backend implements, so the CPU exploit corpus exercises the harness's device path
 * (device snapshots of inputs, backend-side comparisons) in CI. Fills stay on the host Rng stream (false).
 */
export class CpuHarnessKernels implements HarnessKernels {
  constructor(private readonly backend: Backend) {}

  fillNormal(): boolean {
    return false;
  }

  compareStats(actual: Tensor, expected: Tensor, tol: Tolerance): CompareStats | undefined {
    if (actual.backend !== this.backend || expected.backend !== this.backend || actual.numel !== expected.numel) return undefined;
    return compareStatsHost(actual.toFloat64Array(), expected.toFloat64Array(), tol);
  }

  countDifferentBytes(a: Storage, aOff: number, b: Storage, bOff: number, byteLength: number): number {
    if (aOff < 0 || bOff < 0 || aOff + byteLength > a.byteLength || bOff + byteLength > b.byteLength) {
      throw new RangeError(`countDifferentBytes: [${aOff}, +${byteLength}) / [${bOff}, +${byteLength}) outside storages of ${a.byteLength} / ${b.byteLength} bytes`);
    }
    const x = a.hostBytes!;
    const y = b.hostBytes!;
    let diff = 0;
    for (let i = 0; i < byteLength; i++) if (x[aOff + i] !== y[bOff + i]) diff++;
    return diff;
  }
}
