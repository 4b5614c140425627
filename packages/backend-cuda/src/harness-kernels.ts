/**
 * The bench harness's device-side helpers on CUDA (kernels/harness.cu): seeded normal fills, comparison
 * statistics and byte equality, so production-size cases never round-trip through the host.
 */
import type { CompareStats, HarnessKernels, Storage, Tensor, Tolerance } from '@fastkernels/core';
import type { CudaBackend } from './backend.js';
import { CudaKernel } from './kernel.js';
import { KERNEL_SOURCES } from './kernel-sources.generated.js';
import { CUDA_CTYPE, ptrOf } from './ops.js';

const THREADS = 256;
/** FkCompareStats in harness.cu: 6 u64 then 2 f64. */
const STATS_BYTES = 64;
const FILL_TYPES = new Set(['f32', 'f64', 'f16', 'bf16']);
const COMPARE_TYPES = new Set(['f32', 'f64', 'f16', 'bf16', 'i64', 'i32', 'i16', 'i8', 'u8']);

export class CudaHarnessKernels implements HarnessKernels {
  private readonly kernels = new Map<string, CudaKernel>();

  constructor(private readonly backend: CudaBackend) {}

  fillNormal(t: Tensor, seed: number, scale: number, mean: number): boolean {
    if (!FILL_TYPES.has(t.dtype) || !t.isContiguous() || t.backend !== this.backend) return false;
    if (t.numel === 0) return true;
    const k = this.kernel('fk_fill_normal', { FK_T: CUDA_CTYPE[t.dtype] });
    k.launch(this.grid(t.numel), THREADS, 0, [ptrOf(t), t.numel, seed >>> 0, scale, mean]);
    return true;
  }

  compareStats(actual: Tensor, expected: Tensor, tol: Tolerance): CompareStats | undefined {
    if (!COMPARE_TYPES.has(actual.dtype) || !COMPARE_TYPES.has(expected.dtype)) return undefined;
    if (actual.backend !== this.backend || expected.backend !== this.backend || actual.numel !== expected.numel) return undefined;
    const n = expected.numel;
    const temps: Tensor[] = [];
    const out = this.backend.allocate(STATS_BYTES, expected.device);
    try {
      const a = this.contiguous(actual, temps);
      const e = this.contiguous(expected, temps);
      this.backend.runtime.memset(out.devicePtr!, 0, STATS_BYTES, 1);
      if (n > 0) {
        const k = this.kernel('fk_compare_stats', { FK_A: CUDA_CTYPE[a.dtype], FK_E: CUDA_CTYPE[e.dtype] });
        k.launch(this.grid(n), THREADS, 0, [ptrOf(a), ptrOf(e), n, tol.atol, tol.rtol, out]);
      }
      const bytes = this.backend.read(out, 0, STATS_BYTES);
      const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      const u = (i: number) => Number(v.getBigUint64(i * 8, true));
      return {
        n,
        matched: u(0),
        nonFinite: u(1),
        actualNonZero: u(2) !== 0,
        expectedNonZero: u(3) !== 0,
        maxAbs: v.getFloat64(32, true),
        maxRel: v.getFloat64(40, true),
        sumSqDiff: v.getFloat64(48, true),
        sumSqRef: v.getFloat64(56, true),
      };
    } finally {
      out.release();
      for (const t of temps) t.dispose();
    }
  }

  countDifferentBytes(a: Storage, aOff: number, b: Storage, bOff: number, byteLength: number): number {
    if (byteLength === 0) return 0;
    if (aOff < 0 || bOff < 0 || aOff + byteLength > a.byteLength || b.byteLength < bOff + byteLength) {
      throw new RangeError(`countDifferentBytes: [${aOff}, +${byteLength}) / [${bOff}, +${byteLength}) outside storages of ${a.byteLength} / ${b.byteLength} bytes`);
    }
    const out = this.backend.allocate(8, a.device);
    try {
      this.backend.runtime.memset(out.devicePtr!, 0, 8, 1);
      const k = this.kernel('fk_count_diff', {});
      k.launch(this.grid(Math.ceil(byteLength / 16)), THREADS, 0, [a.devicePtr! + aOff, b.devicePtr! + bOff, byteLength, out]);
      const bytes = this.backend.read(out, 0, 8);
      return Number(new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true));
    } finally {
      out.release();
    }
  }

  /** Grid-stride launches: enough blocks to fill the device a few times over, never more than the work. */
  private grid(units: number): number {
    const sms = this.backend.runtime.properties().multiprocessors;
    return Math.max(1, Math.min(Math.ceil(units / THREADS), sms * 8));
  }

  private contiguous(t: Tensor, temps: Tensor[]): Tensor {
    if (t.isContiguous()) return t;
    const c = t.contiguous();
    temps.push(c);
    return c;
  }

  private kernel(entry: string, defines: Readonly<Record<string, string>>): CudaKernel {
    const options = Object.entries(defines).map(([k, v]) => `-D${k}=${v}`);
    const key = `${entry}|${options.join(' ')}`;
    let k = this.kernels.get(key);
    if (!k) {
      const source = KERNEL_SOURCES['harness.cu'];
      if (source === undefined) throw new Error('kernel source harness.cu is not embedded (run npm run embed-kernels -w @fastkernels/backend-cuda)');
      k = new CudaKernel({ source, entry, name: 'harness.cu', options });
      this.kernels.set(key, k);
    }
    return k;
  }
}
