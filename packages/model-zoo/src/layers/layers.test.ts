/**
 * The torch.nn mirror on the CPU backend in float64: each layer on fresh random inputs against a naive computation
 * written here (or the float64 op where the layer is only a call of it), PyTorch's parameter names and shapes, the
 * containers' paths, late binding through the registry, and a small tree saved to safetensors and loaded back by path.
 */
import { F, Module, ModuleRegistry, Rng, Tensor, erf, withContext, type ExecutionContext, type Tensor as T } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cpuBackend } from '../../test/l1-harness.js';
import {
  BatchNorm2d, Conv1d, Conv2d, Conv3d, ConvTranspose2d, Dropout, Embedding, GELU, GroupNorm, Identity, LayerNorm, Linear,
  AdaptiveAvgPool2d, AvgPool2d, Flatten, MaxPool2d, ModuleDict, ModuleList, QuickGELU, RMSNorm, ReLU, Sequential, SiLU, Sigmoid, Tanh,
  createLayer, registerLayers,
} from './index.js';
import { baselineRegistry } from '../index.js';
import { convWeightsToChannelsLast } from './conv.js';


const registry = registerLayers(new ModuleRegistry());
const ctx = (r: ModuleRegistry = registry): ExecutionContext => ({ backend: cpuBackend(), device: 0, dtype: 'f64', registry: r });
const inCtx = <R>(fn: () => R, r?: ModuleRegistry): R => withContext(ctx(r), fn);
let seed = 1;
const rng = () => new Rng(seed++ * 7919);

function randT(shape: number[], r = rng(), scale = 1): T {
  const n = shape.reduce((a, b) => a * b, 1);
  return Tensor.fromArray(cpuBackend(), r.fillNormal(n, scale), shape, 'f64');
}
/** Random values into every parameter (running_var kept positive). */
function randomize(m: Module, r = rng()): void {
  for (const [k, p] of m.namedParameters()) {
    const v = r.fillNormal(p.numel, 0.5);
    if (k.endsWith('running_var')) v.forEach((x, i) => (v[i] = 0.5 + Math.abs(x)));
    p.copy_(Tensor.fromArray(cpuBackend(), v, p.shape, 'f64'));
  }
}
const vals = (t: T): number[] => [...t.toFloat64Array()];
function expectClose(got: T, want: ArrayLike<number>, shape: number[], tol = 1e-12): void {
  expect([...got.shape]).toEqual(shape);
  const g = got.toFloat64Array();
  expect(g.length).toBe(want.length);
  let max = 0;
  g.forEach((v, i) => (max = Math.max(max, Math.abs(v - want[i]!))));
  expect(max).toBeLessThanOrEqual(tol);
}
/** Row-major strides of a shape. */
const stridesOf = (s: readonly number[]) => s.map((_, i) => s.slice(i + 1).reduce((a, b) => a * b, 1));

describe('Linear, Embedding', () => {
  it('Linear(in, out, bias) has weight [out, in], bias [out] and computes x W^T + b', () => {
    inCtx(() => {
      const l = new Linear(5, 3);
      expect(l.namedParameters().map(([k, p]) => [k, [...p.shape]])).toEqual([['weight', [3, 5]], ['bias', [3]]]);
      expect(new Linear(5, 3, false).namedParameters().map(([k]) => k)).toEqual(['weight']);
      randomize(l);
      const x = randT([2, 4, 5]);
      const [xv, w, b] = [vals(x), vals(l.weight), vals(l.bias!)];
      const want = new Float64Array(2 * 4 * 3);
      for (let r = 0; r < 8; r++) for (let o = 0; o < 3; o++) {
        let s = b[o]!;
        for (let i = 0; i < 5; i++) s += xv[r * 5 + i]! * w[o * 5 + i]!;
        want[r * 3 + o] = s;
      }
      expectClose(l.forward(x), want, [2, 4, 3]);
      expect(() => new Linear(0, 3)).toThrow(/Linear: in_features must be a positive integer, got 0/);
    });
  });

  it('Embedding(num, dim, padding_idx) gathers rows of weight [num, dim]', () => {
    inCtx(() => {
      const e = new Embedding(10, 4, -1);
      expect(e.paddingIdx).toBe(9);
      expect([...e.weight.shape]).toEqual([10, 4]);
      randomize(e);
      const ids = [3, 0, 9, 3, 7, 1];
      const w = vals(e.weight);
      const out = e.forward(Tensor.fromArray(cpuBackend(), ids, [2, 3], 'i64'));
      expectClose(out, ids.flatMap((id) => w.slice(id * 4, id * 4 + 4)), [2, 3, 4], 0);
      expect(() => new Embedding(10, 4, 10)).toThrow(/padding_idx must be within num_embeddings \(10\), got 10/);
    });
  });
});

