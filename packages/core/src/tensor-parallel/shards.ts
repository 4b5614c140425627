/**
 * Which slice of a full (checkpoint-layout) tensor each tensor-parallel rank holds, as vLLM's weight loaders cut
 * them. Pure arithmetic, no tensors: model-zoo's sharding helpers (layers/parallel) cut tensors with it, and model-zoo's weight
 * loader reads exactly these bytes from a checkpoint (a rank never reads the whole tensor).
 *  - column parallel (ColumnParallelLinear): rows split; bias split;
 *  - vocab parallel (VocabParallelEmbedding, ParallelLMHead): the table's rows (the vocabulary) split;
 *  - row parallel (RowParallelLinear): columns split; bias replicated;
 *  - merged column (MergedColumnParallelLinear): every part's rows split, the rank's pieces concatenated;
 *  - QKV (QKVParallelLinear): q heads split; kv heads split, or replicated when there are fewer kv heads than
 *    ranks (rank r takes kv head group floor(r / replicas)).
 * Weights are [out, in]; biases [out].
 */
import { divide } from './group.js';

/** `length` entries from `start` along `dim` of the full tensor. */
export interface ShardSlice {
  readonly dim: number;
  readonly start: number;
  readonly length: number;
}

/** A slice of a full tensor and where it lands in the rank's parameter: rows [rowOffset, rowOffset + ...) of dim 0. */
export interface ShardPiece extends ShardSlice {
  readonly rowOffset: number;
}

/** Rank `rank`'s equal chunk of `size` entries along `dim`. */
export function equalSlice(dim: number, size: number, rank: number, world: number, what = `dim ${dim}`): ShardSlice {
  const part = divide(size, world, what);
  return { dim, start: rank * part, length: part };
}

/** ColumnParallelLinear: rows (dim 0) of a weight [N, K] or a bias [N]. */
export function columnParallelSlice(rows: number, rank: number, world: number): ShardSlice {
  return equalSlice(0, rows, rank, world, 'output size');
}

/**
 * VocabParallelEmbedding / ParallelLMHead: rows (dim 0) of a table [V, H], rank r holding [r V / W, (r + 1) V / W)
 * (vLLM's vocab_range_from_global_vocab_size without padding; the callers split only a V that W divides).
 */
export function vocabParallelSlice(vocabSize: number, rank: number, world: number): ShardSlice {
  return equalSlice(0, vocabSize, rank, world, 'vocabulary size');
}

/** RowParallelLinear: columns (dim 1) of a weight [N, K]. */
export function rowParallelSlice(cols: number, rank: number, world: number): ShardSlice {
  return equalSlice(1, cols, rank, world, 'input size');
}

/** MergedColumnParallelLinear, from the full merged tensor: each part's rows split, pieces stacked in part order. */
export function mergedColumnPieces(outputSizes: readonly number[], rank: number, world: number): ShardPiece[] {
  const pieces: ShardPiece[] = [];
  let off = 0;
  let rowOffset = 0;
  for (const n of outputSizes) {
    const part = divide(n, world, 'merged part');
    pieces.push({ dim: 0, start: off + rank * part, length: part, rowOffset });
    off += n;
    rowOffset += part;
  }
  return pieces;
}

/** MergedColumnParallelLinear, from part `index`'s own full tensor (gate_proj = 0, up_proj = 1). */
export function mergedColumnPartPiece(outputSizes: readonly number[], index: number, rank: number, world: number): ShardPiece {
  if (!Number.isInteger(index) || index < 0 || index >= outputSizes.length) throw new RangeError(`merged column: part ${index} (parts: ${outputSizes.length})`);
  const parts = outputSizes.map((n) => divide(n, world, 'merged part'));
  const rowOffset = parts.slice(0, index).reduce((a, b) => a + b, 0);
  return { dim: 0, start: rank * parts[index]!, length: parts[index]!, rowOffset };
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

/** vLLM QKVParallelLinear's head arithmetic (RangeError naming the count that does not divide). */
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

export type QkvPart = 'q' | 'k' | 'v';

/** QKVParallelLinear, from part `part`'s own full tensor (q_proj / k_proj / v_proj): rows, and where they go. */
export function qkvPartPiece(layout: QkvLayout, part: QkvPart, rank: number): ShardPiece {
  const { headSize: d, numHeads, numKvHeads, numKvHeadReplicas } = layout;
  if (part === 'q') return { dim: 0, start: rank * numHeads * d, length: numHeads * d, rowOffset: 0 };
  const kvShard = Math.floor(rank / numKvHeadReplicas);
  return { dim: 0, start: kvShard * numKvHeads * d, length: numKvHeads * d, rowOffset: (part === 'k' ? numHeads : numHeads + numKvHeads) * d };
}

/** QKVParallelLinear, from the full fused tensor [(Hq + 2 Hkv) d, ...]: the rank's q, k and v rows. */
export function qkvPieces(layout: QkvLayout, rank: number): ShardPiece[] {
  const { headSize: d, totalNumHeads: hq, totalNumKvHeads: hkv } = layout;
  const base = { q: 0, k: hq * d, v: (hq + hkv) * d };
  return (['q', 'k', 'v'] as const).map((p) => {
    const piece = qkvPartPiece(layout, p, rank);
    return { ...piece, start: base[p] + piece.start };
  });
}
