/**
 * Data types and exact host codecs.
 *
 * 16- and 8-bit floats have no host type: they are stored as raw bit patterns
 * (Uint16Array / Uint8Array) and converted here with a single round-to-nearest-even
 * step straight from the float64 value (no double rounding through float32).
 */
export const DTYPES = ['f64', 'f32', 'f16', 'bf16', 'fp8e4m3', 'fp8e5m2', 'i64', 'i32', 'i16', 'i8', 'u8', 'bool'] as const;
export type DType = (typeof DTYPES)[number];

export interface DTypeInfo {
  readonly name: DType;
  /** Bytes per element. */
  readonly itemsize: number;
  readonly kind: 'float' | 'int' | 'bool';
  /** The name PyTorch uses, for messages and interop. */
  readonly torchName: string;
}

const info = (name: DType, itemsize: number, kind: DTypeInfo['kind'], torchName: string): DTypeInfo => ({ name, itemsize, kind, torchName });

export const DTYPE_INFO: Readonly<Record<DType, DTypeInfo>> = {
  f64: info('f64', 8, 'float', 'float64'),
  f32: info('f32', 4, 'float', 'float32'),
  f16: info('f16', 2, 'float', 'float16'),
  bf16: info('bf16', 2, 'float', 'bfloat16'),
  fp8e4m3: info('fp8e4m3', 1, 'float', 'float8_e4m3fn'),
  fp8e5m2: info('fp8e5m2', 1, 'float', 'float8_e5m2'),
  i64: info('i64', 8, 'int', 'int64'),
  i32: info('i32', 4, 'int', 'int32'),
  i16: info('i16', 2, 'int', 'int16'),
  i8: info('i8', 1, 'int', 'int8'),
  u8: info('u8', 1, 'int', 'uint8'),
  bool: info('bool', 1, 'bool', 'bool'),
};

export function isDType(x: unknown): x is DType {
  return typeof x === 'string' && (DTYPES as readonly string[]).includes(x);
}

export const isFloatDType = (d: DType): boolean => DTYPE_INFO[d].kind === 'float';

/** Accepts our names and PyTorch's (`bfloat16`, `torch.float16`, `half`, ...). */
export function parseDType(name: string): DType {
  const n = name.replace(/^torch\./, '');
  if (isDType(n)) return n;
  const alias: Record<string, DType> = {
    float64: 'f64', double: 'f64', float32: 'f32', float: 'f32', float16: 'f16', half: 'f16', bfloat16: 'bf16',
    float8_e4m3fn: 'fp8e4m3', float8_e5m2: 'fp8e5m2', int64: 'i64', long: 'i64', int32: 'i32', int: 'i32',
    int16: 'i16', int8: 'i8', uint8: 'u8', F64: 'f64', F32: 'f32', F16: 'f16', BF16: 'bf16', F8_E4M3: 'fp8e4m3',
    F8_E5M2: 'fp8e5m2', I64: 'i64', I32: 'i32', I16: 'i16', I8: 'i8', U8: 'u8', BOOL: 'bool',
  };
  const d = Object.hasOwn(alias, n) ? alias[n] : undefined;
  if (!d) throw new RangeError(`unknown dtype '${name}' (known: ${DTYPES.join(', ')})`);
  return d;
}

// ---------------------------------------------------------------------------------------------
// Small-float codecs

interface SmallFloatFormat {
  readonly expBits: number;
  readonly mantBits: number;
  readonly bias: number;
  /** IEEE-like formats have Inf (all-ones exponent, zero mantissa); e4m3fn does not. */
  readonly hasInf: boolean;
}

const F16: SmallFloatFormat = { expBits: 5, mantBits: 10, bias: 15, hasInf: true };
const BF16: SmallFloatFormat = { expBits: 8, mantBits: 7, bias: 127, hasInf: true };
const E4M3: SmallFloatFormat = { expBits: 4, mantBits: 3, bias: 7, hasInf: false };
const E5M2: SmallFloatFormat = { expBits: 5, mantBits: 2, bias: 15, hasInf: true };

