import { z } from 'zod';
import { DTYPE_INFO, type DType } from '../dtype.js';
import { DTypeSchema, resolveSpecShape, type TaskCase, type TaskDefinition } from '../task.js';

/**
 * Capture files (design §4 "Cases"): a JSON index per (model, workload) with, per task, the init
 * variants and the forward shapes production called, with counts; data-dependent inputs (MoE routing,
 * block tables, cu_seqlens) may carry their values in safetensors files next to the index.
 * `fastkernels capture` (a later issue) writes them; `fastkernels bench --captures DIR` reads them.
 */
export const CAPTURE_VERSION = 1;

export const CapturedValueSchema = z.object({
  /** safetensors file, relative to the index file. */
  file: z.string().min(1),
  /** tensor name inside it. */
  tensor: z.string().min(1),
});

export const CapturedForwardSchema = z.object({
  dims: z.record(z.string(), z.number().int().nonnegative()),
  dtype: DTypeSchema,
  count: z.number().int().positive(),
  /** Which entry of `init` built the module (default 0). */
  init: z.number().int().nonnegative().default(0),
  /** Per-case options the task's input builder reads. */
  options: z.record(z.string(), z.unknown()).optional(),
  values: z.record(z.string(), CapturedValueSchema).optional(),
});

export const CaptureIndexSchema = z.object({
  version: z.literal(CAPTURE_VERSION),
  model: z.string().min(1),
  workload: z.string().min(1),
  capturedAt: z.string().optional(),
  tasks: z.record(
    z.string().regex(/^L[1-9]\/[a-z0-9_]+$/),
    z.object({
      /** Constructor argument lists, one per init variant. */
      init: z.array(z.array(z.unknown())).min(1),
      forward: z.array(CapturedForwardSchema).min(1),
    }),
  ),
});
export type CaptureIndex = z.infer<typeof CaptureIndexSchema>;
export type CapturedForward = z.infer<typeof CapturedForwardSchema>;

/** A case built from a capture, with where its captured values live (absolute paths). */
export interface CapturedCase extends TaskCase {
  readonly values?: Readonly<Record<string, { readonly file: string; readonly tensor: string }>>;
  readonly source: string;
}

export const DEFAULT_MAX_SHAPES = 5;

/** Total input elements of a case (the size the selection orders by). */
export function caseSize(task: TaskDefinition, c: TaskCase): number {
  let n = 0;
  for (const spec of task.inputs) {
    try {
      n += resolveSpecShape(spec, c).reduce((a, b) => a * b, 1);
    } catch {
      // an optional input whose dims the case lacks
    }
  }
  return n;
}

/**
 * The cases of one task from one or more capture indexes: deduplicated by (init args, dims, dtype,
 * options) with counts summed; more than `maxShapes` → the smallest, the largest and the median by
 * total input elements, then the most frequent (the original's rule).
 */
export function casesFromCaptures(task: TaskDefinition, captures: readonly { readonly index: CaptureIndex; readonly resolve: (file: string) => string; readonly path: string }[], maxShapes = DEFAULT_MAX_SHAPES): CapturedCase[] {
  const byKey = new Map<string, CapturedCase>();
  for (const { index, resolve, path } of captures) {
    const t = index.tasks[task.id];
    if (!t) continue;
    for (const [i, f] of t.forward.entries()) {
      const init = t.init[f.init];
      if (!init) throw new Error(`${path}: tasks.${task.id}.forward.${i}.init: no init variant ${f.init} (there are ${t.init.length})`);
      const values = f.values ? Object.fromEntries(Object.entries(f.values).map(([k, v]) => [k, { file: resolve(v.file), tensor: v.tensor }])) : undefined;
      const key = JSON.stringify([init, Object.entries(f.dims).sort(), f.dtype, f.options ?? {}, values ?? null]);
      const prev = byKey.get(key);
      if (prev) {
        byKey.set(key, { ...prev, count: prev.count + f.count });
        continue;
      }
      const dimsText = Object.entries(f.dims).map(([k, v]) => `${k}${v}`).join('-');
      byKey.set(key, {
        name: `cap-${index.model}-${index.workload}-${dimsText}-${f.dtype}`.replace(/[^A-Za-z0-9_.+-]/g, '_'),
        dtype: f.dtype, dims: f.dims, init, options: f.options ?? {}, count: f.count, source: path,
        ...(values ? { values } : {}),
      });
    }
  }
  return selectCases(task, [...byKey.values()], maxShapes);
}

