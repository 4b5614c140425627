/**
 * How layer_norm_modulate's kernel reads a scale / shift operand broadcast to x [..., L]: row r of x (its leading dims
 * flattened) takes the modulation row at element (r / groupRows) * stride. That covers adaLN's layouts: [B, 1, L]
 * against [B, S, L] (groupRows S, stride L, or 6L for a chunk of the [B, 6L] modulation vector), [L] (one row for all:
 * groupRows = rows, stride 0) and x's own shape (groupRows 1). Pure: CPU-tested.
 */
export interface ModulationRows {
  readonly groupRows: number;
  readonly stride: number;
}

/**
 * The (groupRows, stride) of an operand with `strides` (already broadcast to x's shape: 0 on broadcast dims), or null
 * when its last dim is not unit-stride or its rows are not one stride apart per group (the caller makes it contiguous).
 */
export function modulationRows(shape: readonly number[], strides: readonly number[]): ModulationRows | null {
  const r = shape.length;
  if (r === 0 || (shape[r - 1]! > 1 && strides[r - 1] !== 1)) return null;
  // the innermost leading dims that repeat one row (stride 0 or size 1) make a group
  let d = r - 2;
  let groupRows = 1;
  for (; d >= 0 && (strides[d] === 0 || shape[d] === 1); d--) groupRows *= shape[d]!;
  // the outer dims must step through the rows at one stride: each dim's stride is the next (non-size-1) one's times its size
  let stride = 0;
  let expect = -1;
  for (; d >= 0; d--) {
    if (shape[d] === 1) continue;
    if (strides[d] === 0) return null;
    if (expect === -1) stride = strides[d]!;
    else if (strides[d] !== expect) return null;
    expect = strides[d]! * shape[d]!;
  }
  return { groupRows, stride };
}
