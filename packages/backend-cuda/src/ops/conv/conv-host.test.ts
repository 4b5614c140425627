/**
 * The conv ops' host side without a GPU: tensors on a fake device, a kernel cache that packs each launch as the runtime
 * would, and a fake cuDNN (absent, present, declining, asking for workspace). Checks which path runs, the fallback's
 * arguments, the output layout, the parameter block cuDNN gets and the forced fallback; the numbers are GPU-tested.
 */
import { describe, expect, it } from 'vitest';
import type { Tensor } from '@fastkernels/core';
import { fake } from '../../../test/ops-fake.js';
import type { CudaRuntime } from '../../runtime.js';
import { ConvKernels } from './conv-kernels.js';
import { ConvPools } from './pool.js';
import type { CudnnState } from './cudnn-library.js';
import { cudnnPlanKey } from './cudnn-params.js';

const ptrOf = (t: Tensor) => t.storage.devicePtr! + t.offset * t.itemsize;
const A = { stride: 1, padding: 1, dilation: 1, groups: 1 };

/** A fake runtime with a fake cuDNN addon: `answers` are what successive cudnnConv calls return. */
function setup(cudnn: CudnnState, answers: number[] = []) {
  const f = fake();
  const calls: Float64Array[] = [];
  const allocs: number[] = [];
  const addon = {
    cudnnConv: (p: Float64Array) => {
      calls.push(p.slice());
      return answers.length ? answers.shift()! : 0;
    },
    cudnnDeclineReason: () => 'CUDNN_STATUS_NOT_SUPPORTED',
    cudnnEnsureHandle: () => {},
  };
  let next = 1 << 30;
  const rt = {
    properties: () => ({ multiprocessors: 132 }),
    addon,
    device: 0,
    stream: 77,
    allocate: (bytes: number) => {
      allocs.push(bytes);
      const b = { ptr: next, size: bytes, requested: bytes, stream: 77, live: true };
      next += bytes;
      return b;
    },
    free: () => {},
  } as unknown as CudaRuntime;
  const conv = new ConvKernels(() => rt, f.cache, () => cudnn);
  return { f, conv, calls, allocs };
}

const ABSENT: CudnnState = { ok: false, reason: 'cuDNN not found: tried libcudnn.so.9 (cannot open shared object file)' };
const PRESENT: CudnnState = { ok: true, path: '/x/libcudnn.so.9', version: '9.10.2', apis: ['graph', 'legacy'] };

