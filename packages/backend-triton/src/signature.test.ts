import { describe, expect, it } from 'vitest';
import { inferTypeString, parsePythonParams, parseTritonType } from './signature.js';
import { tritonKernel } from './kernel.js';
import { ADD_SOURCE } from './test-util.js';

const tensor = (dtype: 'f32' | 'bf16' | 'i64', ptr: number, offset = 0) => ({ storage: { devicePtr: ptr }, offset, itemsize: dtype === 'bf16' ? 2 : dtype === 'i64' ? 8 : 4, dtype });

describe('the kernel parameter list from the Python def', () => {
  it('reads names, constexpr annotations and defaults across lines, comments and strings', () => {
    const src = `@triton.autotune(configs=[triton.Config({'B': 1})], key=['n'])
@triton.jit
def k(
    x_ptr,  # input, "quoted (paren"
    out_ptr: "tl.pointer_type",
    n,
    eps: float = 1e-6,
    BLOCK: tl.constexpr,
    ACC: tl.constexpr = tl.float32,
    FLAGS: triton.language.constexpr = (1, 2),
):
    pass
`;
    expect(parsePythonParams(src, 'k')).toEqual([
      { name: 'x_ptr', constexpr: false, hasDefault: false },
      { name: 'out_ptr', constexpr: false, hasDefault: false },
      { name: 'n', constexpr: false, hasDefault: false },
      { name: 'eps', constexpr: false, hasDefault: true },
      { name: 'BLOCK', constexpr: true, hasDefault: false },
      { name: 'ACC', constexpr: true, hasDefault: true },
      { name: 'FLAGS', constexpr: true, hasDefault: true },
    ]);
    expect(() => parsePythonParams(src, 'missing')).toThrow(/has no 'def missing\(...\)'/);
    expect(() => parsePythonParams('def v(*args):\n  pass', 'v')).toThrow(/variadic/);
  });
});

describe('Triton types', () => {
  it('parses pointer, scalar and divisibility forms', () => {
    expect(parseTritonType('*bf16:16')).toEqual({ type: '*bf16', div16: true });
    expect(parseTritonType('*kfp32')).toEqual({ type: '*kfp32', div16: false });
    expect(parseTritonType('i64:16')).toEqual({ type: 'i64', div16: true });
    expect(parseTritonType('f32')).toEqual({ type: 'fp32', div16: false });
    expect(parseTritonType('*fp8e4nv')).toEqual({ type: '*fp8e4nv', div16: false });
    expect(() => parseTritonType('float')).toThrow(/not a Triton type/);
    expect(() => parseTritonType('fp32:16')).toThrow(/applies to pointers and integers/);
  });

  it('infers what Triton\'s JIT would: dtype and 16-byte alignment of tensors, i32/i64 and divisibility of ints', () => {
    expect(inferTypeString(tensor('bf16', 4096), 'x')).toBe('*bf16:16');
    expect(inferTypeString(tensor('bf16', 4096, 3), 'x')).toBe('*bf16');
    expect(inferTypeString(tensor('f32', 4096), 'x', true)).toBe('*fp32');
    expect(inferTypeString(4096, 'n')).toBe('i32:16');
    expect(inferTypeString(4097, 'n')).toBe('i32');
    expect(inferTypeString(2 ** 33, 'n')).toBe('i64:16');
    expect(inferTypeString(2 ** 33, 'n', true)).toBe('i64');
    expect(inferTypeString(1e-6, 'eps')).toBe('fp32');
    expect(inferTypeString(true, 'flag')).toBe('i1');
    expect(inferTypeString(48n, 'n')).toBe('i64:16');
    expect(() => inferTypeString({ devicePtr: 4096 }, 'x')).toThrow(/raw device pointer has no element type; pass a tensor or give 'x' a type in signature/);
    expect(() => inferTypeString({ storage: {}, offset: 0, itemsize: 4, dtype: 'f32' }, 'x')).toThrow(/not on a CUDA device/);
  });
});