/** Naive conv2d on [N, C, H, W] with zero padding pad[0], pad[1]. */
function naiveConv2d(x: number[], xs: number[], w: number[], ws: number[], b: number[] | null, stride: number[], pad: number[], dil: number[], groups: number) {
  const [N, C, H, W] = xs as [number, number, number, number];
  const [Co, Cg, KH, KW] = ws as [number, number, number, number];
  const Ho = Math.floor((H + 2 * pad[0]! - dil[0]! * (KH - 1) - 1) / stride[0]!) + 1;
  const Wo = Math.floor((W + 2 * pad[1]! - dil[1]! * (KW - 1) - 1) / stride[1]!) + 1;
  const out = new Float64Array(N * Co * Ho * Wo);
  const og = Co / groups;
  for (let n = 0; n < N; n++) for (let co = 0; co < Co; co++) for (let i = 0; i < Ho; i++) for (let j = 0; j < Wo; j++) {
    let s = b ? b[co]! : 0;
    const g = Math.floor(co / og);
    for (let cg = 0; cg < Cg; cg++) for (let kh = 0; kh < KH; kh++) for (let kw = 0; kw < KW; kw++) {
      const h = i * stride[0]! - pad[0]! + kh * dil[0]!;
      const ww = j * stride[1]! - pad[1]! + kw * dil[1]!;
      if (h < 0 || h >= H || ww < 0 || ww >= W) continue;
      s += x[((n * C + g * Cg + cg) * H + h) * W + ww]! * w[((co * Cg + cg) * KH + kh) * KW + kw]!;
    }
    out[((n * Co + co) * Ho + i) * Wo + j] = s;
  }
  return { out, shape: [N, Co, Ho, Wo] };
}