function roundHalfEven(v: number): number {
  const f = Math.floor(v);
  const d = v - f;
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

/** Largest finite magnitude of a format. */
function maxFinite(fmt: SmallFloatFormat): number {
  const maxField = (1 << fmt.expBits) - 1;
  if (fmt.hasInf) return 2 ** (maxField - 1 - fmt.bias) * (2 - 2 ** -fmt.mantBits);
  // e4m3fn: the all-ones exponent is a normal binade except mantissa all-ones (NaN).
  return 2 ** (maxField - fmt.bias) * (2 - 2 * 2 ** -fmt.mantBits);
}

function nanBits(fmt: SmallFloatFormat): number {
  const maxField = (1 << fmt.expBits) - 1;
  if (fmt.hasInf) return (maxField << fmt.mantBits) | (1 << (fmt.mantBits - 1)); // quiet NaN
  return (maxField << fmt.mantBits) | ((1 << fmt.mantBits) - 1);
}

/**
 * Encode a float64 to the format's bits with round-to-nearest-even.
 * Overflow gives Inf where the format has it; for e4m3fn it gives NaN (PyTorch's cast),
 * unless `saturate`, which clamps finite and infinite values to ±max (the OCP saturating mode).
 */
function encodeSmallFloat(x: number, fmt: SmallFloatFormat, saturate: boolean): number {
  const total = 1 + fmt.expBits + fmt.mantBits;
  const signBit = 1 << (total - 1);
  if (Number.isNaN(x)) return nanBits(fmt);
  const sign = x < 0 || Object.is(x, -0) ? signBit : 0;
  let a = Math.abs(x);
  const maxF = maxFinite(fmt);
  const maxField = (1 << fmt.expBits) - 1;
  const infBits = fmt.hasInf ? maxField << fmt.mantBits : nanBits(fmt);
  if (a === Infinity) return sign | (saturate ? encodeSmallFloat(maxF, fmt, false) : infBits);
  if (a === 0) return sign;
  if (saturate && a > maxF) a = maxF;
  const emin = 1 - fmt.bias;
  let bits: number;
  if (a < 2 ** emin) {
    // Subnormal: multiples of 2^(emin - mantBits). m == 2^mantBits rounds up into the first normal binade,
    // whose encoding happens to be exactly m.
    bits = roundHalfEven(a / 2 ** (emin - fmt.mantBits));
  } else {
    let e = Math.floor(Math.log2(a));
    if (2 ** e > a) e -= 1;
    if (2 ** (e + 1) <= a) e += 1;
    let m = roundHalfEven((a / 2 ** e - 1) * 2 ** fmt.mantBits);
    if (m === 1 << fmt.mantBits) {
      m = 0;
      e += 1;
    }
    const field = e + fmt.bias;
    const overflow = fmt.hasInf ? field >= maxField : field > maxField || (field === maxField && m === (1 << fmt.mantBits) - 1);
    if (overflow) return sign | (saturate ? encodeSmallFloat(maxF, fmt, false) : infBits);
    bits = (field << fmt.mantBits) | m;
  }
  return sign | bits;
}

function decodeSmallFloat(bits: number, fmt: SmallFloatFormat): number {
  const total = 1 + fmt.expBits + fmt.mantBits;
  const sign = (bits >> (total - 1)) & 1 ? -1 : 1;
  const field = (bits >> fmt.mantBits) & ((1 << fmt.expBits) - 1);
  const m = bits & ((1 << fmt.mantBits) - 1);
  const maxField = (1 << fmt.expBits) - 1;
  if (fmt.hasInf && field === maxField) return m === 0 ? sign * Infinity : NaN;
  if (!fmt.hasInf && field === maxField && m === (1 << fmt.mantBits) - 1) return NaN;
  if (field === 0) return sign * m * 2 ** (1 - fmt.bias - fmt.mantBits);
  return sign * (1 + m / (1 << fmt.mantBits)) * 2 ** (field - fmt.bias);
}

function decodeTable(fmt: SmallFloatFormat): Float64Array {
  const n = 1 << (1 + fmt.expBits + fmt.mantBits);
  const t = new Float64Array(n);
  for (let i = 0; i < n; i++) t[i] = decodeSmallFloat(i, fmt);
  return t;
}

let f16Table: Float64Array | undefined;
let bf16Table: Float64Array | undefined;
let e4m3Table: Float64Array | undefined;
let e5m2Table: Float64Array | undefined;

const f32Scratch = new Float32Array(1);
const u32Scratch = new Uint32Array(f32Scratch.buffer);

export function bf16ToNumber(bits: number): number {
  return (bf16Table ??= decodeTable(BF16))[bits & 0xffff]!;
}
/**
 * float64 -> bf16 bits, one round-to-nearest-even. Fast path: round to float32 *to odd* (float32 keeps 16 more
 * mantissa bits than bf16, so a sticky odd bit keeps the exact tie / above-tie information), then RNE on the float32
 * bits; inf, NaN and float32 overflow take the exact general encoder.
 */
export function numberToBf16(x: number): number {
  const u = float32BitsRoundedToOdd(x);
  if (u < 0) return encodeSmallFloat(x, BF16, false);
  return ((u + 0x7fff + ((u >>> 16) & 1)) >>> 16) & 0xffff;
}

/**
 * float64 -> float16 bits, one round-to-nearest-even: the same round-to-odd step (float32 keeps 13 more mantissa bits),
 * then RNE on the float32 bits for float16's normal range; zeros, subnormals, values near overflow, inf and NaN take
 * the exact general encoder.
 */
export function numberToF16(x: number): number {
  const u = float32BitsRoundedToOdd(x);
  const a = u & 0x7fffffff;
  // 0x38800000 = 2^-14 (float16's least normal); 0x47000000 = 2^15 (every larger value is near or past 65504)
  if (u < 0 || a < 0x38800000 || a >= 0x47000000) return encodeSmallFloat(x, F16, false);
  const rebiased = a - (112 << 23); // float32 exponent bias 127 -> float16's 15
  return ((u >>> 16) & 0x8000) | ((rebiased + 0x0fff + ((rebiased >>> 13) & 1)) >>> 13);
}

/**
 * The float32 bits of x rounded to odd (truncated toward zero, then the last bit set when inexact), or -1 where
 * float32 cannot hold x (NaN, inf, overflow).
 */
function float32BitsRoundedToOdd(x: number): number {
  const f = Math.fround(x);
  if (f === Infinity || f === -Infinity || Number.isNaN(f)) return -1;
  f32Scratch[0] = f;
  let u = u32Scratch[0]!;
  if (f !== x) {
    if (Math.abs(f) > Math.abs(x)) u -= 1; // fround rounded away from zero: step back to the truncation
    u = (u | 1) >>> 0; // unsigned: the sign bit stays a bit, not a negative number
  }
  return u;
}
export function f16ToNumber(bits: number): number {
  return (f16Table ??= decodeTable(F16))[bits & 0xffff]!;
}
export function fp8e4m3ToNumber(bits: number): number {
  return (e4m3Table ??= decodeTable(E4M3))[bits & 0xff]!;
}
export function numberToFp8e4m3(x: number, opts: { saturate?: boolean } = {}): number {
  return encodeSmallFloat(x, E4M3, opts.saturate ?? false);
}
export function fp8e5m2ToNumber(bits: number): number {
  return (e5m2Table ??= decodeTable(E5M2))[bits & 0xff]!;
}
export function numberToFp8e5m2(x: number, opts: { saturate?: boolean } = {}): number {
  return encodeSmallFloat(x, E5M2, opts.saturate ?? false);
}

/** Largest finite value of each small float format. */
export const FP8_E4M3_MAX = maxFinite(E4M3); // 448
export const FP8_E5M2_MAX = maxFinite(E5M2); // 57344
export const F16_MAX = maxFinite(F16); // 65504
export const BF16_MAX = maxFinite(BF16);

/** Round a number to the nearest value representable in `dtype` (what a store then load does). */
export function roundToDType(x: number, dtype: DType): number {
  switch (dtype) {
    case 'f64': return x;
    case 'f32': return Math.fround(x);
    case 'f16': return f16ToNumber(numberToF16(x));
    case 'bf16': return bf16ToNumber(numberToBf16(x));
    case 'fp8e4m3': return fp8e4m3ToNumber(numberToFp8e4m3(x));
    case 'fp8e5m2': return fp8e5m2ToNumber(numberToFp8e5m2(x));
    case 'bool': return x !== 0 ? 1 : 0;
    default: return integerWrap(Math.trunc(x), dtype);
  }
}

function integerWrap(v: number, dtype: DType): number {
  switch (dtype) {
    case 'i32': return v | 0;
    case 'i16': return (v << 16) >> 16;
    case 'i8': return (v << 24) >> 24;
    case 'u8': return v & 0xff;
    default: return v; // i64: exact up to 2^53
  }
}

// ---------------------------------------------------------------------------------------------
// Element access over raw little-endian bytes

/** Reads and writes elements of one dtype in a byte buffer, by element index, as JS numbers. */
export interface ElementAccessor {
  get(index: number): number;
  set(index: number, value: number): void;
}

export function elementAccessor(dtype: DType, bytes: Uint8Array): ElementAccessor {
  const { buffer, byteOffset, byteLength } = bytes;
  switch (dtype) {
    case 'f64': {
      const a = aligned(Float64Array, buffer, byteOffset, byteLength);
      return { get: (i) => a[i]!, set: (i, v) => { a[i] = v; } };
    }
    case 'f32': {
      const a = aligned(Float32Array, buffer, byteOffset, byteLength);
      return { get: (i) => a[i]!, set: (i, v) => { a[i] = v; } };
    }
    case 'f16': {
      const a = aligned(Uint16Array, buffer, byteOffset, byteLength);
      return { get: (i) => f16ToNumber(a[i]!), set: (i, v) => { a[i] = numberToF16(v); } };
    }
    case 'bf16': {
      const a = aligned(Uint16Array, buffer, byteOffset, byteLength);
      return { get: (i) => bf16ToNumber(a[i]!), set: (i, v) => { a[i] = numberToBf16(v); } };
    }
    case 'fp8e4m3': {
      const a = bytes;
      return { get: (i) => fp8e4m3ToNumber(a[i]!), set: (i, v) => { a[i] = numberToFp8e4m3(v); } };
    }
    case 'fp8e5m2': {
      const a = bytes;
      return { get: (i) => fp8e5m2ToNumber(a[i]!), set: (i, v) => { a[i] = numberToFp8e5m2(v); } };
    }
    case 'i64': {
      // Two int32 halves, little-endian; exact for |v| < 2^53 (every index and id we use).
      const a = aligned(Int32Array, buffer, byteOffset, byteLength);
      return {
        get: (i) => a[2 * i + 1]! * 4294967296 + (a[2 * i]! >>> 0),
        set: (i, v) => {
          const t = Math.trunc(v);
          const hi = Math.floor(t / 4294967296);
          a[2 * i] = (t - hi * 4294967296) | 0;
          a[2 * i + 1] = hi | 0;
        },
      };
    }
    case 'i32': {
      const a = aligned(Int32Array, buffer, byteOffset, byteLength);
      return { get: (i) => a[i]!, set: (i, v) => { a[i] = v; } };
    }
    case 'i16': {
      const a = aligned(Int16Array, buffer, byteOffset, byteLength);
      return { get: (i) => a[i]!, set: (i, v) => { a[i] = v; } };
    }
    case 'i8': {
      const a = new Int8Array(buffer, byteOffset, byteLength);
      return { get: (i) => a[i]!, set: (i, v) => { a[i] = v; } };
    }
    case 'u8':
      return { get: (i) => bytes[i]!, set: (i, v) => { bytes[i] = v; } };
    case 'bool':
      return { get: (i) => (bytes[i] ? 1 : 0), set: (i, v) => { bytes[i] = v ? 1 : 0; } };
  }
}

type TypedCtor<T> = new (buffer: ArrayBufferLike, byteOffset: number, length: number) => T;
function aligned<T>(Ctor: TypedCtor<T> & { BYTES_PER_ELEMENT: number }, buffer: ArrayBufferLike, byteOffset: number, byteLength: number): T {
  if (byteOffset % Ctor.BYTES_PER_ELEMENT !== 0) throw new RangeError(`misaligned ${Ctor.name} view at byte ${byteOffset}`);
  return new Ctor(buffer, byteOffset, Math.floor(byteLength / Ctor.BYTES_PER_ELEMENT));
}
