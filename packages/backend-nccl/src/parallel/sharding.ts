/**
 * Weight sharding for tensor parallelism, as vLLM's weight loaders do it. Full (unsharded, checkpoint-layout)
 * tensors in, this rank's shard out, and the inverse merges (exact: copies, no arithmetic). Weights are
 * [out, in]; biases [out].
 *  - column parallel (ColumnParallelLinear): rows split; bias split;
 *  - row parallel (RowParallelLinear): columns split; bias replicated;
 *  - merged column (MergedColumnParallelLinear): every part's rows split, the rank's pieces concatenated;
 *  - QKV (QKVParallelLinear): q heads split; kv heads split, or replicated when there are fewer kv heads than
 *    ranks (rank r takes kv head group floor(r / replicas)).
 * Every function works on any backend (views + copies).
 */
import { Tensor, normalizeDim } from '@fastkernels/core';
import { divide } from './group.js';

/** Concatenate along `dim` into a new contiguous tensor. */
export function cat(parts: readonly Tensor[], dim = 0): Tensor {
  if (parts.length === 0) throw new RangeError('cat: no tensors');
  const first = parts[0]!;
  const d = normalizeDim(dim, first.rank);
  for (const p of parts) {
    if (p.rank !== first.rank || p.shape.some((s, i) => i !== d && s !== first.shape[i])) throw new RangeError(`cat: shape [${p.shape.join(', ')}] does not match [${first.shape.join(', ')}] outside dim ${d}`);
  }
  const shape = [...first.shape];
  shape[d] = parts.reduce((a, p) => a + p.shape[d]!, 0);
  const out = Tensor.empty(first.backend, shape, first.dtype, { device: first.device });
  let off = 0;
  for (const p of parts) {
    const dst = out.narrow(d, off, p.shape[d]!);
    dst.copy_(p);
    dst.dispose();
    off += p.shape[d]!;
  }
  return out;
}

/** A contiguous copy of rows [start, start + length) along `dim`. */
function take(t: Tensor, dim: number, start: number, length: number): Tensor {
  const v = t.narrow(dim, start, length);
  const c = v.clone();
  v.dispose();
  return c;
}

/** Rank `rank`'s equal chunk along `dim` (a contiguous copy). */
export function shardDim(t: Tensor, dim: number, rank: number, world: number): Tensor {
  const d = normalizeDim(dim, t.rank);
  const part = divide(t.shape[d]!, world, `dim ${d}`);
  return take(t, d, rank * part, part);
}

/** ColumnParallelLinear: weight [N, K] -> [N / world, K]; bias [N] -> [N / world]. */
export function shardColumnParallel(t: Tensor, rank: number, world: number): Tensor {
  return shardDim(t, 0, rank, world);
}

/** RowParallelLinear: weight [N, K] -> [N, K / world] (the bias is not sharded). */
export function shardRowParallel(weight: Tensor, rank: number, world: number): Tensor {
  return shardDim(weight, -1, rank, world);
}

/** Inverse of shardColumnParallel: the shards in rank order -> the full tensor. */
export function mergeColumnParallel(shards: readonly Tensor[]): Tensor {
  return cat(shards, 0);
}

/** Inverse of shardRowParallel. */
export function mergeRowParallel(shards: readonly Tensor[]): Tensor {
  return cat(shards, -1);
}

/** MergedColumnParallelLinear: every part (rows outputSizes[i]) split over the ranks; the rank's pieces concatenated. */
export function shardMergedColumn(t: Tensor, outputSizes: readonly number[], rank: number, world: number): Tensor {
  const total = outputSizes.reduce((a, b) => a + b, 0);
  if (t.shape[0] !== total) throw new RangeError(`merged column: dim 0 is ${t.shape[0]}, the parts sum to ${total}`);
  const pieces: Tensor[] = [];
  let off = 0;
  for (const n of outputSizes) {
    const part = divide(n, world, 'merged part');
    pieces.push(take(t, 0, off + rank * part, part));
    off += n;
  }
  const out = cat(pieces, 0);
  for (const p of pieces) p.dispose();
  return out;
}

