import { describe, expect, it } from 'vitest';
import {
  BF16_MAX,
  DTYPE_INFO,
  DTYPES,
  F16_MAX,
  FP8_E4M3_MAX,
  FP8_E5M2_MAX,
  bf16ToNumber,
  elementAccessor,
  f16ToNumber,
  fp8e4m3ToNumber,
  fp8e5m2ToNumber,
  isDType,
  isFloatDType,
  numberToBf16,
  numberToF16,
  numberToFp8e4m3,
  numberToFp8e5m2,
  parseDType,
  roundToDType,
  type DType,
} from './dtype.js';
import { Rng } from './rng.js';

const hex = (n: number) => `0x${n.toString(16)}`;

describe('dtype metadata', () => {
  it('has an info entry per dtype with the right item size', () => {
    const sizes: Record<DType, number> = { f64: 8, f32: 4, f16: 2, bf16: 2, fp8e4m3: 1, fp8e5m2: 1, i64: 8, i32: 4, i16: 2, i8: 1, u8: 1, bool: 1 };
    for (const d of DTYPES) {
      expect(DTYPE_INFO[d].name).toBe(d);
      expect(DTYPE_INFO[d].itemsize).toBe(sizes[d]);
    }
    expect(DTYPE_INFO.bf16.torchName).toBe('bfloat16');
    expect(DTYPE_INFO.fp8e4m3.torchName).toBe('float8_e4m3fn');
  });

  it('isDType / isFloatDType', () => {
    expect(isDType('bf16')).toBe(true);
    expect(isDType('bfloat16')).toBe(false);
    expect(isDType(3)).toBe(false);
    expect(DTYPES.filter(isFloatDType)).toEqual(['f64', 'f32', 'f16', 'bf16', 'fp8e4m3', 'fp8e5m2']);
  });

  it('parseDType accepts our names, torch names, torch. prefixes and safetensors names', () => {
    const cases: [string, DType][] = [
      ['f32', 'f32'], ['bf16', 'bf16'], ['bfloat16', 'bf16'], ['torch.bfloat16', 'bf16'], ['torch.float16', 'f16'],
      ['half', 'f16'], ['float', 'f32'], ['double', 'f64'], ['long', 'i64'], ['int', 'i32'], ['torch.int64', 'i64'],
      ['float8_e4m3fn', 'fp8e4m3'], ['torch.float8_e5m2', 'fp8e5m2'], ['uint8', 'u8'], ['int8', 'i8'], ['int16', 'i16'],
      ['F8_E4M3', 'fp8e4m3'], ['F8_E5M2', 'fp8e5m2'], ['BF16', 'bf16'], ['F16', 'f16'], ['F32', 'f32'], ['F64', 'f64'],
      ['I64', 'i64'], ['I32', 'i32'], ['I16', 'i16'], ['I8', 'i8'], ['U8', 'u8'], ['BOOL', 'bool'], ['bool', 'bool'],
    ];
    for (const [name, d] of cases) expect(parseDType(name), name).toBe(d);
  });

  it('parseDType rejects unknown names, listing the known ones', () => {
    expect(() => parseDType('float128')).toThrow(RangeError);
    expect(() => parseDType('float128')).toThrow(/unknown dtype 'float128'.*bf16/);
    expect(() => parseDType('')).toThrow(/unknown dtype/);
    expect(() => parseDType('Float32')).toThrow(/unknown dtype/);
  });

  it('parseDType does not resolve Object.prototype names', () => {
    for (const n of ['toString', 'constructor', '__proto__', 'hasOwnProperty', 'valueOf']) {
      expect(() => parseDType(n), n).toThrow(/unknown dtype/);
    }
  });
});

