import { describe, expect, it } from 'vitest';
import { roundToDType, Tensor, type DType } from '@fastkernels/core';
import { conv1d, conv2d, conv3d, convTranspose1d, convTranspose2d, convTranspose3d, convNd } from './ops/conv.js';
import { adaptiveAvgPoolNd, adaptiveMaxPoolNd, adaptiveMaxPoolNdWithIndices, avgPoolNd, maxPoolNd, maxPoolNdWithIndices } from './ops/pool.js';
import { cpu, expectClose, LAYOUTS, randn, relayout, Rng, tensor, values } from './test-helpers.js';

const prod = (s: readonly number[]) => s.reduce((a, b) => a * b, 1);
const rowStrides = (shape: readonly number[]) => shape.map((_, i) => prod(shape.slice(i + 1)));
function* indices(shape: readonly number[]): Generator<number[]> {
  const st = rowStrides(shape);
  for (let i = 0; i < prod(shape); i++) yield shape.map((d, k) => Math.floor(i / st[k]!) % d);
}
const flat = (shape: readonly number[], idx: readonly number[]) => idx.reduce((o, x, k) => o + x * rowStrides(shape)[k]!, 0);

/**
 * Naive N-d convolution: zero-pad the input into a new array first (asymmetric pads allowed), then slide the dilated
 * kernel with no bounds checks. Independent of the kernel's clipped loops.
 */
function naiveConv(X: number[], xs: number[], W: number[], ws: number[], B: number[] | null, o: { stride: number[]; padL: number[]; padR: number[]; dil: number[]; groups: number }): { v: number[]; shape: number[] } {
  const [N, C] = xs as [number, number];
  const sp = xs.slice(2);
  const [Cout, Cg] = ws as [number, number];
  const k = ws.slice(2);
  const padded = sp.map((s, i) => s + o.padL[i]! + o.padR[i]!);
  const P = new Array<number>(N * C * prod(padded)).fill(0);
  for (const idx of indices(xs)) P[flat([N, C, ...padded], [idx[0]!, idx[1]!, ...idx.slice(2).map((x, i) => x + o.padL[i]!)])] = X[flat(xs, idx)]!;
  const out = padded.map((p, i) => Math.floor((p - o.dil[i]! * (k[i]! - 1) - 1) / o.stride[i]!) + 1);
  const shape = [N, Cout, ...out];
  const v: number[] = [];
  for (const [n, oc, ...op] of indices(shape)) {
    const g = Math.floor(oc! / (Cout / o.groups));
    let s = B ? B[oc!]! : 0;
    for (let ic = 0; ic < Cg; ic++) {
      for (const kk of indices(k)) {
        const ip = op.map((x, i) => x * o.stride[i]! + kk[i]! * o.dil[i]!);
        s += P[flat([N, C, ...padded], [n!, g * Cg + ic, ...ip])]! * W[flat(ws, [oc!, ic, ...kk])]!;
      }
    }
    v.push(s);
  }
  return { v, shape };
}

const round = (v: number[], d: DType) => v.map((x) => roundToDType(x, d));
const dot = (a: number[], b: number[]) => a.reduce((s, x, i) => s + x * b[i]!, 0);

