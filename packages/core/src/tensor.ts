import type { Backend, Storage } from './backend.js';
import { DTYPE_INFO, elementAccessor, type DType } from './dtype.js';
import { contiguousStrides, formatShape, normalizeDim, numel, shapesEqual, viewStrides, type Shape } from './shape.js';

export interface TensorInit {
  readonly storage: Storage;
  readonly dtype: DType;
  readonly shape: Shape;
  readonly strides?: readonly number[];
  /** Offset into the storage, in elements. */
  readonly offset?: number;
}

/**
 * A strided view over backend-owned storage. Views share storage; each tensor holds
 * one reference and gives it back on dispose (also via `using`).
 */
export class Tensor {
  readonly storage: Storage;
  readonly dtype: DType;
  readonly shape: readonly number[];
  readonly strides: readonly number[];
  readonly offset: number;
  private disposed = false;

  constructor(init: TensorInit) {
    this.storage = init.storage;
    this.dtype = init.dtype;
    this.shape = Object.freeze([...init.shape]);
    this.strides = Object.freeze([...(init.strides ?? contiguousStrides(init.shape))]);
    this.offset = init.offset ?? 0;
    if (this.strides.length !== this.shape.length) throw new RangeError(`strides ${formatShape(this.strides)} do not match shape ${formatShape(this.shape)}`);
    for (const d of this.shape) if (!Number.isInteger(d) || d < 0) throw new RangeError(`invalid shape ${formatShape(this.shape)}`);
    this.storage.retain();
  }

  /** Allocate an uninitialised (or poisoned) tensor on a backend. */
  static empty(backend: Backend, shape: Shape, dtype: DType, options: { device?: number; poison?: number } = {}): Tensor {
    const bytes = numel(shape) * DTYPE_INFO[dtype].itemsize;
    const storage = backend.allocate(bytes, options.device ?? 0, options.poison === undefined ? undefined : { poison: options.poison });
    const t = new Tensor({ storage, dtype, shape });
    storage.release(); // the tensor holds the only reference
    return t;
  }

  static zeros(backend: Backend, shape: Shape, dtype: DType, options: { device?: number } = {}): Tensor {
    const t = Tensor.empty(backend, shape, dtype, options);
    backend.ops.fill(t, 0);
    return t;
  }

  /** Build a tensor from host numbers, encoding to `dtype` (rounding to nearest even for small floats). */
  static fromArray(backend: Backend, data: ArrayLike<number>, shape: Shape, dtype: DType, options: { device?: number } = {}): Tensor {
    const n = numel(shape);
    if (data.length !== n) throw new RangeError(`fromArray: ${data.length} values for shape ${formatShape(shape)} (${n} elements)`);
    const host = new Uint8Array(n * DTYPE_INFO[dtype].itemsize);
    const acc = elementAccessor(dtype, host);
    for (let i = 0; i < n; i++) acc.set(i, data[i]!);
    const t = Tensor.empty(backend, shape, dtype, options);
    backend.write(t.storage, 0, host);
    return t;
  }

  get backend(): Backend {
    return this.storage.backend;
  }
  get device(): number {
    return this.storage.device;
  }
  get rank(): number {
    return this.shape.length;
  }
  get numel(): number {
    return numel(this.shape);
  }
  get itemsize(): number {
    return DTYPE_INFO[this.dtype].itemsize;
  }
  get isDisposed(): boolean {
    return this.disposed;
  }

  size(dim: number): number {
    return this.shape[normalizeDim(dim, this.rank)]!;
  }

  isContiguous(): boolean {
    if (this.numel === 0) return true; // nothing to lay out (PyTorch agrees)
    let expected = 1;
    for (let i = this.rank - 1; i >= 0; i--) {
      if (this.shape[i] === 1) continue;
      if (this.strides[i] !== expected) return false;
      expected *= this.shape[i]!;
    }
    return true;
  }

  private derive(shape: Shape, strides: readonly number[], offset: number, dtype: DType = this.dtype): Tensor {
    this.assertLive();
    return new Tensor({ storage: this.storage, dtype, shape, strides, offset });
  }

  /**
   * A view with a new shape, without copying. One dimension may be -1. As torch's view: a contiguous tensor takes any
   * shape of its size; a strided one only shapes that split or merge dims whose elements are evenly spaced (a per-head
   * [T, heads, d] view of a narrow [T, heads * d] of a fused projection), else it throws (reshape copies instead).
   */
  view(...shapeArg: number[] | [Shape]): Tensor {
    const shape = resolveShape(flatShape(shapeArg), this.numel);
    if (this.isContiguous()) return this.derive(shape, contiguousStrides(shape), this.offset);
    const strides = viewStrides(this.shape, this.strides, shape);
    if (!strides) throw new Error(`view ${formatShape(shape)} of a non-contiguous tensor ${formatShape(this.shape)} (strides [${this.strides.join(', ')}]) needs a copy: use reshape() or contiguous()`);
    return this.derive(shape, strides, this.offset);
  }