describe('bf16 codec', () => {
  const cases: [number, number][] = [
    [1, 0x3f80], [-2, 0xc000], [0.1, 0x3dcd], [-0.1, 0xbdcd], [0.5, 0x3f00], [3, 0x4040],
    [BF16_MAX, 0x7f7f], [Infinity, 0x7f80], [-Infinity, 0xff80], [0, 0x0000], [-0, 0x8000],
    [2 ** -133, 0x0001], [2 ** -126, 0x0080], [127 * 2 ** -133, 0x007f],
    // ties to even at 1: 1 + 2^-8 is halfway between 0x3F80 and 0x3F81
    [1 + 2 ** -8, 0x3f80], [1 + 3 * 2 ** -8, 0x3f82], [-(1 + 3 * 2 ** -8), 0xbf82],
    // subnormal ties
    [2 ** -134, 0x0000], [3 * 2 ** -134, 0x0002], [-(2 ** -134), 0x8000],
    // overflow: the midpoint between max and 2^128 goes to Inf; just below stays max
    [2 ** 127 * (2 - 2 ** -8), 0x7f80], [2 ** 127 * (2 - 2 ** -8 - 2 ** -20), 0x7f7f],
    [1e39, 0x7f80], [-1e39, 0xff80], [1e300, 0x7f80],
    // tiny values beyond float32's range round to zero with the right sign
    [1e-300, 0x0000], [-1e-300, 0x8000],
  ];
  it.each(cases)('encode %d -> %s', (x, bits) => {
    expect(hex(numberToBf16(x))).toBe(hex(bits));
  });

  it('rounds once from float64 (no double rounding through float32)', () => {
    // float32(1 + 2^-8 + 2^-40) = 1 + 2^-8 (a bf16 tie that would go to 0x3F80); the float64 value is above the tie
    expect(hex(numberToBf16(1 + 2 ** -8 + 2 ** -40))).toBe('0x3f81');
    expect(hex(numberToBf16(1 + 2 ** -8 - 2 ** -40))).toBe('0x3f80');
    expect(hex(numberToBf16(2 ** -134 * (1 + 2 ** -30)))).toBe('0x1');
  });

  it('NaN encodes to a quiet NaN and decodes as NaN', () => {
    expect(hex(numberToBf16(NaN))).toBe('0x7fc0');
    expect(bf16ToNumber(0x7fc0)).toBeNaN();
    expect(bf16ToNumber(0xffff)).toBeNaN();
    expect(bf16ToNumber(0x7f81)).toBeNaN();
  });

  it('decodes known patterns', () => {
    expect(bf16ToNumber(0x3f80)).toBe(1);
    expect(bf16ToNumber(0xc000)).toBe(-2);
    expect(bf16ToNumber(0x0001)).toBe(2 ** -133);
    expect(bf16ToNumber(0x7f7f)).toBe(BF16_MAX);
    expect(BF16_MAX).toBe(3.3895313892515355e38);
    expect(bf16ToNumber(0x7f80)).toBe(Infinity);
    expect(bf16ToNumber(0xff80)).toBe(-Infinity);
    expect(Object.is(bf16ToNumber(0x8000), -0)).toBe(true);
    expect(bf16ToNumber(0x13f80)).toBe(1); // only the low 16 bits count
  });
});

describe('f16 codec', () => {
  const cases: [number, number][] = [
    [1, 0x3c00], [-2, 0xc000], [65504, 0x7bff], [F16_MAX, 0x7bff], [0.1, 0x2e66], [1 / 3, 0x3555], [0.5, 0x3800],
    [65520, 0x7c00], [65519.99, 0x7bff], [-65520, 0xfc00], [1e10, 0x7c00], [Infinity, 0x7c00], [-Infinity, 0xfc00],
    [2 ** -24, 0x0001], [2 ** -14, 0x0400], [1023 * 2 ** -24, 0x03ff], [0, 0], [-0, 0x8000],
    [1 + 2 ** -11, 0x3c00], [1 + 3 * 2 ** -11, 0x3c02], [2 ** -25, 0x0000], [3 * 2 ** -25, 0x0002], [2 ** -25 * 1.0001, 0x0001],
    // the largest subnormal plus half an ulp rounds up into the first normal binade
    [1023.5 * 2 ** -24, 0x0400], [1022.5 * 2 ** -24, 0x03fe],
    [2048 + 1, 0x6800], [2048 + 3, 0x6802], [-1e-30, 0x8000],
  ];
  it.each(cases)('encode %d -> %s', (x, bits) => {
    expect(hex(numberToF16(x))).toBe(hex(bits));
  });

  it('NaN and decoding', () => {
    expect(hex(numberToF16(NaN))).toBe('0x7e00');
    expect(f16ToNumber(0x7e00)).toBeNaN();
    expect(f16ToNumber(0x7c01)).toBeNaN();
    expect(f16ToNumber(0x7c00)).toBe(Infinity);
    expect(f16ToNumber(0xfc00)).toBe(-Infinity);
    expect(f16ToNumber(0x7bff)).toBe(65504);
    expect(f16ToNumber(0x0001)).toBe(2 ** -24);
    expect(f16ToNumber(0x2e66)).toBe(0.0999755859375);
    expect(Object.is(f16ToNumber(0x8000), -0)).toBe(true);
  });
});