describe('conv without cuDNN: the implicit-GEMM fallback', () => {
  it('conv2d NCHW bf16 + bias: one fused launch, geometry and strides in order, a 64 x 64 tile grid a group', () => {
    const { f, conv } = setup(ABSENT);
    const [x, w, b] = [f.t([2, 8, 20, 30]), f.t([16, 4, 3, 3]), f.t([16])];
    const y = conv.run(2, false, x, w, b, [2, 16, 20, 30], { ...A, groups: 2 });
    expect(conv.lastPath).toBe('fallback');
    expect(f.cache.launches).toHaveLength(1);
    const l = f.cache.launches[0]!;
    expect(l.entry).toBe('fk_conv_igemm');
    expect(l.source).toContain('#define FK_BIAS 1');
    expect(l.source).toContain('typedef __nv_bfloat16 T;');
    expect(l.args.slice(0, 4)).toEqual([ptrOf(y), ptrOf(x), ptrOf(w), ptrOf(b)]);
    // N C D H W, K OD OH OW, KD KH KW, G, stride, pad, dilation
    expect(l.args.slice(4, 26)).toEqual([2, 8, 1, 20, 30, 16, 1, 20, 30, 1, 3, 3, 2, 1, 1, 1, 0, 1, 1, 1, 1, 1]);
    // x strides (n c d h w), weight roles (out, in, kd, kh, kw), y strides
    expect(l.args.slice(26)).toEqual([4800, 600, 600, 30, 1, 36, 9, 9, 3, 1, 9600, 600, 600, 30, 1]);
    expect(l.grid).toEqual([Math.ceil((2 * 600) / 64), 1, 2]);
    expect(y.strides).toEqual([9600, 600, 30, 1]);
  });

  it('channels-last input: read in place (no copy), the output channels-last as torch', () => {
    const { f, conv } = setup(ABSENT);
    const base = f.t([2, 20, 30, 8], 'f16');
    const x = base.permute(0, 3, 1, 2);
    const y = conv.run(2, false, x, f.t([16, 8, 3, 3], 'f16'), null, [2, 16, 20, 30], A);
    expect(f.copies).toHaveLength(0);
    expect(y.strides).toEqual([9600, 1, 480, 16]);
    const l = f.cache.launches[0]!;
    expect(l.args.slice(26, 31)).toEqual([4800, 1, 4800, 240, 8]);
    expect(l.source).toContain('#define FK_BIAS 0');
  });

  it('conv_transpose2d: the transposed kernel, weight [C, K / G, ...] read with its roles swapped', () => {
    const { f, conv } = setup(ABSENT);
    const w = f.t([6, 2, 3, 3], 'f32');
    conv.run(2, true, f.t([1, 6, 7, 7], 'f32'), w, null, [1, 6, 15, 15], { stride: 2, padding: 0, dilation: 1, groups: 3 });
    const l = f.cache.launches[0]!;
    expect(l.source).toContain('#define FK_TRANSPOSED 1');
    expect(l.args.slice(31, 36)).toEqual([9, 18, 9, 3, 1]);
    expect(l.grid).toEqual([Math.ceil(225 / 64), 1, 3]);
  });

  it("library 'cudnn' without cuDNN: supports() gives the not-found reason (the registry then reports it)", () => {
    const { f, conv } = setup(ABSENT);
    conv.library = 'cudnn';
    expect(conv.supports(2, false, f.t([1, 4, 5, 5]), f.t([4, 4, 3, 3]), [1, 4, 5, 5], A)).toMatch(/^cuDNN not found: tried/);
    conv.library = 'auto';
    expect(conv.supports(2, false, f.t([1, 4, 5, 5]), f.t([4, 4, 3, 3]), [1, 4, 5, 5], A)).toBe(true);
    expect(conv.supports(2, false, f.t([1, 4, 5, 5], 'f64'), f.t([4, 4, 3, 3], 'f64'), [1, 4, 5, 5], A)).toMatch(/dtype f64/);
  });
});

