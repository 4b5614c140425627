/**
 * Triton signatures on the TypeScript side: the kernel's parameter list read from the Python `def`, Triton type
 * strings ('*bf16', 'i32', 'fp32', with an optional ':16' divisibility hint), and the types inferred from launch
 * arguments the way Triton's JIT specialises them (tensor dtype, 16-byte pointer alignment, i32/i64 and
 * divisibility by 16 of integers).
 */
import type { DType } from '@fastkernels/core';

export interface PyParam {
  readonly name: string;
  /** Annotated `tl.constexpr` (or `constexpr`): a compile-time value, not a kernel parameter. */
  readonly constexpr: boolean;
  readonly hasDefault: boolean;
}

/**
 * The parameters of `def <fn>(...)` in a Python source. Handles annotations, defaults, nested brackets, strings
 * and comments; `*args`/`**kwargs` are rejected (Triton rejects them too).
 */
export function parsePythonParams(source: string, fn: string): PyParam[] {
  const re = new RegExp(`^([ \\t]*)def[ \\t]+${fn.replace(/[$]/g, '\\$')}[ \\t]*\\(`, 'm');
  const m = re.exec(source);
  if (!m) throw new Error(`the Triton source has no 'def ${fn}(...)'`);
  let i = m.index + m[0].length;
  let depth = 1;
  let cur = '';
  const parts: string[] = [];
  while (i < source.length && depth > 0) {
    const c = source[i]!;
    if (c === '#') {
      while (i < source.length && source[i] !== '\n') i++;
      continue;
    }
    if (c === '"' || c === "'") {
      const triple = source.startsWith(c.repeat(3), i);
      const q = triple ? c.repeat(3) : c;
      let j = i + q.length;
      while (j < source.length && !source.startsWith(q, j)) j += source[j] === '\\' ? 2 : 1;
      cur += source.slice(i, j + q.length);
      i = j + q.length;
      continue;
    }
    if (c === '(' || c === '[' || c === '{') depth++;
    else if (c === ')' || c === ']' || c === '}') depth--;
    if (depth === 0) break;
    if (c === ',' && depth === 1) {
      parts.push(cur);
      cur = '';
    } else cur += c;
    i++;
  }
  if (depth !== 0) throw new Error(`cannot parse the parameter list of 'def ${fn}(...)' (unbalanced brackets)`);
  parts.push(cur);
  const out: PyParam[] = [];
  for (const raw of parts) {
    const p = raw.replace(/\s+/g, ' ').trim();
    if (p === '' || p === '/' || p === '*') continue;
    if (p.startsWith('*')) throw new Error(`'def ${fn}': variadic parameter '${p}' is not supported by Triton kernels`);
    const pm = /^([A-Za-z_]\w*)\s*(?::\s*([^=]+?))?\s*(?:=\s*(.+))?$/.exec(p);
    if (!pm) throw new Error(`'def ${fn}': cannot parse parameter '${p}'`);
    const ann = pm[2]?.trim() ?? '';
    out.push({ name: pm[1]!, constexpr: /(^|\.)constexpr$/.test(ann), hasDefault: pm[3] !== undefined });
  }
  return out;
}

export const TRITON_SCALARS = ['i1', 'i8', 'i16', 'i32', 'i64', 'u1', 'u8', 'u16', 'u32', 'u64', 'fp16', 'bf16', 'fp32', 'fp64'] as const;
export const TRITON_ELEMENT_TYPES = [...TRITON_SCALARS, 'fp8e4nv', 'fp8e5', 'fp8e4b15', 'fp8e4b8', 'fp8e5b16'] as const;
const SCALAR_SET = new Set<string>(TRITON_SCALARS);
const ELEMENT_SET = new Set<string>(TRITON_ELEMENT_TYPES);

/** A runtime (non-constexpr) parameter's type: the Triton type and whether it carries tt.divisibility=16. */
export interface ParamType {
  /** '*fp32', '*kbf16', 'i32', 'fp32', ... (no ':16'). */
  readonly type: string;
  readonly div16: boolean;
}

