/**
 * A caching device allocator over raw cuMemAlloc/cuMemFree (injected, so the logic is unit-tested
 * without a GPU).
 *
 *  - Sizes are rounded up to classes: multiples of 512 B up to 1 MiB, then 8 classes per power of two
 *    (at most 12.5% waste) with a 2 MiB granule. A freed block goes to the free list of its (stream,
 *    class) and is reused by the next request of that class on that stream; stream order makes that safe
 *    without a sync. A block used on another stream (`recordStream`) waits for the next synchronize().
 *  - When cuMemAlloc runs out of memory, the cache is emptied (after a device sync) and the call retried.
 *  - During CUDA graph capture every allocation comes from a pre-reserved `GraphPool` (a bump allocator
 *    over one slab, in size classes); allocating without one is an error, since cuMemAlloc is not capturable
 *    and a reused cached block would alias memory the graph replays into. A pool block freed during the
 *    capture that made it is reused by a later request of its class on its stream in the same capture, as
 *    the eager cache does: the captured work is stream-ordered, so the graph replays the reuse safely, and a
 *    deep forward needs about its peak rather than the sum of every intermediate it allocates.
 *  - A pool's size need not be guessed from the eager peak (reuse is by exact class, so a capture takes the sum over
 *    classes of the most blocks of each alive at once, more than the peak of live bytes where sizes vary, as in a conv
 *    net): `measurePoolBytes(fn)` runs fn eagerly and replays its allocations through a pool's own rules, giving the
 *    bytes a capture of the same allocations takes.
 */

export interface RawDeviceMemory {
  /** cuMemAlloc; null when the device is out of memory. */
  alloc(bytes: number): number | null;
  free(ptr: number): void;
  /** Device-wide sync (before giving memory back). */
  synchronize(): void;
}

export interface AllocatorStats {
  /** Bytes in live blocks (rounded sizes), graph pools excluded. */
  readonly allocated: number;
  /** Bytes obtained from cuMemAlloc and not yet freed (live + cached + graph pools). */
  readonly reserved: number;
  /** Highest `allocated` seen since the last resetPeak(). */
  readonly peak: number;
  /** allocate() calls served. */
  readonly numAllocs: number;
  /** allocate() calls served from the cache. */
  readonly cacheHits: number;
  /** cuMemAlloc calls made. */
  readonly numDeviceAllocs: number;
  /** Blocks sitting in the cache. */
  readonly cachedBlocks: number;
  readonly cachedBytes: number;
}

export interface DeviceBlock {
  readonly ptr: number;
  /** The class size actually reserved. */
  readonly size: number;
  readonly requested: number;
  readonly stream: number;
  /** Set when the block belongs to a graph pool (released with the pool, not to the cache). */
  readonly pool?: GraphPool;
  /** The pool's capture the block was made in (only a block of the current capture is reused). */
  readonly capture?: number;
  /** Streams other than `stream` that used the block (see recordStream). */
  crossStream?: boolean;
  live: boolean;
}

const KiB = 1024;
const MiB = 1024 * KiB;
export const SMALL_LIMIT = 1 * MiB;
export const SMALL_GRANULE = 512;
export const LARGE_GRANULE = 2 * MiB;

/** The class size for a request. */
export function roundSize(bytes: number): number {
  if (!Number.isFinite(bytes) || bytes < 0) throw new RangeError(`invalid allocation size ${bytes}`);
  if (bytes <= SMALL_LIMIT) return Math.max(SMALL_GRANULE, Math.ceil(bytes / SMALL_GRANULE) * SMALL_GRANULE);
  const step = Math.max(LARGE_GRANULE, 2 ** (Math.floor(Math.log2(bytes)) - 3));
  return Math.ceil(bytes / step) * step;
}

