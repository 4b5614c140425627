/**
 * Reading and writing strided tensors of any dtype as float64 on the host.
 * Ops gather their (possibly non-contiguous, broadcast) inputs into row-major Float64Arrays,
 * compute in float64 and write a fresh contiguous output, rounding once with the dtype's codec.
 */
import { DTYPE_INFO, Tensor, elementAccessor, forEachOffset, formatShape, numel, type Backend, type DType, type ElementAccessor, type Shape } from '@fastkernels/core';

/** The host bytes of a tensor's storage, or a clear error (disposed, released, or not host memory). */
export function hostBytesOf(t: Tensor, what: string): Uint8Array {
  if (t.isDisposed) throw new Error(`${what}: tensor ${formatShape(t.shape)} is disposed`);
  if (t.storage.released) throw new Error(`${what}: storage of tensor ${formatShape(t.shape)} was released`);
  const bytes = t.storage.hostBytes;
  if (!bytes) throw new TypeError(`${what}: tensor ${formatShape(t.shape)} lives on backend '${t.backend.name}' (device memory); move it to the cpu backend with .to(cpu)`);
  return bytes;
}

export function accessorOf(t: Tensor, what: string): ElementAccessor {
  return elementAccessor(t.dtype, hostBytesOf(t, what));
}

/**
 * Map a float64 result to what the accessor stores. Floats round in the accessor (RNE),
 * integer typed arrays truncate toward zero like torch; bool is `value != 0` (NaN is true, as in torch).
 */
export function encoderFor(dtype: DType): (v: number) => number {
  if (dtype === 'bool') return (v) => (v !== 0 ? 1 : 0);
  if (DTYPE_INFO[dtype].kind === 'int') return (v) => (Number.isFinite(v) ? Math.trunc(v) : 0);
  return (v) => v;
}

/** Values of a strided layout of `t`'s storage, row-major. */
export function gatherLayout(t: Tensor, shape: Shape, strides: readonly number[], offset: number, what: string): Float64Array {
  const acc = accessorOf(t, what);
  const out = new Float64Array(numel(shape));
  forEachOffset(shape, strides, offset, (off, i) => {
    out[i] = acc.get(off);
  });
  return out;
}

/** All values of `t` as float64, row-major. */
export function gather(t: Tensor, what: string): Float64Array {
  return gatherLayout(t, t.shape, t.strides, t.offset, what);
}

/** Values of `t` broadcast to `shape` (size-1 and missing leading dims repeat). */
export function gatherBroadcast(t: Tensor, shape: Shape, what: string): Float64Array {
  return gatherLayout(t, shape, broadcastStrides(t, shape, what), t.offset, what);
}

/** Write row-major float64 values into every element of a (possibly strided) view. */
export function scatter(dst: Tensor, values: Float64Array, what: string): void {
  const acc = accessorOf(dst, what);
  const enc = encoderFor(dst.dtype);
  forEachOffset(dst.shape, dst.strides, dst.offset, (off, i) => {
    acc.set(off, enc(values[i]!));
  });
}

/** A fresh contiguous tensor on `backend` holding `values` rounded to `dtype`. */
export function output(backend: Backend, shape: Shape, dtype: DType, values: Float64Array, what: string): Tensor {
  if (values.length !== numel(shape)) throw new Error(`${what}: internal error, ${values.length} values for ${formatShape(shape)}`);
  const out = Tensor.empty(backend, shape, dtype);
  try {
    scatter(out, values, what);
  } catch (e) {
    out.dispose();
    throw e;
  }
  return out;
}

/** numpy/torch broadcasting of two shapes (right-aligned; each pair equal or one of them 1). */
export function broadcastShapes(a: Shape, b: Shape, what: string): number[] {
  const rank = Math.max(a.length, b.length);
  const out = new Array<number>(rank);
  for (let i = 0; i < rank; i++) {
    const da = a[a.length - rank + i] ?? 1;
    const db = b[b.length - rank + i] ?? 1;
    if (da !== db && da !== 1 && db !== 1) throw new RangeError(`${what}: shapes ${formatShape(a)} and ${formatShape(b)} do not broadcast`);
    out[i] = da === 1 ? db : da;
  }
  return out;
}

/** Strides that read `t` as if expanded to `shape` (0 for broadcast dims). */
export function broadcastStrides(t: Tensor, shape: Shape, what: string): number[] {
  const lead = shape.length - t.rank;
  if (lead < 0) throw new RangeError(`${what}: cannot broadcast ${formatShape(t.shape)} to ${formatShape(shape)}`);
  return shape.map((d, i) => {
    const j = i - lead;
    if (j < 0) return 0;
    const have = t.shape[j]!;
    if (have === d) return t.strides[j]!;
    if (have === 1) return 0;
    throw new RangeError(`${what}: cannot broadcast ${formatShape(t.shape)} to ${formatShape(shape)}`);
  });
}

/** Integer values of an index tensor (i32/i64/...), checked to be of an integer dtype. */
export function gatherInts(t: Tensor, what: string): Float64Array {
  if (DTYPE_INFO[t.dtype].kind !== 'int') throw new TypeError(`${what}: expected an integer tensor, got ${t.dtype}`);
  return gather(t, what);
}

export function expectRank(t: Tensor, rank: number, what: string, layout: string): void {
  if (t.rank !== rank) throw new RangeError(`${what}: expected ${layout} (rank ${rank}), got ${formatShape(t.shape)}`);
}

export function expectShape(t: Tensor, shape: Shape, what: string, name: string): void {
  if (t.rank !== shape.length || t.shape.some((d, i) => d !== shape[i])) {
    throw new RangeError(`${what}: ${name} has shape ${formatShape(t.shape)}, expected ${formatShape(shape)}`);
  }
}

export function expectFloat(t: Tensor, what: string, name: string): void {
  if (DTYPE_INFO[t.dtype].kind !== 'float') throw new TypeError(`${what}: ${name} must be a float tensor, got ${t.dtype}`);
}

/**
 * Direct strided element access without gathering (for large tensors such as KV caches and
 * embedding tables, of which an op reads only a part).
 */
export class StridedView {
  readonly acc: ElementAccessor;
  readonly strides: readonly number[];
  readonly offset: number;

  constructor(
    readonly tensor: Tensor,
    what: string,
  ) {
    this.acc = accessorOf(tensor, what);
    this.strides = tensor.strides;
    this.offset = tensor.offset;
  }

  /** Element offset of an index prefix (remaining dims at 0). */
  at(...idx: number[]): number {
    let off = this.offset;
    for (let i = 0; i < idx.length; i++) off += idx[i]! * this.strides[i]!;
    return off;
  }
}
