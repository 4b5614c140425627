/**
 * Rotary embedding on the CUDA backend (kernels/rotary.cu), vLLM forward_native semantics, out of place:
 * positions [T] (i32/i64, any shape flattened), query/key holding T tokens of heads x headSize (any shape;
 * the result keeps it), cosSinCache [maxPos, rotaryDim] read in its own dtype. Neox or GPT-J pairing,
 * partial rotary (the tail of each head is copied). Query and key go in one launch.
 * Out-of-range positions write zeros and, with index checks on (see common.ts), throw a RangeError.
 */
import { Tensor, formatShape } from '@fastkernels/core';
import { cudaTuning } from '../../tuning/load.js';
import type { SpineContext } from '../launch/context.js';
import { checkIndexFlag, contiguousOf, disposeAll, floatCType, indexCType, indexFlag, itemsizeOf, ptr, roundUp, spineKernel, vecWidth } from '../launch/common.js';

// The tuning's rotary section (tuning/*.json): blocksPerSm (0: one block a token; N: at most N blocks an SM striding
// over tokens: fewer, longer-lived blocks reach closer to copy speed at large T) and fuseKvStore (rotary-kv.ts: rotary
// and the KV write as one kernel, one launch fewer a layer; the same bits).

/**
 * fk_rotary's launch shape, shared with fk_rotary_store_kv (ops/rotary/rotary-kv.ts): cvec (cos / sin rows read as vectors
 * of vec elements of the cache's dtype: rows start at p * rot, a multiple of vec as half is, so only the base address
 * needs the alignment), threads for a token's heads (at least `extraWork` items: the fused kernel's value copy) and the
 * grid of token blocks (the tuning's rotary.blocksPerSm).
 */
export function rotaryLaunchShape(
  ctx: SpineContext,
  s: { T: number; nq: number; nk: number; headSize: number; rot: number; isNeoxStyle: boolean; vec: number; cache: Tensor },
  extraWork = 0,
): { cvec: number; threads: number; grid: number } {
  const half = s.rot / 2;
  const cvec = s.isNeoxStyle && s.vec > 1 && ptr(s.cache) % (s.vec * itemsizeOf(s.cache.dtype)) === 0 ? 1 : 0;
  const work = Math.max(Math.max(s.nq, s.nk) * Math.max(s.isNeoxStyle ? half / s.vec : half, s.headSize - s.rot), extraWork);
  const threads = Math.min(256, Math.max(32, roundUp(work, 32)));
  const perSm = Math.floor(cudaTuning().rotary.blocksPerSm);
  const grid = Math.min(s.T, 2 ** 31 - 1, perSm > 0 ? perSm * ctx.multiprocessors : Infinity);
  return { cvec, threads, grid };
}

export function rotaryEmbedding(
  ctx: SpineContext,
  positions: Tensor,
  query: Tensor,
  key: Tensor | null,
  cosSinCache: Tensor,
  headSize: number,
  isNeoxStyle: boolean,
): [Tensor, Tensor | null] {
  const op = 'rotaryEmbedding';
  const { T, maxPos, rot, nq, nk, C, P, Tq } = rotaryGeometry(op, positions, query, key, cosSinCache, headSize);
  const qOut = Tensor.empty(query.backend, query.shape, query.dtype, { device: query.device });
  const kOut = key ? Tensor.empty(key.backend, key.shape, key.dtype, { device: key.device }) : null;
  if (T === 0 || (nq === 0 && nk === 0)) return [qOut, kOut];
  const temps: Tensor[] = [];
  try {
    const pos = contiguousOf(positions, temps);
    const cache = contiguousOf(cosSinCache, temps);
    const q = tokenRows(query, T, temps);
    const k = key ? tokenRows(key, T, temps) : null;
    const half = rot / 2;
    const it = itemsizeOf(query.dtype);
    let vec = 1;
    if (isNeoxStyle) {
      const ptrs = [ptr(q.t), ptr(qOut)];
      const counts = [half, headSize, q.stride];
      if (k && kOut) {
        ptrs.push(ptr(k.t), ptr(kOut));
        counts.push(k.stride);
      }
      vec = vecWidth(it, counts, ptrs);
    }
    const { cvec, threads, grid } = rotaryLaunchShape(ctx, { T, nq, nk, headSize, rot, isNeoxStyle, vec, cache });
    const flag = indexFlag(ctx, qOut);
    // A block striding over tokens loads its next token's position while it rotates this one, so only its first token
    // waits for a position before the row and cache loads. Run 15 (H200 kernel bench, 3 processes, against a position
    // loaded per token): T4096 27.8-34.3 -> 27.6-27.8 us, T16384 95.6-105.8 -> 94.3-94.4 us (83-85% -> 85-86% of copy).
    const kern = spineKernel(ctx, 'rotary.cu', 'fk_rotary', { FK_T: Tq, FK_C: C, FK_POS: P, FK_NEOX: isNeoxStyle ? 1 : 0, FK_VEC: vec, FK_CVEC: cvec });
    kern.launch([grid, k ? 2 : 1], threads, 0, [
      qOut, q.t, q.stride, nq,
      kOut ? ptr(kOut) : 0, k ? ptr(k.t) : 0, k ? k.stride : 0, nk,
      pos, cache, T, maxPos, headSize, rot, flag,
    ]);
    checkIndexFlag(ctx, flag, () => `${op}: a position is out of range for a cache of ${maxPos} positions`);
    return [qOut, kOut];
  } finally {
    disposeAll(temps);
  }
}

