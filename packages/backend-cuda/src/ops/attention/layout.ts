/**
 * How the dense SDPA kernel addresses its operands: every tensor as (batch, head, row, column) element strides, the batch
 * being the leading dims before the heads collapsed into one index. Broadcast dims (missing, or of size 1) get stride 0,
 * so a mask [L, S] or a key shared by every head is read in place. Pure functions of shapes and strides.
 */

export interface OperandStrides {
  readonly batch: number;
  readonly head: number;
  readonly row: number;
  readonly col: number;
}

/**
 * Strides of a tensor (shape / strides, right-aligned) read as [...outer, heads, rows, cols], each of its dims equal to
 * the target's or 1; the outer dims must collapse into one batch stride (each one the next one's stride times its
 * size, where the target's size is not 1). null when they do not (the caller makes a dense copy).
 */
export function operandStrides(
  shape: readonly number[],
  strides: readonly number[],
  outer: readonly number[],
  heads: number,
  rows: number,
  cols: number,
): OperandStrides | null {
  const target = [...outer, heads, rows, cols];
  const off = target.length - shape.length;
  if (off < 0) throw new RangeError(`operand of rank ${shape.length} is wider than [${target.join(', ')}]`);
  const st = target.map((n, i) => {
    const j = i - off;
    if (j < 0 || shape[j] === 1) return 0;
    if (shape[j] !== n) throw new RangeError(`operand dim ${j} is ${shape[j]}, expected ${n} or 1`);
    return strides[j]!;
  });
  let batch: number | undefined;
  let next: number | undefined; // the stride the next outer dim (going out) must have
  for (let i = outer.length - 1; i >= 0; i--) {
    if (outer[i] === 1) continue;
    if (next !== undefined && st[i] !== next) return null;
    batch ??= st[i];
    next = st[i]! * outer[i]!;
  }
  const n = target.length;
  return { batch: batch ?? 0, head: st[n - 3]!, row: st[n - 2]!, col: st[n - 1]! };
}

/** Whether cp.async may move 16-byte chunks of an operand: its address and the byte strides of batch, head and row. */
export function chunkAligned(address: number, s: OperandStrides, itemsize: number): boolean {
  return address % 16 === 0 && [s.batch, s.head, s.row].every((x) => (x * itemsize) % 16 === 0);
}