describe('tritonKernel (no GPU needed)', () => {
  it('builds the compile request of a launch: signature, constexprs, divisibility attrs, options, target', () => {
    const k = tritonKernel({ source: ADD_SOURCE, fn: 'add_kernel', name: 'add.py', constexprs: { BLOCK_SIZE: 256 }, numWarps: 8 });
    expect(k.argNames).toEqual(['x_ptr', 'y_ptr', 'out_ptr', 'n_elements']);
    expect(k.fixedSignature).toBe(false);
    expect(k.language).toBe('triton');
    const req = k.compileRequest([tensor('f32', 4096), tensor('f32', 8192, 1), tensor('f32', 12288), 1000], 0, 90);
    expect(req).toEqual({
      source: ADD_SOURCE,
      filename: 'add.py',
      fn: 'add_kernel',
      signature: { x_ptr: '*fp32', y_ptr: '*fp32', out_ptr: '*fp32', n_elements: 'i32', BLOCK_SIZE: 'constexpr' },
      constexprs: { BLOCK_SIZE: 256 },
      attrs: { x_ptr: [['tt.divisibility', 16]], out_ptr: [['tt.divisibility', 16]] },
      options: { num_warps: 8, num_stages: 3 },
      target: { backend: 'cuda', arch: 90, warp_size: 32 },
    });
    expect(() => k.compileRequest()).toThrow(/pass example args to compile\(\), or give every type in signature/);
  });

  it('a full signature is one fixed specialisation; partial ones mix with inference', () => {
    const fixed = tritonKernel({ source: ADD_SOURCE, fn: 'add_kernel', signature: ['*bf16:16', '*bf16:16', '*bf16:16', 'i32'] });
    expect(fixed.fixedSignature).toBe(true);
    expect(fixed.compileRequest(undefined, 0, 90).signature).toEqual({ x_ptr: '*bf16', y_ptr: '*bf16', out_ptr: '*bf16', n_elements: 'i32', BLOCK_SIZE: 'constexpr' });
    const partial = tritonKernel({ source: ADD_SOURCE, fn: 'add_kernel', signature: { n_elements: 'i64' } });
    expect(partial.compileRequest([tensor('bf16', 32), tensor('bf16', 64), tensor('bf16', 96), 4096], 0, 90).signature.n_elements).toBe('i64');
  });

  it('validates names against the def, and configs', () => {
    expect(() => tritonKernel({ source: ADD_SOURCE, fn: 'add_kernel', signature: { BLOCK_SIZE: 'i32' } })).toThrow(/'BLOCK_SIZE', which is a tl.constexpr \(give it in constexprs\)/);
    expect(() => tritonKernel({ source: ADD_SOURCE, fn: 'add_kernel', signature: { z: 'i32' } })).toThrow(/'z', which is not a parameter of add_kernel/);
    expect(() => tritonKernel({ source: ADD_SOURCE, fn: 'add_kernel', constexprs: { n_elements: 3 } })).toThrow(/not a tl.constexpr parameter/);
    expect(() => tritonKernel({ source: ADD_SOURCE, fn: 'add_kernel', signature: ['*fp32'] })).toThrow(/lists 1 types for 4 runtime parameters/);
    expect(() => tritonKernel({ source: ADD_SOURCE, fn: 'add_kernel', numWarps: 3 })).toThrow(/power of two/);
    const tuned = tritonKernel({ source: ADD_SOURCE, fn: 'add_kernel', configs: [{ constexprs: { BLOCK_SIZE: 128 }, numWarps: 2 }, { constexprs: { BLOCK_SIZE: 1024 }, numWarps: 8, numStages: 2 }], key: ['n_elements'] });
    expect(tuned.configs.map((c) => c.label)).toEqual(['BLOCK_SIZE=128 warps=2 stages=3', 'BLOCK_SIZE=1024 warps=8 stages=2']);
    expect(tuned.configs[1]!.meta).toEqual({ BLOCK_SIZE: 1024, num_warps: 8, num_stages: 2 });
    expect(tuned.shapeKey([0, 0, 0, 4096])).toBe('4096,');
    expect(tritonKernel({ source: ADD_SOURCE, fn: 'add_kernel' }).shapeKey([tensor('f32', 0), 0, 0, 77])).toBe('0,0,77,');
  });
});
