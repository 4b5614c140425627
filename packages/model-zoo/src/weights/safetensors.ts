/**
 * safetensors (https://huggingface.co/docs/safetensors): an 8-byte little-endian header length N, N bytes of
 * JSON ({name: {dtype, shape, data_offsets: [begin, end]}, __metadata__?: {str: str}}), then the data;
 * offsets are relative to the start of the data. Node has no mmap without a native addon, so tensors are
 * streamed: the header is read and validated, then each tensor's byte range is read with fs.read in chunks
 * that go straight to backend.write (the model is never held in the JS heap).
 */
import { closeSync, existsSync, fstatSync, openSync, readFileSync, readSync, readdirSync, writeSync } from 'node:fs';
import { basename, join } from 'node:path';
import { DTYPE_INFO, UserError, formatShape, numel, type Backend, type DType, type Storage } from '@fastkernels/core';
import { z } from 'zod';

/** safetensors dtype names -> item size and our dtype (null: known to the format, not to this engine). */
export const SAFETENSORS_DTYPES: Readonly<Record<string, { readonly itemsize: number; readonly dtype: DType | null }>> = {
  F64: { itemsize: 8, dtype: 'f64' },
  F32: { itemsize: 4, dtype: 'f32' },
  F16: { itemsize: 2, dtype: 'f16' },
  BF16: { itemsize: 2, dtype: 'bf16' },
  F8_E4M3: { itemsize: 1, dtype: 'fp8e4m3' },
  F8_E5M2: { itemsize: 1, dtype: 'fp8e5m2' },
  I64: { itemsize: 8, dtype: 'i64' },
  I32: { itemsize: 4, dtype: 'i32' },
  I16: { itemsize: 2, dtype: 'i16' },
  I8: { itemsize: 1, dtype: 'i8' },
  U8: { itemsize: 1, dtype: 'u8' },
  BOOL: { itemsize: 1, dtype: 'bool' },
  U16: { itemsize: 2, dtype: null },
  U32: { itemsize: 4, dtype: null },
  U64: { itemsize: 8, dtype: null },
  F8_E8M0: { itemsize: 1, dtype: null },
  C64: { itemsize: 8, dtype: null },
};

const ST_NAME: Readonly<Record<DType, string>> = {
  f64: 'F64', f32: 'F32', f16: 'F16', bf16: 'BF16', fp8e4m3: 'F8_E4M3', fp8e5m2: 'F8_E5M2',
  i64: 'I64', i32: 'I32', i16: 'I16', i8: 'I8', u8: 'U8', bool: 'BOOL',
};

/** The safetensors name of one of our dtypes. */
export const safetensorsDTypeName = (d: DType): string => ST_NAME[d];

/** The format's own limit on the header. */
const MAX_HEADER_BYTES = 100_000_000;

const EntrySchema = z.object({
  dtype: z.string(),
  shape: z.array(z.number().int().nonnegative()),
  data_offsets: z.tuple([z.number().int().nonnegative(), z.number().int().nonnegative()]),
});
const MetadataSchema = z.record(z.string(), z.string());

export interface TensorInfo {
  readonly name: string;
  /** The safetensors dtype name (F32, BF16, ...). */
  readonly stDType: string;
  /** Our dtype, or null for one the engine has no counterpart of. */
  readonly dtype: DType | null;
  readonly shape: readonly number[];
  /** Absolute byte range in the file. */
  readonly begin: number;
  readonly end: number;
  readonly file: string;
}