/** Parse '*bf16', '*bf16:16', 'i32:16', 'fp32', 'f32' (alias), '*kfp16' (const pointer). */
export function parseTritonType(s: string, where = 'type'): ParamType {
  const m = /^\s*(\*k?)?([a-z0-9]+)\s*(?::\s*(16|D))?\s*$/.exec(s);
  const bad = () => new Error(`${where}: '${s}' is not a Triton type (use e.g. '*fp32', '*bf16:16', 'i32', 'i64:16', 'fp32')`);
  if (!m) throw bad();
  const elem = m[2] === 'f32' ? 'fp32' : m[2]!;
  const ptr = m[1] ?? '';
  if (ptr ? !ELEMENT_SET.has(elem) : !SCALAR_SET.has(elem)) throw bad();
  if (m[3] && !ptr && !/^[iu](8|16|32|64)$/.test(elem)) throw new Error(`${where}: a divisibility hint (':16') applies to pointers and integers, not '${elem}'`);
  return { type: `${ptr}${elem}`, div16: m[3] !== undefined };
}

export function formatParamType(t: ParamType): string {
  return t.div16 ? `${t.type}:16` : t.type;
}

/** Triton's element type for each core dtype (pointers to bool are '*i1', as PyTorch's torch.bool). */
export const TRITON_DTYPE: Readonly<Record<DType, string>> = {
  f64: 'fp64', f32: 'fp32', f16: 'fp16', bf16: 'bf16', fp8e4m3: 'fp8e4nv', fp8e5m2: 'fp8e5',
  i64: 'i64', i32: 'i32', i16: 'i16', i8: 'i8', u8: 'u8', bool: 'i1',
};

/** What a launch argument may be: a tensor, a device pointer, a scalar. */
export type TritonArg = number | bigint | boolean | Uint8Array | { readonly devicePtr: number } | TensorArg;
/** A core Tensor (duck-typed: storage with a device pointer, an element offset, a dtype). */
export interface TensorArg {
  readonly storage: { readonly devicePtr?: number };
  readonly offset: number;
  readonly itemsize: number;
  readonly dtype: DType;
}

export function isTensorArg(v: unknown): v is TensorArg {
  return typeof v === 'object' && v !== null && 'storage' in v && 'dtype' in v && 'offset' in v;
}

/** The device address of a pointer argument (tensor, {devicePtr}, number), or undefined. */
export function pointerOf(v: unknown): number | undefined {
  if (typeof v === 'number') return v;
  if (typeof v !== 'object' || v === null) return undefined;
  if (isTensorArg(v)) {
    const p = v.storage.devicePtr;
    return typeof p === 'number' ? p + v.offset * v.itemsize : undefined;
  }
  if ('devicePtr' in v && typeof (v as { devicePtr: unknown }).devicePtr === 'number') return (v as { devicePtr: number }).devicePtr;
  return undefined;
}

const I32_MIN = -(2 ** 31);
const I32_MAX = 2 ** 31 - 1;

/**
 * The Triton type Triton's JIT would give `v` (as a '*bf16:16' string): a tensor is a pointer to its dtype,
 * divisible by 16 when its address is 16-byte aligned; an integer number is i32 when it fits, else i64 (u64
 * at 2^63 and above), divisible when v % 16 == 0 (unless `noSpecialize`); a fractional number is fp32; a
 * boolean is i1. A raw device pointer has no dtype: give that parameter's type in `signature`.
 */
export function inferTypeString(v: unknown, name: string, noSpecialize = false): string {
  if (typeof v === 'number') {
    if (Number.isInteger(v)) {
      const t = v >= I32_MIN && v <= I32_MAX ? 'i32' : v >= 2 ** 63 ? 'u64' : 'i64';
      return !noSpecialize && v % 16 === 0 ? `${t}:16` : t;
    }
    return 'fp32';
  }
  if (typeof v === 'boolean') return 'i1';
  if (typeof v === 'bigint') {
    const t = v >= -(2n ** 63n) && v < 2n ** 63n ? 'i64' : 'u64';
    return !noSpecialize && v % 16n === 0n ? `${t}:16` : t;
  }
  if (isTensorArg(v)) {
    const addr = pointerOf(v);
    if (addr === undefined) throw new TypeError(`argument '${name}': the tensor is not on a CUDA device`);
    const t = `*${TRITON_DTYPE[v.dtype]}`;
    return !noSpecialize && addr % 16 === 0 ? `${t}:16` : t;
  }
  if (typeof v === 'object' && v !== null && 'devicePtr' in v) {
    throw new TypeError(`argument '${name}': a raw device pointer has no element type; pass a tensor or give '${name}' a type in signature (e.g. '*bf16')`);
  }
  throw new TypeError(`argument '${name}': cannot infer a Triton type for ${v === null ? 'null' : typeof v}; give it a type in signature`);
}