describe('conv1d / conv2d / conv3d', () => {
  it('hand-computed conv2d with padding and bias', () => {
    const x = tensor([1, 2, 3, 4, 5, 6, 7, 8, 9], [1, 1, 3, 3]);
    const w = tensor([1, 0, 0, -1], [1, 1, 2, 2]);
    // x[i][j] - x[i+1][j+1] = -4 everywhere inside
    expect(conv2d(cpu, x, w).toNested()).toEqual([[[[-4, -4], [-4, -4]]]]);
    const y = conv2d(cpu, x, w, tensor([10], [1]), { padding: 1 });
    expect(y.shape).toEqual([1, 1, 4, 4]);
    expect((y.toNested() as number[][][][])[0]![0]![0]).toEqual([9, 8, 7, 10]); // first row: 10 - x[0][j-1] ... padded
  });

  it('hand-computed conv1d: stride, dilation, unbatched input', () => {
    const x = tensor([1, 2, 3, 4, 5, 6, 7], [1, 7]);
    const w = tensor([1, 1], [1, 1, 2]);
    expect(values(conv1d(cpu, x, w, null, { stride: 2 }))).toEqual([3, 7, 11]);
    expect(values(conv1d(cpu, x, w, null, { dilation: 3 }))).toEqual([5, 7, 9, 11]);
    expect(conv1d(cpu, x, w).shape).toEqual([1, 6]); // unbatched in, unbatched out
  });

  it('conv2d against a naive reference: stride, padding, dilation, groups, depthwise, dtypes, layouts', () => {
    const rng = new Rng(1);
    const cases = [
      { C: 3, Cout: 4, k: [3, 3], stride: [1, 1], pad: [1, 1], dil: [1, 1], groups: 1 },
      { C: 4, Cout: 6, k: [3, 2], stride: [2, 1], pad: [1, 0], dil: [1, 2], groups: 2 },
      { C: 5, Cout: 5, k: [3, 3], stride: [2, 2], pad: [1, 1], dil: [1, 1], groups: 5 }, // depthwise
      { C: 3, Cout: 6, k: [1, 1], stride: [1, 1], pad: [0, 0], dil: [1, 1], groups: 3 }, // depthwise multiplier 2
    ];
    for (const c of cases) {
      for (const dtype of ['f32', 'bf16', 'f16'] as DType[]) {
        const x = randn(rng, [2, c.C, 7, 6], dtype);
        const w = randn(rng, [c.Cout, c.C / c.groups, ...c.k], dtype);
        const b = randn(rng, [c.Cout], dtype);
        const want = naiveConv(values(x), [...x.shape], values(w), [...w.shape], values(b), { stride: c.stride, padL: c.pad, padR: c.pad, dil: c.dil, groups: c.groups });
        for (const layout of LAYOUTS) {
          const y = conv2d(cpu, relayout(x, layout), relayout(w, layout), b, { stride: c.stride, padding: c.pad, dilation: c.dil, groups: c.groups });
          expect(y.shape).toEqual(want.shape);
          expectClose(values(y), round(want.v, dtype), 1e-5, 1e-5);
        }
      }
    }
  });

  it("channels-last input (NHWC memory) and padding='same' (odd total pad goes right) / 'valid'", () => {
    const rng = new Rng(2);
    const nhwc = randn(rng, [2, 5, 6, 3]);
    const x = nhwc.permute(0, 3, 1, 2); // [2, 3, 5, 6] with channels-last strides
    const w = randn(rng, [4, 3, 2, 4]);
    const same = conv2d(cpu, x, w, null, { padding: 'same', dilation: [2, 1] });
    expect(same.shape).toEqual([2, 4, 5, 6]);
    // dilation*(k-1) = [2, 3]: pads [1, 1] top/bottom and [1, 2] left/right
    const want = naiveConv(values(x), [2, 3, 5, 6], values(w), [4, 3, 2, 4], null, { stride: [1, 1], padL: [1, 1], padR: [1, 2], dil: [2, 1], groups: 1 });
    expectClose(values(same), round(want.v, 'f32'), 1e-5, 1e-5);
    expect(conv2d(cpu, x, w, null, { padding: 'valid' }).shape).toEqual([2, 4, 4, 3]);
  });

  it('conv1d and conv3d against the naive reference', () => {
    const rng = new Rng(3);
    const x1 = randn(rng, [2, 4, 11]);
    const w1 = randn(rng, [6, 2, 3]);
    const want1 = naiveConv(values(x1), [2, 4, 11], values(w1), [6, 2, 3], null, { stride: [2], padL: [2], padR: [2], dil: [2], groups: 2 });
    expectClose(values(conv1d(cpu, relayout(x1, 'transposed'), w1, null, { stride: 2, padding: 2, dilation: 2, groups: 2 })), round(want1.v, 'f32'), 1e-5, 1e-5);
    const x3 = randn(rng, [1, 2, 4, 5, 3], 'bf16');
    const w3 = randn(rng, [3, 2, 2, 3, 2], 'bf16');
    const b3 = randn(rng, [3], 'bf16');
    const want3 = naiveConv(values(x3), [1, 2, 4, 5, 3], values(w3), [3, 2, 2, 3, 2], values(b3), { stride: [1, 2, 1], padL: [1, 0, 1], padR: [1, 0, 1], dil: [1, 1, 2], groups: 1 });
    const y3 = conv3d(cpu, relayout(x3, 'stepped'), w3, b3, { stride: [1, 2, 1], padding: [1, 0, 1], dilation: [1, 1, 2] });
    expect(y3.shape).toEqual(want3.shape);
    expectClose(values(y3), round(want3.v, 'bf16'), 0, 0);
  });

  it('empty batch and odd sizes', () => {
    expect(conv2d(cpu, randn(new Rng(0), [0, 3, 5, 5]), randn(new Rng(0), [2, 3, 3, 3])).shape).toEqual([0, 2, 3, 3]);
    expect(conv2d(cpu, randn(new Rng(0), [1, 1, 1, 1]), randn(new Rng(0), [1, 1, 1, 1])).shape).toEqual([1, 1, 1, 1]);
  });

  it('errors name the op, the argument and the shapes', () => {
    const x = randn(new Rng(0), [1, 4, 5, 5]);
    expect(() => conv2d(cpu, x, randn(new Rng(0), [2, 3, 3, 3]))).toThrow(/conv2d: given groups=1, weight \[2, 3, 3, 3\] expects input \[1, 4, 5, 5\] to have 3 channels, but it has 4/);
    expect(() => conv2d(cpu, x, randn(new Rng(0), [3, 2, 3, 3]), null, { groups: 2 })).toThrow(/out_channels 3 must both be divisible by groups 2/);
    expect(() => conv2d(cpu, x, randn(new Rng(0), [2, 4, 3, 3]), null, { padding: 'same', stride: 2 })).toThrow(/'same' is not supported for strided/);
    expect(() => conv2d(cpu, x, randn(new Rng(0), [2, 4, 7, 7]))).toThrow(/smaller than the dilated kernel/);
    expect(() => conv2d(cpu, randn(new Rng(0), [5, 5]), randn(new Rng(0), [2, 4, 3, 3]))).toThrow(/conv2d: expected a 4-D input/);
    expect(() => conv2d(cpu, x, randn(new Rng(0), [2, 4, 3, 3]), randn(new Rng(0), [3]))).toThrow(/bias \[3\] must be \[2\]/);
    expect(() => conv2d(cpu, x, randn(new Rng(0), [2, 4, 3, 3]), null, { stride: [1, 2, 3] })).toThrow(/stride must be an int >= 1 or a tuple of 2/);
  });
});

