import { readFileSync } from 'node:fs';
import { writeArgs } from '@fastkernels/backend-cuda';
import { bf16ToNumber, numberToBf16 } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { buildLaunchPlan, parseCompileResult, parsePtxParam, resultForCache, scratchBytes } from './metadata.js';

const fixture = (name: string) => JSON.parse(readFileSync(new URL(`../fixtures/${name}`, import.meta.url), 'utf8')) as Record<string, unknown>;

describe('PTX parameter declarations', () => {
  it('parses pointers, scalars and by-value arrays', () => {
    expect(parsePtxParam('.param .u64 .ptr .global .align 1 add_kernel_param_0')).toEqual({ name: 'add_kernel_param_0', ptxType: 'u64', size: 8, align: 8, pointer: true });
    expect(parsePtxParam('.param .u32 add_kernel_param_3')).toEqual({ name: 'add_kernel_param_3', ptxType: 'u32', size: 4, align: 4, pointer: false });
    expect(parsePtxParam('  .param .f32   k_param_5 ')).toMatchObject({ size: 4, ptxType: 'f32' });
    expect(parsePtxParam('.param .b16 k_param_6')).toMatchObject({ size: 2 });
    expect(parsePtxParam('.param .u64 k_param_7')).toMatchObject({ size: 8, pointer: false });
    expect(parsePtxParam('.param .align 64 .b8 k_param_1[128]')).toEqual({ name: 'k_param_1', ptxType: 'b8', size: 128, align: 64, pointer: false });
    expect(() => parsePtxParam('.reg .u32 %r1')).toThrow(/cannot parse/);
  });
});

