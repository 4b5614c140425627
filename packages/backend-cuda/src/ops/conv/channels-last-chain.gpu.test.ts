/**
 * A YOLOv10 C2f block's op chain on CUDA, f16, from a channels-last input, as the vision runner feeds it: conv + bias,
 * SiLU, split, a bottleneck (conv, SiLU, residual add), cat, a 1x1 conv. Checks that every result stays channels-last
 * (PyTorch's rule for elementwise ops, cat and convs; before, the first SiLU returned NCHW and every conv after it ran
 * cuDNN's NCHW path), that the values match the float64 CPU backend, and that the allocator's measurePoolBytes of the
 * chain is exactly what its capture takes from a graph pool. Prints the chain's eager and graph device times.
 */
import { callOp, callOp1, stridesLikeChannelsLast, type Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { G, expectClose, gpu, graphMs, medianMs, printedAfterAll, toGpu } from '../../../test/spine-helpers.js';
import { rand } from '../../../test/ops-helpers.js';

const GT = { ...G, timeout: 300_000 };

/** x [N, C, H, W] stored channels-last (x.contiguous(memory_format=torch.channels_last)). */
function channelsLast(t: Tensor): Tensor {
  const p = t.permute(0, 2, 3, 1);
  const c = p.contiguous();
  p.dispose();
  const v = c.permute(0, 3, 1, 2);
  c.dispose();
  return v;
}

interface Weights {
  w1: Tensor; b1: Tensor; // cv1: C -> 2c, 1x1
  wm: Tensor; bm: Tensor; // bottleneck conv: c -> c, 3x3
  w2: Tensor; b2: Tensor; // cv2: 3c -> C, 1x1
}

/** The chain; `seen` gets every intermediate (for the layout checks); returns the block's output. */
function c2f(x: Tensor, w: Weights, seen: Tensor[] = []): Tensor {
  const keep = <T extends Tensor>(t: T) => (seen.push(t), t);
  const y1 = keep(callOp1('conv2d', [x, w.w1, w.b1], {}));
  const a1 = keep(callOp1('silu', [y1]));
  const [lo, hi] = callOp('split', [a1], { split_size_or_sections: a1.shape[1]! / 2, dim: 1 }) as [Tensor, Tensor];
  const m = keep(callOp1('conv2d', [hi, w.wm, w.bm], { padding: 1 })); // a channel slice of a channels-last tensor
  const ma = keep(callOp1('silu', [m]));
  const r = keep(callOp1('add', [hi, ma]));
  const cat = keep(callOp1('cat', [lo, hi, r], { dim: 1 }));
  const out = callOp1('conv2d', [cat, w.w2, w.b2], {});
  for (const t of [lo, hi]) t.dispose();
  return out;
}

describe('channels-last through a C2f block on CUDA (f16)', () => {
  const lines = printedAfterAll();
  const N = 1, C = 64, H = 40, W = 40, c = 32;
  const host = {
    x: rand([N, C, H, W], 'f16', 1),
    w1: rand([2 * c, C, 1, 1], 'f16', 2, { scale: 0.1 }), b1: rand([2 * c], 'f16', 3, { scale: 0.1 }),
    wm: rand([c, c, 3, 3], 'f16', 4, { scale: 0.05 }), bm: rand([c], 'f16', 5, { scale: 0.1 }),
    w2: rand([C, 3 * c, 1, 1], 'f16', 6, { scale: 0.1 }), b2: rand([C], 'f16', 7, { scale: 0.1 }),
  };

  it('every result is channels-last and the output matches the float64 CPU chain (contiguous or channels-last weights)', GT, () => {
    for (const clWeights of [false, true]) {
      const x0 = toGpu(host.x);
      const x = channelsLast(x0);
      const dev = (t: Tensor) => {
        const g = toGpu(t);
        if (!clWeights || t.rank !== 4) return g;
        const v = channelsLast(g); // as the vision runner lays conv weights out
        g.dispose();
        return v;
      };
      const w = { w1: dev(host.w1), b1: dev(host.b1), wm: dev(host.wm), bm: dev(host.bm), w2: dev(host.w2), b2: dev(host.b2) };
      const seen: Tensor[] = [];
      const got = c2f(x, w, seen);
      const want = c2f(host.x, host);
      try {
        for (const t of [...seen, got]) expect(stridesLikeChannelsLast(t.shape, t.strides) && !t.isContiguous(), `[${t.shape}] strides [${t.strides}]`).toBe(true);
        expectClose(got, want, { atol: 2e-2, rtol: 2e-2 }, `C2f chain, ${clWeights ? 'channels-last' : 'contiguous'} weights`);
      } finally {
        for (const t of [...seen, got, want, x, x0, ...Object.values(w)]) t.dispose();
      }
    }
  });

  it("measurePoolBytes of the chain is what its capture takes; the chain's eager and graph device times", GT, () => {
    const b = gpu();
    const x0 = toGpu(host.x);
    const x = channelsLast(x0);
    const wm0 = toGpu(host.wm);
    // the 3x3 filter channels-last, as the vision runner lays it out (the 1x1 ones are both layouts)
    const w = { w1: toGpu(host.w1), b1: toGpu(host.b1), wm: channelsLast(wm0), bm: toGpu(host.bm), w2: toGpu(host.w2), b2: toGpu(host.b2) };
    wm0.dispose();
    const run = () => {
      const seen: Tensor[] = [];
      const out = c2f(x, w, seen);
      for (const t of seen) t.dispose();
      return out;
    };
    try {
      run().dispose(); // kernels compiled, plans made, the conv workspace in place
      b.synchronize();
      let out: Tensor | undefined;
      const need = b.runtime.allocator.measurePoolBytes(() => (out = run()));
      out!.dispose();
      const pool = b.runtime.createGraphPool(need);
      const g = b.runtime.capture(() => {
        out = run();
      }, { pool });
      expect(pool.peak).toBe(need);
      out!.dispose();
      g.destroy();
      pool.destroy();
      lines.push(`C2f chain 1x64x40x40 f16 channels-last: eager ${(medianMs(() => run().dispose(), 20) * 1e3).toFixed(1)} us, in a graph ${(graphMs(() => run().dispose(), 10) * 1e3).toFixed(1)} us (5 convs' worth: 3 convs, 2 SiLU, add, cat)`);
    } finally {
      for (const t of [x, x0, ...Object.values(w)]) t.dispose();
    }
  });
});