describe('conv_transpose1d / 2d / 3d', () => {
  it('hand-computed: stride 2 scatters the kernel', () => {
    const x = tensor([1, 2], [1, 1, 2]);
    const w = tensor([1, 10, 100], [1, 1, 3]);
    // out[i*2 + k] += x[i] * w[k]: [1, 10, 100+2, 20, 200]
    expect(values(convTranspose1d(cpu, x, w, null, { stride: 2 }))).toEqual([1, 10, 102, 20, 200]);
    expect(values(convTranspose1d(cpu, x, w, null, { stride: 2, padding: 1, output_padding: 1 }))).toEqual([10, 102, 20, 200]);
    expect(values(convTranspose1d(cpu, x, w, tensor([1], [1]), { stride: 2, output_padding: 1 }))).toEqual([2, 11, 103, 21, 201, 1]);
  });

  it('is the adjoint of conv: <conv(x, w), y> = <x, conv_transpose(y, w)>, for 1-D, 2-D and 3-D', () => {
    const rng = new Rng(4);
    const cases = [
      { nd: 1, xs: [2, 4, 9], ws: [6, 2, 3], stride: [2], pad: [1], dil: [2], groups: 2 },
      { nd: 2, xs: [1, 3, 7, 8], ws: [4, 3, 3, 2], stride: [2, 3], pad: [1, 0], dil: [1, 2], groups: 1 },
      { nd: 2, xs: [2, 4, 5, 5], ws: [4, 1, 3, 3], stride: [2, 2], pad: [1, 1], dil: [1, 1], groups: 4 },
      { nd: 3, xs: [1, 2, 4, 5, 4], ws: [2, 2, 2, 3, 2], stride: [2, 1, 2], pad: [0, 1, 1], dil: [1, 1, 1], groups: 1 },
    ] as const;
    for (const c of cases) {
      const x = randn(rng, [...c.xs], 'f64');
      const w = randn(rng, [...c.ws], 'f64');
      const y = convNd(cpu, c.nd, x, w, null, { stride: [...c.stride], padding: [...c.pad], dilation: [...c.dil], groups: c.groups });
      const g = randn(rng, [...y.shape], 'f64');
      // output_padding recovers the input size where the strided conv dropped trailing elements
      const sp = c.xs.slice(2);
      const natural = y.shape.slice(2).map((o, i) => (o - 1) * c.stride[i]! - 2 * c.pad[i]! + c.dil[i]! * (c.ws[i + 2]! - 1) + 1);
      const outPad = sp.map((s, i) => s - natural[i]!);
      const ct = [convTranspose1d, convTranspose2d, convTranspose3d][c.nd - 1]!(cpu, relayout(g, 'transposed'), relayout(w, 'stepped'), null, { stride: [...c.stride], padding: [...c.pad], dilation: [...c.dil], groups: c.groups, output_padding: outPad });
      expect(ct.shape).toEqual([...c.xs]);
      const lhs = dot(values(y), values(g));
      const rhs = dot(values(x), values(ct));
      expect(Math.abs(lhs - rhs)).toBeLessThan(1e-9 * Math.max(1, Math.abs(lhs)));
    }
  });

  it('bf16 against a naive scatter, with bias and groups', () => {
    const rng = new Rng(5);
    const x = randn(rng, [1, 4, 3, 3], 'bf16');
    const w = randn(rng, [4, 3, 2, 2], 'bf16');
    const b = randn(rng, [6], 'bf16');
    const X = values(x);
    const W = values(w);
    const B = values(b);
    const OH = (3 - 1) * 2 + 1 * 1 + 1; // stride 2, k 2 -> 6
    const want = new Array<number>(6 * OH * OH).fill(0).map((_, i) => B[Math.floor(i / (OH * OH))]!);
    for (const [, ic, ih, iw] of indices([1, 4, 3, 3])) {
      const g = Math.floor(ic! / 2);
      for (const [j, kh, kw] of indices([3, 2, 2])) want[((g * 3 + j!) * OH + ih! * 2 + kh!) * OH + iw! * 2 + kw!]! += X[flat([1, 4, 3, 3], [0, ic!, ih!, iw!])]! * W[flat([4, 3, 2, 2], [ic!, j!, kh!, kw!])]!;
    }
    const y = convTranspose2d(cpu, x, w, b, { stride: 2, groups: 2 });
    expect(y.shape).toEqual([1, 6, OH, OH]);
    expectClose(values(y), round(want, 'bf16'), 0, 0);
  });

  it('rejects a too-large output_padding and channel mismatches', () => {
    const x = randn(new Rng(0), [1, 2, 4]);
    expect(() => convTranspose1d(cpu, x, randn(new Rng(0), [2, 1, 3]), null, { stride: 2, output_padding: 2 })).toThrow(/output_padding \[2\] must be smaller than either stride \[2\] or dilation \[1\]/);
    expect(() => convTranspose1d(cpu, x, randn(new Rng(0), [3, 1, 3]))).toThrow(/weight \[3, 1, 3\] expects 3 input channels, but input \[1, 2, 4\] has 2/);
  });
});

