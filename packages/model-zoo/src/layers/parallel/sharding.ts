/**
 * Weight sharding for tensor parallelism, as vLLM's weight loaders do it: full (unsharded, checkpoint-layout) tensors
 * in, this rank's shard out, and the inverse merges (exact: copies, no arithmetic). Which rows or columns a rank
 * takes is core's shard arithmetic (columnParallelSlice, qkvPieces, ...), which model-zoo's weight loader also uses
 * to read only a rank's bytes from a checkpoint. Weights are [out, in]; biases [out]. Works on any backend.
 */
import { Tensor, columnParallelSlice, divide, equalSlice, mergedColumnPieces, normalizeDim, qkvPieces, rowParallelSlice, type QkvLayout, type ShardSlice } from '@fastkernels/core';

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

/** A contiguous copy of a slice of `t`. */
export function takeSlice(t: Tensor, s: ShardSlice): Tensor {
  const v = t.narrow(normalizeDim(s.dim, t.rank), s.start, s.length);
  const c = v.clone();
  v.dispose();
  return c;
}

/** Several slices of `t` (along dim 0) stacked in order. */
function takePieces(t: Tensor, pieces: readonly ShardSlice[]): Tensor {
  const parts = pieces.map((p) => takeSlice(t, p));
  const out = cat(parts, 0);
  for (const p of parts) p.dispose();
  return out;
}

/** Rank `rank`'s equal chunk along `dim` (a contiguous copy). */
export function shardDim(t: Tensor, dim: number, rank: number, world: number): Tensor {
  const d = normalizeDim(dim, t.rank);
  return takeSlice(t, equalSlice(d, t.shape[d]!, rank, world));
}

/** ColumnParallelLinear: weight [N, K] -> [N / world, K]; bias [N] -> [N / world]. */
export function shardColumnParallel(t: Tensor, rank: number, world: number): Tensor {
  return takeSlice(t, columnParallelSlice(t.shape[0]!, rank, world));
}

/** RowParallelLinear: weight [N, K] -> [N, K / world] (the bias is not sharded). */
export function shardRowParallel(weight: Tensor, rank: number, world: number): Tensor {
  return takeSlice(weight, rowParallelSlice(weight.shape[1]!, rank, world));
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
  return takePieces(t, mergedColumnPieces(outputSizes, rank, world));
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

/** QKV weight [(Hq + 2 Hkv) d, H] (or bias) -> the rank's [q_r; k_r; v_r] rows. */
export function shardQkv(t: Tensor, layout: QkvLayout, rank: number): Tensor {
  const { headSize: d, totalNumHeads: hq, totalNumKvHeads: hkv } = layout;
  if (t.shape[0] !== (hq + 2 * hkv) * d) throw new RangeError(`qkv: dim 0 is ${t.shape[0]}, expected (${hq} + 2 x ${hkv}) x ${d}`);
  return takePieces(t, qkvPieces(layout, rank));
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