/** A slab reserved before capture; allocations inside capture bump through it or reuse what the capture freed. */
export class GraphPool {
  private offset = 0;
  private peakOffset = 0;
  private captureId = 0;
  /** Addresses freed in the current capture, by `${stream}:${class size}`. */
  private readonly freed = new Map<string, number[]>();
  constructor(
    readonly base: number,
    readonly size: number,
    private readonly onDestroy: (p: GraphPool) => void,
  ) {}
  get used(): number {
    return this.offset;
  }
  get peak(): number {
    return this.peakOffset;
  }
  /** The current capture's number (bumped by reset). */
  get capture(): number {
    return this.captureId;
  }
  /**
   * A block of `bytes`' size class: one the capture freed on `stream`, else bumped from the slab (256-byte aligned,
   * what cuMemAlloc guarantees). undefined when the slab is spent.
   */
  take(bytes: number, stream = 0): { ptr: number; size: number } | undefined {
    const size = roundSize(Math.max(bytes, 1));
    const reused = this.freed.get(`${stream}:${size}`)?.pop();
    if (reused !== undefined) return { ptr: reused, size };
    const start = Math.ceil(this.offset / 256) * 256;
    const end = start + size;
    if (end > this.size) return undefined;
    this.offset = end;
    this.peakOffset = Math.max(this.peakOffset, end);
    return { ptr: this.base + start, size };
  }
  /** A block of the current capture freed in it: later requests of its class on its stream take it. */
  giveBack(ptr: number, size: number, stream: number): void {
    const key = `${stream}:${size}`;
    const list = this.freed.get(key);
    if (list) list.push(ptr);
    else this.freed.set(key, [ptr]);
  }
  /** Start over (a re-capture lays the same allocations out at the same addresses). */
  reset(): void {
    this.offset = 0;
    this.freed.clear();
    this.captureId++;
  }
  destroy(): void {
    this.onDestroy(this);
  }
}

export class CachingAllocator {
  private readonly free = new Map<number, Map<number, number[]>>(); // stream -> size -> ptrs
  private readonly pending: DeviceBlock[] = [];
  private readonly pools = new Set<GraphPool>();
  private capturePool: GraphPool | null | undefined; // undefined: not capturing; null: capturing without a pool
  /** While measurePoolBytes runs: a boundless pool that takes the same classes, and where each live block sits in it. */
  private meter: { pool: GraphPool; at: Map<DeviceBlock, number> } | null = null;
  private s = { allocated: 0, reserved: 0, peak: 0, numAllocs: 0, cacheHits: 0, numDeviceAllocs: 0, cachedBlocks: 0, cachedBytes: 0 };

  constructor(private readonly raw: RawDeviceMemory) {}

  stats(): AllocatorStats {
    return { ...this.s };
  }

  resetPeak(): void {
    this.s.peak = this.s.allocated;
  }

  allocate(bytes: number, stream: number): DeviceBlock {
    const requested = bytes;
    if (this.capturePool !== undefined) {
      const pool = this.capturePool;
      if (!pool) {
        throw new Error(
          `allocation of ${bytes} bytes during CUDA graph capture, outside a graph pool: cuMemAlloc cannot be captured. ` +
            'Reserve one: capture(fn, { poolBytes }) or pass a GraphPool, or allocate before capturing.',
        );
      }
      const got = pool.take(bytes, stream);
      if (got === undefined) throw new Error(`graph pool exhausted during capture: ${bytes} bytes requested, ${pool.size - pool.used} of ${pool.size} left; reserve a larger pool`);
      this.s.numAllocs++;
      return { ptr: got.ptr, size: got.size, requested, stream, pool, capture: pool.capture, live: true };
    }
    const size = roundSize(bytes);
    this.s.numAllocs++;
    const list = this.free.get(stream)?.get(size);
    let ptr = list?.pop();
    if (ptr !== undefined) {
      this.s.cacheHits++;
      this.s.cachedBlocks--;
      this.s.cachedBytes -= size;
    } else {
      ptr = this.deviceAlloc(size);
    }
    this.s.allocated += size;
    if (this.s.allocated > this.s.peak) this.s.peak = this.s.allocated;
    const block: DeviceBlock = { ptr, size, requested, stream, live: true };
    if (this.meter) this.meter.at.set(block, this.meter.pool.take(bytes, stream)!.ptr);
    return block;
  }

  /**
   * The graph-pool bytes a capture of fn's allocations would take: fn runs eagerly (outside capture) while every
   * allocation and release it makes is replayed through a pool's rules (bump, reuse of a freed block by its class on
   * its stream, no reuse of one another stream used). What fn allocates and keeps (outputs, a grown workspace) counts
   * too, so it errs high when a warm-up makes lazy state a capture would not.
   */
  measurePoolBytes(fn: () => void): number {
    if (this.capturePool !== undefined) throw new Error('measurePoolBytes() during CUDA graph capture');
    if (this.meter) throw new Error('measurePoolBytes() calls do not nest');
    const meter = { pool: new GraphPool(0, Number.MAX_SAFE_INTEGER, () => {}), at: new Map<DeviceBlock, number>() };
    this.meter = meter;
    try {
      fn();
    } finally {
      this.meter = null;
    }
    return meter.pool.peak;
  }