  /** view() when possible, else a contiguous copy. */
  reshape(...shapeArg: number[] | [Shape]): Tensor {
    const shape = resolveShape(flatShape(shapeArg), this.numel);
    if (this.isContiguous()) return this.derive(shape, contiguousStrides(shape), this.offset);
    const c = this.contiguous();
    const v = c.view(shape);
    c.dispose();
    return v;
  }

  permute(...dimsArg: number[] | [readonly number[]]): Tensor {
    const dims = flatShape(dimsArg).map((d) => normalizeDim(d, this.rank));
    if (dims.length !== this.rank || new Set(dims).size !== this.rank) throw new RangeError(`permute(${dims.join(', ')}) is not a permutation of ${this.rank} dims`);
    return this.derive(dims.map((d) => this.shape[d]!), dims.map((d) => this.strides[d]!), this.offset);
  }

  transpose(dim0: number, dim1: number): Tensor {
    const a = normalizeDim(dim0, this.rank);
    const b = normalizeDim(dim1, this.rank);
    const dims = [...Array(this.rank).keys()];
    dims[a] = b;
    dims[b] = a;
    return this.permute(dims);
  }

  /** Elements [start, start+length) of one dimension, as a view. */
  narrow(dim: number, start: number, length: number): Tensor {
    const d = normalizeDim(dim, this.rank);
    const size = this.shape[d]!;
    const s = start < 0 ? start + size : start;
    if (s < 0 || length < 0 || s + length > size) throw new RangeError(`narrow(dim=${dim}, start=${start}, length=${length}) out of range for size ${size}`);
    const shape = [...this.shape];
    shape[d] = length;
    return this.derive(shape, this.strides, this.offset + s * this.strides[d]!);
  }

  /** Python-style slice [start, end) with an optional step, as a view. */
  slice(dim: number, start = 0, end?: number, step = 1): Tensor {
    const d = normalizeDim(dim, this.rank);
    const size = this.shape[d]!;
    const clamp = (v: number) => Math.min(Math.max(v < 0 ? v + size : v, 0), size);
    const s = clamp(start);
    const e = clamp(end ?? size);
    if (!Number.isInteger(step) || step <= 0) throw new RangeError(`slice step must be a positive integer, got ${step}`);
    const len = Math.max(0, Math.ceil((e - s) / step));
    const shape = [...this.shape];
    const strides = [...this.strides];
    shape[d] = len;
    strides[d] = strides[d]! * step;
    return this.derive(shape, strides, this.offset + s * this.strides[d]!);
  }

  /** Index one position of a dimension away (a view of rank - 1). */
  select(dim: number, index: number): Tensor {
    const d = normalizeDim(dim, this.rank);
    const size = this.shape[d]!;
    const i = index < 0 ? index + size : index;
    if (i < 0 || i >= size) throw new RangeError(`select index ${index} out of range for size ${size}`);
    return this.derive(this.shape.filter((_, k) => k !== d), this.strides.filter((_, k) => k !== d), this.offset + i * this.strides[d]!);
  }

  unsqueeze(dim: number): Tensor {
    const d = normalizeDim(dim, this.rank + 1);
    const shape = [...this.shape];
    const strides = [...this.strides];
    shape.splice(d, 0, 1);
    strides.splice(d, 0, d < this.rank ? this.strides[d]! * this.shape[d]! : 1);
    return this.derive(shape, strides, this.offset);
  }

  /** Broadcast size-1 dimensions (stride 0) to a larger shape; -1 keeps a dimension. */
  expand(...shapeArg: number[] | [Shape]): Tensor {
    const target = flatShape(shapeArg);
    if (target.length < this.rank) throw new RangeError(`expand to ${formatShape(target)} has fewer dims than ${formatShape(this.shape)}`);
    const lead = target.length - this.rank;
    const shape: number[] = [];
    const strides: number[] = [];
    target.forEach((t, i) => {
      const j = i - lead;
      const have = j >= 0 ? this.shape[j]! : 1;
      const stride = j >= 0 ? this.strides[j]! : 0;
      const want = t === -1 ? have : t;
      if (have === want) {
        shape.push(want);
        strides.push(stride);
      } else if (have === 1) {
        shape.push(want);
        strides.push(0);
      } else throw new RangeError(`cannot expand ${formatShape(this.shape)} to ${formatShape(target)}`);
    });
    return this.derive(shape, strides, this.offset);
  }

  /** A contiguous tensor with the same values: a new view of this storage when already contiguous. */
  contiguous(): Tensor {
    this.assertLive();
    if (this.isContiguous()) return this.derive(this.shape, contiguousStrides(this.shape), this.offset);
    const out = Tensor.empty(this.backend, this.shape, this.dtype, { device: this.device });
    this.backend.ops.copy(out, this);
    return out;
  }

