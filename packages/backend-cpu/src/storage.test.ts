import { BACKEND, container, loadPlugins, Tensor, type Backend } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { CpuBackend } from './backend.js';
import { DEFAULT_LLC_BYTES, lastLevelCacheBytes, parseCacheSize } from './device.js';
import { cpuPlugin } from './plugin.js';
import { CpuStorage } from './storage.js';

describe('CpuStorage', () => {
  it('allocates zeroed, 8-byte aligned host bytes of the requested length', () => {
    const b = new CpuBackend();
    const s = b.allocate(13, 0);
    expect(s.byteLength).toBe(13);
    expect(s.hostBytes!.byteLength).toBe(13);
    expect(s.hostBytes!.byteOffset % 8).toBe(0);
    expect(s.hostBytes!.buffer.byteLength).toBe(16);
    expect([...s.hostBytes!].every((v) => v === 0)).toBe(true);
    expect(s.device).toBe(0);
    expect(s.backend).toBe(b);
    s.release();
  });

  it('fills with the poison byte, per call or by the backend default', () => {
    const b = new CpuBackend({ defaultPoison: 0xab });
    const s = b.allocate(8, 0, { poison: 0xff });
    expect([...s.hostBytes!]).toEqual(Array(8).fill(0xff));
    const d = b.allocate(4, 0);
    expect([...d.hostBytes!]).toEqual(Array(4).fill(0xab));
    const t = Tensor.empty(b, [2], 'f32');
    expect([...t.toHostBytes()]).toEqual(Array(8).fill(0xab));
    const nan = Tensor.empty(b, [3], 'f32', { poison: 0xff });
    expect(Array.from(nan.toFloat64Array()).every(Number.isNaN)).toBe(true);
    expect(() => b.allocate(4, 0, { poison: 256 })).toThrow(/poison/);
    for (const x of [s, d]) x.release();
    t.dispose();
    nan.dispose();
  });

  it('counts references: release at zero frees the buffer; double release and late retain throw', () => {
    const b = new CpuBackend();
    const s = b.allocate(16, 0) as CpuStorage;
    expect(s.refCount).toBe(1);
    s.retain();
    expect(s.refCount).toBe(2);
    s.release();
    expect(s.released).toBe(false);
    expect(s.hostBytes).toBeDefined();
    s.release();
    expect(s.released).toBe(true);
    expect(s.hostBytes).toBeUndefined();
    expect(() => s.release()).toThrow(/double release/);
    expect(() => s.retain()).toThrow(/released/);
    expect(() => b.read(s, 0, 4)).toThrow(/released/);
  });

  it('tracks live memory through tensors and views', () => {
    const b = new CpuBackend();
    const t = Tensor.zeros(b, [4, 4], 'f32');
    expect(b.memoryStats()).toMatchObject({ liveStorages: 1, liveBytes: 64 });
    const v = t.transpose(0, 1);
    t.dispose();
    expect(b.memoryStats().liveStorages).toBe(1); // the view keeps the storage alive
    expect(v.storage.released).toBe(false);
    v.dispose();
    expect(b.memoryStats()).toMatchObject({ liveStorages: 0, liveBytes: 0, peakBytes: 64 });
    expect(v.storage.released).toBe(true);
  });

  it('rejects invalid sizes and devices', () => {
    const b = new CpuBackend();
    expect(() => b.allocate(-1, 0)).toThrow(RangeError);
    expect(() => b.allocate(1.5, 0)).toThrow(RangeError);
    expect(() => b.allocate(8, 1)).toThrow(/one device/);
    expect(() => b.synchronize(2)).toThrow(/one device/);
  });
});