  /** Mark a block as used on another stream: on release it waits for the next synchronize() before reuse. */
  recordStream(block: DeviceBlock, stream: number): void {
    if (stream !== block.stream) block.crossStream = true;
  }

  release(block: DeviceBlock): void {
    if (!block.live) throw new Error(`double free of device block 0x${block.ptr.toString(16)}`);
    block.live = false;
    if (block.pool) {
      // owned by its graph pool; reusable in the capture that made it when only its own stream used it
      if (this.capturePool === block.pool && block.capture === block.pool.capture && !block.crossStream) block.pool.giveBack(block.ptr, block.size, block.stream);
      return;
    }
    this.s.allocated -= block.size;
    const metered = this.meter?.at.get(block);
    if (metered !== undefined) {
      this.meter!.at.delete(block);
      if (!block.crossStream) this.meter!.pool.giveBack(metered, roundSize(Math.max(block.requested, 1)), block.stream);
    }
    if (block.crossStream || this.capturePool !== undefined) {
      // During capture, the graph may still read it at replay; other streams may still use it.
      this.pending.push(block);
      return;
    }
    this.toCache(block);
  }

  /** The device was synchronized: blocks waiting on other streams can be reused now. */
  onSynchronize(): void {
    if (this.capturePool !== undefined) return;
    while (this.pending.length) this.toCache(this.pending.pop()!);
  }

  /** Free every cached block back to the driver (after a device sync). Live blocks are untouched. */
  emptyCache(): void {
    if (this.capturePool !== undefined) throw new Error('emptyCache() during CUDA graph capture');
    this.raw.synchronize();
    this.onSynchronize();
    for (const bySize of this.free.values()) {
      for (const [size, ptrs] of bySize) {
        for (const p of ptrs) {
          this.raw.free(p);
          this.s.reserved -= size;
        }
      }
    }
    this.free.clear();
    this.s.cachedBlocks = 0;
    this.s.cachedBytes = 0;
  }

  /** Reserve a graph pool of `bytes` (a fresh cuMemAlloc, outside capture). */
  createGraphPool(bytes: number): GraphPool {
    const size = roundSize(bytes);
    const ptr = this.deviceAlloc(size);
    const pool = new GraphPool(ptr, size, (p) => {
      if (!this.pools.delete(p)) return;
      if (this.capturePool === p) throw new Error('destroying the graph pool in use by an active capture');
      this.raw.synchronize();
      this.raw.free(p.base);
      this.s.reserved -= p.size;
    });
    this.pools.add(pool);
    return pool;
  }

  /** Enter capture mode: allocations come from `pool` (or fail when null). */
  beginCapture(pool: GraphPool | null): void {
    if (this.capturePool !== undefined) throw new Error('a CUDA graph capture is already in progress (captures do not nest)');
    pool?.reset();
    this.capturePool = pool;
  }

  endCapture(): void {
    this.capturePool = undefined;
  }

  get capturing(): boolean {
    return this.capturePool !== undefined;
  }

  private toCache(block: DeviceBlock): void {
    let bySize = this.free.get(block.stream);
    if (!bySize) this.free.set(block.stream, (bySize = new Map()));
    let list = bySize.get(block.size);
    if (!list) bySize.set(block.size, (list = []));
    list.push(block.ptr);
    this.s.cachedBlocks++;
    this.s.cachedBytes += block.size;
  }

  private deviceAlloc(size: number): number {
    let ptr = this.raw.alloc(size);
    if (ptr === null) {
      this.emptyCache();
      ptr = this.raw.alloc(size);
    }
    if (ptr === null) {
      const st = this.s;
      throw new Error(
        `CUDA out of memory: cannot allocate ${fmtBytes(size)} (allocated ${fmtBytes(st.allocated)}, reserved ${fmtBytes(st.reserved)}, cache emptied and retried)`,
      );
    }
    this.s.numDeviceAllocs++;
    this.s.reserved += size;
    return ptr;
  }
}

export function fmtBytes(n: number): string {
  if (n >= 1024 ** 3) return `${(n / 1024 ** 3).toFixed(2)} GiB`;
  if (n >= MiB) return `${(n / MiB).toFixed(1)} MiB`;
  if (n >= KiB) return `${(n / KiB).toFixed(1)} KiB`;
  return `${n} B`;
}
