/** The conv planning without a GPU: geometry, memory format, strides, eligibility and the cuDNN parameter block. */
import { describe, expect, it } from 'vitest';
import { CUDNN_PARAM_COUNT, CUDNN_WORKSPACE_LIMIT, fillCudnnParams, setCudnnPointers, type CudnnApi } from './cudnn-params.js';
import { ConvGeometry, convFormat, cudnnEligible, fallbackEligible, fillGeometry, isChannelsLast, strides5 } from './plan.js';

const A = (o: Partial<{ stride: number | number[]; padding: number | number[] | 'same' | 'valid'; dilation: number | number[]; groups: number }> = {}) => ({ stride: 1, padding: 0, dilation: 1, groups: 1, ...o });
const contig = (shape: number[]) => {
  const s = new Array<number>(shape.length);
  let acc = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    s[i] = acc;
    acc *= shape[i]!;
  }
  return s;
};
/** Strides of [N, C, *sp] stored channels-last. */
const cl = (shape: number[]) => {
  const [n, c, ...sp] = shape;
  const s = contig([n!, ...sp, c!]);
  return [s[0]!, s[s.length - 1]!, ...s.slice(1, -1)];
};

describe('conv geometry', () => {
  it('conv2d: unit leading d; stride, padding, dilation, groups per dim', () => {
    const g = fillGeometry(new ConvGeometry(), 2, false, [2, 8, 20, 30], [16, 2, 3, 5], [2, 16, 9, 13], A({ stride: [2, 2], padding: [1, 2], dilation: [1, 2], groups: 4 }));
    expect([g.N, g.C, g.K, g.G, g.batched]).toEqual([2, 8, 16, 4, true]);
    expect([...g.in, ...g.out, ...g.k]).toEqual([1, 20, 30, 1, 9, 13, 1, 3, 5]);
    expect([...g.stride, ...g.pad, ...g.padEnd, ...g.dil]).toEqual([1, 2, 2, 0, 1, 2, 0, 1, 2, 1, 1, 2]);
    expect(g.pixels).toBe(2 * 9 * 13);
  });

  it("conv1d is conv3d with d = h = 1; padding='same' splits an odd total as torch (one more at the end)", () => {
    const g = fillGeometry(new ConvGeometry(), 1, false, [3, 4, 50], [6, 4, 4], [3, 6, 50], A({ padding: 'same', dilation: 1 }));
    expect([...g.in, ...g.out, ...g.k]).toEqual([1, 1, 50, 1, 1, 50, 1, 1, 4]);
    expect([g.pad[2], g.padEnd[2]]).toEqual([1, 2]);
    expect(cudnnEligible(g, 1, 1, 1)).toMatch(/asymmetric padding/);
    const odd = fillGeometry(new ConvGeometry(), 1, false, [3, 4, 50], [6, 4, 3], [3, 6, 50], A({ padding: 'same', dilation: 2 }));
    expect([odd.pad[2], odd.padEnd[2]]).toEqual([2, 2]);
    expect(cudnnEligible(odd, 1, 1, 1)).toBe(true);
  });

  it('unbatched input: N = 1; transposed: K from the output; conv3d uses all three dims', () => {
    const u = fillGeometry(new ConvGeometry(), 2, false, [8, 10, 10], [4, 8, 3, 3], [4, 8, 8], A());
    expect([u.batched, u.N, u.C, u.K]).toEqual([false, 1, 8, 4]);
    const t = fillGeometry(new ConvGeometry(), 2, true, [2, 6, 7, 7], [6, 2, 3, 3], [2, 6, 15, 15], { ...A({ stride: 2, padding: 0, groups: 3 }) });
    expect([t.transposed, t.C, t.K, t.G, ...t.out]).toEqual([true, 6, 6, 3, 1, 15, 15]);
    const v = fillGeometry(new ConvGeometry(), 3, false, [1, 2, 5, 6, 7], [4, 2, 3, 3, 3], [1, 4, 3, 4, 5], A());
    expect([...v.in, ...v.k, ...v.out]).toEqual([5, 6, 7, 3, 3, 3, 3, 4, 5]);
  });

  it('the fallback takes up to 65535 groups and 2^31 output pixels', () => {
    const g = new ConvGeometry();
    expect(fallbackEligible(fillGeometry(g, 2, false, [1, 8, 4, 4], [8, 1, 3, 3], [1, 8, 2, 2], A({ groups: 8 })))).toBe(true);
    g.G = 70000;
    expect(fallbackEligible(g)).toMatch(/70000 groups/);
  });
});