/** A rotary call's checked arguments: T tokens of nq query and nk key heads, the cache [maxPos, rot], the C++ types. */
export interface RotaryGeometry {
  readonly T: number;
  readonly maxPos: number;
  readonly rot: number;
  readonly nq: number;
  readonly nk: number;
  /** C++ types of the cos / sin cache, the positions and the activations */
  readonly C: string;
  readonly P: 'int' | 'long long';
  readonly Tq: string;
}

/** Checks rotary arguments the way every rotary op does (errors name `op`). */
export function rotaryGeometry(op: string, positions: Tensor, query: Tensor, key: Tensor | null, cosSinCache: Tensor, headSize: number): RotaryGeometry {
  if (cosSinCache.rank !== 2) throw new RangeError(`${op}: cosSinCache ${formatShape(cosSinCache.shape)} must be [maxPos, rotaryDim]`);
  const [maxPos, rot] = cosSinCache.shape as [number, number];
  if (!Number.isInteger(headSize) || headSize <= 0) throw new RangeError(`${op}: invalid headSize ${headSize}`);
  if (rot % 2 !== 0 || rot > headSize) throw new RangeError(`${op}: rotaryDim ${rot} must be even and <= headSize ${headSize}`);
  const C = floatCType(cosSinCache, op, 'cosSinCache');
  const P = indexCType(positions, op, 'positions');
  const T = positions.numel;
  const Tq = floatCType(query, op, 'query');
  if (key && key.dtype !== query.dtype) throw new TypeError(`${op}: key dtype ${key.dtype} differs from query dtype ${query.dtype}`);
  const headsOf = (x: Tensor, name: string) => {
    const per = T === 0 ? 0 : x.numel / T;
    if (x.rank < 1 || (T === 0 && x.numel !== 0) || !Number.isInteger(per) || per % headSize !== 0) {
      throw new RangeError(`${op}: ${name} ${formatShape(x.shape)} does not hold ${T} tokens of heads * ${headSize} (one per position)`);
    }
    return per / headSize;
  };
  const nq = headsOf(query, 'query');
  const nk = key ? headsOf(key, 'key') : 0;
  return { T, maxPos, rot, nq, nk, C, P, Tq };
}

/** x as T token rows: in place when every dim after the first is contiguous and the first is T; else a copy. */
export function tokenRows(x: Tensor, T: number, temps: Tensor[]): { t: Tensor; stride: number } {
  const per = x.numel / T;
  if (T === 1) {
    if (innerContiguous(x, 0)) return { t: x, stride: per };
  } else if (x.rank >= 2 && x.shape[0] === T && innerContiguous(x, 1)) {
    return { t: x, stride: x.strides[0]! };
  }
  const c = contiguousOf(x, temps);
  return { t: c, stride: per };
}

/** Whether dims [from, rank) are laid out contiguously (size-1 dims ignored). */
function innerContiguous(x: Tensor, from: number): boolean {
  let expected = 1;
  for (let i = x.rank - 1; i >= from; i--) {
    if (x.shape[i] === 1) continue;
    if (x.strides[i] !== expected) return false;
    expected *= x.shape[i]!;
  }
  return true;
}