describe('fp8 e4m3fn codec', () => {
  const cases: [number, number][] = [
    [448, 0x7e], [-448, 0xfe], [FP8_E4M3_MAX, 0x7e], [1, 0x38], [-1, 0xb8], [2 ** -9, 0x01], [7 * 2 ** -9, 0x07], [2 ** -6, 0x08],
    [0.0625, 0x18], [256, 0x78], [0, 0], [-0, 0x80], [0.1, 0x1d], [3, 0x44],
    // ties to even
    [1 + 2 ** -4, 0x38], [1 + 3 * 2 ** -4, 0x3a], [2 ** -10, 0x00], [3 * 2 ** -10, 0x02],
    // [448, 464] rounds to 448; 464 is the tie with 480 (not representable) and goes to the even 448
    [450, 0x7e], [464, 0x7e],
    // above the tie rounds towards 480, which is NaN (PyTorch: everything >= 480 becomes 0x7F as well)
    [464.0001, 0x7f], [470, 0x7f], [479.9, 0x7f], [480, 0x7f], [1e6, 0x7f], [-1e6, 0xff],
    [Infinity, 0x7f], [-Infinity, 0xff],
  ];
  it.each(cases)('encode %d -> %s', (x, bits) => {
    expect(hex(numberToFp8e4m3(x))).toBe(hex(bits));
  });

  it('saturate clamps finite and infinite overflow to ±448 and keeps NaN', () => {
    expect(hex(numberToFp8e4m3(1e6, { saturate: true }))).toBe('0x7e');
    expect(hex(numberToFp8e4m3(-1e6, { saturate: true }))).toBe('0xfe');
    expect(hex(numberToFp8e4m3(470, { saturate: true }))).toBe('0x7e');
    expect(hex(numberToFp8e4m3(480, { saturate: true }))).toBe('0x7e');
    expect(hex(numberToFp8e4m3(Infinity, { saturate: true }))).toBe('0x7e');
    expect(hex(numberToFp8e4m3(-Infinity, { saturate: true }))).toBe('0xfe');
    expect(hex(numberToFp8e4m3(NaN, { saturate: true }))).toBe('0x7f');
    expect(hex(numberToFp8e4m3(1, { saturate: true }))).toBe('0x38');
    expect(hex(numberToFp8e4m3(NaN))).toBe('0x7f');
  });

  it('decodes: no Inf, 0x7F/0xFF are NaN, 0x78..0x7E are normal', () => {
    expect(fp8e4m3ToNumber(0x7f)).toBeNaN();
    expect(fp8e4m3ToNumber(0xff)).toBeNaN();
    expect(fp8e4m3ToNumber(0x7e)).toBe(448);
    expect(fp8e4m3ToNumber(0xfe)).toBe(-448);
    expect(fp8e4m3ToNumber(0x78)).toBe(256);
    expect(fp8e4m3ToNumber(0x01)).toBe(2 ** -9);
    expect(fp8e4m3ToNumber(0x38)).toBe(1);
    expect(Object.is(fp8e4m3ToNumber(0x80), -0)).toBe(true);
    let nans = 0;
    for (let b = 0; b < 256; b++) {
      const v = fp8e4m3ToNumber(b);
      if (Number.isNaN(v)) nans++;
      expect(Number.isFinite(v) || Number.isNaN(v)).toBe(true);
    }
    expect(nans).toBe(2);
  });
});

