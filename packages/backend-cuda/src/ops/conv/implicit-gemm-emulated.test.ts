/**
 * The fallback kernel's index math without a GPU: fk_conv_igemm transcribed line for line (blocks, the 256 threads'
 * load mapping, the shared tiles, the 4 x 4 outputs a thread, C's truncating division), run on the host over the
 * arguments ConvLaunches packs, against the float64 CPU backend on small shapes: strides, padding, dilation, groups,
 * transposed, channels-last and unbatched. The CUDA arithmetic itself is GPU-tested (cuda-conv.gpu.test.ts).
 */
import { describe, expect, it } from 'vitest';
import { Tensor, callOp } from '@fastkernels/core';
import { CpuBackend } from '@fastkernels/backend-cpu';
import { fake } from '../../../test/ops-fake.js';
import { ConvKernels } from './conv-kernels.js';
import type { CudnnState } from './cudnn-library.js';
import { CONV_ACTS, IGEMM_TILE, type ConvEpilogueAct } from './implicit-gemm-source.js';

/** fk_act of the epilogue (FK_ACT), as the kernel writes it. */
const ACT_FNS: Readonly<Record<ConvEpilogueAct, (v: number) => number>> = { none: (v) => v, silu: (v) => v / (1 + Math.exp(-v)), relu: (v) => (v <= 0 ? 0 : v) };

const { BM, BN, BK } = IGEMM_TILE;
const div = (a: number, b: number) => Math.trunc(a / b);

/** fk_conv_igemm on the host: x, w, bias, y are element arrays indexed from the packed offsets (all 0 here). */
function emulate(args: number[], x: Float64Array, w: Float64Array, bias: Float64Array | null, y: Float64Array, transposed: boolean, grid: number[], act: (v: number) => number): void {
  const [N, C, D, H, W, K, OD, OH, OW, KD, KH, KW, G, sd, sh, sw, pd, ph, pw, dd, dh, dw] = args.slice(4, 26) as number[];
  const [xn, xc, xd, xh, xw, wo, wi, wd, wh, ww, yn, yc, yd, yh, yw] = args.slice(26) as number[];
  const Cg = div(C!, G!), Kg = div(K!, G!);
  const M = N! * OD! * OH! * OW!;
  const R = Cg * KD! * KH! * KW!;
  for (let bz = 0; bz < grid[2]!; bz++)
    for (let by = 0; by < grid[1]!; by++)
      for (let bx = 0; bx < grid[0]!; bx++) {
        const g = bz, m0 = bx * BM, n0 = by * BN;
        const As = Array.from({ length: BK }, () => new Float64Array(BM));
        const Bs = Array.from({ length: BK }, () => new Float64Array(BN));
        const acc = Array.from({ length: 256 }, () => new Float64Array(16));
        for (let k0 = 0; k0 < R; k0 += BK) {
          for (let t = 0; t < 256; t++) {
            const lm = t % BM, lk = div(t, BM), am = m0 + lm;
            let an = 0, aod = 0, aoh = 0, aow = 0;
            if (am < M) {
              let r = am;
              aow = r % OW!; r = div(r, OW!);
              aoh = r % OH!; r = div(r, OH!);
              aod = r % OD!; an = div(r, OD!);
            }
            const xg = an * xn! + g * Cg * xc!;
            const bk = n0 + lm;
            const wg = transposed ? bk * wo! + g * Cg * wi! : (g * Kg + bk) * wo!;
            for (let i = 0; i < 4; i++) {
              const kk = k0 + lk + 4 * i;
              let a = 0, b = 0;
              if (kk < R) {
                let r = kk;
                const c = r % Cg; r = div(r, Cg);
                const kw = r % KW!; r = div(r, KW!);
                const kh = r % KH!;
                const kd = div(r, KH!);
                if (am < M) {
                  let ok: boolean, id: number, ih: number, iw: number;
                  if (transposed) {
                    const td = aod + pd! - kd * dd!, th = aoh + ph! - kh * dh!, tw = aow + pw! - kw * dw!;
                    id = div(td, sd!); ih = div(th, sh!); iw = div(tw, sw!);
                    ok = td >= 0 && th >= 0 && tw >= 0 && td - id * sd! === 0 && th - ih * sh! === 0 && tw - iw * sw! === 0 && id < D! && ih < H! && iw < W!;
                  } else {
                    id = aod * sd! - pd! + kd * dd!; ih = aoh * sh! - ph! + kh * dh!; iw = aow * sw! - pw! + kw * dw!;
                    ok = id >= 0 && ih >= 0 && iw >= 0 && id < D! && ih < H! && iw < W!;
                  }
                  if (ok) a = x[xg + c * xc! + id * xd! + ih * xh! + iw * xw!]!;
                }
                if (bk < Kg) b = w[wg + c * wi! + kd * wd! + kh * wh! + kw * ww!]!;
              }
              As[lk + 4 * i]![lm] = a;
              Bs[lk + 4 * i]![lm] = b;
            }
          }
          for (let t = 0; t < 256; t++) {
            const ty = div(t, 16), tx = t % 16;
            for (let k = 0; k < BK; k++) for (let i = 0; i < 4; i++) for (let j = 0; j < 4; j++) acc[t]![i * 4 + j]! += As[k]![ty + 16 * i]! * Bs[k]![tx + 16 * j]!;
          }
        }
        for (let t = 0; t < 256; t++) {
          const ty = div(t, 16), tx = t % 16;
          for (let i = 0; i < 4; i++) {
            const m = m0 + ty + 16 * i;
            if (m >= M) continue;
            let r = m;
            const ow = r % OW!; r = div(r, OW!);
            const oh = r % OH!; r = div(r, OH!);
            const od = r % OD!;
            const n = div(r, OD!);
            for (let j = 0; j < 4; j++) {
              const kl = n0 + tx + 16 * j;
              if (kl >= Kg) continue;
              const k = g * Kg + kl;
              y[n * yn! + od * yd! + oh * yh! + ow * yw! + k * yc!] = act(acc[t]![i * 4 + j]! + (bias ? bias[k]! : 0));
            }
          }
        }
      }
}