describe('CpuBackend byte transfers', () => {
  it('writes, reads (as a copy) and bounds-checks', () => {
    const b = new CpuBackend();
    const s = b.allocate(8, 0);
    b.write(s, 2, new Uint8Array([1, 2, 3]));
    const r = b.read(s, 0, 6);
    expect([...r]).toEqual([0, 0, 1, 2, 3, 0]);
    r[2] = 99;
    expect(s.hostBytes![2]).toBe(1);
    expect(() => b.write(s, 6, new Uint8Array(3))).toThrow(/out of range/);
    expect(() => b.read(s, -1, 2)).toThrow(/out of range/);
    s.release();
  });

  it('copies between storages and within one (memmove on overlap)', () => {
    const b = new CpuBackend();
    const a = b.allocate(8, 0);
    const c = b.allocate(8, 0);
    b.write(a, 0, new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8]));
    b.copyBytes(c, 4, a, 0, 4);
    expect([...c.hostBytes!]).toEqual([0, 0, 0, 0, 1, 2, 3, 4]);
    b.copyBytes(a, 2, a, 0, 6);
    expect([...a.hostBytes!]).toEqual([1, 2, 1, 2, 3, 4, 5, 6]);
    expect(() => b.copyBytes(c, 6, a, 0, 4)).toThrow(/out of range/);
    a.release();
    c.release();
  });

  it('refuses storages of another backend', () => {
    const b1 = new CpuBackend();
    const b2 = new CpuBackend();
    const s = b2.allocate(4, 0);
    expect(() => b1.read(s, 0, 4)).toThrow(/not this cpu backend/);
    s.release();
  });
});

describe('CpuBackend description', () => {
  const b = new CpuBackend();
  it('is always available with one device', () => {
    expect(b.name).toBe('cpu');
    expect(b.availability()).toEqual({ available: true });
    const devs = b.devices();
    expect(devs).toHaveLength(1);
    expect(devs[0]).toMatchObject({ backend: 'cpu', index: 0 });
    expect(devs[0]!.name.length).toBeGreaterThan(0);
    expect(devs[0]!.totalMemory).toBeGreaterThan(0);
    expect(devs[0]!.multiprocessors).toBeGreaterThanOrEqual(1);
    expect(devs[0]!.l2CacheBytes).toBeGreaterThan(0);
    expect(b.devices()).toBe(devs);
  });

  it('has the cpu capabilities and versions', () => {
    expect(b.capabilities).toEqual({ graphs: false, collectives: false, kernelLanguages: ['typescript'] });
    expect(b.versions()).toEqual({ node: process.version });
    b.synchronize();
  });

  it('parses sysfs cache sizes and falls back without sysfs', () => {
    expect(parseCacheSize('32768K\n')).toBe(32 * 1024 * 1024);
    expect(parseCacheSize('2M')).toBe(2 * 1024 * 1024);
    expect(parseCacheSize('512')).toBe(512);
    expect(parseCacheSize('lots')).toBeUndefined();
    expect(lastLevelCacheBytes('/nonexistent/path')).toBe(DEFAULT_LLC_BYTES);
  });

  it('times with a monotonic clock', () => {
    const timer = b.createTimer();
    expect(() => timer.elapsedMs()).toThrow();
    timer.start();
    let x = 0;
    for (let i = 0; i < 1e5; i++) x += Math.sqrt(i);
    timer.stop();
    expect(x).toBeGreaterThan(0);
    const ms = timer.elapsedMs();
    expect(ms).toBeGreaterThan(0);
    expect(ms).toBeLessThan(10_000);
    expect(() => b.createTimer().stop()).toThrow(/before it was started/);
  });
});

describe('cpuPlugin', () => {
  it('registers a CpuBackend under BACKEND', () => {
    expect(cpuPlugin).toMatchObject({ name: 'backend-cpu' });
    const c = loadPlugins(container.createChildContainer(), [cpuPlugin]);
    const all: Backend[] = c.resolveAll(BACKEND);
    expect(all).toHaveLength(1);
    expect(all[0]).toBeInstanceOf(CpuBackend);
    expect(all[0]!.name).toBe('cpu');
  });
});