/** Validate a parsed header against a file's data length. Throws UserError naming the file and tensor. */
export function validateHeader(header: unknown, file: string, dataLength: number, dataStart: number): { tensors: Map<string, TensorInfo>; metadata: Record<string, string> } {
  if (!header || typeof header !== 'object' || Array.isArray(header)) throw new UserError(`${file}: the safetensors header is not a JSON object`);
  const tensors = new Map<string, TensorInfo>();
  let metadata: Record<string, string> = {};
  for (const [name, value] of Object.entries(header as Record<string, unknown>)) {
    if (name === '__metadata__') {
      const m = MetadataSchema.safeParse(value);
      if (!m.success) throw new UserError(`${file}: __metadata__ must map strings to strings`, { field: '__metadata__' });
      metadata = m.data;
      continue;
    }
    const e = EntrySchema.safeParse(value);
    if (!e.success) {
      const issue = e.error.issues[0]!;
      throw new UserError(`${file}: tensor '${name}': ${issue.path.join('.') || 'entry'}: ${issue.message}`, { field: name });
    }
    const { dtype: stDType, shape, data_offsets: [b, en] } = e.data;
    const info = SAFETENSORS_DTYPES[stDType];
    if (!info) throw new UserError(`${file}: tensor '${name}' has unknown dtype '${stDType}' (known: ${Object.keys(SAFETENSORS_DTYPES).join(', ')})`, { field: name });
    if (b > en) throw new UserError(`${file}: tensor '${name}' has data_offsets [${b}, ${en}] with begin after end`, { field: name });
    if (en > dataLength) {
      throw new UserError(`${file}: tensor '${name}' ends at data byte ${en} but the file holds ${dataLength} bytes of data: the file is truncated or corrupt`, {
        field: name,
        fix: 'download or write the checkpoint again',
      });
    }
    const want = numel(shape) * info.itemsize;
    if (en - b !== want) throw new UserError(`${file}: tensor '${name}' (${stDType}${formatShape(shape)}) needs ${want} bytes, its data_offsets span ${en - b}`, { field: name });
    tensors.set(name, { name, stDType, dtype: info.dtype, shape, begin: dataStart + b, end: dataStart + en, file });
  }
  const sorted = [...tensors.values()].filter((t) => t.end > t.begin).sort((x, y) => x.begin - y.begin);
  for (let i = 1; i < sorted.length; i++) {
    if (sorted[i]!.begin < sorted[i - 1]!.end) throw new UserError(`${file}: tensors '${sorted[i - 1]!.name}' and '${sorted[i]!.name}' overlap in the data section`, { field: sorted[i]!.name });
  }
  return { tensors, metadata };
}

/** One .safetensors file, header parsed and validated; tensors are read on demand. */
export class SafetensorsFile {
  private fd: number | null;
  private constructor(
    readonly path: string,
    fd: number,
    readonly tensors: ReadonlyMap<string, TensorInfo>,
    readonly metadata: Readonly<Record<string, string>>,
  ) {
    this.fd = fd;
  }

  static open(path: string): SafetensorsFile {
    let fd: number;
    try {
      fd = openSync(path, 'r');
    } catch (e) {
      throw new UserError(`cannot open ${path}: ${(e as Error).message}`);
    }
    try {
      const size = fstatSync(fd).size;
      if (size < 8) throw new UserError(`${path}: ${size} bytes is too short for a safetensors file (8-byte header length missing): the file is truncated`);
      const lenBuf = Buffer.alloc(8);
      readFully(fd, lenBuf, 0, path);
      const n = Number(lenBuf.readBigUInt64LE(0));
      if (n > MAX_HEADER_BYTES || 8 + n > size) {
        throw new UserError(`${path}: the header length ${n} does not fit the file's ${size} bytes: the file is truncated or not safetensors`);
      }
      const hbuf = Buffer.alloc(n);
      readFully(fd, hbuf, 8, path);
      let header: unknown;
      try {
        header = JSON.parse(hbuf.toString('utf8'));
      } catch (e) {
        throw new UserError(`${path}: the safetensors header is not valid JSON (${(e as Error).message})`);
      }
      const { tensors, metadata } = validateHeader(header, path, size - 8 - n, 8 + n);
      return new SafetensorsFile(path, fd, tensors, metadata);
    } catch (e) {
      closeSync(fd);
      throw e;
    }
  }

  info(name: string): TensorInfo {
    const t = this.tensors.get(name);
    if (!t) throw new UserError(`${this.path} has no tensor '${name}'`, { field: name });
    return t;
  }

  /**
   * Stream a tensor's bytes in chunks of at most chunkBytes (a multiple of 8): onChunk(bytes, offset within
   * the tensor). The chunk buffer is reused: consume it before returning.
   */
  stream(name: string, onChunk: (bytes: Uint8Array, offset: number) => void, chunkBytes = 64 << 20): void {
    const t = this.info(name);
    const fd = this.handle();
    const total = t.end - t.begin;
    const size = Math.max(8, Math.min(chunkBytes - (chunkBytes % 8), total));
    const buf = Buffer.allocUnsafe(size);
    for (let off = 0; off < total; off += size) {
      const len = Math.min(size, total - off);
      const view = buf.subarray(0, len);
      readFully(fd, view, t.begin + off, this.path, name);
      onChunk(view, off);
    }
  }

  /** A tensor's bytes in one new buffer (small tensors and tests). */
  readBytes(name: string): Uint8Array {
    const t = this.info(name);
    const out = new Uint8Array(t.end - t.begin);
    readFully(this.handle(), out, t.begin, this.path, name);
    return out;
  }

