/**
 * A minimal host backend for core's own tests (Tensor views, modules, state dicts).
 * Not exported from index.ts: real backends live in their own packages.
 * Storage is a reference-counted Uint8Array; only fill and copy are implemented,
 * every other op throws.
 */
import type { Backend, BackendAvailability, DeviceInfo, Storage, Timer } from '../backend.js';
import { elementAccessor } from '../dtype.js';
import type { Ops } from '../ops.js';
import { forEachOffset, formatShape, shapesEqual } from '../shape.js';
import type { Tensor } from '../tensor.js';

export class HostStorage implements Storage {
  readonly hostBytes: Uint8Array;
  private refs = 1;
  released = false;

  constructor(
    readonly backend: HostTestBackend,
    readonly device: number,
    readonly byteLength: number,
  ) {
    this.hostBytes = new Uint8Array(byteLength);
  }

  get refCount(): number {
    return this.refs;
  }

  retain(): void {
    if (this.released) throw new Error('retain of a released storage');
    this.refs++;
  }

  release(): void {
    if (this.released) throw new Error('release of a released storage');
    if (--this.refs === 0) {
      this.released = true;
      this.backend.liveStorages.delete(this);
    }
  }
}

function bytesOf(s: Storage): Uint8Array {
  if (s.released) throw new Error('use of a released storage');
  return s.hostBytes!;
}

/** Row-major values of a strided tensor view, as numbers. */
function gather(t: Tensor): number[] {
  const acc = elementAccessor(t.dtype, bytesOf(t.storage));
  const out: number[] = [];
  forEachOffset(t.shape, t.strides, t.offset, (off) => out.push(acc.get(off)));
  return out;
}

function notHere(name: string): () => never {
  return () => {
    throw new Error(`${name}: not in this fixture`);
  };
}

function makeOps(): Ops {
  return {
    fill(dst, value) {
      const acc = elementAccessor(dst.dtype, bytesOf(dst.storage));
      forEachOffset(dst.shape, dst.strides, dst.offset, (off) => acc.set(off, value));
    },
    copy(dst, src) {
      if (!shapesEqual(dst.shape, src.shape)) throw new RangeError(`copy: ${formatShape(src.shape)} into ${formatShape(dst.shape)}`);
      const vals = gather(src);
      const acc = elementAccessor(dst.dtype, bytesOf(dst.storage));
      forEachOffset(dst.shape, dst.strides, dst.offset, (off, i) => acc.set(off, vals[i]!));
    },
    add: notHere('add'),
    mul: notHere('mul'),
    matmul: notHere('matmul'),
    rmsNorm: notHere('rmsNorm'),
    fusedAddRmsNorm: notHere('fusedAddRmsNorm'),
    siluAndMul: notHere('siluAndMul'),
    geluAndMul: notHere('geluAndMul'),
    rotaryEmbedding: notHere('rotaryEmbedding'),
    embedding: notHere('embedding'),
    embeddingMasked: notHere('embeddingMasked'),
    linear: notHere('linear'),
    softmax: notHere('softmax'),
    storeKvcache_: notHere('storeKvcache_'),
    pagedDecodeAttention: notHere('pagedDecodeAttention'),
    varlenPrefillAttention: notHere('varlenPrefillAttention'),
    sample: notHere('sample'),
  };
}

export class HostTestBackend implements Backend {
  readonly capabilities = { graphs: false, collectives: false, kernelLanguages: ['typescript'] as const };
  readonly ops: Ops = makeOps();
  /** Storages allocated and not yet released (for leak checks in tests). */
  readonly liveStorages = new Set<HostStorage>();

  constructor(readonly name = 'host-test') {}

  availability(): BackendAvailability {
    return { available: true };
  }

  devices(): readonly DeviceInfo[] {
    return [{ backend: this.name, index: 0, name: 'test host', totalMemory: 0, multiprocessors: 1, l2CacheBytes: 0 }];
  }

  allocate(byteLength: number, device: number, options?: { poison?: number }): HostStorage {
    const s = new HostStorage(this, device, byteLength);
    if (options?.poison !== undefined) s.hostBytes.fill(options.poison);
    this.liveStorages.add(s);
    return s;
  }

  write(dst: Storage, byteOffset: number, src: Uint8Array): void {
    const b = bytesOf(dst);
    if (byteOffset + src.length > b.length) throw new RangeError('write past the end of a storage');
    b.set(src, byteOffset);
  }

  read(src: Storage, byteOffset: number, byteLength: number): Uint8Array {
    const b = bytesOf(src);
    if (byteOffset + byteLength > b.length) throw new RangeError('read past the end of a storage');
    return b.slice(byteOffset, byteOffset + byteLength);
  }

  copyBytes(dst: Storage, dstOffset: number, src: Storage, srcOffset: number, byteLength: number): void {
    bytesOf(dst).set(bytesOf(src).subarray(srcOffset, srcOffset + byteLength), dstOffset);
  }

  synchronize(): void {}

  createTimer(): Timer {
    let t0 = 0;
    let t1 = 0;
    return {
      start: () => void (t0 = performance.now()),
      stop: () => void (t1 = performance.now()),
      elapsedMs: () => t1 - t0,
    };
  }

  versions(): Readonly<Record<string, string>> {
    return { fixture: '0' };
  }
}
