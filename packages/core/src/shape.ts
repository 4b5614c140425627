/** Shape and stride arithmetic shared by tensors and backends. */
export type Shape = readonly number[];

export function numel(shape: Shape): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

export function contiguousStrides(shape: Shape): number[] {
  const strides = new Array<number>(shape.length);
  let s = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    strides[i] = s;
    s *= shape[i]!;
  }
  return strides;
}

/**
 * Strides that view a (shape, strides) layout as `newShape` without copying, or null when the layout cannot
 * (PyTorch's computeStride: dims may merge only where they are contiguous with each other). Tensor.view and the
 * reshape / view ops use it.
 */
export function viewStrides(shape: Shape, strides: readonly number[], newShape: Shape): number[] | null {
  const n = numel(shape);
  if (shape.length === 0) return newShape.map(() => 1);
  if (n === 0 && shapesEqual(shape, newShape)) return [...strides];
  if (n === 0) return contiguousStrides(newShape);
  const newStrides = new Array<number>(newShape.length);
  let viewD = newShape.length - 1;
  let chunkBase = strides[strides.length - 1]!;
  let tensorNumel = 1;
  let viewNumel = 1;
  for (let d = shape.length - 1; d >= 0; d--) {
    tensorNumel *= shape[d]!;
    if (d === 0 || (shape[d - 1] !== 1 && strides[d - 1] !== tensorNumel * chunkBase)) {
      while (viewD >= 0 && (viewNumel < tensorNumel || newShape[viewD] === 1)) {
        newStrides[viewD] = viewNumel * chunkBase;
        viewNumel *= newShape[viewD]!;
        viewD--;
      }
      if (viewNumel !== tensorNumel) return null;
      if (d > 0) {
        chunkBase = strides[d - 1]!;
        tensorNumel = 1;
        viewNumel = 1;
      }
    }
  }
  return viewD === -1 ? newStrides : null;
}

export function normalizeDim(dim: number, rank: number): number {
  const d = dim < 0 ? dim + rank : dim;
  if (!Number.isInteger(d) || d < 0 || d >= rank) throw new RangeError(`dimension ${dim} out of range for rank ${rank}`);
  return d;
}

export function shapesEqual(a: Shape, b: Shape): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

export function formatShape(shape: Shape): string {
  return `[${shape.join(', ')}]`;
}

/**
 * Visit every element of a strided layout in row-major order, calling fn with the
 * element offset (in elements, including `offset`) and the linear index.
 */
export function forEachOffset(shape: Shape, strides: readonly number[], offset: number, fn: (elemOffset: number, linear: number) => void): void {
  const rank = shape.length;
  const total = numel(shape);
  if (total === 0) return;
  if (rank === 0) {
    fn(offset, 0);
    return;
  }
  const idx = new Array<number>(rank).fill(0);
  let off = offset;
  const last = rank - 1;
  const lastDim = shape[last]!;
  const lastStride = strides[last]!;
  for (let linear = 0; linear < total; ) {
    for (let j = 0; j < lastDim; j++, linear++) fn(off + j * lastStride, linear);
    // carry into the outer dimensions
    let d = last - 1;
    while (d >= 0) {
      idx[d]!++;
      off += strides[d]!;
      if (idx[d]! < shape[d]!) break;
      off -= strides[d]! * shape[d]!;
      idx[d] = 0;
      d--;
    }
    if (d < 0) break;
  }
}

/** Memory order of a 4-d / 5-d channels-last tensor ([N, *spatial, C] in memory), outermost dim first. */
export const CHANNELS_LAST_ORDER: Readonly<Record<number, readonly number[]>> = { 4: [0, 2, 3, 1], 5: [0, 2, 3, 4, 1] };

/**
 * Whether strides order a 4-d / 5-d tensor's dims as channels-last (C innermost, then the spatial dims from the last,
 * then N), packed or not: PyTorch's is_channels_last_strides_2d / _3d, which suggest_memory_format (and so the
 * memory-format choice of conv, cat and elementwise results) reads. A channel slice of a channels-last tensor (C2f's
 * split) counts; ambiguous cases (N111, a 1C1W permutation) fall back to contiguous as in torch.
 */
export function stridesLikeChannelsLast(shape: Shape, strides: readonly number[]): boolean {
  const order = CHANNELS_LAST_ORDER[shape.length];
  if (!order || strides[1] === 0) return false;
  let min = 0;
  for (let i = order.length - 1; i >= 0; i--) {
    const d = order[i]!;
    if (shape[d] === 0 || strides[d]! < min) return false;
    if (d === 0 && min === strides[1]) return false;
    min = strides[d]! * (shape[d]! > 1 ? shape[d]! : 1);
  }
  return true;
}