const cpu = new CpuBackend();
const ABSENT: CudnnState = { ok: false, reason: 'absent' };

/** Launch through ConvKernels on the fake device, emulate the recorded launch over CPU copies, compare with the CPU op. */
function check(op: string, nd: 1 | 2 | 3, xShape: number[], wShape: number[], withBias: boolean, attrs: Record<string, unknown>, channelsLast = false, act: ConvEpilogueAct = 'none'): void {
  const transposed = op.startsWith('conv_transpose');
  const rnd = (n: number, seed: number) => Float64Array.from({ length: n }, (_, i) => Math.sin(seed * 7.3 + i * 1.7) * 2);
  const numel = (s: number[]) => s.reduce((a, b) => a * b, 1);
  let xc = Tensor.fromArray(cpu, rnd(numel(xShape), 1), xShape, 'f64');
  if (channelsLast) {
    const r = xShape.length;
    const p = xc.permute([0, ...Array.from({ length: r - 2 }, (_, i) => i + 2), 1]).contiguous();
    xc = p.permute([0, r - 1, ...Array.from({ length: r - 2 }, (_, i) => i + 1)]);
  }
  const wc = Tensor.fromArray(cpu, rnd(numel(wShape), 2), wShape, 'f64');
  const groups = (attrs.groups as number | undefined) ?? 1;
  const outC = transposed ? wShape[1]! * groups : wShape[0]!;
  const bc = withBias ? Tensor.fromArray(cpu, rnd(outC, 3), [outC], 'f64') : null;
  const want = callOp(act === 'none' ? op : 'conv2d_act', [xc, wc, bc], act === 'none' ? attrs : { ...attrs, activation: act })[0]!;
  // the same call through ConvKernels on the fake device: f32 tensors laid out as the CPU ones (same strides, offset 0)
  const f = fake();
  const conv = new ConvKernels(f.runtime, f.cache, () => ABSENT);
  const r = xShape.length;
  const x = channelsLast ? f.t([xShape[0]!, ...xShape.slice(2), xShape[1]!], 'f32').permute([0, r - 1, ...Array.from({ length: r - 2 }, (_, i) => i + 1)]) : f.t(xShape, 'f32');
  expect(x.strides).toEqual(xc.strides);
  const yt = conv.run(nd, transposed, x, f.t(wShape, 'f32'), withBias ? f.t([outC], 'f32') : null, want.shape, { stride: 1, padding: 0, dilation: 1, groups: 1, ...attrs } as never, act);
  const l = f.cache.launches[0]!;
  expect(l.source).toContain(`#define FK_ACT ${CONV_ACTS.indexOf(act)}`);
  const y = new Float64Array(yt.storage.byteLength / 4);
  emulate(l.args as number[], hostData(xc), hostData(wc), bc ? hostData(bc) : null, y, transposed, l.grid as number[], ACT_FNS[act]);
  const got = Tensor.fromArray(cpu, gather(y, yt.shape, yt.strides), [...yt.shape], 'f64');
  const a = got.toFloat64Array();
  const e = want.toFloat64Array();
  for (let i = 0; i < e.length; i++) expect(Math.abs(a[i]! - e[i]!), `${op} element ${i}`).toBeLessThan(1e-9 * (1 + Math.abs(e[i]!)));
}