describe('conv with cuDNN', () => {
  it('grows the workspace when the plan asks, runs, then adds the bias in place over the channels-last output', () => {
    const { f, conv, calls, allocs } = setup(PRESENT, [1000, 0]);
    const x = f.t([2, 20, 30, 8], 'f16').permute(0, 3, 1, 2);
    const b = f.t([16], 'f16');
    const y = conv.run(2, false, x, f.t([16, 8, 3, 3], 'f16'), b, [2, 16, 20, 30], A);
    expect(conv.lastPath).toBe('cudnn');
    expect(calls).toHaveLength(2);
    expect(calls[0]![48]).toBe(0);
    expect(allocs).toEqual([32 * 1024 * 1024]);
    expect(calls[1]![48]).toBe(32 * 1024 * 1024);
    // the weight was KCRS: copied channels-last for cuDNN (filter format 1), x read in place
    expect(f.copies).toHaveLength(1);
    expect(calls[1]![21]).toBe(1);
    expect(calls[1]![44]).toBe(ptrOf(x));
    expect(calls[1]![46]).toBe(ptrOf(y));
    expect(calls[1]![49]).toBe(77);
    const l = f.cache.launches[0]!;
    expect(l.entry).toBe('fk_conv_bias_add');
    expect(l.args).toEqual([ptrOf(y), ptrOf(b), 2 * 16 * 600, 16, 1]);
    expect(l.source).toContain('#define FK_VEC 8');
  });

  it("a channels-last weight (the vision runner's, as torch's model.to(channels_last)) is read in place; a channel slice of a channels-last x is packed NHWC, not run NCHW", () => {
    const { f, conv, calls } = setup(PRESENT, [0, 0]);
    const x = f.t([2, 20, 30, 8], 'f16').permute(0, 3, 1, 2);
    const w = f.t([16, 3, 3, 8], 'f16').permute(0, 3, 1, 2); // [16, 8, 3, 3] stored KRSC
    const y = conv.run(2, false, x, w, null, [2, 16, 20, 30], A);
    expect(f.copies).toHaveLength(0);
    expect(calls[0]![21]).toBe(1);
    expect(calls[0]![45]).toBe(ptrOf(w));
    expect(y.strides).toEqual([9600, 1, 480, 16]);
    // C2f's split: 8 of 16 channels of a channels-last tensor
    const wide = f.t([2, 20, 30, 16], 'f16').permute(0, 3, 1, 2);
    const half = wide.narrow(1, 8, 8);
    const y2 = conv.run(2, false, half, w, null, [2, 16, 20, 30], A);
    expect(f.copies).toHaveLength(1); // x packed channels-last for cuDNN, as torch's input.contiguous(channels_last)
    expect(calls[1]![21]).toBe(1);
    expect(y2.strides).toEqual([9600, 1, 480, 16]);
  });

  it('conv2d_act: the bias and the activation in one pass after cuDNN (or the activation alone without a bias)', () => {
    const { f, conv, calls } = setup(PRESENT, [0, 0]);
    const x = f.t([2, 20, 30, 8], 'f16').permute(0, 3, 1, 2);
    const w = f.t([16, 3, 3, 8], 'f16').permute(0, 3, 1, 2);
    const b = f.t([16], 'f16');
    const y = conv.run(2, false, x, w, b, [2, 16, 20, 30], A, 'silu');
    expect(conv.lastPath).toBe('cudnn');
    expect(calls).toHaveLength(1);
    expect(f.cache.launches).toHaveLength(1);
    const l = f.cache.launches[0]!;
    expect(l.entry).toBe('fk_conv_bias_add');
    expect(l.args).toEqual([ptrOf(y), ptrOf(b), 2 * 16 * 600, 16, 1]);
    expect(l.source).toContain('#define FK_ACT 1');
    expect(l.source).toContain('#define FK_BIAS 1');
    const y2 = conv.run(2, false, x, w, null, [2, 16, 20, 30], A, 'relu');
    const l2 = f.cache.launches[1]!;
    expect(l2.args).toEqual([ptrOf(y2), 0, 2 * 16 * 600, 16, 1]);
    expect(l2.source).toContain('#define FK_ACT 2');
    expect(l2.source).toContain('#define FK_BIAS 0');
  });

  it('answers for more workspace again (the next plan wants more): grown each time until it runs; endless asking declines', () => {
    const big = 64 * 1024 * 1024;
    const { f, conv, calls, allocs } = setup(PRESENT, [1000, big, 0, big, big, big, big, big]);
    const run = () => conv.run(2, false, f.t([1, 4, 5, 5], 'f16'), f.t([4, 4, 3, 3], 'f16'), null, [1, 4, 5, 5], A);
    run();
    expect([conv.lastPath, calls.length, calls[2]![48]]).toEqual(['cudnn', 3, big]);
    expect(allocs).toEqual([32 * 1024 * 1024, big]);
    run();
    expect([conv.lastPath, calls.length, conv.lastDeclineReason]).toEqual(['fallback', 8, `cuDNN still asks for ${big} bytes of workspace after 4 rounds`]);
  });

  it('f32 math: TF32 tensor ops by default (torch.backends.cudnn.allow_tf32), exact FMA with allowTf32 = false', () => {
    const { f, conv, calls } = setup(PRESENT);
    const run = () => conv.run(2, false, f.t([1, 4, 5, 5], 'f32'), f.t([4, 4, 3, 3], 'f32'), null, [1, 4, 5, 5], A);
    run();
    conv.allowTf32 = false;
    run();
    expect([calls[0]![3], calls[1]![3]]).toEqual([1, 0]);
  });

  it("algoSearch 'benchmark' asks the addon to measure the shape's algorithms; a capture reuses only keys measured before", () => {
    const { f, conv, calls } = setup(PRESENT);
    const run = (C = 4) => conv.run(2, false, f.t([1, C, 5, 5], 'f16'), f.t([C, C, 3, 3], 'f16'), null, [1, C, 5, 5], A);
    run();
    conv.algoSearch = 'benchmark';
    run();
    const rt = (conv as unknown as { runtime: () => { capturing?: boolean } }).runtime();
    rt.capturing = true;
    run(); // the key the eager call measured: the capture asks for it (the addon runs the measured plan, times nothing)
    run(8); // a shape first seen in the capture: no search (timing cannot run in a capture), the heuristics' plan
    expect(calls.map((p) => p[42])).toEqual([0, 1, 1, 0]);
    expect(cudnnPlanKey(calls[1]!)).toBe(cudnnPlanKey(calls[2]!));
  });

  it("cudnnApi picks the cuDNN API per call (graph then legacy by default, or one of them only)", () => {
    const { f, conv, calls } = setup(PRESENT);
    const run = () => conv.run(2, false, f.t([1, 4, 5, 5], 'f16'), f.t([4, 4, 3, 3], 'f16'), null, [1, 4, 5, 5], A);
    run();
    conv.cudnnApi = 'graph';
    run();
    conv.cudnnApi = 'legacy';
    run();
    expect(calls.map((p) => p[43])).toEqual([0, 1, 2]);
  });

  it('a declined shape and asymmetric padding run on the fallback; the forced fallback never calls cuDNN', () => {
    const { f, conv, calls } = setup(PRESENT, [-1]);
    conv.run(2, false, f.t([1, 4, 5, 5]), f.t([4, 4, 3, 3]), null, [1, 4, 5, 5], A);
    expect([conv.lastPath, conv.declined, conv.lastDeclineReason]).toEqual(['fallback', 1, 'CUDNN_STATUS_NOT_SUPPORTED']);
    conv.run(1, false, f.t([1, 4, 10]), f.t([4, 4, 4]), null, [1, 4, 10], { ...A, padding: 'same' });
    expect([conv.lastPath, calls.length]).toEqual(['fallback', 1]);
    expect(conv.lastDeclineReason).toMatch(/asymmetric/);
    conv.library = 'fallback';
    conv.run(2, false, f.t([1, 4, 5, 5]), f.t([4, 4, 3, 3]), null, [1, 4, 5, 5], A);
    expect([conv.lastPath, calls.length]).toEqual(['fallback', 1]);
  });

  it("library 'cudnn' turns a decline into an error naming the reason", () => {
    const { f, conv } = setup(PRESENT, [-1]);
    conv.library = 'cudnn';
    expect(() => conv.run(2, false, f.t([1, 4, 5, 5]), f.t([4, 4, 3, 3]), null, [1, 4, 5, 5], A)).toThrow(/cuDNN cannot run this call.*NOT_SUPPORTED/);
  });
});