describe('fp8 e5m2 codec', () => {
  const cases: [number, number][] = [
    [57344, 0x7b], [FP8_E5M2_MAX, 0x7b], [-57344, 0xfb], [1, 0x3c], [-2, 0xc0], [2 ** -16, 0x01], [2 ** -14, 0x04], [0, 0], [-0, 0x80],
    [Infinity, 0x7c], [-Infinity, 0xfc], [61440, 0x7c], [61439, 0x7b], [1e9, 0x7c],
    [1 + 2 ** -3, 0x3c], [1 + 3 * 2 ** -3, 0x3e], [2 ** -17, 0x00], [3 * 2 ** -17, 0x02],
  ];
  it.each(cases)('encode %d -> %s', (x, bits) => {
    expect(hex(numberToFp8e5m2(x))).toBe(hex(bits));
  });

  it('saturate, NaN and decoding', () => {
    expect(hex(numberToFp8e5m2(61440, { saturate: true }))).toBe('0x7b');
    expect(hex(numberToFp8e5m2(Infinity, { saturate: true }))).toBe('0x7b');
    expect(hex(numberToFp8e5m2(-Infinity, { saturate: true }))).toBe('0xfb');
    expect(hex(numberToFp8e5m2(NaN))).toBe('0x7e');
    expect(fp8e5m2ToNumber(0x7c)).toBe(Infinity);
    expect(fp8e5m2ToNumber(0xfc)).toBe(-Infinity);
    for (const b of [0x7d, 0x7e, 0x7f, 0xfd, 0xfe, 0xff]) expect(fp8e5m2ToNumber(b)).toBeNaN();
    expect(fp8e5m2ToNumber(0x7b)).toBe(57344);
    expect(fp8e5m2ToNumber(0x01)).toBe(2 ** -16);
  });
});

interface Codec {
  readonly name: string;
  readonly bits: number;
  decode(b: number): number;
  encode(x: number): number;
  /** Exponent and mantissa widths, for the independent reference rounding. */
  readonly expBits: number;
  readonly mantBits: number;
  readonly hasInf: boolean;
}

const CODECS: Codec[] = [
  { name: 'bf16', bits: 16, decode: bf16ToNumber, encode: numberToBf16, expBits: 8, mantBits: 7, hasInf: true },
  { name: 'f16', bits: 16, decode: f16ToNumber, encode: numberToF16, expBits: 5, mantBits: 10, hasInf: true },
  { name: 'fp8e4m3', bits: 8, decode: fp8e4m3ToNumber, encode: (x) => numberToFp8e4m3(x), expBits: 4, mantBits: 3, hasInf: false },
  { name: 'fp8e5m2', bits: 8, decode: fp8e5m2ToNumber, encode: (x) => numberToFp8e5m2(x), expBits: 5, mantBits: 2, hasInf: true },
];