describe('convolutions', () => {
  it('Conv2d(in, out, k, stride, padding, dilation, groups, bias) matches a naive convolution', () => {
    inCtx(() => {
      const c = new Conv2d(4, 6, [3, 2], [2, 1], [1, 2], [1, 2], 2);
      expect(c.namedParameters().map(([k, p]) => [k, [...p.shape]])).toEqual([['weight', [6, 2, 3, 2]], ['bias', [6]]]);
      randomize(c);
      const x = randT([2, 4, 7, 6]);
      const want = naiveConv2d(vals(x), [2, 4, 7, 6], vals(c.weight), [6, 2, 3, 2], vals(c.bias!), [2, 1], [1, 2], [1, 2], 2);
      expectClose(c.forward(x), want.out, want.shape);
    });
  });

  it('toChannelsLast: the same weight values laid out [out, *k, in / groups], the same outputs; idempotent; Conv1d untouched', () => {
    inCtx(() => {
      const c = new Conv2d(4, 6, 3, 1, 1, 1, 2);
      randomize(c);
      const x = randT([2, 4, 5, 6]);
      const before = vals(c.weight);
      const want = vals(c.forward(x));
      expect(c.toChannelsLast()).toBe(true);
      expect(c.weight.strides).toEqual([18, 1, 6, 2]); // [6, 2, 3, 3] stored as [6, 3, 3, 2]
      expect(c.namedParameters()[0]![1]).toBe(c.weight);
      expect(vals(c.weight)).toEqual(before);
      expectClose(c.forward(x), want, [2, 6, 5, 6]);
      expect(c.toChannelsLast()).toBe(false);
      const net = new Sequential(new Conv1d(2, 2, 3), new Conv2d(2, 2, 1), new Conv3d(2, 2, 2));
      expect(convWeightsToChannelsLast(net)).toBe(1); // the 1x1 Conv2d is both layouts already: Conv3d only
    });
  });

  it("Conv2d padding_mode='reflect' pads by reflection, then convolves unpadded", () => {
    inCtx(() => {
      const c = new Conv2d(2, 3, 3, 1, 1, 1, 1, true, 'reflect');
      randomize(c);
      const [H, W] = [4, 5];
      const x = randT([1, 2, H, W]);
      const xv = vals(x);
      const refl = (i: number, n: number) => (i < 0 ? -i : i >= n ? 2 * n - 2 - i : i);
      const padded: number[] = [];
      for (let ch = 0; ch < 2; ch++) for (let h = -1; h <= H; h++) for (let w = -1; w <= W; w++) padded.push(xv[(ch * H + refl(h, H)) * W + refl(w, W)]!);
      const want = naiveConv2d(padded, [1, 2, H + 2, W + 2], vals(c.weight), [3, 2, 3, 3], vals(c.bias!), [1, 1], [0, 0], [1, 1], 1);
      expectClose(c.forward(x), want.out, [1, 3, H, W]);
      expect(() => new Conv2d(2, 3, 3, 1, 1, 1, 1, true, 'mirror' as 'reflect')).toThrow(/padding_mode must be/);
    });
  });

  it("Conv1d / Conv3d equal F.conv1d / F.conv3d with their arguments; padding='same' keeps the size", () => {
    inCtx(() => {
      const c1 = new Conv1d(3, 4, 5, 1, 'same', 2);
      randomize(c1);
      const x1 = randT([2, 3, 11]);
      const y1 = c1.forward(x1);
      expect([...y1.shape]).toEqual([2, 4, 11]);
      expectClose(y1, vals(F.conv1d(x1, c1.weight, c1.bias, { padding: 'same', dilation: 2 })), [2, 4, 11], 0);
      const c3 = new Conv3d(2, 4, [1, 3, 3], 1, [0, 1, 1], 1, 2, false);
      expect(c3.namedParameters().map(([k, p]) => [k, [...p.shape]])).toEqual([['weight', [4, 1, 1, 3, 3]]]);
      randomize(c3);
      const x3 = randT([1, 2, 3, 4, 4]);
      expectClose(c3.forward(x3), vals(F.conv3d(x3, c3.weight, null, { padding: [0, 1, 1], groups: 2 })), [1, 4, 3, 4, 4], 0);
      expect(() => new Conv2d(3, 4, 3, 1, 0, 1, 2)).toThrow(/in_channels 3 must be divisible by groups 2/);
    });
  });

  it('ConvTranspose2d(in, out, k, stride, padding, output_padding, groups) scatters like a naive transposed convolution', () => {
    inCtx(() => {
      const [Ci, Co, K, s, p, op, g] = [4, 6, 3, 2, 1, 1, 2];
      const c = new ConvTranspose2d(Ci, Co, K, s, p, op, g);
      expect(c.namedParameters().map(([k, t]) => [k, [...t.shape]])).toEqual([['weight', [4, 3, 3, 3]], ['bias', [6]]]);
      randomize(c);
      const [H, W] = [3, 4];
      const x = randT([2, Ci, H, W]);
      const [xv, w, b] = [vals(x), vals(c.weight), vals(c.bias!)];
      const Ho = (H - 1) * s - 2 * p + (K - 1) + op + 1;
      const Wo = (W - 1) * s - 2 * p + (K - 1) + op + 1;
      const want = new Float64Array(2 * Co * Ho * Wo);
      const [cig, cog] = [Ci / g, Co / g];
      for (let n = 0; n < 2; n++) for (let co = 0; co < Co; co++) want.fill(b[co]!, (n * Co + co) * Ho * Wo, (n * Co + co + 1) * Ho * Wo);
      for (let n = 0; n < 2; n++) for (let ci = 0; ci < Ci; ci++) for (let i = 0; i < H; i++) for (let j = 0; j < W; j++) {
        const gi = Math.floor(ci / cig);
        for (let oc = 0; oc < cog; oc++) for (let kh = 0; kh < K; kh++) for (let kw = 0; kw < K; kw++) {
          const oh = i * s - p + kh;
          const ow = j * s - p + kw;
          if (oh < 0 || oh >= Ho || ow < 0 || ow >= Wo) continue;
          want[((n * Co + gi * cog + oc) * Ho + oh) * Wo + ow]! += xv[((n * Ci + ci) * H + i) * W + j]! * w[((ci * cog + oc) * K + kh) * K + kw]!;
        }
      }
      expectClose(c.forward(x), want, [2, Co, Ho, Wo]);
    });
  });
});