describe('pooling launches', () => {
  it('max_pool2d with indices on a channels-last input: channels-last outputs, channels-innermost threads, window args', () => {
    const f = fake();
    const pools = new ConvPools(f.cache, f.runtime);
    const x = f.t([2, 10, 11, 8], 'f16').permute(0, 3, 1, 2);
    const [y, yi] = pools.run('max', 2, true, x, [2, 8, 5, 6], { kernel_size: 3, stride: 2, padding: 1, dilation: 1 });
    expect(y!.strides).toEqual([240, 1, 48, 8]);
    expect(yi!.dtype).toBe('i64');
    const l = f.cache.launches[0]!;
    expect(l.source).toContain('#define FK_CL 1');
    expect(l.source).toContain('#define FK_INDICES 1');
    expect(l.args.slice(0, 3)).toEqual([ptrOf(y!), ptrOf(yi!), ptrOf(x)]);
    // N C D H W, OD OH OW, kernel, stride (default: the kernel), pad, dilation, countPad, divisor
    expect(l.args.slice(3, 25)).toEqual([2, 8, 1, 10, 11, 1, 5, 6, 1, 3, 3, 1, 2, 2, 0, 1, 1, 1, 1, 1, 1, 0]);
    expect(l.args.slice(25)).toEqual([880, 1, 880, 88, 8, 240, 1, 240, 48, 8]);
  });

  it('avg_pool1d with stride None, no count_include_pad; adaptive_avg_pool2d on an unbatched input', () => {
    const f = fake();
    const pools = new ConvPools(f.cache, f.runtime);
    pools.run('avg', 1, false, f.t([2, 3, 20], 'f32'), [2, 3, 6], { kernel_size: 3, stride: null, padding: 1, count_include_pad: false, divisor_override: null });
    const l = f.cache.launches[0]!;
    expect(l.args.slice(11, 25)).toEqual([1, 1, 3, 1, 1, 3, 0, 0, 1, 1, 1, 1, 0, 0]);
    const [y] = pools.run('adaptive_avg', 2, false, f.t([4, 9, 7]), [4, 2, 3], {});
    expect(y!.shape).toEqual([4, 2, 3]);
    expect(f.cache.launches[1]!.args.slice(3, 11)).toEqual([1, 4, 1, 9, 7, 1, 2, 3]);
  });
});