describe('compile results (recorded Triton 3.6 fixtures)', () => {
  it('parses the add kernel and maps the two appended scratch pointers', () => {
    const c = parseCompileResult(fixture('add_kernel.triton-3.6.json'));
    expect(c).toMatchObject({ name: 'add_kernel', shared: 0, numWarps: 4, numCtas: 1, triton: '3.6.0', globalScratchSize: 0, profileScratchSize: 0 });
    expect(Array.from(c.cubin.subarray(0, 4))).toEqual([0x7f, 0x45, 0x4c, 0x46]);
    const plan = buildLaunchPlan(c);
    expect(plan.argCount).toBe(4);
    expect(plan.params.map((p) => [p.role, p.argName, p.argType, p.encoding])).toEqual([
      ['arg', 'x_ptr', 'ptr', 'ptr'],
      ['arg', 'y_ptr', 'ptr', 'ptr'],
      ['arg', 'out_ptr', 'ptr', 'ptr'],
      ['arg', 'n_elements', 'i32', 'int'],
      ['global_scratch', 'global_scratch', 'ptr', 'ptr'],
      ['profile_scratch', 'profile_scratch', 'ptr', 'ptr'],
    ]);
    expect(plan.globalScratchIndex).toBe(4);
    expect(plan.profileScratchIndex).toBe(5);
    expect(Array.from(plan.layout.offsets)).toEqual([0, 8, 16, 24, 32, 40]);
    expect(plan.layout.size).toBe(48);
  });

  it('packs the arguments exactly as the kernel ABI lays them out', () => {
    const plan = buildLaunchPlan(parseCompileResult(fixture('add_kernel.triton-3.6.json')));
    const buf = new ArrayBuffer(plan.layout.size);
    const view = new DataView(buf);
    const x = 0x7f12_3456_7800;
    const tensor = { storage: { devicePtr: 0x7f00_0000_0000 }, offset: 16, itemsize: 4 };
    writeArgs(view, new Uint8Array(buf), plan.layout, [x, tensor, x + 4096, 98_432, 0, 0]);
    expect(view.getBigUint64(0, true)).toBe(BigInt(x));
    expect(view.getBigUint64(8, true)).toBe(BigInt(0x7f00_0000_0000 + 64));
    expect(view.getBigUint64(16, true)).toBe(BigInt(x + 4096));
    expect(view.getInt32(24, true)).toBe(98_432);
    expect(view.getBigUint64(32, true)).toBe(0n);
    expect(view.getBigUint64(40, true)).toBe(0n);
  });

  it('maps i64, fp32, bf16 and i1 scalars and a sized global scratch (scaled_rms_kernel)', () => {
    const c = parseCompileResult(fixture('scaled_rms_kernel.triton-3.6.json'));
    expect(c).toMatchObject({ shared: 66048, numWarps: 8, globalScratchSize: 128, globalScratchAlign: 128 });
    const plan = buildLaunchPlan(c);
    expect(plan.params.map((p) => [p.argName, p.argType, p.encoding])).toEqual([
      ['x_ptr', 'ptr', 'ptr'],
      ['w_ptr', 'ptr', 'ptr'],
      ['y_ptr', 'ptr', 'ptr'],
      ['stride', 'i64', 'int'],
      ['n_cols', 'i32', 'int'],
      ['eps', 'f32', 'float'],
      ['scale', 'u16', 'bf16'],
      ['HAS_W', 'u8', 'bool'],
      ['global_scratch', 'ptr', 'ptr'],
      ['profile_scratch', 'ptr', 'ptr'],
    ]);
    expect(Array.from(plan.layout.offsets)).toEqual([0, 8, 16, 24, 32, 36, 40, 42, 48, 56]);
    const buf = new ArrayBuffer(plan.layout.size);
    const view = new DataView(buf);
    writeArgs(view, new Uint8Array(buf), plan.layout, [256, 512, 768, 4096 * 3, 4096, 1e-5, numberToBf16(0.5), 1, 0x1000, 0]);
    expect(view.getBigInt64(24, true)).toBe(12288n);
    expect(view.getFloat32(36, true)).toBeCloseTo(1e-5, 10);
    expect(bf16ToNumber(view.getUint16(40, true))).toBe(0.5);
    expect(view.getUint8(42)).toBe(1);
    expect(view.getBigUint64(48, true)).toBe(0x1000n);
    // Scratch: per program x programs x CTAs.
    expect(scratchBytes(c.globalScratchSize, 4096, c.numCtas)).toBe(128 * 4096);
    expect(scratchBytes(0, 4096, 1)).toBe(0);
  });

  it('handles an older Triton with only global_scratch appended', () => {
    const plan = buildLaunchPlan(parseCompileResult(fixture('add_kernel.triton-3.3.json')));
    expect(plan.params.map((p) => p.role)).toEqual(['arg', 'arg', 'arg', 'arg', 'global_scratch']);
    expect(plan.profileScratchIndex).toBe(-1);
  });

  it('rejects parameter lists it cannot map', () => {
    const f = fixture('add_kernel.triton-3.6.json');
    const extra = { ...f, ptx_params: [...(f.ptx_params as string[]), '.param .u64 .ptr .global .align 1 add_kernel_param_6'] };
    expect(() => buildLaunchPlan(parseCompileResult(extra))).toThrow(/7 parameters but 4 runtime arguments/);
    const wrong = { ...f, ptx_params: (f.ptx_params as string[]).map((p, i) => (i === 3 ? '.param .u64 add_kernel_param_3' : p)) };
    expect(() => buildLaunchPlan(parseCompileResult(wrong))).toThrow(/'n_elements' is i32 \(4 bytes\) but the compiled kernel declares '.u64' of 8 bytes/);
    expect(() => parseCompileResult({ ...f, shared: -1 })).toThrow(/'shared' should be a byte count/);
    expect(() => parseCompileResult({ ...f, cubin_b64: Buffer.from('not an elf').toString('base64') })).toThrow(/not an ELF/);
  });

  it('stores the result without the cubin and reads it back with the cubin beside it', () => {
    const f = fixture('add_kernel.triton-3.6.json');
    const stored = resultForCache(f);
    expect(stored.cubin_b64).toBeUndefined();
    const cubin = new Uint8Array(Buffer.from(f.cubin_b64 as string, 'base64'));
    expect(parseCompileResult(JSON.parse(JSON.stringify(stored)), cubin).name).toBe('add_kernel');
  });
});
