import { describe, expect, it } from 'vitest';
import { CachingAllocator, roundSize, type RawDeviceMemory } from './allocator.js';

function fakeRaw(limit = Infinity) {
  let next = 0x10000;
  let used = 0;
  const live = new Map<number, number>();
  const raw: RawDeviceMemory & { live: Map<number, number>; syncs: number } = {
    live,
    syncs: 0,
    alloc(bytes) {
      if (used + bytes > limit) return null;
      const p = next;
      next += Math.ceil(bytes / 512) * 512 + 512;
      used += bytes;
      live.set(p, bytes);
      return p;
    },
    free(p) {
      used -= live.get(p)!;
      live.delete(p);
    },
    synchronize() {
      raw.syncs++;
    },
  };
  return raw;
}

describe('caching allocator', () => {
  it('rounds to 512 B up to 1 MiB, then 8 classes per power of two on a 2 MiB granule', () => {
    expect([0, 1, 512, 513, 1 << 20].map(roundSize)).toEqual([512, 512, 512, 1024, 1 << 20]);
    expect(roundSize((1 << 20) + 1)).toBe(2 << 20);
    expect(roundSize(100 << 20)).toBe(104 << 20); // step 8 MiB at 64..128 MiB
    expect(roundSize(1 << 30)).toBe(1 << 30);
    expect(roundSize((1 << 30) + 1)).toBe((1 << 30) + (128 << 20));
  });

  it('reuses freed blocks of the same class on the same stream; stats return to baseline', () => {
    const raw = fakeRaw();
    const a = new CachingAllocator(raw);
    const base = a.stats();
    const blocks = Array.from({ length: 100 }, (_, i) => a.allocate(900 + (i % 100), 1));
    expect(a.stats().allocated).toBe(100 * 1024);
    blocks.forEach((b) => a.release(b));
    expect(a.stats().allocated).toBe(base.allocated);
    const again = Array.from({ length: 100 }, (_, i) => a.allocate(900 + (i % 100), 1));
    const s = a.stats();
    expect(s.cacheHits).toBe(100);
    expect(s.numDeviceAllocs).toBe(100);
    expect(s.numAllocs).toBe(200);
    expect(s.peak).toBe(100 * 1024);
    again.forEach((b) => a.release(b));
    a.emptyCache();
    expect(raw.live.size).toBe(0);
    expect(a.stats()).toMatchObject({ allocated: 0, reserved: 0, cachedBlocks: 0, cachedBytes: 0 });
  });

  it('does not hand a block freed on one stream to another stream', () => {
    const a = new CachingAllocator(fakeRaw());
    const b = a.allocate(4096, 1);
    a.release(b);
    const c = a.allocate(4096, 2);
    expect(c.ptr).not.toBe(b.ptr);
    expect(a.allocate(4096, 1).ptr).toBe(b.ptr);
  });

  it('holds cross-stream blocks until the next synchronize', () => {
    const a = new CachingAllocator(fakeRaw());
    const b = a.allocate(4096, 1);
    a.recordStream(b, 2);
    a.release(b);
    expect(a.allocate(4096, 1).ptr).not.toBe(b.ptr);
    a.onSynchronize();
    expect(a.allocate(4096, 1).ptr).toBe(b.ptr);
  });

  it('on out-of-memory, empties the cache and retries; then fails with the statistics', () => {
    const raw = fakeRaw(4 << 20);
    const a = new CachingAllocator(raw);
    a.release(a.allocate(2 << 20, 1));
    const b = a.allocate(3 << 20, 1); // a 4 MiB class: needs the cached 2 MiB back
    expect(raw.syncs).toBe(1);
    expect(() => a.allocate(2 << 20, 1)).toThrow(/CUDA out of memory: cannot allocate 2\.0 MiB \(allocated 4\.0 MiB/);
    a.release(b);
  });

  it('refuses a double free', () => {
    const a = new CachingAllocator(fakeRaw());
    const b = a.allocate(10, 0);
    a.release(b);
    expect(() => a.release(b)).toThrow(/double free/);
  });

  it('during capture allocates from the graph pool only, and errors clearly without one', () => {
    const raw = fakeRaw();
    const a = new CachingAllocator(raw);
    a.beginCapture(null);
    expect(() => a.allocate(16, 1)).toThrow(/during CUDA graph capture, outside a graph pool/);
    a.endCapture();
    const pool = a.createGraphPool(1 << 20);
    a.beginCapture(pool);
    const x = a.allocate(100, 1);
    const y = a.allocate(100, 1);
    expect(x.ptr).toBe(pool.base);
    expect(y.ptr).toBe(pool.base + 512); // the 512-byte class of a 100-byte request
    expect(() => a.allocate(2 << 20, 1)).toThrow(/graph pool exhausted/);
    a.release(x);
    a.endCapture();
    // a re-capture lays allocations out at the same addresses
    a.beginCapture(pool);
    expect(a.allocate(100, 1).ptr).toBe(pool.base);
    a.endCapture();
    pool.destroy();
    expect(raw.live.size).toBe(0);
    expect(a.stats().reserved).toBe(0);
  });

  it('a pool block freed during its capture is reused by the next request of its class on its stream (a deep forward needs its peak, not its sum)', () => {
    const a = new CachingAllocator(fakeRaw());
    const pool = a.createGraphPool(16 << 20);
    a.beginCapture(pool);
    // 40 layers, each making a 3 MiB activation and freeing the one before: 120 MiB bumped without reuse
    let prev = a.allocate(3 << 20, 1);
    const first = prev.ptr;
    for (let layer = 1; layer < 40; layer++) {
      const next = a.allocate(3 << 20, 1);
      a.release(prev);
      prev = next;
    }
    expect(pool.peak).toBeLessThanOrEqual(2 * roundSize(3 << 20));
    // the freed block serves its class only: a smaller class bumps; another stream does not take it
    a.release(prev);
    expect(a.allocate(3 << 20, 2).ptr).not.toBe(prev.ptr);
    expect([first, prev.ptr]).toContain(a.allocate(3 << 20, 1).ptr);
    a.endCapture();
    pool.destroy();
  });

  it('a pool block is not reused when another stream used it, or when it was freed after its capture or in a later one', () => {
    const a = new CachingAllocator(fakeRaw());
    const pool = a.createGraphPool(64 << 20);
    a.beginCapture(pool);
    const shared = a.allocate(1 << 20, 1);
    a.recordStream(shared, 2);
    a.release(shared);
    expect(a.allocate(1 << 20, 1).ptr).not.toBe(shared.ptr);
    const output = a.allocate(2 << 20, 1); // a graph output, alive after the capture
    a.endCapture();
    a.release(output); // freed between captures: the pool keeps it, nothing to reuse
    a.beginCapture(pool);
    const early = a.allocate(2 << 20, 1);
    const late = a.allocate(2 << 20, 1);
    expect(late.ptr).not.toBe(early.ptr);
    a.endCapture();
    a.beginCapture(pool);
    a.release(early); // made in the previous capture: freeing it now must not hand its address out twice
    const x = a.allocate(2 << 20, 1);
    const y = a.allocate(2 << 20, 1);
    expect(x.ptr).not.toBe(y.ptr);
    a.endCapture();
    pool.destroy();
  });

  /** A conv net's shape of allocations: each layer's activation a different class, the one before freed. */
  function convNetForward(a: CachingAllocator, stream: number, keep: { ptr: number }[] = []): void {
    const sizes = [6.5, 3.3, 3.3, 1.7, 2.1, 0.9, 1.2, 0.45, 0.6, 0.3, 1.1, 2.2, 4.4, 0.8, 0.2].map((m) => Math.round(m * 2 ** 20));
    let prev = a.allocate(sizes[0]!, stream);
    for (let i = 1; i < sizes.length; i++) {
      const skip = i % 4 === 0 ? a.allocate(sizes[i]! >> 1, stream) : null; // a residual kept for one layer
      const next = a.allocate(sizes[i]!, stream);
      a.release(prev);
      if (skip) a.release(skip);
      prev = next;
    }
    keep.push(prev); // the output outlives the forward
  }

  it('measurePoolBytes: an eager run replayed through the pool rules gives exactly what its capture takes (more than twice the live peak here)', () => {
    const a = new CachingAllocator(fakeRaw());
    const outs: { ptr: number }[] = [];
    a.resetPeak();
    const before = a.stats().allocated;
    const need = a.measurePoolBytes(() => convNetForward(a, 1, outs));
    const livePeak = a.stats().peak - before;
    const pool = a.createGraphPool(need);
    a.beginCapture(pool);
    convNetForward(a, 1, outs);
    a.endCapture();
    expect(pool.peak).toBe(need);
    expect(need).toBeGreaterThan(2 * livePeak); // why the runners' '2 x the eager peak' pools ran out
    // the eager cache served the second half of the forward from blocks the first half freed: no double counting
    expect(a.measurePoolBytes(() => convNetForward(a, 1, outs))).toBe(need);
    pool.destroy();
  });

  it('measurePoolBytes: blocks used on another stream are not reused, as in a capture; no nesting, not during capture', () => {
    const a = new CachingAllocator(fakeRaw());
    const need = a.measurePoolBytes(() => {
      const x = a.allocate(1 << 20, 1);
      a.recordStream(x, 2);
      a.release(x);
      a.release(a.allocate(1 << 20, 1));
    });
    expect(need).toBe(2 * roundSize(1 << 20));
    expect(() => a.measurePoolBytes(() => a.measurePoolBytes(() => {}))).toThrow(/do not nest/);
    const pool = a.createGraphPool(1 << 20);
    a.beginCapture(pool);
    expect(() => a.measurePoolBytes(() => {})).toThrow(/during CUDA graph capture/);
    a.endCapture();
    pool.destroy();
  });
});
