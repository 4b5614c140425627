/**
 * PyTorch's type promotion (torch.result_type): categories bool < integer < float; within the operands of the highest
 * priority class (tensors with dims, then 0-d tensors, then Python scalars) the types promote by the table below, and
 * a lower class only matters when its category is higher (a float scalar turns an int tensor into the default float
 * type f32; it never widens a bf16 tensor).
 *
 * JS has one number type, so a scalar operand is an integer scalar when Number.isInteger(v) (2.0 counts as int) and a
 * float scalar otherwise; pass a 0-d tensor to force a type.
 */
import { DTYPE_INFO, type DType } from '../dtype.js';
import { opError, type MetaArg, type TensorMeta } from './registry.js';

/** The default float dtype (torch.get_default_dtype()). */
export const DEFAULT_FLOAT: DType = 'f32';

const FLOAT_RANK: Partial<Record<DType, number>> = { f16: 1, bf16: 1, f32: 2, f64: 3 };
const INT_BITS: Partial<Record<DType, number>> = { i8: 8, i16: 16, i32: 32, i64: 64 };

/** promote_types(a, b): the smallest type both values fit (bf16 + f16 -> f32, u8 + i8 -> i16, int + float -> float). */
export function promoteTypes(a: DType, b: DType): DType {
  if (a === b) return a;
  const ka = DTYPE_INFO[a].kind;
  const kb = DTYPE_INFO[b].kind;
  if (ka === 'bool') return b;
  if (kb === 'bool') return a;
  if (ka === 'float' && kb === 'float') {
    const ra = FLOAT_RANK[a];
    const rb = FLOAT_RANK[b];
    if (ra === undefined || rb === undefined) throw new TypeError(`promote_types(${a}, ${b}): fp8 types do not promote; cast explicitly`);
    if (ra === rb) return 'f32'; // f16 + bf16
    return ra > rb ? a : b;
  }
  if (ka === 'float') {
    if (FLOAT_RANK[a] === undefined) throw new TypeError(`promote_types(${a}, ${b}): fp8 types do not promote; cast explicitly`);
    return a;
  }
  if (kb === 'float') return promoteTypes(b, a);
  // both integers
  if (a === 'u8') return b === 'i8' ? 'i16' : b;
  if (b === 'u8') return a === 'i8' ? 'i16' : a;
  return INT_BITS[a]! >= INT_BITS[b]! ? a : b;
}

type Category = 0 | 1 | 2; // bool, int, float
const category = (d: DType): Category => (DTYPE_INFO[d].kind === 'float' ? 2 : DTYPE_INFO[d].kind === 'int' ? 1 : 0);

/** combine_categories(higher-priority result, lower-priority result) as in c10. */
function combine(higher: DType | undefined, lower: DType | undefined): DType | undefined {
  if (higher === undefined) return lower;
  if (lower === undefined) return higher;
  if (category(higher) === 2) return higher;
  if (higher === 'bool' || category(lower) === 2) return promoteTypes(higher, lower);
  return higher;
}

/** The dtype a Python-style scalar has when it takes part in promotion. */
export function scalarDType(v: number): DType {
  return Number.isInteger(v) ? 'i64' : DEFAULT_FLOAT;
}

/** torch.result_type over tensors (metas) and scalars; nulls are skipped. */
export function resultType(operands: readonly MetaArg[], op = 'result_type'): DType {
  let dim: DType | undefined;
  let zero: DType | undefined;
  let wrapped: DType | undefined;
  const up = (acc: DType | undefined, d: DType) => {
    try {
      return acc === undefined ? d : promoteTypes(acc, d);
    } catch (e) {
      return opError(op, (e as Error).message);
    }
  };
  for (const o of operands) {
    if (o === null) continue;
    if (typeof o === 'number') {
      wrapped = up(wrapped, scalarDType(o));
      continue;
    }
    const t = o as TensorMeta;
    if (t.shape.length === 0) zero = up(zero, t.dtype);
    else dim = up(dim, t.dtype);
  }
  const r = combine(dim, combine(zero, wrapped));
  if (r === undefined) opError(op, 'no operands to promote');
  // a float scalar over an integer tensor gives the default float type, not f64
  return r;
}

/** Integer and bool results of ops that only make sense in floating point (exp, sigmoid, true division) become f32. */
export function toFloatType(d: DType): DType {
  return DTYPE_INFO[d].kind === 'float' ? d : DEFAULT_FLOAT;
}