describe('normalisation layers', () => {
  /** Naive normalisation of contiguous groups of `size` elements, then a per-element affine. */
  function normGroups(x: number[], size: number, eps: number, scale: (i: number) => number, shift: (i: number) => number, rms = false): Float64Array {
    const out = new Float64Array(x.length);
    for (let g = 0; g < x.length / size; g++) {
      const seg = x.slice(g * size, (g + 1) * size);
      const mean = rms ? 0 : seg.reduce((a, v) => a + v, 0) / size;
      const v = seg.reduce((a, t) => a + (t - mean) ** 2, 0) / size;
      seg.forEach((t, k) => (out[g * size + k] = ((t - mean) / Math.sqrt(v + eps)) * scale(g * size + k) + shift(g * size + k)));
    }
    return out;
  }

  it('LayerNorm(normalized_shape, eps, elementwise_affine, bias) over the trailing dims', () => {
    inCtx(() => {
      const ln = new LayerNorm([3, 4], 1e-3);
      expect(ln.namedParameters().map(([k, p]) => [k, [...p.shape]])).toEqual([['weight', [3, 4]], ['bias', [3, 4]]]);
      expect(vals(ln.weight!)).toEqual(new Array(12).fill(1)); // PyTorch's init: weight 1, bias 0
      randomize(ln);
      const x = randT([5, 3, 4], rng(), 3);
      const [w, b] = [vals(ln.weight!), vals(ln.bias!)];
      expectClose(ln.forward(x), normGroups(vals(x), 12, 1e-3, (i) => w[i % 12]!, (i) => b[i % 12]!), [5, 3, 4]);
      expect(new LayerNorm(8, 1e-5, true, false).namedParameters().map(([k]) => k)).toEqual(['weight']);
      const plain = new LayerNorm(4, 1e-5, false);
      expect(plain.namedParameters()).toEqual([]);
      const x2 = randT([3, 4]);
      expectClose(plain.forward(x2), normGroups(vals(x2), 4, 1e-5, () => 1, () => 0), [3, 4]);
    });
  });

  it('GroupNorm(num_groups, num_channels, eps, affine) normalises each group of channels over its planes', () => {
    inCtx(() => {
      const gn = new GroupNorm(3, 6, 1e-4);
      randomize(gn);
      const x = randT([2, 6, 3, 5], rng(), 2);
      const [w, b] = [vals(gn.weight!), vals(gn.bias!)];
      const ch = (i: number) => Math.floor(i / 15) % 6;
      expectClose(gn.forward(x), normGroups(vals(x), 2 * 15, 1e-4, (i) => w[ch(i)]!, (i) => b[ch(i)]!), [2, 6, 3, 5]);
      expect(() => new GroupNorm(4, 6)).toThrow(/num_channels 6 must be divisible by num_groups 4/);
    });
  });

  it('BatchNorm2d(num_features, eps, momentum, affine) in eval uses running_mean / running_var', () => {
    inCtx(() => {
      const bn = new BatchNorm2d(3, 1e-3);
      expect(bn.namedParameters().map(([k]) => k)).toEqual(['weight', 'bias', 'running_mean', 'running_var']);
      expect(vals(bn.runningVar)).toEqual([1, 1, 1]);
      randomize(bn);
      const x = randT([2, 3, 2, 4]);
      const [w, b, m, v] = [vals(bn.weight!), vals(bn.bias!), vals(bn.runningMean), vals(bn.runningVar)];
      const want = vals(x).map((t, i) => {
        const c = Math.floor(i / 8) % 3;
        return ((t - m[c]!) / Math.sqrt(v[c]! + 1e-3)) * w[c]! + b[c]!;
      });
      expectClose(bn.forward(x), want, [2, 3, 2, 4]);
      expect(() => bn.forward(randT([2, 3, 4]))).toThrow(/BatchNorm2d: expected a 4-D input, got \[2, 3, 4\]/);
      expect(() => new BatchNorm2d(3, 1e-5, 0.1, true, false)).toThrow(/track_running_stats=False/);
    });
  });

  it("RMSNorm(normalized_shape, eps=None) uses torch.finfo(dtype).eps when eps is None", () => {
    inCtx(() => {
      const rn = new RMSNorm(6);
      randomize(rn);
      const x = randT([4, 6]);
      const w = vals(rn.weight!);
      expectClose(rn.forward(x), normGroups(vals(x), 6, 2 ** -52, (i) => w[i % 6]!, () => 0, true), [4, 6]);
      const rn2 = new RMSNorm([6], 0.5, false);
      expectClose(rn2.forward(x), normGroups(vals(x), 6, 0.5, () => 1, () => 0, true), [4, 6]);
    });
  });
});

