/**
 * The FA3 prefill route's host side without a GPU: which calls take fk_varlen_prefill_fa3 and why the others decline,
 * the tensor maps it asks for (as the lab encodes them), the launch (grid, block, shared memory, defines), and the three
 * 128-byte maps packed by value at 64-byte offsets of the launch staging buffer. The kernel itself runs in
 * attention-fa3.gpu.test.ts (GPU host); its sm_90a build in prefill-fa3-nvcc.test.ts.
 */
import { Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { fakeDevice } from '../../../test/fake-device.js';
import { withTuning } from '../../../test/spine-helpers.js';
import { ARG_BASE, LaunchBuffer, layoutArgs, parseSignature, TENSOR_MAP_ARG } from '../../args.js';
import { KERNEL_SOURCES } from '../../kernel-sources.generated.js';
import { TENSOR_MAP_BYTES, TensorMapCache, tensorMapProblem, tensorMapSpecHash, type TensorMapSpec } from '../../tensor-map.js';
import { cudaTuning } from '../../tuning/load.js';
import { ptr } from '../launch/common.js';
import { prefillFa3Route, varlenPrefillAttention } from './attention.js';
import { fa3Grid, fa3Kernel, fa3Operand, fa3SharedBytes, fa3TensorMapSpec, prefillFa3Decline, type Fa3Call, type Fa3Operand } from './prefill-fa3.js';

const packed = (address: number, rows: number, heads: number, D: number): Fa3Operand => ({ address, rows, heads, rowStrideBytes: heads * D * 2, headStrideBytes: D * 2 });
const llama: Fa3Call = {
  arch: 'sm_90a', dtype: 'bf16', headDim: 128, totalQ: 4096, numSeqs: 1,
  q: packed(1 << 20, 4096, 32, 128), k: packed(1 << 28, 4096, 8, 128), v: packed(1 << 29, 4096, 8, 128),
  sharedPerBlockOptin: 232448, tensorMapsUnavailable: null,
};
const on = { prefillFa3: true, prefillMma: true };

describe('FA3 prefill: which calls take it, and why the others do not', () => {
  it('takes sm_90a bf16 / f16 at head dim 64 and 128, GQA or not (the call does not carry causal / window: both supported)', () => {
    expect(prefillFa3Decline(llama, on)).toBeNull();
    expect(prefillFa3Decline({ ...llama, dtype: 'f16' }, on)).toBeNull();
    expect(prefillFa3Decline({ ...llama, headDim: 64, q: packed(1 << 20, 4096, 32, 64), k: packed(1 << 28, 4096, 32, 64), v: packed(1 << 29, 4096, 32, 64) }, on)).toBeNull();
    expect(cudaTuning().attention.prefillFa3).toBe(true); // on by default (generic.json, h200.json)
  });

  it('declines, with the reason: the tuning, the device, dtypes, head dims, the grid, shared memory, layouts, tensor maps', () => {
    const cases: [Partial<Fa3Call>, RegExp][] = [
      [{ arch: 'sm_90' }, /sm_90a/],
      [{ arch: 'sm_89' }, /device target sm_89/],
      [{ arch: 'sm_100a' }, /sm_90a/],
      [{ arch: undefined }, /unknown/],
      [{ dtype: 'f32' }, /dtype f32/],
      [{ headDim: 96 }, /head dim 96/],
      [{ headDim: 256 }, /head dim 256/],
      [{ totalQ: 65535 * 128 }, /65535/],
      [{ sharedPerBlockOptin: 101376 }, /164936 bytes of shared memory/],
      [{ q: { ...llama.q, address: (1 << 20) + 2 } }, /q at byte address .*16-byte aligned/],
      [{ k: { ...llama.k, rowStrideBytes: 8 * 128 * 2 + 8 } }, /k's byte strides .*multiples of 16/],
      [{ v: { ...llama.v, headStrideBytes: 0 } }, /v's byte strides/],
      [{ tensorMapsUnavailable: 'no cuTensorMapEncodeTiled' }, /no TMA tensor maps: no cuTensorMapEncodeTiled/],
      [{ out: { address: (1 << 22) + 8, rowStrideBytes: 256, headStrideBytes: 4096 * 256 } }, /out at byte address .*16-byte chunks/],
      [{ out: { address: 1 << 22, rowStrideBytes: 256 + 2, headStrideBytes: 4096 * 256 } }, /out .*byte strides 258/],
    ];
    for (const [patch, why] of cases) expect(prefillFa3Decline({ ...llama, ...patch }, on), JSON.stringify(patch)).toMatch(why);
    // dense SDPA's BHSD views: head stride S D above the row stride D (either order is a valid map), output [H, L, D]
    const bhsd = (address: number, heads: number): Fa3Operand => ({ address, rows: 4096, heads, rowStrideBytes: 256, headStrideBytes: 4096 * 256 });
    const dense = { ...llama, q: bhsd(1 << 20, 32), k: bhsd(1 << 28, 8), v: bhsd(1 << 29, 8), out: { address: 1 << 30, rowStrideBytes: 256, headStrideBytes: 4096 * 256 } };
    expect(prefillFa3Decline(dense, on)).toBeNull();
    expect(prefillFa3Decline(llama, { ...on, prefillFa3: false })).toMatch(/attention.prefillFa3 is off/);
    expect(prefillFa3Decline(llama, { ...on, prefillMma: false })).toMatch(/prefillMma is off/);
  });

  it("shared memory, grid and the kernel's constants", () => {
    expect(fa3SharedBytes(128)).toBe(32768 + 4 * 32768 + 72 + 1024);
    expect(fa3SharedBytes(64)).toBe(16384 + 4 * 16384 + 72 + 1024);
    expect(fa3Grid(32, 7832, 8)).toEqual([32, 62 + 8, 1]);
    const src = KERNEL_SOURCES['attention_fa3.cu']!;
    for (const c of ['BM = 128', 'BN = 128', 'STAGES = 2', 'THREADS = 384']) expect(src).toContain(`constexpr int ${c};`);
  });
});

describe('FA3 tensor maps: as the lab encodes them', () => {
  it('3-D {D, heads, rows}, byte strides {head, row}, boxes {64, 1, 64} (q) and {64, 1, 128} (k, v), 128-byte swizzle, 256-byte L2, zeros past the end', () => {
    const q = fa3TensorMapSpec('bf16', 128, llama.q, 64);
    expect(q).toEqual({
      dataType: 9, address: 1 << 20, dims: [128, 32, 4096], stridesBytes: [256, 32 * 256], box: [64, 1, 64], elementStrides: [1, 1, 1],
      interleave: 0, swizzle: 3, l2Promotion: 3, oobFill: 0,
    });
    const k64 = fa3TensorMapSpec('f16', 64, packed(4096, 300, 2, 64), 128);
    expect(k64).toMatchObject({ dataType: 6, dims: [64, 2, 300], stridesBytes: [128, 256], box: [64, 1, 128] });
    expect(tensorMapProblem(q)).toBeNull();
    expect(tensorMapProblem(k64)).toBeNull();
  });

  it("operands: a tensor's strides (a fused qkv slice), the packed stride for a dim of one element", () => {
    const { backend } = fakeDevice();
    const fused = Tensor.empty(backend, [300, 32 + 2 * 8, 128], 'bf16');
    const k = fused.narrow(1, 32, 8);
    expect(fa3Operand(k)).toEqual({ address: ptr(fused) + 32 * 128 * 2, rows: 300, heads: 8, rowStrideBytes: 48 * 256, headStrideBytes: 256 });
    const one = Tensor.empty(backend, [1, 1, 64], 'f16');
    expect(fa3Operand(one)).toMatchObject({ rows: 1, heads: 1, rowStrideBytes: 128, headStrideBytes: 128 });
  });

  it("dense SDPA's [rows, heads, D] view of a [B, H, S, D] tensor: head stride S D above the row stride D, in place", () => {
    const { backend } = fakeDevice();
    const bhsd = Tensor.empty(backend, [2, 8, 4096, 128], 'bf16');
    const entry1 = bhsd.select(0, 1).transpose(0, 1); // [S, H, D] of batch entry 1
    const o = fa3Operand(entry1);
    expect(o).toEqual({ address: ptr(bhsd) + 8 * 4096 * 128 * 2, rows: 4096, heads: 8, rowStrideBytes: 256, headStrideBytes: 4096 * 256 });
    const k = fa3TensorMapSpec('bf16', 128, o, 128);
    expect(k).toMatchObject({ dims: [128, 8, 4096], stridesBytes: [4096 * 256, 256], box: [64, 1, 128] });
    expect(tensorMapProblem(k)).toBeNull();
    // head dim 64, one head: the head stride is the packed one (never stepped)
    const one = Tensor.empty(backend, [1, 1, 300, 64], 'f16').select(0, 0).transpose(0, 1);
    expect(fa3TensorMapSpec('f16', 64, fa3Operand(one), 64)).toMatchObject({ dims: [64, 1, 300], stridesBytes: [128, 128] });
  });

  it('tensorMapProblem: the TMA limits checked before the driver is asked', () => {
    const s = fa3TensorMapSpec('bf16', 128, llama.q, 64);
    expect(tensorMapProblem({ ...s, address: 8 })).toMatch(/16-byte aligned/);
    expect(tensorMapProblem({ ...s, stridesBytes: [256, 100] })).toMatch(/multiple of 16/);
    expect(tensorMapProblem({ ...s, box: [64, 1, 512] })).toMatch(/\[1, 256\]/);
    expect(tensorMapProblem({ ...s, dims: [128, 32] })).toMatch(/do not match the rank/);
    expect(tensorMapProblem({ ...s, dims: [128, 32, 0] })).toMatch(/dims/);
  });

  it('the cache encodes a description once, re-encodes for another address, evicts the oldest past its capacity', () => {
    const calls: unknown[][] = [];
    const encode = (...a: unknown[]) => {
      calls.push(a);
      const b = new Uint8Array(TENSOR_MAP_BYTES);
      b[0] = calls.length;
      return b.buffer;
    };
    const cache = new TensorMapCache(2);
    const s = fa3TensorMapSpec('bf16', 128, llama.q, 64);
    const a = cache.get(encode, s);
    expect(cache.get(encode, s)).toBe(a);
    expect(calls).toHaveLength(1);
    expect(calls[0]).toEqual([9, 1 << 20, [128, 32, 4096], [256, 8192], [64, 1, 64], [1, 1, 1], 0, 3, 3, 0]);
    const b = cache.get(encode, { ...s, address: s.address + 4096 });
    expect(b[0]).toBe(2);
    cache.get(encode, { ...s, address: s.address + 8192 });
    expect(cache.size).toBe(2);
    cache.get(encode, s); // evicted: encoded again
    expect(calls).toHaveLength(4);
    expect(() => cache.get(encode, { ...s, address: 3 })).toThrow(/16-byte aligned/);
    expect(() => cache.get(() => new ArrayBuffer(64), { ...s, address: 4096 })).toThrow(/64 bytes, not 128/);
  });

  it('the cache key is a number; a hit compares the whole description, so a hash collision re-encodes, never returns another map', () => {
    let n = 0;
    const encode = () => {
      const b = new Uint8Array(TENSOR_MAP_BYTES);
      b[0] = ++n;
      return b.buffer;
    };
    const s = fa3TensorMapSpec('bf16', 128, llama.q, 64);
    expect(Number.isInteger(tensorMapSpecHash(s))).toBe(true);
    expect(tensorMapSpecHash(s)).toBe(tensorMapSpecHash({ ...s, dims: [...s.dims] }));
    expect(tensorMapSpecHash({ ...s, address: s.address + 2 ** 32 })).not.toBe(tensorMapSpecHash(s)); // the high bits count
    expect(tensorMapSpecHash({ ...s, stridesBytes: [s.stridesBytes[1]!, s.stridesBytes[0]!] })).not.toBe(tensorMapSpecHash(s));
    const colliding = new TensorMapCache(4, () => 7); // every description on one key
    const a = colliding.get(encode, s);
    const b = colliding.get(encode, { ...s, box: [64, 1, 128] });
    expect(b[0]).toBe(2);
    expect(colliding.get(encode, { ...s, box: [64, 1, 128] })).toBe(b);
    expect(colliding.get(encode, s)[0]).toBe(3); // not b: encoded again
    expect(a[0]).toBe(1);
    expect(colliding.size).toBe(1);
  });
});

// ------------------------------------------------------------------------------------------- the op on a fake device

/** A fake sm_90a device whose runtime encodes maps by recording their specs (the bytes say which map it is). */
function hopper(opts: { unavailable?: string; refuse?: string } = {}) {
  const f = fakeDevice();
  const rt = f.ctx.runtime as unknown as Record<string, unknown>;
  const props = (rt.properties as () => object)();
  const specs: TensorMapSpec[] = [];
  rt.properties = () => ({ ...props, arch: 'sm_90a', sharedPerBlockOptin: 232448 });
  rt.tensorMapUnavailable = () => opts.unavailable ?? null;
  rt.tensorMap = (s: TensorMapSpec) => {
    if (opts.refuse) throw new Error(opts.refuse);
    specs.push(s);
    return new Uint8Array(TENSOR_MAP_BYTES).fill(specs.length);
  };
  return { ...f, specs };
}

describe('varlen prefill on a fake sm_90a device: the FA3 launch', () => {
  it('Llama-3-8B prefill: fk_varlen_prefill_fa3 with the production defines, grid, block, shared memory and arguments', () => {
    const { backend, ctx, launches, specs } = hopper();
    const q = Tensor.empty(backend, [4096, 32, 128], 'bf16');
    const k = Tensor.empty(backend, [4096, 8, 128], 'bf16');
    const v = Tensor.empty(backend, [4096, 8, 128], 'bf16');
    const cu = Tensor.empty(backend, [2], 'i32');
    const out = varlenPrefillAttention(ctx, q, k, v, cu, cu, 0.088, true, 0);
    expect(launches).toHaveLength(1);
    const l = launches[0]!;
    expect(l.entry).toBe('fk_varlen_prefill_fa3');
    expect(l.options).toEqual(['-DFK_T=__nv_bfloat16', '-DFK_D=128']);
    expect(l.grid).toEqual([32, 32 + 1, 1]);
    expect(l.block).toBe(384);
    expect(l.shared).toBe(fa3SharedBytes(128));
    expect(specs.map((s) => [s.address, s.box])).toEqual([[ptr(q), [64, 1, 64]], [ptr(k), [64, 1, 128]], [ptr(v), [64, 1, 128]]]);
    expect(specs[1]).toMatchObject({ dims: [128, 8, 4096], stridesBytes: [256, 2048] });
    expect(l.args.slice(0, 3).map((a) => (a as Uint8Array)[0])).toEqual([1, 2, 3]);
    // out, lse (none), cu_q, cu_k, num_seqs, total_q, n_q_heads, group, causal, window, scale_log2
    expect(l.args.slice(3, 13)).toEqual([ptr(out), 0, ptr(cu), ptr(cu), 1, 4096, 32, 4, 1, 0]);
    expect(l.args[13]).toBeCloseTo(0.088 * Math.LOG2E, 12);
    // the output's row and head strides (elements): the packed [Tq, nQ, D] the op returns; no sinks
    expect(l.args.slice(14)).toEqual([32 * 128, 128, 0]);
  });

  it('head dim 64, f16, a sliding window, not causal, several sequences', () => {
    const { backend, ctx, launches, specs } = hopper();
    const q = Tensor.empty(backend, [377, 4, 64], 'f16');
    const k = Tensor.empty(backend, [500, 2, 64], 'f16');
    const cq = Tensor.empty(backend, [3], 'i32');
    varlenPrefillAttention(ctx, q, k, k, cq, cq, 0.125, false, 100);
    const l = launches[0]!;
    expect(l.entry).toBe('fk_varlen_prefill_fa3');
    expect(l.options).toEqual(['-DFK_T=__half', '-DFK_D=64']);
    expect(l.grid).toEqual([4, 3 + 2, 1]);
    expect(l.shared).toBe(fa3SharedBytes(64));
    expect(specs.map((s) => s.dataType)).toEqual([6, 6, 6]);
    expect(specs[1]).toMatchObject({ dims: [64, 2, 500], box: [64, 1, 128] });
    expect(l.args.slice(7, 13)).toEqual([2, 377, 4, 2, 0, 100]);
    expect(l.args.slice(14, 16)).toEqual([4 * 64, 64]);
  });

  it('a fused qkv projection is read in place (maps over the strided views, no copy)', () => {
    const { backend, ctx, launches, specs } = hopper();
    const fused = Tensor.empty(backend, [300, 48, 128], 'bf16');
    const [q, k, v] = [fused.narrow(1, 0, 32), fused.narrow(1, 32, 8), fused.narrow(1, 40, 8)];
    const before = (ctx.runtime as unknown as { launches: number }).launches;
    varlenPrefillAttention(ctx, q, k, v, Tensor.empty(backend, [3], 'i32'), Tensor.empty(backend, [3], 'i32'), 0.088, true, 0);
    expect(launches.map((l) => l.entry)).toEqual(['fk_varlen_prefill_fa3']);
    expect((ctx.runtime as unknown as { launches: number }).launches).toBe(before + 1); // no copies
    expect(specs.map((s) => s.address)).toEqual([ptr(q), ptr(k), ptr(v)]);
    expect(specs.map((s) => s.stridesBytes)).toEqual([[256, 48 * 256], [256, 48 * 256], [256, 48 * 256]]);
  });

  it('gpt-oss prefill with sinks: the FK_SINKS=1 build, the fp32 sinks pointer as the last argument', () => {
    const { backend, ctx, launches } = hopper();
    const q = Tensor.empty(backend, [4096, 64, 64], 'bf16');
    const k = Tensor.empty(backend, [4096, 8, 64], 'bf16');
    const cu = Tensor.empty(backend, [2], 'i32');
    const sinks = Tensor.empty(backend, [64], 'f32');
    varlenPrefillAttention(ctx, q, k, k, cu, cu, 0.125, true, 128, sinks);
    expect(launches).toHaveLength(1);
    const l = launches[0]!;
    expect(l.entry).toBe('fk_varlen_prefill_fa3');
    expect(l.options).toEqual(['-DFK_T=__nv_bfloat16', '-DFK_D=64', '-DFK_SINKS=1']);
    expect(l.grid).toEqual([64, 32 + 1, 1]);
    expect(l.args).toHaveLength(17);
    expect(l.args.slice(7, 13)).toEqual([1, 4096, 64, 8, 1, 128]);
    expect(l.args.slice(14, 16)).toEqual([64 * 64, 64]);
    expect(l.args[16]).toBe(ptr(sinks));
  });

  it('sinks of another dtype are converted to fp32 first (one launch before) and the temporary is passed; none: 0', () => {
    const { backend, ctx, launches } = hopper();
    const q = Tensor.empty(backend, [300, 8, 128], 'f16');
    const k = Tensor.empty(backend, [300, 2, 128], 'f16');
    const cu = Tensor.empty(backend, [2], 'i32');
    const sinks = Tensor.empty(backend, [8], 'bf16');
    const count = () => (ctx.runtime as unknown as { launches: number }).launches;
    const before = count();
    varlenPrefillAttention(ctx, q, k, k, cu, cu, 0.088, false, 0, sinks);
    const l = launches.at(-1)!;
    expect(l.entry).toBe('fk_varlen_prefill_fa3');
    expect(l.options).toEqual(['-DFK_T=__half', '-DFK_D=128', '-DFK_SINKS=1']);
    expect(count()).toBe(before + 2); // the bf16 -> f32 conversion, then the kernel
    expect(l.args[16]).not.toBe(0);
    expect(l.args[16]).not.toBe(ptr(sinks));
    varlenPrefillAttention(ctx, q, k, k, cu, cu, 0.088, false, 0);
    expect(launches.at(-1)!.options).toEqual(['-DFK_T=__half', '-DFK_D=128']);
    expect(launches.at(-1)!.args[16]).toBe(0);
  });

  it('declined calls keep the route before FA3: a misaligned q, f32, other head dims, no tensor maps, the tuning off (with sinks too)', () => {
    const run = (h: ReturnType<typeof hopper>, dtype: 'bf16' | 'f32', D: number, opts: { sinks?: boolean; oddQ?: boolean } = {}) => {
      const { backend, ctx } = h;
      let q = Tensor.empty(backend, [40, 4, D], dtype);
      if (opts.oddQ) q = Tensor.empty(backend, [40, 4, D + 1], dtype).narrow(2, 1, D);
      const k = Tensor.empty(backend, [40, 2, D], dtype);
      const cu = Tensor.empty(backend, [2], 'i32');
      varlenPrefillAttention(ctx, q, k, k, cu, cu, 0.1, true, 0, opts.sinks ? Tensor.empty(backend, [4], 'f32') : null);
      return h.launches.at(-1)!.entry;
    };
    expect(run(hopper(), 'bf16', 128, { sinks: true })).toBe('fk_varlen_prefill_fa3');
    expect(run(hopper(), 'bf16', 64, { sinks: true })).toBe('fk_varlen_prefill_fa3');
    expect(run(hopper(), 'f32', 128, { sinks: true })).toBe('fk_varlen_prefill_simple');
    expect(withTuning('attention', { prefillFa3: false }, () => run(hopper(), 'bf16', 128, { sinks: true }))).toBe('fk_varlen_prefill_wgmma');
    expect(withTuning('attention', { prefillFa3: false }, () => run(hopper(), 'bf16', 64, { sinks: true }))).toBe('fk_varlen_prefill');
    expect(run(hopper(), 'bf16', 128, { oddQ: true })).toBe('fk_varlen_prefill_wgmma'); // copied contiguous for cp.async
    expect(run(hopper(), 'f32', 128)).toBe('fk_varlen_prefill_simple');
    expect(run(hopper(), 'bf16', 96)).toBe('fk_varlen_prefill_simple');
    expect(run(hopper({ unavailable: 'an addon built before tensorMapEncodeTiled' }), 'bf16', 128)).toBe('fk_varlen_prefill_wgmma');
    expect(run(hopper({ refuse: 'cuTensorMapEncodeTiled failed: CUDA_ERROR_INVALID_VALUE' }), 'bf16', 64)).toBe('fk_varlen_prefill');
    expect(withTuning('attention', { prefillFa3: false }, () => run(hopper(), 'bf16', 128))).toBe('fk_varlen_prefill_wgmma');
    expect(withTuning('attention', { prefillFa3: false }, () => run(hopper(), 'bf16', 64))).toBe('fk_varlen_prefill');
    expect(run(fakeDevice() as ReturnType<typeof hopper>, 'bf16', 128)).toBe('fk_varlen_prefill'); // an sm_80 device
  });
});

describe('the kernel lookup: a numeric slot per build, no options string per launch', () => {
  it('one ctx.kernel call per (dtype, head dim, sinks) build, the same kernel after', () => {
    const { ctx } = hopper();
    const c = ctx as unknown as { kernel: (spec: { options?: readonly string[] }) => unknown };
    const asked: string[] = [];
    const kernel = c.kernel.bind(ctx);
    c.kernel = (spec) => (asked.push((spec.options ?? []).join(' ')), kernel(spec as never));
    const a = fa3Kernel(ctx, 'bf16', 128, false);
    expect(fa3Kernel(ctx, 'bf16', 128, false)).toBe(a);
    expect(fa3Kernel(ctx, 'f16', 64, true)).not.toBe(a);
    fa3Kernel(ctx, 'f16', 64, true);
    expect(asked).toEqual(['-DFK_T=__nv_bfloat16 -DFK_D=128', '-DFK_T=__half -DFK_D=64 -DFK_SINKS=1']);
  });
});

describe('prefillFa3Route: the decision the op makes, with its reason', () => {
  it('takes with the three maps; declines naming the tuning, the device, a missing entry, or the driver refusing a map', () => {
    const mk = (h: ReturnType<typeof hopper>) => {
      const q = Tensor.empty(h.backend, [100, 8, 128], 'bf16');
      const k = Tensor.empty(h.backend, [100, 2, 128], 'bf16');
      return prefillFa3Route(h.ctx, q, k, k, 100, 1);
    };
    const taken = mk(hopper());
    expect(taken.take).toBe(true);
    if (taken.take) expect([taken.maps.q[0], taken.maps.k[0], taken.maps.v[0]]).toEqual([1, 2, 3]);
    expect(withTuning('attention', { prefillFa3: false }, () => mk(hopper()))).toEqual({ take: false, reason: 'attention.prefillFa3 is off in the tuning' });
    expect(mk(fakeDevice() as ReturnType<typeof hopper>)).toMatchObject({ take: false, reason: expect.stringMatching(/device target unknown/) });
    expect(mk(hopper({ unavailable: 'no entry' }))).toEqual({ take: false, reason: 'no TMA tensor maps: no entry' });
    expect(mk(hopper({ refuse: 'CUDA_ERROR_INVALID_VALUE' }))).toEqual({ take: false, reason: 'a tensor map was refused: CUDA_ERROR_INVALID_VALUE' });
    const empty = hopper();
    const q0 = Tensor.empty(empty.backend, [10, 8, 128], 'bf16');
    const k0 = Tensor.empty(empty.backend, [0, 2, 128], 'bf16');
    expect(prefillFa3Route(empty.ctx, q0, k0, k0, 10, 2)).toEqual({ take: false, reason: 'no keys (a tensor map needs a row)' });
  });
});

describe('the launch staging buffer: the 128-byte maps by value at 64-byte offsets', () => {
  it("fk_varlen_prefill_fa3's signature parses to three TENSOR_MAP_ARGs, the scalar tail, the output strides and the sinks pointer (declared under FK_SINKS)", () => {
    const sig = parseSignature(KERNEL_SOURCES['attention_fa3.cu']!, 'fk_varlen_prefill_fa3');
    expect(sig).toEqual([TENSOR_MAP_ARG, TENSOR_MAP_ARG, TENSOR_MAP_ARG, 'ptr', 'ptr', 'ptr', 'ptr', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'f32', 'i64', 'i64', 'ptr']);
    expect(TENSOR_MAP_ARG).toEqual({ struct: 128, align: 64 });
    // a map after a 4-byte scalar is pushed to the next multiple of 64
    expect(Array.from(layoutArgs(['i32', TENSOR_MAP_ARG, 'ptr', TENSOR_MAP_ARG]).offsets)).toEqual([0, 64, 192, 256]);
  });

  it('packDims writes the map bytes verbatim at ARG_BASE + offset, ARG_BASE a multiple of 64', () => {
    expect(ARG_BASE % 64).toBe(0);
    const layout = layoutArgs(parseSignature(KERNEL_SOURCES['attention_fa3.cu']!, 'fk_varlen_prefill_fa3'));
    expect(Array.from(layout.offsets)).toEqual([0, 128, 256, 384, 392, 400, 408, 416, 420, 424, 428, 432, 436, 440, 448, 456, 464]);
    const maps = [1, 2, 3].map((m) => Uint8Array.from({ length: 128 }, (_, i) => (m * 37 + i) & 255));
    const lb = new LaunchBuffer();
    lb.packDims(7, 0, 32, 33, 1, 384, 1, 1, fa3SharedBytes(128), layout, [...maps, 0x10000, 0, 0x20000, 0x20000, 1, 4096, 32, 4, 1, 0, 0.5, 128, 4096 * 128, 0x30000]);
    const all = new Uint8Array(lb.buffer);
    maps.forEach((m, i) => expect(Array.from(all.subarray(ARG_BASE + 128 * i, ARG_BASE + 128 * (i + 1)))).toEqual(Array.from(m)));
    expect(Array.from(lb.offsets.subarray(0, 3))).toEqual([0, 128, 256]);
    expect(lb.view.getUint32(384, true)).toBe(0x10000);
    expect(lb.view.getFloat32(440, true)).toBe(0.5);
    expect(lb.view.getBigInt64(448, true)).toBe(128n); // the output's row stride
    expect(lb.view.getBigInt64(456, true)).toBe(4096n * 128n); // and head stride (dense SDPA's [H, L, D])
    expect(lb.view.getUint32(464, true)).toBe(0x30000); // the sinks pointer
    expect(() => lb.packDims(7, 0, 1, 1, 1, 1, 1, 1, 0, layout, [new Uint8Array(64), ...maps.slice(1), 0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0.5, 8, 8, 0])).toThrow(/128 bytes/);
  });
});