export function selectCases<T extends TaskCase>(task: TaskDefinition, all: readonly T[], maxShapes: number): T[] {
  if (all.length <= maxShapes) return [...all];
  const bySize = [...all].sort((a, b) => caseSize(task, a) - caseSize(task, b) || a.name.localeCompare(b.name));
  const picked = new Set<T>();
  for (const c of [bySize[0]!, bySize[bySize.length - 1]!, bySize[Math.floor((bySize.length - 1) / 2)]!]) {
    if (picked.size < maxShapes) picked.add(c);
  }
  const byCount = [...all].sort((a, b) => b.count - a.count || caseSize(task, a) - caseSize(task, b));
  for (const c of byCount) {
    if (picked.size >= maxShapes) break;
    picked.add(c);
  }
  return bySize.filter((c) => picked.has(c));
}

// ---- safetensors ----------------------------------------------------------------------------------

const ST_DTYPES: Readonly<Record<string, DType>> = {
  F64: 'f64', F32: 'f32', F16: 'f16', BF16: 'bf16', F8_E4M3: 'fp8e4m3', F8_E5M2: 'fp8e5m2',
  I64: 'i64', I32: 'i32', I16: 'i16', I8: 'i8', U8: 'u8', BOOL: 'bool',
};

export interface SafetensorsEntry {
  readonly dtype: DType;
  readonly shape: readonly number[];
  /** Byte range within the file. */
  readonly start: number;
  readonly end: number;
}

/** Parse a safetensors header (the first 8 + N bytes). Throws with what is wrong. */
export function parseSafetensorsHeader(head: Uint8Array, fileSize: number): Map<string, SafetensorsEntry> {
  if (head.byteLength < 8) throw new Error('not a safetensors file (shorter than 8 bytes)');
  const n = Number(new DataView(head.buffer, head.byteOffset, 8).getBigUint64(0, true));
  if (n <= 0 || 8 + n > fileSize || 8 + n > head.byteLength) throw new Error(`not a safetensors file (header length ${n} does not fit in ${fileSize} bytes)`);
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder().decode(head.subarray(8, 8 + n)));
  } catch (e) {
    throw new Error(`corrupt safetensors header (${(e as Error).message})`);
  }
  if (typeof json !== 'object' || json === null) throw new Error('corrupt safetensors header (not an object)');
  const out = new Map<string, SafetensorsEntry>();
  for (const [name, v] of Object.entries(json as Record<string, unknown>)) {
    if (name === '__metadata__') continue;
    const e = v as { dtype?: string; shape?: number[]; data_offsets?: [number, number] };
    const dtype = e.dtype ? ST_DTYPES[e.dtype] : undefined;
    if (!dtype) throw new Error(`tensor '${name}': unsupported dtype ${String(e.dtype)}`);
    if (!Array.isArray(e.shape) || !Array.isArray(e.data_offsets) || e.data_offsets.length !== 2) throw new Error(`tensor '${name}': missing shape or data_offsets`);
    const start = 8 + n + e.data_offsets[0];
    const end = 8 + n + e.data_offsets[1];
    const want = e.shape.reduce((a, b) => a * b, 1) * DTYPE_INFO[dtype].itemsize;
    if (end - start !== want || end > fileSize || start < 8 + n) throw new Error(`tensor '${name}': data_offsets [${e.data_offsets.join(', ')}] do not hold ${want} bytes within the file`);
    out.set(name, { dtype, shape: e.shape, start, end });
  }
  return out;
}