/** The whole storage of a CPU tensor as float64 (index 0 = storage element 0). */
function hostData(t: Tensor): Float64Array {
  const bytes = t.backend.read(t.storage, 0, t.storage.byteLength);
  return new Float64Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 8);
}

/** Elements of a strided view, in logical order. */
function gather(data: Float64Array, shape: readonly number[], strides: readonly number[]): Float64Array {
  const n = shape.reduce((a, b) => a * b, 1);
  const out = new Float64Array(n);
  const idx = new Array<number>(shape.length).fill(0);
  for (let i = 0; i < n; i++) {
    let off = 0;
    for (let d = 0; d < shape.length; d++) off += idx[d]! * strides[d]!;
    out[i] = data[off]!;
    for (let d = shape.length - 1; d >= 0; d--) {
      if (++idx[d]! < shape[d]!) break;
      idx[d] = 0;
    }
  }
  return out;
}

describe('fk_conv_igemm emulated on the host vs the float64 CPU conv', () => {
  it('conv2d: stride, asymmetric padding, dilation, groups, bias; more than one tile of pixels and channels', () => {
    check('conv2d', 2, [2, 4, 9, 10], [6, 2, 3, 3], true, { stride: [2, 1], padding: [1, 2], dilation: [1, 2], groups: 2 });
    check('conv2d', 2, [1, 3, 12, 12], [70, 3, 3, 3], false, { padding: 1 });
    check('conv2d', 2, [1, 4, 9, 9], [4, 4, 4, 4], false, { padding: 'same' });
  });

  it('depthwise channels-last, conv1d, conv3d, unbatched', () => {
    check('conv2d', 2, [2, 6, 7, 7], [6, 1, 3, 3], true, { stride: 2, padding: 1, groups: 6 }, true);
    check('conv1d', 1, [2, 4, 20], [6, 2, 5], true, { stride: 2, padding: 2, dilation: 2, groups: 2 });
    check('conv3d', 3, [1, 2, 4, 5, 6], [3, 2, 2, 3, 3], true, { padding: 1 });
    check('conv2d', 2, [3, 6, 6], [2, 3, 3, 3], false, {});
  });

  it('conv2d_act: the activation in the epilogue (silu / relu; bias or none; depthwise stride 2 channels-last)', () => {
    check('conv2d', 2, [2, 4, 9, 10], [6, 4, 3, 3], true, { stride: 2, padding: 1 }, false, 'silu');
    check('conv2d', 2, [1, 5, 6, 7], [70, 5, 1, 1], false, {}, false, 'silu');
    check('conv2d', 2, [2, 6, 7, 7], [6, 1, 3, 3], true, { stride: 2, padding: 1, groups: 6 }, true, 'silu');
    check('conv2d', 2, [1, 4, 8, 8], [8, 2, 3, 3], true, { padding: 1, groups: 2 }, false, 'relu');
  });

  it('conv_transpose: stride, padding, output_padding, dilation, groups', () => {
    check('conv_transpose2d', 2, [2, 4, 5, 4], [4, 3, 3, 3], true, { stride: 2, padding: 1, output_padding: 1, groups: 2 });
    check('conv_transpose1d', 1, [1, 3, 7], [3, 2, 4], false, { stride: 3, dilation: 2 });
    check('conv_transpose3d', 3, [1, 2, 3, 3, 2], [2, 2, 2, 2, 2], true, { stride: [2, 1, 2] });
  });
});
