/**
 * The pooling kernel's logic without a GPU: fk_pool transcribed (the output walk in memory order, windows, NaN rule,
 * avg counts, adaptive windows in integer math), run on the host over the arguments ConvPools packs, against the float64
 * CPU backend. The CUDA arithmetic itself is GPU-tested (cuda-pool.gpu.test.ts).
 */
import { describe, expect, it } from 'vitest';
import { Tensor, callOp } from '@fastkernels/core';
import { CpuBackend } from '@fastkernels/backend-cpu';
import { fake } from '../../../test/ops-fake.js';
import { ConvPools } from './pool.js';
import type { PoolKind } from './pool-source.js';

const div = (a: number, b: number) => Math.trunc(a / b);

function emulate(kind: PoolKind, cl: boolean, a: number[], x: Float64Array, y: Float64Array, yi: Float64Array | null): void {
  const [N, C, D, H, W, OD, OH, OW, kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw, countPad, divisor] = a.slice(3, 25) as number[];
  const [xn, xc, xd, xh, xw, yn, yc, yd, yh, yw] = a.slice(25) as number[];
  const total = N! * C! * OD! * OH! * OW!;
  for (let i = 0; i < total; i++) {
    let r = i;
    let c: number, ow: number, oh: number, od: number, n: number;
    if (cl) {
      c = r % C!; r = div(r, C!);
      ow = r % OW!; r = div(r, OW!);
      oh = r % OH!; r = div(r, OH!);
      od = r % OD!; n = div(r, OD!);
    } else {
      ow = r % OW!; r = div(r, OW!);
      oh = r % OH!; r = div(r, OH!);
      od = r % OD!; r = div(r, OD!);
      c = r % C!; n = div(r, C!);
    }
    const xp = n * xn! + c * xc!;
    const yo = n * yn! + c * yc! + od * yd! + oh * yh! + ow * yw!;
    const adaptive = kind.startsWith('adaptive');
    const lo = (o: number, I: number, O: number) => div(o * I, O);
    const hi = (o: number, I: number, O: number) => div((o + 1) * I + O - 1, O);
    if (kind === 'max' || kind === 'adaptive_max') {
      const d0 = adaptive ? lo(od, D!, OD!) : od * sd! - pd!, h0 = adaptive ? lo(oh, H!, OH!) : oh * sh! - ph!, w0 = adaptive ? lo(ow, W!, OW!) : ow * sw! - pw!;
      const nd = adaptive ? hi(od, D!, OD!) - d0 : kd!, nh = adaptive ? hi(oh, H!, OH!) - h0 : kh!, nw = adaptive ? hi(ow, W!, OW!) - w0 : kw!;
      const ed = adaptive ? 1 : dd!, eh = adaptive ? 1 : dh!, ew = adaptive ? 1 : dw!;
      let best = -Infinity;
      let bi = -1;
      for (let p = 0; p < nd; p++) {
        const id = d0 + p * ed;
        if (id < 0 || id >= D!) continue;
        for (let q = 0; q < nh; q++) {
          const ih = h0 + q * eh;
          if (ih < 0 || ih >= H!) continue;
          for (let e = 0; e < nw; e++) {
            const iw = w0 + e * ew;
            if (iw < 0 || iw >= W!) continue;
            const v = x[xp + id * xd! + ih * xh! + iw * xw!]!;
            if (bi < 0 || v > best || (Number.isNaN(v) && !Number.isNaN(best))) {
              best = v;
              bi = (id * H! + ih) * W! + iw;
            }
          }
        }
      }
      y[yo] = best;
      if (yi) yi[yo] = bi;
    } else {
      let d0: number, h0: number, w0: number, d1: number, h1: number, w1: number, padded: number;
      if (!adaptive) {
        d0 = od * sd! - pd!; h0 = oh * sh! - ph!; w0 = ow * sw! - pw!;
        d1 = Math.min(d0 + kd!, D! + pd!); h1 = Math.min(h0 + kh!, H! + ph!); w1 = Math.min(w0 + kw!, W! + pw!);
        padded = (d1 - d0) * (h1 - h0) * (w1 - w0);
        d0 = Math.max(d0, 0); h0 = Math.max(h0, 0); w0 = Math.max(w0, 0);
        d1 = Math.min(d1, D!); h1 = Math.min(h1, H!); w1 = Math.min(w1, W!);
      } else {
        d0 = lo(od, D!, OD!); h0 = lo(oh, H!, OH!); w0 = lo(ow, W!, OW!);
        d1 = hi(od, D!, OD!); h1 = hi(oh, H!, OH!); w1 = hi(ow, W!, OW!);
        padded = (d1 - d0) * (h1 - h0) * (w1 - w0);
      }
      let s = 0;
      if (d0 < d1 && h0 < h1 && w0 < w1) {
        for (let id = d0; id < d1; id++) for (let ih = h0; ih < h1; ih++) for (let iw = w0; iw < w1; iw++) s += x[xp + id * xd! + ih * xh! + iw * xw!]!;
        s /= divisor !== 0 ? divisor! : countPad ? padded : (d1 - d0) * (h1 - h0) * (w1 - w0);
      }
      y[yo] = s;
    }
  }
}

