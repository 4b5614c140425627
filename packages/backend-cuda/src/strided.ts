/** Stride arithmetic for the elementwise kernels (pure, unit-tested). */

export const MAX_KERNEL_RANK = 6;

/**
 * Drop size-1 dimensions and merge adjacent dimensions that are contiguous with each other in every
 * operand, so most copies run as rank 1 or 2. A scalar becomes shape [1].
 */
export function coalesce(shape: readonly number[], strides: readonly (readonly number[])[]): { shape: number[]; strides: number[][] } {
  const keep = shape.map((_, d) => d).filter((d) => shape[d] !== 1);
  let sh = keep.map((d) => shape[d]!);
  let st = strides.map((s) => keep.map((d) => s[d]!));
  if (sh.length === 0) return { shape: [1], strides: strides.map(() => [0]) };
  const outShape = [sh[0]!];
  const outStrides = st.map((s) => [s[0]!]);
  for (let d = 1; d < sh.length; d++) {
    const last = outShape.length - 1;
    const mergeable = st.every((s, k) => outStrides[k]![last] === s[d]! * sh[d]!);
    if (mergeable) {
      outShape[last] = outShape[last]! * sh[d]!;
      st.forEach((s, k) => (outStrides[k]![last] = s[d]!));
    } else {
      outShape.push(sh[d]!);
      st.forEach((s, k) => outStrides[k]!.push(s[d]!));
    }
  }
  sh = outShape;
  st = outStrides;
  return { shape: sh, strides: st };
}

/** Broadcast two shapes (numpy rules); throws naming both shapes. */
export function broadcastShapes(a: readonly number[], b: readonly number[]): number[] {
  const r = Math.max(a.length, b.length);
  const out: number[] = [];
  for (let i = 0; i < r; i++) {
    const x = a[a.length - r + i] ?? 1;
    const y = b[b.length - r + i] ?? 1;
    if (x !== y && x !== 1 && y !== 1) throw new RangeError(`shapes [${a.join(', ')}] and [${b.join(', ')}] do not broadcast`);
    out.push(x === 1 ? y : x);
  }
  return out;
}

/** Strides of `shape`/`strides` viewed as broadcast to `target` (0 on broadcast dims). */
export function broadcastStrides(shape: readonly number[], strides: readonly number[], target: readonly number[]): number[] {
  const lead = target.length - shape.length;
  return target.map((t, i) => {
    const j = i - lead;
    if (j < 0) return 0;
    return shape[j] === 1 && t !== 1 ? 0 : strides[j]!;
  });
}

/** Size of the FkStrided struct in kernels/elementwise.cu. */
export const STRIDED_STRUCT_BYTES = 208;

/** Encode FkStrided { sizes[6], stride0[6], stride1[6], stride2[6], numel, rank } little-endian into `out`. */
export function encodeStrided(out: Uint8Array, shape: readonly number[], strides: readonly (readonly number[])[], numel: number): Uint8Array {
  if (shape.length > MAX_KERNEL_RANK) throw new RangeError(`rank ${shape.length} after coalescing exceeds the kernels' limit of ${MAX_KERNEL_RANK}`);
  out.fill(0);
  const v = new DataView(out.buffer, out.byteOffset, STRIDED_STRUCT_BYTES);
  const put = (off: number, x: number) => {
    const hi = Math.floor(x / 4294967296);
    v.setUint32(off, (x - hi * 4294967296) >>> 0, true);
    v.setInt32(off + 4, hi, true);
  };
  shape.forEach((n, d) => put(d * 8, n));
  for (let k = 0; k < 3; k++) {
    const s = strides[k];
    if (s) s.forEach((x, d) => put(48 * (k + 1) + d * 8, x));
  }
  put(192, numel);
  v.setInt32(200, shape.length, true);
  return out;
}