describe.each(CODECS)('$name: exhaustive properties', (codec) => {
  const n = 1 << codec.bits;
  const signBit = n >> 1;

  it('decode then encode gives back every non-NaN pattern', () => {
    let checked = 0;
    for (let b = 0; b < n; b++) {
      const v = codec.decode(b);
      if (Number.isNaN(v)) {
        expect(Number.isNaN(codec.decode(codec.encode(v)))).toBe(true);
        continue;
      }
      const back = codec.encode(v);
      if (back !== b) expect(hex(back), `pattern ${hex(b)} = ${v}`).toBe(hex(b));
      checked++;
    }
    expect(checked).toBeGreaterThan(n * 0.95);
  });

  it('decoded values are monotone in the positive patterns and symmetric in sign', () => {
    let prev = -Infinity;
    const bad: string[] = [];
    for (let b = 0; b < signBit; b++) {
      const v = codec.decode(b);
      if (Number.isNaN(v)) continue;
      if (!(v > prev)) bad.push(`${hex(b)} = ${v} not above ${prev}`);
      prev = v;
      if (!Object.is(codec.decode(b | signBit), -v)) bad.push(`${hex(b | signBit)} is not -${v}`);
    }
    expect(bad).toEqual([]);
  });

  it('roundToDType-style encode agrees with an independent nearest-value search (ties to even)', () => {
    // The reference: sorted non-negative finite values plus the "next" value past the maximum (the
    // overflow point, which is Inf for IEEE-like formats and NaN for e4m3fn), nearest wins, ties to the
    // even mantissa. Written without the codec's own rounding code.
    const vals: { v: number; b: number }[] = [];
    for (let b = 0; b < signBit; b++) {
      const v = codec.decode(b);
      if (Number.isFinite(v)) vals.push({ v, b });
    }
    vals.sort((p, q) => p.v - q.v);
    const max = vals[vals.length - 1]!.v;
    const emax = Math.floor(Math.log2(max));
    const overflowBits = codec.hasInf ? codec.encode(Infinity) : codec.encode(NaN);
    vals.push({ v: max + 2 ** (emax - codec.mantBits), b: overflowBits }); // 2^(emax+1) for IEEE-like, 480 for e4m3fn
    const refEncode = (x: number): number => {
      const a = Math.abs(x);
      const sign = x < 0 || Object.is(x, -0) ? signBit : 0;
      let lo = 0;
      let hi = vals.length - 1;
      if (a >= vals[hi]!.v) return sign | vals[hi]!.b;
      while (hi - lo > 1) {
        const mid = (lo + hi) >> 1;
        if (vals[mid]!.v <= a) lo = mid;
        else hi = mid;
      }
      const dl = a - vals[lo]!.v;
      const dh = vals[hi]!.v - a;
      let pick: number;
      if (dl < dh) pick = lo;
      else if (dh < dl) pick = hi;
      else pick = (vals[lo]!.b & 1) === 0 ? lo : hi; // the even mantissa (the overflow value counts as even)
      return sign | vals[pick]!.b;
    };
    const rng = new Rng(7);
    const mismatches: string[] = [];
    const check = (x: number) => {
      const got = codec.encode(x);
      const want = refEncode(x);
      if (got !== want && mismatches.length < 5) mismatches.push(`${x}: got ${hex(got)}, want ${hex(want)}`);
    };
    // random magnitudes spanning the whole range (subnormals to overflow), both signs
    const emin = Math.log2(vals[1]!.v) - 2;
    for (let i = 0; i < 20000; i++) {
      const e = emin + (emax + 3 - emin) * rng.uniform();
      check((rng.uniform() < 0.5 ? -1 : 1) * 2 ** e);
    }
    // exact midpoints between neighbours, and a hair either side
    for (let i = 0; i + 1 < vals.length; i++) {
      const m = (vals[i]!.v + vals[i + 1]!.v) / 2;
      check(m);
      check(-m);
      check(m * (1 + 2 ** -40));
      check(m * (1 - 2 ** -40));
      // one float64 ulp either side: the fast float32-to-odd paths must keep this sticky information
      check(m * (1 + 2 ** -52));
      check(-m * (1 - 2 ** -53));
    }
    expect(mismatches).toEqual([]);
  });
});

describe('roundToDType', () => {
  it('floats', () => {
    expect(roundToDType(0.1, 'f64')).toBe(0.1);
    expect(roundToDType(0.1, 'f32')).toBe(Math.fround(0.1));
    expect(roundToDType(0.1, 'f16')).toBe(0.0999755859375);
    expect(roundToDType(0.1, 'bf16')).toBe(0.10009765625);
    expect(roundToDType(0.1, 'fp8e4m3')).toBe(0.1015625);
    expect(roundToDType(0.1, 'fp8e5m2')).toBe(0.09375);
    expect(roundToDType(1e6, 'fp8e4m3')).toBeNaN();
    expect(roundToDType(1e6, 'f16')).toBe(Infinity);
    expect(roundToDType(470, 'fp8e4m3')).toBeNaN();
    expect(roundToDType(460, 'fp8e4m3')).toBe(448);
  });

  it('integers truncate and wrap', () => {
    expect(roundToDType(2.7, 'i32')).toBe(2);
    expect(roundToDType(-2.7, 'i32')).toBe(-2);
    expect(roundToDType(2 ** 31, 'i32')).toBe(-(2 ** 31));
    expect(roundToDType(40000, 'i16')).toBe(40000 - 65536);
    expect(roundToDType(-32769, 'i16')).toBe(32767);
    expect(roundToDType(200, 'i8')).toBe(-56);
    expect(roundToDType(-1, 'u8')).toBe(255);
    expect(roundToDType(256.9, 'u8')).toBe(0);
    expect(roundToDType(2 ** 53, 'i64')).toBe(2 ** 53);
    expect(roundToDType(-3.9, 'i64')).toBe(-3);
  });

  it('bool', () => {
    expect(roundToDType(0, 'bool')).toBe(0);
    expect(roundToDType(-0.5, 'bool')).toBe(1);
    expect(roundToDType(NaN, 'bool')).toBe(1);
  });
});