describe('activations and dropout', () => {
  const cases: [string, () => Module & { forward(x: T): T }, (v: number) => number][] = [
    ['GELU()', () => new GELU(), (v) => 0.5 * v * (1 + erf(v / Math.SQRT2))],
    ["GELU('tanh')", () => new GELU('tanh'), (v) => 0.5 * v * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (v + 0.044715 * v ** 3)))],
    ['SiLU', () => new SiLU(), (v) => v / (1 + Math.exp(-v))],
    ['ReLU', () => new ReLU(), (v) => Math.max(v, 0)],
    ['Sigmoid', () => new Sigmoid(), (v) => 1 / (1 + Math.exp(-v))],
    ['Tanh', () => new Tanh(), (v) => Math.tanh(v)],
    ['QuickGELU', () => new QuickGELU(), (v) => v / (1 + Math.exp(-1.702 * v))],
  ];
  for (const [name, make, f] of cases) {
    it(`${name} matches its formula elementwise`, () => {
      inCtx(() => {
        const x = randT([3, 17], rng(), 3);
        expectClose(make().forward(x), vals(x).map(f), [3, 17], 1e-13);
      });
    });
  }

  it('Dropout is the identity in eval; GELU rejects an unknown approximate', () => {
    inCtx(() => {
      const x = randT([4]);
      expect(new Dropout(0.3).forward(x)).toBe(x);
      expect(new Identity().forward(x)).toBe(x);
      expect(() => new Dropout(1.5)).toThrow(/p must be in \[0, 1\]/);
      expect(() => new GELU('erf' as 'none')).toThrow(/approximate must be 'none' or 'tanh'/);
    });
  });
});

describe('pooling and flatten', () => {
  /** Naive 2-D pooling over [N, C, H, W] with window k, stride s, padding p (padded cells are -inf / 0). */
  function pool(x: number[], [N, C, H, W]: number[], k: number, s: number, p: number, kind: 'max' | 'avg', countPad = true): { out: number[]; shape: number[] } {
    const Ho = Math.floor((H! + 2 * p - k) / s) + 1;
    const Wo = Math.floor((W! + 2 * p - k) / s) + 1;
    const out: number[] = [];
    for (let nc = 0; nc < N! * C!; nc++) for (let i = 0; i < Ho; i++) for (let j = 0; j < Wo; j++) {
      let acc = kind === 'max' ? -Infinity : 0;
      let n = 0;
      for (let a = 0; a < k; a++) for (let b = 0; b < k; b++) {
        const h = i * s - p + a;
        const w = j * s - p + b;
        const inside = h >= 0 && h < H! && w >= 0 && w < W!;
        if (inside || countPad) n++;
        if (!inside) continue;
        const v = x[(nc * H! + h) * W! + w]!;
        acc = kind === 'max' ? Math.max(acc, v) : acc + v;
      }
      out.push(kind === 'max' ? acc : acc / n);
    }
    return { out, shape: [N!, C!, Ho, Wo] };
  }

  it('MaxPool2d / AvgPool2d (kernel_size, stride, padding, count_include_pad) match naive pooling', () => {
    inCtx(() => {
      const x = randT([2, 3, 7, 6]);
      const m = pool(vals(x), [2, 3, 7, 6], 3, 2, 1, 'max');
      expectClose(new MaxPool2d(3, 2, 1).forward(x) as T, m.out, m.shape, 0);
      const a = pool(vals(x), [2, 3, 7, 6], 3, 2, 1, 'avg');
      expectClose(new AvgPool2d(3, 2, 1).forward(x), a.out, a.shape);
      const a2 = pool(vals(x), [2, 3, 7, 6], 3, 2, 1, 'avg', false);
      expectClose(new AvgPool2d(3, 2, 1, false, false).forward(x), a2.out, a2.shape);
      const d = pool(vals(x), [2, 3, 7, 6], 2, 2, 0, 'max'); // stride None = kernel_size
      const [out, idx] = new MaxPool2d(2, null, 0, 1, true).forward(x) as [T, T];
      expectClose(out, d.out, d.shape, 0);
      expect(idx.dtype).toBe('i64');
    });
  });

  it('AdaptiveAvgPool2d(1) is the mean of each plane; Flatten(1) gives [N, C*H*W]', () => {
    inCtx(() => {
      const x = randT([2, 3, 4, 5]);
      const xv = vals(x);
      const means = [0, 1, 2, 3, 4, 5].map((p) => xv.slice(p * 20, p * 20 + 20).reduce((s, v) => s + v, 0) / 20);
      expectClose(new AdaptiveAvgPool2d(1).forward(x), means, [2, 3, 1, 1]);
      expectClose(new Flatten().forward(x), xv, [2, 60], 0);
      expectClose(new Flatten(0, 1).forward(x), xv, [6, 4, 5], 0);
    });
  });
});

