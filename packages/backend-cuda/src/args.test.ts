import { describe, expect, it } from 'vitest';
import { addressOf, ARG_BASE, layoutArgs, LaunchBuffer, parseSignature, writeArgs } from './args.js';

describe('kernel argument packing', () => {
  it('aligns every argument to its own alignment', () => {
    const l = layoutArgs(['i32', 'ptr', 'f32', 'u8', 'f64', 'i16', { struct: 12, align: 4 }, { struct: 208, align: 8 }]);
    expect([...l.offsets]).toEqual([0, 8, 16, 20, 24, 32, 36, 48]);
    expect(l.size).toBe(256);
  });

  it('writes little-endian bytes: pointers and i64 as 64-bit, floats IEEE, structs verbatim', () => {
    const l = layoutArgs(['ptr', 'i32', 'f32', 'i64', { struct: 4, align: 4 }, 'f64']);
    const buf = new ArrayBuffer(64);
    const bytes = new Uint8Array(buf);
    writeArgs(new DataView(buf), bytes, l, [0x7f12_3456_7800, -2, 1.5, -1, new Uint8Array([1, 2, 3, 4]), 0.25]);
    const v = new DataView(buf);
    expect(v.getBigUint64(0, true)).toBe(0x7f12_3456_7800n);
    expect(v.getInt32(8, true)).toBe(-2);
    expect(v.getFloat32(12, true)).toBe(1.5);
    expect(v.getBigInt64(16, true)).toBe(-1n);
    expect([...bytes.slice(24, 28)]).toEqual([1, 2, 3, 4]);
    expect(v.getFloat64(32, true)).toBe(0.25);
  });

  it('takes tensors (storage pointer + element offset) and objects with devicePtr as pointers', () => {
    expect(addressOf({ storage: { devicePtr: 4096 }, offset: 3, itemsize: 2 })).toBe(4102);
    expect(addressOf({ devicePtr: 512 })).toBe(512);
    const l = layoutArgs(['ptr']);
    const buf = new ArrayBuffer(8);
    writeArgs(new DataView(buf), new Uint8Array(buf), l, [{ storage: { devicePtr: 1024 }, offset: 4, itemsize: 4 }]);
    expect(new DataView(buf).getBigUint64(0, true)).toBe(1040n);
  });

  it('rejects wrong argument counts and types with the argument index', () => {
    const lb = new LaunchBuffer();
    const l = layoutArgs(['ptr', 'i32']);
    expect(() => lb.packDims(1, 0, 1, 1, 1, 1, 1, 1, 0, l, [1])).toThrow('kernel expects 2 arguments, got 1');
    expect(() => lb.packDims(1, 0, 1, 1, 1, 1, 1, 1, 0, l, [1, 'x' as unknown as number])).toThrow(/argument 1 \(i32\): expected a number/);
    expect(() => lb.packDims(1, 0, 1, 1, 1, 1, 1, 1, 0, layoutArgs([{ struct: 8, align: 8 }]), [new Uint8Array(4)])).toThrow(/8 bytes/);
  });

  it('fills the staging header the addon reads (function, stream, dims, shared bytes, count, offsets)', () => {
    const lb = new LaunchBuffer();
    const l = layoutArgs(['i32', 'ptr']);
    lb.packDims(0x1234, 0x5678, 10, 2, 1, 256, 1, 1, 4096, l, [7, 0x1000]);
    const v = new DataView(lb.buffer);
    expect(v.getFloat64(0, true)).toBe(0x1234);
    expect(v.getFloat64(8, true)).toBe(0x5678);
    expect([0, 1, 2, 3, 4, 5, 6, 7].map((i) => v.getUint32(16 + 4 * i, true))).toEqual([10, 2, 1, 256, 1, 1, 4096, 2]);
    expect([v.getUint32(64, true), v.getUint32(68, true)]).toEqual([0, 8]);
    expect(v.getInt32(ARG_BASE, true)).toBe(7);
    expect(v.getBigUint64(ARG_BASE + 8, true)).toBe(0x1000n);
  });

  it('infers signatures from an extern "C" __global__ entry', () => {
    const src = `
      // a comment with fk(int)
      extern "C" __global__ void __launch_bounds__(256) scale(float* __restrict__ out, const __nv_bfloat16* in, float s, int n, long long m, unsigned flags) {}
      extern "C" __global__ void nothing() {}`;
    expect(parseSignature(src, 'scale')).toEqual(['ptr', 'ptr', 'f32', 'i32', 'i64', 'u32']);
    expect(parseSignature(src, 'nothing')).toEqual([]);
    expect(() => parseSignature(src, 'missing')).toThrow(/cannot find the __global__ entry 'missing'/);
    expect(() => parseSignature('extern "C" __global__ void k(MyStruct s) {}', 'k')).toThrow(/type 'MyStruct'.*pass signature explicitly/);
  });

  it('counts a parameter declared under a preprocessor condition in every build', () => {
    const src = `#define FK_X 0
extern "C" __global__ void k(float* out, int n
#if FK_X
    , const float* __restrict__ extra  // only in FK_X builds
#endif
    ) {}`;
    expect(parseSignature(src, 'k')).toEqual(['ptr', 'i32', 'ptr']);
  });
});