  /** Stream a tensor straight into a backend storage at a byte offset. */
  readInto(name: string, backend: Backend, dst: Storage, byteOffset: number, chunkBytes?: number): void {
    this.stream(name, (bytes, off) => backend.write(dst, byteOffset + off, bytes), chunkBytes);
  }

  /**
   * Stream a slice of a tensor (`length` entries from `start` along `dim` 0 or 1; a tensor-parallel rank's shard)
   * into a backend storage at a byte offset, contiguous in the slice's own shape. Only the slice's bytes are read:
   * rows of dim 0 are one byte range; a column slice (dim 1 of a matrix) is one read per row, gathered in a staging
   * buffer of at most chunkBytes.
   */
  readSliceInto(name: string, slice: { readonly dim: number; readonly start: number; readonly length: number }, backend: Backend, dst: Storage, byteOffset: number, chunkBytes = 64 << 20): void {
    const t = this.info(name);
    const { dim, start, length } = slice;
    if (dim !== 0 && !(dim === 1 && t.shape.length === 2)) throw new RangeError(`${this.path}: tensor '${name}' ${formatShape(t.shape)}: slices along dim ${dim} are not supported (dim 0, or dim 1 of a matrix)`);
    if (!Number.isInteger(start) || !Number.isInteger(length) || start < 0 || length < 0 || start + length > t.shape[dim]!) {
      throw new RangeError(`${this.path}: tensor '${name}' ${formatShape(t.shape)}: slice [${start}, ${start + length}) of dim ${dim} is out of range`);
    }
    const itemsize = SAFETENSORS_DTYPES[t.stDType]!.itemsize;
    const fd = this.handle();
    if (dim === 0) {
      const rowBytes = (numel(t.shape) / Math.max(1, t.shape[0]!)) * itemsize;
      const total = length * rowBytes;
      const size = Math.max(8, Math.min(chunkBytes - (chunkBytes % 8), total));
      const buf = Buffer.allocUnsafe(size);
      for (let off = 0; off < total; off += size) {
        const view = buf.subarray(0, Math.min(size, total - off));
        readFully(fd, view, t.begin + start * rowBytes + off, this.path, name);
        backend.write(dst, byteOffset + off, view);
      }
      return;
    }
    const [rows, cols] = t.shape as [number, number];
    const seg = length * itemsize;
    const rowsPerChunk = Math.max(1, Math.floor(chunkBytes / Math.max(1, seg)));
    const buf = Buffer.allocUnsafe(Math.min(rows, rowsPerChunk) * seg);
    for (let r0 = 0; r0 < rows; r0 += rowsPerChunk) {
      const n = Math.min(rowsPerChunk, rows - r0);
      for (let i = 0; i < n; i++) readFully(fd, buf.subarray(i * seg, (i + 1) * seg), t.begin + ((r0 + i) * cols + start) * itemsize, this.path, name);
      backend.write(dst, byteOffset + r0 * seg, buf.subarray(0, n * seg));
    }
  }

  close(): void {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }

  private handle(): number {
    if (this.fd === null) throw new Error(`${this.path} is closed`);
    return this.fd;
  }
}

function readFully(fd: number, buf: Uint8Array, position: number, file: string, tensor?: string): void {
  let done = 0;
  while (done < buf.byteLength) {
    const n = readSync(fd, buf, done, Math.min(buf.byteLength - done, 1 << 30), position + done);
    if (n === 0) throw new UserError(`${file}: unexpected end of file${tensor ? ` reading tensor '${tensor}'` : ''}: the file is truncated`, tensor ? { field: tensor } : {});
    done += n;
  }
}

const IndexSchema = z.object({
  metadata: z.record(z.string(), z.unknown()).optional(),
  weight_map: z.record(z.string(), z.string()),
});

/** A checkpoint folder: model.safetensors, shards listed by model.safetensors.index.json, or every *.safetensors. */
export class Checkpoint {
  private constructor(
    readonly dir: string,
    readonly files: readonly SafetensorsFile[],
    private readonly where: ReadonlyMap<string, SafetensorsFile>,
  ) {}

  /** Whether a folder holds safetensors weights at all. */
  static exists(dir: string): boolean {
    return existsSync(dir) && readdirSync(dir).some((f) => f.endsWith('.safetensors'));
  }

