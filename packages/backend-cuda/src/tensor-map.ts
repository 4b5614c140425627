/**
 * TMA tensor maps (CUtensorMap, sm_90+): the 128-byte descriptor cuTensorMapEncodeTiled packs for a tiled box over a
 * tensor in global memory, which a warp-specialised kernel (kernels/attention_fa3.cu) takes as a __grid_constant__
 * by-value parameter (TENSOR_MAP_ARG in the argument area). The addon's tensorMapEncodeTiled calls the driver
 * (native/addon.cc); this file names the driver's enum values, describes a map, and caches encoded maps by their
 * description (a map holds a raw address: a cached one is reused only for the same address, shape and box).
 */
import type { NativeAddon } from './native.js';

/** Bytes of a CUtensorMap. */
export const TENSOR_MAP_BYTES = 128;

/** CUtensorMapDataType values (cuda.h) of the dtypes the kernels take. */
export const TENSOR_MAP_DTYPE = { f16: 6, f32: 7, bf16: 9 } as const;
/** CUtensorMapSwizzle: how 16-byte chunks of a box row are permuted in shared memory. */
export const TENSOR_MAP_SWIZZLE = { none: 0, '32B': 1, '64B': 2, '128B': 3 } as const;
/** CUtensorMapL2promotion: the L2 fetch granularity of the copies. */
export const TENSOR_MAP_L2_PROMOTION = { none: 0, '64B': 1, '128B': 2, '256B': 3 } as const;
/** CUtensorMapFloatOOBfill: elements past the tensor's end arrive as zeros (none) or as NaN that FMA reads as 0. */
export const TENSOR_MAP_OOB_FILL = { zeros: 0, nanRequestZeroFma: 1 } as const;
/** CUtensorMapInterleave: none for every layout the kernels read. */
export const TENSOR_MAP_INTERLEAVE_NONE = 0;

/** A tiled tensor map: dims innermost first, strides of dims 1 .. rank - 1 in bytes (as cuTensorMapEncodeTiled). */
export interface TensorMapSpec {
  readonly dataType: number;
  readonly address: number;
  readonly dims: readonly number[];
  readonly stridesBytes: readonly number[];
  readonly box: readonly number[];
  readonly elementStrides: readonly number[];
  readonly interleave: number;
  readonly swizzle: number;
  readonly l2Promotion: number;
  readonly oobFill: number;
}

/** Why the TMA cannot address a spec (the driver's documented limits), or null: checked before the driver is asked. */
export function tensorMapProblem(s: TensorMapSpec): string | null {
  const rank = s.dims.length;
  if (rank < 1 || rank > 5) return `rank ${rank}: 1 to 5 dims`;
  if (s.stridesBytes.length !== rank - 1 || s.box.length !== rank || s.elementStrides.length !== rank) return 'strides, box and element strides do not match the rank';
  if (s.address % 16 !== 0) return `address ${s.address} is not 16-byte aligned`;
  if (s.dims.some((d) => !Number.isInteger(d) || d < 1 || d > 2 ** 32)) return `dims ${s.dims.join(', ')}: each in [1, 2^32]`;
  if (s.stridesBytes.some((x) => !Number.isInteger(x) || x % 16 !== 0 || x <= 0 || x >= 2 ** 40)) return `strides ${s.stridesBytes.join(', ')} B: each a positive multiple of 16 below 2^40`;
  if (s.box.some((b) => !Number.isInteger(b) || b < 1 || b > 256)) return `box ${s.box.join(', ')}: each in [1, 256]`;
  if (s.elementStrides.some((e) => !Number.isInteger(e) || e < 1 || e > 8)) return `element strides ${s.elementStrides.join(', ')}: each in [1, 8]`;
  return null;
}

/** The addon's entry (absent from addons built before it: then no kernel that needs a map is routed). */
export type TensorMapEncoder = NonNullable<NativeAddon['tensorMapEncodeTiled']>;

/** The 128 bytes of the map (throws the driver's error, or a TypeError for a spec tensorMapProblem rejects). */
export function encodeTensorMap(encode: TensorMapEncoder, s: TensorMapSpec): Uint8Array {
  const problem = tensorMapProblem(s);
  if (problem) throw new TypeError(`tensor map: ${problem}`);
  const bytes = new Uint8Array(encode(s.dataType, s.address, [...s.dims], [...s.stridesBytes], [...s.box], [...s.elementStrides], s.interleave, s.swizzle, s.l2Promotion, s.oobFill));
  if (bytes.byteLength !== TENSOR_MAP_BYTES) throw new Error(`tensorMapEncodeTiled returned ${bytes.byteLength} bytes, not ${TENSOR_MAP_BYTES}`);
  return bytes;
}

/** The numbers of a spec, in a fixed order (what the cache hashes and compares). */
function specNumbers(s: TensorMapSpec): number[] {
  return [s.dataType, s.address, s.dims.length, ...s.dims, ...s.stridesBytes, ...s.box, ...s.elementStrides, s.interleave, s.swizzle, s.l2Promotion, s.oobFill];
}

/** A 32-bit FNV-1a hash of a spec's numbers (each as its low and high 32 bits: addresses pass 2^32). */
export function tensorMapSpecHash(s: TensorMapSpec): number {
  let h = 0x811c9dc5;
  for (const x of specNumbers(s)) {
    h = Math.imul(h ^ (x | 0), 0x01000193);
    h = Math.imul(h ^ ((x / 4294967296) | 0), 0x01000193);
  }
  return h >>> 0;
}

function sameNumbers(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * Encoded maps by their full description (address included), so a prefill repeated on the same buffers (a decode loop's
 * chunks, a captured graph's replays being recaptured) skips the driver call. Keyed by a numeric hash of the description
 * (no string is built per launch); an entry keeps the description's numbers and a hit compares them all, so a hash
 * collision re-encodes (and replaces the entry) rather than returning another map. Bounded: the oldest entries go first.
 */
export class TensorMapCache {
  private readonly maps = new Map<number, { numbers: number[]; bytes: Uint8Array }>();
  constructor(
    private readonly capacity = 256,
    private readonly hash: (s: TensorMapSpec) => number = tensorMapSpecHash,
  ) {}

  get size(): number {
    return this.maps.size;
  }

  get(encode: TensorMapEncoder, s: TensorMapSpec): Uint8Array {
    const key = this.hash(s);
    const numbers = specNumbers(s);
    const hit = this.maps.get(key);
    if (hit && sameNumbers(hit.numbers, numbers)) return hit.bytes;
    const bytes = encodeTensorMap(encode, s);
    if (hit) this.maps.delete(key);
    else if (this.maps.size >= this.capacity) this.maps.delete(this.maps.keys().next().value!);
    this.maps.set(key, { numbers, bytes });
    return bytes;
  }
}