const cpu = new CpuBackend();

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

function check(op: string, kind: PoolKind, indices: boolean, nd: 1 | 2 | 3, shape: number[], attrs: Record<string, unknown>, channelsLast = false): void {
  const n = shape.reduce((a, b) => a * b, 1);
  const data = Float64Array.from({ length: n }, (_, i) => Math.round(Math.sin(i * 2.1 + 0.3) * 40) / 8); // ties on purpose
  const r = shape.length;
  const memShape = channelsLast ? [shape[0]!, ...shape.slice(2), shape[1]!] : shape;
  const base = Tensor.fromArray(cpu, data, memShape, 'f64');
  const xc = channelsLast ? base.permute([0, r - 1, ...Array.from({ length: r - 2 }, (_, i) => i + 1)]) : base;
  const want = callOp(op, [xc], attrs);
  const f = fake();
  const pools = new ConvPools(f.cache, f.runtime);
  const xf = channelsLast ? f.t(memShape, 'f32').permute([0, r - 1, ...Array.from({ length: r - 2 }, (_, i) => i + 1)]) : f.t(shape, 'f32');
  const outs = pools.run(kind, nd, indices, xf, want[0]!.shape, attrs);
  const l = f.cache.launches[0]!;
  const y = new Float64Array(outs[0]!.storage.byteLength / 4);
  const yi = indices ? new Float64Array(outs[1]!.storage.byteLength / 8) : null;
  emulate(kind, l.source.includes('#define FK_CL 1'), l.args as number[], data, y, yi);
  const cmp = (got: Float64Array, w: Tensor, what: string) => {
    const e = w.toFloat64Array();
    for (let i = 0; i < e.length; i++) expect(Math.abs(got[i]! - e[i]!), `${op} ${what} element ${i}`).toBeLessThan(1e-9);
  };
  cmp(gather(y, outs[0]!.shape, outs[0]!.strides), want[0]!, 'out');
  if (yi) cmp(gather(yi, outs[1]!.shape, outs[1]!.strides), want[1]!, 'indices');
}

describe('fk_pool emulated on the host vs the float64 CPU pooling', () => {
  it('max: padding, dilation, ceil_mode, indices (with ties), channels-last, 1-d and 3-d', () => {
    check('max_pool2d_with_indices', 'max', true, 2, [2, 3, 9, 8], { kernel_size: 3, stride: 2, padding: 1, dilation: 2, ceil_mode: true });
    check('max_pool2d_with_indices', 'max', true, 2, [2, 5, 7, 7], { kernel_size: 3, stride: 2, padding: 1 }, true);
    check('max_pool1d_with_indices', 'max', true, 1, [2, 3, 17], { kernel_size: 4, stride: 3, padding: 2 });
    check('max_pool3d', 'max', false, 3, [1, 2, 5, 6, 7], { kernel_size: 2, stride: [1, 2, 2] });
  });

  it('avg: count_include_pad on and off, ceil_mode, divisor_override, unbatched', () => {
    check('avg_pool2d', 'avg', false, 2, [2, 3, 10, 9], { kernel_size: 3, stride: 2, padding: 1, ceil_mode: true });
    check('avg_pool2d', 'avg', false, 2, [2, 3, 10, 9], { kernel_size: 3, stride: 2, padding: 1, count_include_pad: false, ceil_mode: true });
    check('avg_pool2d', 'avg', false, 2, [1, 4, 9, 9], { kernel_size: 3, divisor_override: 5 }, true);
    check('avg_pool1d', 'avg', false, 1, [3, 20], { kernel_size: 5, stride: 2, padding: 2 });
  });

  it('adaptive avg and max (overlapping windows, null keeps a dim), 1-d to 3-d', () => {
    check('adaptive_avg_pool2d', 'adaptive_avg', false, 2, [2, 3, 7, 10], { output_size: [3, 4] });
    check('adaptive_max_pool2d_with_indices', 'adaptive_max', true, 2, [1, 3, 9, 11], { output_size: [4, null] }, true);
    check('adaptive_avg_pool1d', 'adaptive_avg', false, 1, [2, 3, 17], { output_size: 5 });
    check('adaptive_max_pool3d', 'adaptive_max', false, 3, [1, 2, 5, 6, 7], { output_size: [2, 3, 4] });
  });
});