  static open(dir: string): Checkpoint {
    const indexPath = join(dir, 'model.safetensors.index.json');
    const files: SafetensorsFile[] = [];
    const where = new Map<string, SafetensorsFile>();
    try {
      if (existsSync(indexPath)) {
        let raw: unknown;
        try {
          raw = JSON.parse(readFileSync(indexPath, 'utf8'));
        } catch (e) {
          throw new UserError(`${indexPath} is not valid JSON: ${(e as Error).message}`);
        }
        const idx = IndexSchema.safeParse(raw);
        if (!idx.success) throw new UserError(`${indexPath}: ${idx.error.issues[0]!.path.join('.')}: ${idx.error.issues[0]!.message}`, { field: 'weight_map' });
        const byName = new Map<string, SafetensorsFile>();
        for (const [tensor, shard] of Object.entries(idx.data.weight_map)) {
          if (basename(shard) !== shard) throw new UserError(`${indexPath}: shard '${shard}' of '${tensor}' must be a file name in the same folder`, { field: tensor });
          let f = byName.get(shard);
          if (!f) {
            f = SafetensorsFile.open(join(dir, shard));
            byName.set(shard, f);
            files.push(f);
          }
          if (!f.tensors.has(tensor)) throw new UserError(`${indexPath} maps '${tensor}' to ${shard}, which has no such tensor`, { field: tensor });
          where.set(tensor, f);
        }
      } else {
        const names = existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith('.safetensors')).sort() : [];
        if (!names.length) throw new UserError(`no safetensors weights in ${dir}`, { fix: 'write some with `fastkernels init-weights`' });
        for (const n of names) {
          const f = SafetensorsFile.open(join(dir, n));
          files.push(f);
          for (const t of f.tensors.keys()) {
            const prev = where.get(t);
            if (prev) throw new UserError(`tensor '${t}' is in both ${prev.path} and ${f.path}`, { field: t });
            where.set(t, f);
          }
        }
      }
    } catch (e) {
      for (const f of files) f.close();
      throw e;
    }
    return new Checkpoint(dir, files, where);
  }

  names(): string[] {
    return [...this.where.keys()];
  }

  has(name: string): boolean {
    return this.where.has(name);
  }

  info(name: string): TensorInfo {
    const f = this.where.get(name);
    if (!f) throw new UserError(`checkpoint ${this.dir} has no tensor '${name}'`, { field: name });
    return f.info(name);
  }

  file(name: string): SafetensorsFile {
    const f = this.where.get(name);
    if (!f) throw new UserError(`checkpoint ${this.dir} has no tensor '${name}'`, { field: name });
    return f;
  }

  close(): void {
    for (const f of this.files) f.close();
  }
}

/** One tensor to write: its bytes are produced when its turn comes (so a model is never held whole). */
export interface WriteEntry {
  readonly name: string;
  readonly dtype: DType;
  readonly shape: readonly number[];
  readonly bytes: () => Uint8Array;
}

/** Write a safetensors file (header padded with spaces to 8 bytes, as the reference writer does). */
export function writeSafetensors(path: string, entries: readonly WriteEntry[], metadata: Record<string, string> = { format: 'pt' }): void {
  const header: Record<string, unknown> = {};
  if (Object.keys(metadata).length) header.__metadata__ = metadata;
  let off = 0;
  const seen = new Set<string>();
  for (const e of entries) {
    if (seen.has(e.name)) throw new Error(`writeSafetensors: tensor '${e.name}' given twice`);
    seen.add(e.name);
    const len = numel(e.shape) * DTYPE_INFO[e.dtype].itemsize;
    header[e.name] = { dtype: ST_NAME[e.dtype], shape: [...e.shape], data_offsets: [off, off + len] };
    off += len;
  }
  let json = JSON.stringify(header);
  const pad = (8 - (Buffer.byteLength(json) % 8)) % 8;
  json += ' '.repeat(pad);
  const hbytes = Buffer.from(json, 'utf8');
  const lenBuf = Buffer.alloc(8);
  lenBuf.writeBigUInt64LE(BigInt(hbytes.byteLength));
  const fd = openSync(path, 'w');
  try {
    writeAll(fd, lenBuf);
    writeAll(fd, hbytes);
    for (const e of entries) {
      const b = e.bytes();
      const want = numel(e.shape) * DTYPE_INFO[e.dtype].itemsize;
      if (b.byteLength !== want) throw new Error(`writeSafetensors: tensor '${e.name}' produced ${b.byteLength} bytes, expected ${want}`);
      writeAll(fd, b);
    }
  } finally {
    closeSync(fd);
  }
}

function writeAll(fd: number, b: Uint8Array): void {
  let done = 0;
  while (done < b.byteLength) done += writeSync(fd, b, done, b.byteLength - done);
}
