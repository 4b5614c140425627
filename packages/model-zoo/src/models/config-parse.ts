/** Shared by every family's config schema: a zod parse whose failure is a UserError naming file and field, the dtype. */
import { UserError, parseDType, type DType } from '@fastkernels/core';
import type { z } from 'zod';

export function parseWith<S extends z.ZodType>(schema: S, raw: unknown, file: string): z.output<S> {
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const field = issue.path.join('.') || '(root)';
    throw new UserError(`invalid field ${field} in ${file}: ${issue.message}`, { field });
  }
  return parsed.data;
}

/** torch_dtype / dtype of a config, or null; an unknown name is a UserError naming the field. */
export function configDType(c: { dtype?: string | null; torch_dtype?: string | null }, file: string): DType | null {
  const name = c.dtype ?? c.torch_dtype ?? null;
  if (!name) return null;
  const field = c.dtype ? 'dtype' : 'torch_dtype';
  let dtype: DType;
  try {
    dtype = parseDType(name);
  } catch {
    throw new UserError(`unknown dtype '${name}' in ${file}: use bfloat16, float16 or float32`, { field });
  }
  if (!FLOAT_DTYPES.has(dtype)) throw new UserError(`unsupported dtype '${name}' in ${file}: supported: bfloat16, float16, float32`, { field });
  return dtype;
}
const FLOAT_DTYPES: ReadonlySet<DType> = new Set<DType>(['bf16', 'f16', 'f32', 'f64']);

/** A UserError naming the field when `ok` is false. */
export function check(ok: boolean, file: string, field: string, message: string): void {
  if (!ok) throw new UserError(`${message} in ${file}`, { field });
}
