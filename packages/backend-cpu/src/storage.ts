import type { Backend, Storage } from '@fastkernels/core';

/** Called once when a storage's reference count reaches zero (for the backend's live-memory accounting). */
export type StorageFreeHook = (storage: CpuStorage) => void;

/**
 * Host memory for the CPU backend: a Uint8Array over its own ArrayBuffer, so the start is
 * 8-byte aligned and every typed-array view (Float64Array, the i64 halves) can be made over it.
 * Reference-counted like device memory: the first holder is the allocator's caller.
 */
export class CpuStorage implements Storage {
  readonly device = 0;
  private bytes: Uint8Array | undefined;
  private refs = 1;

  constructor(
    readonly backend: Backend,
    readonly byteLength: number,
    poison: number | undefined,
    private readonly onFree?: StorageFreeHook,
  ) {
    if (!Number.isInteger(byteLength) || byteLength < 0) throw new RangeError(`cpu allocate: invalid byte length ${byteLength}`);
    // Round the buffer up to 8 bytes so an f64/i64 view over the last element never runs past it.
    const buffer = new ArrayBuffer(Math.ceil(byteLength / 8) * 8);
    this.bytes = new Uint8Array(buffer, 0, byteLength);
    if (poison !== undefined) {
      if (!Number.isInteger(poison) || poison < 0 || poison > 255) throw new RangeError(`cpu allocate: poison must be a byte (0..255), got ${poison}`);
      this.bytes.fill(poison);
    }
  }

  get hostBytes(): Uint8Array | undefined {
    return this.bytes;
  }

  get released(): boolean {
    return this.bytes === undefined;
  }

  /** Current number of holders (for tests and leak reports). */
  get refCount(): number {
    return this.refs;
  }

  retain(): void {
    if (this.released) throw new Error(`retain of a released cpu storage (${this.byteLength} bytes)`);
    this.refs++;
  }

  release(): void {
    if (this.released) throw new Error(`double release of a cpu storage (${this.byteLength} bytes)`);
    if (--this.refs > 0) return;
    this.bytes = undefined; // drop the buffer so the GC can take it now
    this.onFree?.(this);
  }

  /** The bytes, or a clear error when the storage was released. */
  live(what: string): Uint8Array {
    if (!this.bytes) throw new Error(`${what}: cpu storage (${this.byteLength} bytes) was released`);
    return this.bytes;
  }
}