describe('memory format and strides', () => {
  it('channels-last detection ignores unit dims; contiguous wins when both fit', () => {
    expect(isChannelsLast([2, 8, 5, 6], cl([2, 8, 5, 6]))).toBe(true);
    expect(isChannelsLast([2, 8, 5, 6], contig([2, 8, 5, 6]))).toBe(false);
    expect(isChannelsLast([2, 8, 1, 1], contig([2, 8, 1, 1]))).toBe(true);
    expect(isChannelsLast([1, 2, 3, 4, 5], cl([1, 2, 3, 4, 5]))).toBe(true);
    const x = { shape: [2, 8, 5, 6], strides: cl([2, 8, 5, 6]) };
    const w = { shape: [16, 8, 3, 3], strides: contig([16, 8, 3, 3]) };
    expect(convFormat(2, true, x, w)).toBe('channels_last');
    expect(convFormat(2, true, { shape: [2, 8, 5, 6], strides: contig([2, 8, 5, 6]) }, { shape: w.shape, strides: cl(w.shape) })).toBe('channels_last');
    expect(convFormat(2, true, { shape: [2, 8, 1, 1], strides: contig([2, 8, 1, 1]) }, w)).toBe('contiguous');
    expect(convFormat(1, true, { shape: [2, 8, 5], strides: [40, 1, 8] }, { shape: [4, 8, 3], strides: [24, 3, 1] })).toBe('contiguous');
  });

  it("a channel slice of a channels-last tensor (C2f's split) is channels-last, as torch's suggest_memory_format: packed for cuDNN, not run NCHW", () => {
    const w = { shape: [16, 8, 3, 3], strides: contig([16, 8, 3, 3]) };
    const half = { shape: [2, 8, 5, 6], strides: cl([2, 16, 5, 6]) }; // 8 of 16 channels
    expect(isChannelsLast(half.shape, half.strides)).toBe(false); // not packed: inFormat copies it
    expect(convFormat(2, true, half, w)).toBe('channels_last');
    // a channel slice of a row-major tensor stays contiguous
    expect(convFormat(2, true, { shape: [2, 8, 5, 6], strides: contig([2, 16, 5, 6]) }, w)).toBe('contiguous');
  });

  it('strides5: (n, c, d, h, w); the dims conv1d / conv2d lack get packed strides; unbatched n = numel', () => {
    const s = new Array<number>(5).fill(0);
    strides5(s, 0, 2, true, [2, 8, 5, 6], cl([2, 8, 5, 6]));
    expect(s).toEqual([240, 1, 240, 48, 8]);
    strides5(s, 0, 1, true, [2, 8, 50], [400, 50, 1]);
    expect(s).toEqual([400, 50, 50, 50, 1]);
    strides5(s, 0, 2, false, [8, 5, 6], [30, 6, 1]);
    expect(s).toEqual([240, 30, 30, 6, 1]);
  });
});

