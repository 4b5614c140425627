/**
 * Embedding gather on the CUDA backend (kernels/embedding.cu): weight [V, H] at ids [...] (i32/i64; other
 * integer dtypes are widened) -> [..., H] in the weight's dtype. A row copy in the widest unit (16 bytes when
 * aligned). Out-of-range ids write zero rows and, with index checks on (common.ts), throw a RangeError.
 * embeddingMasked: the same kernel on a vocabulary shard (rows [start, start + V) of the full table): ids outside it
 * are other ranks' and give zero rows, never an error.
 */
import { Tensor, formatShape } from '@fastkernels/core';
import type { SpineContext } from '../launch/context.js';
import { asDType, checkIndexFlag, contiguousOf, disposeAll, indexFlag, itemsizeOf, ptr, roundUp, spineKernel } from '../launch/common.js';

const UNITS: readonly [number, string][] = [[16, 'uint4'], [8, 'unsigned long long'], [4, 'unsigned int'], [2, 'unsigned short'], [1, 'unsigned char']];

export function embedding(ctx: SpineContext, ids: Tensor, weight: Tensor): Tensor {
  return gatherRows(ctx, ids, weight, null);
}

export function embeddingMasked(ctx: SpineContext, ids: Tensor, weight: Tensor, start: number): Tensor {
  if (!Number.isInteger(start) || start < 0) throw new RangeError(`embeddingMasked: start ${start} must be a non-negative integer`);
  return gatherRows(ctx, ids, weight, start);
}

/** start null: embedding (ids checked when index checks are on); else embeddingMasked's shard offset. */
function gatherRows(ctx: SpineContext, ids: Tensor, weight: Tensor, start: number | null): Tensor {
  const op = start === null ? 'embedding' : 'embeddingMasked';
  if (weight.rank !== 2) throw new RangeError(`${op}: weight ${formatShape(weight.shape)} must be [V, H]`);
  const [V, H] = weight.shape as [number, number];
  const intTypes = ['i64', 'i32', 'i16', 'i8', 'u8'];
  if (!intTypes.includes(ids.dtype)) throw new TypeError(`${op}: ids have dtype ${ids.dtype}; expected an integer dtype`);
  const out = Tensor.empty(weight.backend, [...ids.shape, H], weight.dtype, { device: weight.device });
  const n = ids.numel;
  if (n === 0 || H === 0) return out;
  const temps: Tensor[] = [];
  try {
    const idv = ids.dtype === 'i32' || ids.dtype === 'i64' ? contiguousOf(ids, temps) : asDType(ids, 'i64', temps);
    const w = H === 1 || weight.strides[1] === 1 ? weight : contiguousOf(weight, temps);
    const it = itemsizeOf(weight.dtype);
    const rowStride = w.strides[0]!;
    const rowBytes = H * it;
    const [unit, ctype] = UNITS.find(([u]) => rowBytes % u === 0 && (rowStride * it) % u === 0 && ptr(w) % u === 0 && ptr(out) % u === 0)!;
    const units = rowBytes / unit;
    const threads = Math.min(256, Math.max(32, roundUp(Math.ceil(units / 4), 32)));
    const flag = start === null ? indexFlag(ctx, out) : 0;
    const k = spineKernel(ctx, 'embedding.cu', 'fk_embedding', { FK_U: ctype, FK_ID: idv.dtype === 'i32' ? 'int' : 'long long' });
    k.launch(Math.min(n, 2 ** 31 - 1), threads, 0, [out, idv, ptr(w), n, V, units, (rowStride * it) / unit, flag, start ?? 0]);
    checkIndexFlag(ctx, flag, () => `${op}: an id is out of range for vocab size ${V}`);
    return out;
  } finally {
    disposeAll(temps);
  }
}
