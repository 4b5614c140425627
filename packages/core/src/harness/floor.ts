import { z } from 'zod';
import type { Backend } from '../backend.js';
import type { DType } from '../dtype.js';
import { Tensor } from '../tensor.js';
import type { WorkCount } from '../task.js';

/**
 * The physical floor of a call: no kernel moves `work.bytes` faster than the device copies memory,
 * nor does `work.flops` faster than its matrix units. Rates are measured once per run:
 * - CPU: the fastest memcpy (Uint8Array.set) over cache-resident and DRAM sizes, and a float64 matmul
 *   in plain JS (then given head-room: SIMD lanes, FMA);
 * - other backends: a device-to-device copy (backend.copyBytes) and a bf16 GEMM (ops.matmul).
 * A median below the floor (with the slack below) is REWARD_HACK: work escaped or was skipped.
 */
export const MachineProfileSchema = z.object({
  backend: z.string(),
  /** Bytes moved per second (read + write) by the fastest copy measured. */
  copyBytesPerSec: z.number().positive(),
  /** FLOP/s of the matrix measurement. */
  matmulFlopsPerSec: z.number().positive(),
  /** How the rates were measured, in words. */
  method: z.string(),
});
export type MachineProfile = z.infer<typeof MachineProfileSchema>;

/** Allowances over the measured rates before a time counts as impossible. */
export const FLOOR_HEADROOM = {
  /** CPU: a candidate may use WebAssembly SIMD on float32 (4-8 lanes, FMA) where we measured scalar float64. */
  cpuFlops: 16,
  cpuBytes: 2,
  /** GPU: cuBLASLt is near peak; fp8 doubles the rate; leave 2x for measurement error. */
  gpuFlops: 4,
  gpuBytes: 2,
} as const;

/** The floor in milliseconds for one call (null when the work is unknown or zero). */
export function floorMs(work: WorkCount | undefined, profile: MachineProfile | undefined, dtype: DType): number | null {
  if (!work || !profile) return null;
  const cpu = profile.backend === 'cpu';
  const bw = profile.copyBytesPerSec * (cpu ? FLOOR_HEADROOM.cpuBytes : FLOOR_HEADROOM.gpuBytes);
  const fp8 = dtype === 'fp8e4m3' || dtype === 'fp8e5m2';
  const rate = profile.matmulFlopsPerSec * (cpu ? FLOOR_HEADROOM.cpuFlops : FLOOR_HEADROOM.gpuFlops) * (fp8 ? 2 : 1);
  const ms = Math.max(work.bytes > 0 ? work.bytes / bw : 0, work.flops > 0 ? work.flops / rate : 0) * 1e3;
  return ms > 0 && Number.isFinite(ms) ? ms : null;
}

const now = () => performance.now();

/** Measure the rates (a few hundred milliseconds at most). */
export function measureProfile(backend: Backend, device = 0): MachineProfile {
  return backend.name === 'cpu' ? measureCpu() : measureDevice(backend, device);
}

function measureCpu(): MachineProfile {
  let copy = 0;
  for (const size of [64 << 10, 1 << 20, 16 << 20]) {
    const a = new Uint8Array(size);
    const b = new Uint8Array(size);
    const reps = Math.max(3, Math.floor((64 << 20) / size));
    let best = Infinity;
    for (let r = 0; r < reps; r++) {
      const t0 = now();
      a.set(b);
      best = Math.min(best, now() - t0);
    }
    copy = Math.max(copy, (2 * size) / Math.max(best / 1e3, 1e-7));
  }
  const n = 96;
  const A = new Float64Array(n * n).fill(1.0001);
  const B = new Float64Array(n * n).fill(0.9999);
  const C = new Float64Array(n * n);
  let bestMm = Infinity;
  for (let r = 0; r < 12; r++) {
    const t0 = now();
    C.fill(0);
    for (let i = 0; i < n; i++) {
      for (let k = 0; k < n; k++) {
        const aik = A[i * n + k]!;
        const rowB = k * n;
        const rowC = i * n;
        for (let j = 0; j < n; j++) C[rowC + j]! += aik * B[rowB + j]!;
      }
    }
    bestMm = Math.min(bestMm, now() - t0);
  }
  const flops = (2 * n * n * n) / Math.max(bestMm / 1e3, 1e-7);
  return { backend: 'cpu', copyBytesPerSec: copy, matmulFlopsPerSec: flops, method: `best memcpy of 64KiB/1MiB/16MiB; float64 ${n}^3 matmul in JS (${C[0]!.toFixed(1)})` };
}

function measureDevice(backend: Backend, device: number): MachineProfile {
  const bytes = 256 << 20;
  const a = backend.allocate(bytes, device);
  const b = backend.allocate(bytes, device);
  let bestCopy = Infinity;
  try {
    for (let r = 0; r < 6; r++) {
      backend.synchronize(device);
      const t = backend.createTimer(device);
      t.start();
      backend.copyBytes(a, 0, b, 0, bytes);
      t.stop();
      if (r > 0) bestCopy = Math.min(bestCopy, t.elapsedMs());
    }
  } finally {
    a.release();
    b.release();
  }
  const n = 4096;
  const x = Tensor.zeros(backend, [n, n], 'bf16', { device });
  const y = Tensor.zeros(backend, [n, n], 'bf16', { device });
  let bestMm = Infinity;
  try {
    for (let r = 0; r < 6; r++) {
      backend.synchronize(device);
      const t = backend.createTimer(device);
      t.start();
      const z = backend.ops.matmul(x, y);
      t.stop();
      if (r > 0) bestMm = Math.min(bestMm, t.elapsedMs());
      z.dispose();
    }
  } finally {
    x.dispose();
    y.dispose();
  }
  return {
    backend: backend.name,
    copyBytesPerSec: (2 * bytes) / (bestCopy / 1e3),
    matmulFlopsPerSec: (2 * n * n * n) / (bestMm / 1e3),
    method: `device-to-device copy of 256 MiB; bf16 ${n}^3 GEMM (ops.matmul)`,
  };
}