describe('cuDNN parameter block (native/cudnn.cc layout)', () => {
  it('conv2d channels-last f16: key fields, filter dims, pads, then pointers', () => {
    const g = fillGeometry(new ConvGeometry(), 2, false, [2, 8, 20, 30], [16, 2, 3, 5], [2, 16, 9, 13], A({ stride: 2, padding: [1, 2], dilation: [1, 2], groups: 4 }));
    const p = fillCudnnParams(new Float64Array(CUDNN_PARAM_COUNT), g, 'channels_last', 'f16', true, 0, { shape: [2, 8, 20, 30], strides: cl([2, 8, 20, 30]) }, { shape: [2, 16, 9, 13], strides: cl([2, 16, 9, 13]) });
    setCudnnPointers(p, 100, 200, 300, 400, 500, 600);
    expect([...p.slice(0, 6)]).toEqual([0, 4, 2, 1, 4, 0]);
    expect([...p.slice(6, 10)]).toEqual([2, 8, 20, 30]);
    expect([...p.slice(11, 15)]).toEqual([4800, 1, 240, 8]);
    expect([...p.slice(16, 20)]).toEqual([16, 2, 3, 5]);
    expect(p[21]).toBe(1);
    expect([...p.slice(22, 26)]).toEqual([2, 16, 9, 13]);
    expect([...p.slice(27, 31)]).toEqual([1872, 1, 208, 16]);
    expect([...p.slice(32, 34), ...p.slice(35, 37), ...p.slice(38, 40)]).toEqual([1, 2, 2, 2, 1, 2]);
    expect(p[41]).toBe(CUDNN_WORKSPACE_LIMIT);
    expect(p[42]).toBe(0); // heuristics unless asked to measure
    expect(p[43]).toBe(0); // graph API, legacy where it declines
    const again = (search: boolean, api: CudnnApi) => fillCudnnParams(new Float64Array(CUDNN_PARAM_COUNT), g, 'channels_last', 'f16', true, 0, { shape: [2, 8, 20, 30], strides: cl([2, 8, 20, 30]) }, { shape: [2, 16, 9, 13], strides: cl([2, 16, 9, 13]) }, search, api);
    expect([again(true, 'auto')[42], again(false, 'graph')[43], again(false, 'legacy')[43]]).toEqual([1, 1, 2]);
    expect([...p.slice(44, 50)]).toEqual([100, 200, 300, 400, 500, 600]);
  });

  it('conv1d as 4-d [N, C, 1, L]; conv_transpose as backward-data with the filter [C, K / G, ...]; f32 without TF32', () => {
    const g1 = fillGeometry(new ConvGeometry(), 1, false, [3, 4, 50], [6, 4, 3], [3, 6, 48], A());
    const p = fillCudnnParams(new Float64Array(CUDNN_PARAM_COUNT), g1, 'contiguous', 'f32', false, 1, { shape: [3, 4, 50], strides: [200, 50, 1] }, { shape: [3, 6, 48], strides: [288, 48, 1] });
    expect([...p.slice(0, 6)]).toEqual([0, 4, 0, 0, 1, 1]);
    expect([...p.slice(6, 10), ...p.slice(11, 15)]).toEqual([3, 4, 1, 50, 200, 50, 50, 1]);
    expect([...p.slice(16, 20)]).toEqual([6, 4, 1, 3]);
    const gt = fillGeometry(new ConvGeometry(), 3, true, [1, 6, 4, 4, 4], [6, 1, 2, 2, 2], [1, 3, 8, 8, 8], { ...A({ stride: 2, groups: 3 }) });
    const q = fillCudnnParams(new Float64Array(CUDNN_PARAM_COUNT), gt, 'contiguous', 'bf16', true, 0, { shape: [1, 6, 4, 4, 4], strides: contig([1, 6, 4, 4, 4]) }, { shape: [1, 3, 8, 8, 8], strides: contig([1, 3, 8, 8, 8]) });
    expect([...q.slice(0, 5)]).toEqual([1, 5, 9, 1, 3]);
    expect([...q.slice(16, 21)]).toEqual([6, 1, 2, 2, 2]);
    expect([...q.slice(22, 27)]).toEqual([1, 3, 8, 8, 8]);
  });
});