/**
 * The in-range positions of each pooling window along one dim. Windows start at i * s - p; floor mode keeps those that
 * end inside the padded input, ceil mode also a last partial one, as long as it starts inside the input.
 */
function windows1d(size: number, k: number, s: number, p: number, d: number, ceil: boolean): number[][] {
  const eff = d * (k - 1) + 1;
  const n = (ceil ? Math.ceil : Math.floor)((size + 2 * p - eff) / s) + 1;
  const outs: number[][] = [];
  for (let i = 0; i < n; i++) {
    const start = i * s - p;
    if (start >= size) break;
    outs.push(Array.from({ length: k }, (_, j) => start + j * d).filter((x) => x >= 0 && x < size));
  }
  return outs;
}

describe('max / avg pooling', () => {
  it('hand-computed max_pool1d with dilation, and indices', () => {
    const x = tensor([1, 5, 2, 4, 3], [1, 1, 5]);
    const [y, i] = maxPoolNdWithIndices(cpu, 1, x, { kernel_size: 2, dilation: 2 });
    expect(values(y)).toEqual([2, 3]);
    expect(values(i)).toEqual([2, 4]);
    expect(i.dtype).toBe('i64');
    expect(values(maxPoolNd(cpu, 1, x, { kernel_size: 2, stride: 1 }))).toEqual([5, 5, 4, 4]);
  });

  it('hand-computed avg_pool1d: ceil_mode, count_include_pad', () => {
    const x = tensor([1, 2, 3, 4, 5], [1, 5]);
    expect(values(avgPoolNd(cpu, 1, x, { kernel_size: 2, ceil_mode: true }))).toEqual([1.5, 3.5, 5]);
    expect(values(avgPoolNd(cpu, 1, x, { kernel_size: 2 }))).toEqual([1.5, 3.5]);
    expect(values(avgPoolNd(cpu, 1, x, { kernel_size: 2, padding: 1 }))).toEqual([0.5, 2.5, 4.5]);
    expect(values(avgPoolNd(cpu, 1, x, { kernel_size: 2, padding: 1, count_include_pad: false }))).toEqual([1, 2.5, 4.5]);
    expect(values(avgPoolNd(cpu, 1, x, { kernel_size: 2, padding: 1, ceil_mode: true }))).toEqual([0.5, 2.5, 4.5]);
    // kernel 3 stride 2 pad 1 ceil: windows [-1,2) [1,4) [3,6): the last includes one pad slot past the input
    expect(values(avgPoolNd(cpu, 1, x, { kernel_size: 3, stride: 2, padding: 1, ceil_mode: true }))).toEqual([1, 3, 3]);
  });

  it('max_pool2d and avg_pool2d against explicit windows (separable), all layouts and dtypes', () => {
    const rng = new Rng(6);
    const configs = [
      { k: [3, 3], s: [2, 2], p: [1, 1], d: [1, 1], ceil: false },
      { k: [3, 2], s: [2, 1], p: [1, 0], d: [2, 1], ceil: true },
      { k: [2, 2], s: [2, 2], p: [0, 0], d: [1, 1], ceil: true },
    ];
    for (const c of configs) {
      for (const dtype of ['f32', 'bf16'] as DType[]) {
        const x = randn(rng, [2, 3, 7, 6], dtype);
        const X = values(x);
        const wh = windows1d(7, c.k[0]!, c.s[0]!, c.p[0]!, c.d[0]!, c.ceil);
        const ww = windows1d(6, c.k[1]!, c.s[1]!, c.p[1]!, c.d[1]!, c.ceil);
        const wantMax: number[] = [];
        for (let nc = 0; nc < 6; nc++) for (const hs of wh) for (const ws of ww) wantMax.push(Math.max(...hs.flatMap((h) => ws.map((w) => X[nc * 42 + h * 6 + w]!))));
        for (const layout of LAYOUTS) {
          const y = maxPoolNd(cpu, 2, relayout(x, layout), { kernel_size: c.k, stride: c.s, padding: c.p, dilation: c.d, ceil_mode: c.ceil });
          expect(y.shape).toEqual([2, 3, wh.length, ww.length]);
          expect(values(y)).toEqual(wantMax);
        }
        if (c.d[0] === 1 && c.d[1] === 1) {
          const wantAvg: number[] = [];
          for (let nc = 0; nc < 6; nc++) for (const hs of wh) for (const ws of ww) wantAvg.push(hs.flatMap((h) => ws.map((w) => X[nc * 42 + h * 6 + w]!)).reduce((a, b) => a + b, 0) / (hs.length * ws.length));
          const y = avgPoolNd(cpu, 2, relayout(x, 'transposed'), { kernel_size: c.k, stride: c.s, padding: c.p, ceil_mode: c.ceil, count_include_pad: false });
          expectClose(values(y), round(wantAvg, dtype), 1e-6, 1e-6);
        }
      }
    }
  });

  it('avg_pool2d divisor_override and count_include_pad; max_pool3d; unbatched input', () => {
    const x = tensor([1, 2, 3, 4], [1, 1, 2, 2]);
    expect(values(avgPoolNd(cpu, 2, x, { kernel_size: 2, divisor_override: 2 }))).toEqual([5]);
    expect(values(avgPoolNd(cpu, 2, x, { kernel_size: 2, padding: 1 }))).toEqual([0.25, 0.5, 0.75, 1]);
    const x3 = tensor(Array.from({ length: 27 }, (_, i) => (i * 7) % 27), [1, 3, 3, 3]);
    const [y3, i3] = maxPoolNdWithIndices(cpu, 3, x3, { kernel_size: 2, stride: 1 });
    expect(y3.shape).toEqual([1, 2, 2, 2]);
    const X = values(x3);
    for (const [, d, h, w] of indices([1, 2, 2, 2])) {
      const cands = [...indices([2, 2, 2])].map(([a, b, c]) => (d! + a!) * 9 + (h! + b!) * 3 + (w! + c!));
      const best = cands.reduce((bi, ci) => (X[ci]! > X[bi]! ? ci : bi));
      expect(values(i3)[d! * 4 + h! * 2 + w!]).toBe(best);
      expect(values(y3)[d! * 4 + h! * 2 + w!]).toBe(X[best]);
    }
  });

  it('max pooling propagates NaN; errors are clear', () => {
    expect(values(maxPoolNd(cpu, 1, tensor([1, NaN, 3, 2], [1, 4]), { kernel_size: 2 })).map(String)).toEqual(['NaN', '3']);
    const x = randn(new Rng(0), [1, 1, 4, 4]);
    expect(() => maxPoolNd(cpu, 2, x, { kernel_size: 2, padding: 2 })).toThrow(/max_pool2d: padding \[2,2\] should be at most half of kernel_size \[2,2\]/);
    expect(() => maxPoolNd(cpu, 2, x, { kernel_size: 5 })).toThrow(/output size is too small/);
    expect(() => avgPoolNd(cpu, 1, randn(new Rng(0), [1, 4]), { kernel_size: 2, divisor_override: 3 })).toThrow(/avg_pool1d: has no divisor_override/);
    expect(maxPoolNd(cpu, 2, randn(new Rng(0), [0, 2, 4, 4]), { kernel_size: 2 }).shape).toEqual([0, 2, 2, 2]);
  });
});