describe('containers and the registry', () => {
  it("Sequential / ModuleList / ModuleDict name children as PyTorch ('0.weight', 'blocks.1.bias', 'heads.cls.weight')", () => {
    inCtx(() => {
      const seq = new Sequential(new Linear(4, 8), new GELU(), new Dropout(), new Linear(8, 2, false));
      expect(seq.namedParameters().map(([k]) => k)).toEqual(['0.weight', '0.bias', '3.weight']);
      randomize(seq);
      const x = randT([3, 4]);
      const h = F.gelu(seq.at(0).forward(x));
      expectClose(seq.forward(x), vals(seq.at(-1).forward(h)), [3, 2], 0);
      const list = new ModuleList([new LayerNorm(4), new LayerNorm(4)]);
      const dict = new ModuleDict<Module>({ cls: new Linear(4, 2), box: new Linear(4, 4, false) });
      class Net extends Module {
        readonly blocks = this.registerModule('blocks', list);
        readonly heads = this.registerModule('heads', dict);
        forward(): void {}
      }
      expect(new Net().namedParameters().map(([k]) => k)).toEqual(['blocks.0.weight', 'blocks.0.bias', 'blocks.1.weight', 'blocks.1.bias', 'heads.cls.weight', 'heads.cls.bias', 'heads.box.weight']);
      expect(new Net().namedModules().map(([k]) => k)).toEqual(['', 'blocks', 'blocks.0', 'blocks.1', 'heads', 'heads.cls', 'heads.box']);
      expect(dict.get('box')).toBeInstanceOf(Linear);
      expect(() => dict.get('nope')).toThrow(/no module 'nope' \(keys: cls, box\)/);
      expect(() => list.at(2)).toThrow(/index 2 out of range for 2 modules/);
      expect(() => dict.set('a.b', new Identity())).toThrow(/contain no '\.'/);
    });
  });

  it('createLayer builds through the registry: a child registry overriding nn.Linear (or a layer task) replaces it', () => {
    class MyLinear extends Linear {}
    const child = registry.child('candidate');
    child.override('nn.Linear', MyLinear);
    expect(child.overrides()).toEqual(['nn.Linear']);
    expect(registry.overrides()).toEqual([]);
    expect(inCtx(() => createLayer('Linear', 4, 2), child)).toBeInstanceOf(MyLinear);
    expect(inCtx(() => createLayer('Linear', 4, 2))).not.toBeInstanceOf(MyLinear);
    expect(inCtx(() => createLayer('Conv2d', 3, 4, 3), child)).toBeInstanceOf(Conv2d);
    // A registry that knows no layers still builds the built-in class.
    expect(inCtx(() => createLayer('ReLU'), new ModuleRegistry())).toBeInstanceOf(ReLU);
    expect(() => registry.registerModule('nn.Linear', MyLinear)).toThrow(/registered twice/);
    // A layer that is an L1 task's baseline resolves through the task: a candidate for L1/layer_norm replaces it.
    class MyLayerNorm extends LayerNorm {}
    const base = baselineRegistry();
    expect(inCtx(() => createLayer('LayerNorm', 8), base)).toBeInstanceOf(LayerNorm);
    const cand = base.child('candidate');
    cand.override('L1/layer_norm', MyLayerNorm);
    expect(inCtx(() => createLayer('LayerNorm', 8, 1e-6), cand)).toBeInstanceOf(MyLayerNorm);
    expect(inCtx(() => createLayer('GroupNorm', 2, 8), cand)).not.toBeInstanceOf(MyLayerNorm);
    expect(() => child.override('nn.Nope', MyLinear)).toThrow(/unknown task 'nn.Nope'/);
  });
});