  /** A new contiguous tensor with a copy of the values. */
  clone(): Tensor {
    this.assertLive();
    const out = Tensor.empty(this.backend, this.shape, this.dtype, { device: this.device });
    this.backend.ops.copy(out, this);
    return out;
  }

  fill_(value: number): this {
    this.assertLive();
    this.backend.ops.fill(this, value);
    return this;
  }

  /** Copy values from `src` (same shape, any dtype, same backend; converts dtype). */
  copy_(src: Tensor): this {
    this.assertLive();
    src.assertLive();
    if (!shapesEqual(this.shape, src.shape)) throw new RangeError(`copy_: shape ${formatShape(src.shape)} into ${formatShape(this.shape)}`);
    if (src.backend === this.backend) {
      this.backend.ops.copy(this, src);
    } else {
      const staged = src.to(this.backend, this.device);
      this.backend.ops.copy(this, staged);
      staged.dispose();
    }
    return this;
  }

  /** A copy converted to another dtype (a new tensor even when the dtype is the same). */
  to(dtype: DType): Tensor;
  /** A contiguous copy on another backend or device. */
  to(backend: Backend, device?: number): Tensor;
  to(target: DType | Backend, device = 0): Tensor {
    this.assertLive();
    if (typeof target === 'string') {
      const out = Tensor.empty(this.backend, this.shape, target, { device: this.device });
      this.backend.ops.copy(out, this);
      return out;
    }
    const c = this.contiguous();
    const bytes = this.backend.read(c.storage, c.offset * c.itemsize, c.numel * c.itemsize);
    c.dispose();
    const out = Tensor.empty(target, this.shape, this.dtype, { device });
    target.write(out.storage, 0, bytes);
    return out;
  }

  /** The values as float64 on the host, in row-major order. */
  toFloat64Array(): Float64Array {
    const bytes = this.toHostBytes();
    const acc = elementAccessor(this.dtype, bytes);
    const out = new Float64Array(this.numel);
    for (let i = 0; i < out.length; i++) out[i] = acc.get(i);
    return out;
  }

  /** Nested JS arrays of numbers (for tests and small printouts). */
  toNested(): unknown {
    const flat = this.toFloat64Array();
    const build = (dim: number, base: number): unknown => {
      if (dim === this.rank) return flat[base];
      const inner = this.shape.slice(dim + 1).reduce((a, b) => a * b, 1);
      return Array.from({ length: this.shape[dim]! }, (_, i) => build(dim + 1, base + i * inner));
    };
    return build(0, 0);
  }

  /** The raw element bytes in row-major order (contiguous copy). */
  toHostBytes(): Uint8Array {
    this.assertLive();
    const c = this.contiguous();
    const bytes = this.backend.read(c.storage, c.offset * c.itemsize, c.numel * c.itemsize);
    c.dispose();
    return bytes;
  }

  /** Reinterpret the storage as another dtype of the same item size (a bit cast view). */
  viewAs(dtype: DType): Tensor {
    if (DTYPE_INFO[dtype].itemsize !== this.itemsize) throw new RangeError(`viewAs ${dtype}: item size differs from ${this.dtype}`);
    return this.derive(this.shape, this.strides, this.offset, dtype);
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.storage.release();
  }

  [Symbol.dispose](): void {
    this.dispose();
  }

  toString(): string {
    return `Tensor(${this.dtype}${formatShape(this.shape)} on ${this.backend.name}:${this.device})`;
  }

  private assertLive(): void {
    if (this.disposed) throw new Error(`use of a disposed tensor ${formatShape(this.shape)}`);
  }
}

function flatShape(arg: number[] | [Shape] | [readonly number[]]): number[] {
  if (arg.length === 1 && Array.isArray(arg[0])) return [...(arg[0] as readonly number[])];
  return arg as number[];
}

function resolveShape(shape: number[], total: number): number[] {
  const free = shape.indexOf(-1);
  if (shape.some((d, i) => !Number.isInteger(d) || (d < 0 && !(d === -1 && i === free)))) {
    throw new RangeError(`invalid shape ${formatShape(shape)}: sizes are non-negative integers, with at most one -1`);
  }
  if (free >= 0) {
    const known = shape.reduce((a, d, i) => (i === free ? a : a * d), 1);
    if (known === 0 || total % known !== 0) throw new RangeError(`cannot infer -1 in ${formatShape(shape)} for ${total} elements`);
    shape = [...shape];
    shape[free] = total / known;
  }
  if (numel(shape) !== total) throw new RangeError(`shape ${formatShape(shape)} has ${numel(shape)} elements, need ${total}`);
  return shape;
}
