import { roundToDType, Tensor, type DType } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { gpu, randomValues, rng, upload } from './gpu-test-util.js';

const G = { tags: ['gpu'] };

describe('CUDA runtime: devices, memory and copies', () => {
  it('reports the device (name, SMs, L2, shared-memory limits, compute capability) and versions', G, () => {
    const b = gpu();
    const [d] = b.devices();
    expect(d!.multiprocessors).toBeGreaterThan(0);
    expect(d!.l2CacheBytes).toBeGreaterThan(0);
    expect(d!.totalMemory).toBeGreaterThan(1e9);
    expect(d!.computeCapability).toMatch(/^\d+\.\d+$/);
    expect(Number(d!.extra!.sharedPerBlockOptin)).toBeGreaterThanOrEqual(Number(d!.extra!.sharedPerBlock));
    const v = b.versions();
    console.log(`     device: ${d!.name}, cc ${d!.computeCapability}, ${d!.multiprocessors} SMs, L2 ${d!.l2CacheBytes} B; versions ${JSON.stringify(v)}`);
    expect(v.driver).toMatch(/^\d+\.\d+$/);
    expect(v.nvrtc).toMatch(/^\d+\.\d+$/);
    expect(v.cublasLt).toMatch(/^\d+\.\d+\.\d+$/);
  });

  it('allocation stress: statistics come back to the baseline and the cache is hit', G, () => {
    const b = gpu();
    const alloc = b.runtime.allocator;
    b.synchronize();
    const base = alloc.stats();
    const r = rng(7);
    const live: import('./backend.js').CudaStorage[] = [];
    for (let i = 0; i < 3000; i++) {
      const big = r() > 0.97;
      const bytes = Math.floor(((r() + 1) / 2) * (big ? 64 << 20 : 1 << 16)) + 1;
      live.push(b.allocate(bytes, 0));
      if (live.length > 64 || r() > 0.3) live.splice(Math.floor(((r() + 1) / 2) * live.length), 1)[0]?.release();
    }
    for (const s of live.splice(0)) s.release();
    const after = alloc.stats();
    expect(after.allocated).toBe(base.allocated);
    expect(after.numAllocs - base.numAllocs).toBe(3000);
    expect(after.cacheHits - base.cacheHits).toBeGreaterThan(1000);
    expect(after.peak).toBeGreaterThan(base.allocated);
    alloc.emptyCache();
    expect(alloc.stats().cachedBytes).toBe(0);
    expect(alloc.stats().reserved).toBeLessThanOrEqual(base.reserved);
  });

  it('host <-> device round trips at odd sizes and offsets; device-to-device copies', G, () => {
    const b = gpu();
    for (const n of [1, 3, 4097, 1 << 20, (8 << 20) + 5]) {
      const host = new Uint8Array(n);
      for (let i = 0; i < n; i++) host[i] = (i * 131 + 7) & 0xff;
      const s = b.allocate(n + 16, 0);
      b.write(s, 16, host);
      expect(b.read(s, 16, n)).toEqual(host);
      const d = b.allocate(n, 0);
      b.copyBytes(d, 0, s, 16, n);
      expect(b.read(d, 0, n)).toEqual(host);
      s.release();
      d.release();
    }
  });

  it('pinned async copies round-trip', G, () => {
    const rt = gpu().runtime;
    const n = 1 << 20;
    const pin = rt.allocPinned(n);
    for (let i = 0; i < n; i++) pin[i] = i & 0xff;
    const blk = rt.allocate(n);
    rt.copyHtoD(blk.ptr, pin, n, true);
    const back = rt.allocPinned(n);
    rt.copyDtoH(back, blk.ptr, n, true);
    rt.synchronize();
    expect(back).toEqual(pin);
    rt.free(blk);
  });

  it('poisons new memory when asked', G, () => {
    const b = gpu();
    const s = b.allocate(1000, 0, { poison: 0xff });
    expect(b.read(s, 0, 1000).every((x) => x === 0xff)).toBe(true);
    s.release();
  });

  it('non-contiguous copies: transpose, stepped slices, broadcast (stride 0), rank 6', G, () => {
    const src = randomValues(2 * 3 * 4 * 5, 1, 'f32');
    const t = upload(src, [2, 3, 4, 5], 'f32');
    const p = t.permute(3, 1, 0, 2);
    const got = p.contiguous().toFloat64Array();
    const want: number[] = [];
    for (let a = 0; a < 5; a++) for (let bb = 0; bb < 3; bb++) for (let c = 0; c < 2; c++) for (let d = 0; d < 4; d++) want.push(src[((c * 3 + bb) * 4 + d) * 5 + a]!);
    expect(Array.from(got)).toEqual(want);
    const sl = t.slice(3, 1, 5, 2).slice(2, 0, 4, 3);
    expect(Array.from(sl.contiguous().toFloat64Array())).toEqual(Array.from(cpuGather(src, [2, 3, 4, 5], sl.shape, sl.strides, sl.offset)));
    const row = upload([1, 2, 3], [1, 3], 'f32');
    expect(Array.from(row.expand(4, 3).contiguous().toFloat64Array())).toEqual([1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3]);
    const six = upload(randomValues(2 * 3 * 2 * 3 * 2 * 3, 2, 'f32'), [2, 3, 2, 3, 2, 3], 'f32');
    const six2 = six.permute(5, 4, 3, 2, 1, 0).slice(0, 0, 3, 2);
    expect(Array.from(six2.contiguous().toFloat64Array())).toEqual(Array.from(cpuGather(six.toFloat64Array(), six.shape, six2.shape, six2.strides, six2.offset)));
  });

  it('dtype casts match the host codecs (f32 -> f16/bf16/fp8/i32/i8/bool/f64 and back)', G, () => {
    const vals = [0, 1, -1, 0.1, 1 / 3, 65504, 1e-8, -2.5, 3.999, 448, 100.75, -0.0];
    const f = upload(vals, [vals.length], 'f32');
    for (const d of ['f16', 'bf16', 'fp8e4m3', 'fp8e5m2', 'i32', 'i8', 'bool', 'f64', 'i64'] as DType[]) {
      const c = f.to(d);
      const got = Array.from(c.toFloat64Array());
      const want = vals.map((v) => roundToDType(Math.fround(v), d));
      for (let i = 0; i < vals.length; i++) {
        if (d === 'fp8e4m3' && Math.abs(vals[i]!) > 448) continue; // the device saturates; the host codec gives NaN
        if (d.startsWith('fp8') && Math.abs(vals[i]!) > 57344) continue;
        expect(Object.is(got[i], want[i]) || got[i] === want[i]).toBe(true);
      }
      const back = c.to('f32').toFloat64Array();
      expect(back.length).toBe(vals.length);
      c.dispose();
    }
  });

  it('fill on contiguous and strided views, every dtype', G, () => {
    const b = gpu();
    for (const d of ['f64', 'f32', 'f16', 'bf16', 'fp8e4m3', 'i64', 'i32', 'i16', 'i8', 'u8', 'bool'] as DType[]) {
      const t = Tensor.zeros(b, [4, 6], d);
      expect(Array.from(t.toFloat64Array()).every((x) => x === 0)).toBe(true);
      t.fill_(3);
      t.slice(1, 0, 6, 2).fill_(-2);
      const got = t.toFloat64Array();
      for (let i = 0; i < 24; i++) expect(got[i]).toBe(roundToDType(i % 2 === 0 ? -2 : 3, d));
      t.dispose();
    }
  });

  it('add and mul broadcast like the host', G, () => {
    const a = randomValues(4 * 1 * 5, 3, 'f32');
    const bb = randomValues(3 * 1, 4, 'bf16');
    const A = upload(a, [4, 1, 5], 'f32');
    const B = upload(bb, [3, 1], 'bf16');
    const s = gpu().ops.add(A, B);
    const m = gpu().ops.mul(A, B);
    expect(s.shape).toEqual([4, 3, 5]);
    const gs = s.toFloat64Array();
    const gm = m.toFloat64Array();
    for (let i = 0; i < 4; i++)
      for (let j = 0; j < 3; j++)
        for (let k = 0; k < 5; k++) {
          const x = a[i * 5 + k]!;
          const y = bb[j]!;
          expect(gs[(i * 3 + j) * 5 + k]).toBe(Math.fround(x + y));
          expect(gm[(i * 3 + j) * 5 + k]).toBe(Math.fround(x * y));
        }
  });

  it('times work with device events', G, () => {
    const b = gpu();
    const t = b.createTimer();
    const x = Tensor.empty(b, [64 << 20], 'u8');
    t.start();
    for (let i = 0; i < 10; i++) x.fill_(i);
    t.stop();
    expect(t.elapsedMs()).toBeGreaterThan(0);
    x.dispose();
  });
});

function cpuGather(src: ArrayLike<number>, _srcShape: readonly number[], shape: readonly number[], strides: readonly number[], offset: number): Float64Array {
  const n = shape.reduce((p, q) => p * q, 1);
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    let rem = i;
    let o = offset;
    for (let d = shape.length - 1; d >= 0; d--) {
      o += (rem % shape[d]!) * strides[d]!;
      rem = Math.floor(rem / shape[d]!);
    }
    out[i] = src[o]!;
  }
  return out;
}