describe('elementAccessor', () => {
  it.each(DTYPES)('%s: set/get round trips representable values at every index', (d) => {
    const n = 5;
    const bytes = new Uint8Array(n * DTYPE_INFO[d].itemsize);
    const acc = elementAccessor(d, bytes);
    const vals = d === 'bool' ? [0, 1, 1, 0, 1] : d === 'u8' ? [0, 1, 127, 200, 255] : [0, 1, -2, 3, -4];
    vals.forEach((v, i) => acc.set(i, v));
    expect(vals.map((_, i) => acc.get(i))).toEqual(vals);
  });

  it('stores little-endian bit patterns', () => {
    const b16 = new Uint8Array(4);
    elementAccessor('bf16', b16).set(1, 1);
    expect([...b16]).toEqual([0, 0, 0x80, 0x3f]);
    const h16 = new Uint8Array(2);
    elementAccessor('f16', h16).set(0, -2);
    expect([...h16]).toEqual([0x00, 0xc0]);
    const e4 = new Uint8Array(2);
    elementAccessor('fp8e4m3', e4).set(1, 448);
    expect([...e4]).toEqual([0, 0x7e]);
    const e5 = new Uint8Array(1);
    elementAccessor('fp8e5m2', e5).set(0, 1);
    expect([...e5]).toEqual([0x3c]);
    const i32 = new Uint8Array(4);
    elementAccessor('i32', i32).set(0, -2);
    expect([...i32]).toEqual([0xfe, 0xff, 0xff, 0xff]);
  });

  it('small floats round to nearest even on store; f32 rounds; bool normalises', () => {
    const bytes = new Uint8Array(8);
    const bf = elementAccessor('bf16', bytes);
    bf.set(0, 1 + 3 * 2 ** -8);
    expect(bf.get(0)).toBe(1 + 2 ** -6);
    const f32 = elementAccessor('f32', bytes);
    f32.set(1, 0.1);
    expect(f32.get(1)).toBe(Math.fround(0.1));
    const bool = elementAccessor('bool', new Uint8Array(2));
    bool.set(0, 7);
    bool.set(1, 0);
    expect([bool.get(0), bool.get(1)]).toEqual([1, 0]);
  });

  it('i64: two int32 halves, exact up to 2^53 in both signs', () => {
    const values = [0, 1, -1, 2 ** 31, -(2 ** 31), 2 ** 32, -(2 ** 32), 2 ** 32 + 5, -(2 ** 32) - 5, 123456789012345, -123456789012345, 2 ** 53, -(2 ** 53), 2 ** 53 - 1, -(2 ** 53 - 1)];
    const bytes = new Uint8Array(values.length * 8);
    const acc = elementAccessor('i64', bytes);
    values.forEach((v, i) => acc.set(i, v));
    expect(values.map((_, i) => acc.get(i))).toEqual(values);
    // bit patterns agree with BigInt64Array (two's complement, little-endian)
    const big = new BigInt64Array(bytes.buffer);
    values.forEach((v, i) => expect(big[i]).toBe(BigInt(v)));
    // and reading what BigInt64Array wrote
    big[0] = -7n;
    big[1] = 9007199254740991n;
    expect(acc.get(0)).toBe(-7);
    expect(acc.get(1)).toBe(9007199254740991);
  });

  it('i64 truncates fractions towards zero', () => {
    const acc = elementAccessor('i64', new Uint8Array(16));
    acc.set(0, -2.5);
    acc.set(1, 2.5);
    expect([acc.get(0), acc.get(1)]).toEqual([-2, 2]);
  });

  it('works on a subarray at an aligned offset and rejects misaligned views', () => {
    const buf = new Uint8Array(32);
    const sub = buf.subarray(8, 24);
    const acc = elementAccessor('f64', sub);
    acc.set(0, 1.5);
    expect(new Float64Array(buf.buffer)[1]).toBe(1.5);
    expect(() => elementAccessor('f32', buf.subarray(2))).toThrow(/misaligned/);
    expect(() => elementAccessor('i64', buf.subarray(2))).toThrow(/misaligned/);
    // byte-sized types accept any offset
    const i8 = elementAccessor('i8', buf.subarray(3));
    i8.set(0, -1);
    expect(buf[3]).toBe(255);
    expect(() => elementAccessor('bf16', buf.subarray(1))).toThrow(/misaligned/);
  });
});