/** Inverse of shardMergedColumn. */
export function mergeMergedColumn(shards: readonly Tensor[], outputSizes: readonly number[]): Tensor {
  const world = shards.length;
  const pieces: Tensor[] = [];
  for (let i = 0, off = 0; i < outputSizes.length; i++) {
    const part = divide(outputSizes[i]!, world, 'merged part');
    for (const s of shards) pieces.push(s.narrow(0, off, part));
    off += part;
  }
  const out = cat(pieces, 0);
  for (const p of pieces) p.dispose();
  return out;
}

export interface QkvLayout {
  readonly headSize: number;
  readonly totalNumHeads: number;
  readonly totalNumKvHeads: number;
  /** Per rank. */
  readonly numHeads: number;
  readonly numKvHeads: number;
  /** How many ranks hold the same kv heads (> 1 when totalNumKvHeads < world). */
  readonly numKvHeadReplicas: number;
  readonly world: number;
}

/** vLLM QKVParallelLinear's head arithmetic. */
export function qkvLayout(headSize: number, totalNumHeads: number, totalNumKvHeads: number | null, world: number): QkvLayout {
  const kv = totalNumKvHeads ?? totalNumHeads;
  const numHeads = divide(totalNumHeads, world, 'number of attention heads');
  let numKvHeads: number;
  let numKvHeadReplicas: number;
  if (world >= kv) {
    numKvHeads = 1;
    numKvHeadReplicas = divide(world, kv, 'tensor-parallel size over kv heads:');
  } else {
    numKvHeads = divide(kv, world, 'number of kv heads');
    numKvHeadReplicas = 1;
  }
  return { headSize, totalNumHeads, totalNumKvHeads: kv, numHeads, numKvHeads, numKvHeadReplicas, world };
}

/** QKV weight [(Hq + 2 Hkv) d, H] (or bias) -> the rank's [q_r; k_r; v_r] rows. */
export function shardQkv(t: Tensor, layout: QkvLayout, rank: number): Tensor {
  const { headSize: d, totalNumHeads: hq, totalNumKvHeads: hkv, numHeads, numKvHeads, numKvHeadReplicas } = layout;
  if (t.shape[0] !== (hq + 2 * hkv) * d) throw new RangeError(`qkv: dim 0 is ${t.shape[0]}, expected (${hq} + 2 x ${hkv}) x ${d}`);
  const kvShard = Math.floor(rank / numKvHeadReplicas);
  const q = take(t, 0, rank * numHeads * d, numHeads * d);
  const k = take(t, 0, hq * d + kvShard * numKvHeads * d, numKvHeads * d);
  const v = take(t, 0, (hq + hkv) * d + kvShard * numKvHeads * d, numKvHeads * d);
  const out = cat([q, k, v], 0);
  q.dispose();
  k.dispose();
  v.dispose();
  return out;
}

/** Inverse of shardQkv (replicated kv heads are taken from the first rank holding them). */
export function mergeQkv(shards: readonly Tensor[], layout: QkvLayout): Tensor {
  const { headSize: d, numHeads, numKvHeads, numKvHeadReplicas } = layout;
  if (shards.length !== layout.world) throw new RangeError(`qkv merge: ${shards.length} shards for a world of ${layout.world}`);
  const qs = shards.map((s) => s.narrow(0, 0, numHeads * d));
  const owners = shards.filter((_, r) => r % numKvHeadReplicas === 0);
  const ks = owners.map((s) => s.narrow(0, numHeads * d, numKvHeads * d));
  const vs = owners.map((s) => s.narrow(0, (numHeads + numKvHeads) * d, numKvHeads * d));
  const out = cat([...qs, ...ks, ...vs], 0);
  for (const p of [...qs, ...ks, ...vs]) p.dispose();
  return out;
}