describe('adaptive pooling', () => {
  it('hand-computed adaptive_avg_pool1d (overlapping windows) and adaptive_max_pool1d indices', () => {
    const x = tensor([1, 2, 3, 4, 5], [1, 1, 5]);
    // windows for 5 -> 3: [0,2) [1,4) [3,5)
    expectClose(values(adaptiveAvgPoolNd(cpu, 1, x, 3)), [1.5, 3, 4.5]);
    const [m, i] = adaptiveMaxPoolNdWithIndices(cpu, 1, tensor([3, 1, 4, 1, 5], [1, 5]), 2);
    // 5 -> 2: [0,3) [2,5)
    expect(values(m)).toEqual([4, 5]);
    expect(values(i)).toEqual([2, 4]);
  });

  it('adaptive 2-D against explicit windows; None keeps a size; global pool = mean', () => {
    const rng = new Rng(7);
    const x = randn(rng, [2, 3, 7, 5], 'f32');
    const X = values(x);
    const win = (I: number, O: number) => Array.from({ length: O }, (_, o) => [Math.floor((o * I) / O), Math.ceil(((o + 1) * I) / O)] as const);
    const wantAvg: number[] = [];
    const wantMax: number[] = [];
    for (let nc = 0; nc < 6; nc++) {
      for (const [h0, h1] of win(7, 3)) {
        for (const [w0, w1] of win(5, 4)) {
          const vals: number[] = [];
          for (let h = h0; h < h1; h++) for (let w = w0; w < w1; w++) vals.push(X[nc * 35 + h * 5 + w]!);
          wantAvg.push(vals.reduce((a, b) => a + b, 0) / vals.length);
          wantMax.push(Math.max(...vals));
        }
      }
    }
    expectClose(values(adaptiveAvgPoolNd(cpu, 2, relayout(x, 'transposed'), [3, 4])), round(wantAvg, 'f32'), 1e-6, 1e-6);
    expect(values(adaptiveMaxPoolNd(cpu, 2, relayout(x, 'stepped'), [3, 4]))).toEqual(wantMax);
    expect(adaptiveAvgPoolNd(cpu, 2, x, [null, 2]).shape).toEqual([2, 3, 7, 2]);
    const g = adaptiveAvgPoolNd(cpu, 2, x, 1);
    for (let nc = 0; nc < 6; nc++) expect(values(g)[nc]).toBeCloseTo(X.slice(nc * 35, nc * 35 + 35).reduce((a, b) => a + b, 0) / 35, 5);
    // upsampling output sizes repeat elements
    expect(values(adaptiveAvgPoolNd(cpu, 1, tensor([1, 2], [1, 2]), 4))).toEqual([1, 1, 2, 2]);
  });

  it('rejects empty spatial dims and bad sizes', () => {
    expect(() => adaptiveAvgPoolNd(cpu, 2, randn(new Rng(0), [1, 2, 0, 3]), 2)).toThrow(/adaptive_avg_pool2d: input \[1, 2, 0, 3\] has an empty spatial dim/);
    expect(() => adaptiveAvgPoolNd(cpu, 2, randn(new Rng(0), [1, 2, 3, 3]), [1, 2, 3])).toThrow(/tuple of 2/);
    expect(Tensor).toBeDefined();
  });
});
