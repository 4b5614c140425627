/**
 * Ops.prefetchWeight (kernels/prefetch.cu, spine/prefetch.ts) as the attention layer uses it at bs-1 decode: a
 * projection, the prefetch of the next projection's weight, small kernels, the join, the next projection. Every mode
 * must give the bits of the same ops without it, eagerly and replayed from a captured graph (with PDL launches, as the
 * decode graphs are captured), and the fork must rejoin the op stream inside the capture.
 */
import { Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { G, gpu, randCpu, toGpu, withTuning } from '../../test/spine-helpers.js';
import { LINEAR_TUNING } from './linear.js';
import { PREFETCH_TUNING, type PrefetchMode } from './prefetch.js';

describe('prefetchWeight: a hint that changes no result', () => {
  it('qkv-like linear, prefetch of o, rms_norm, join, o linear: the bits without the prefetch, eager and in a graph', G, () => {
    const b = gpu();
    const [H, N] = [4096, 4096];
    const x = toGpu(randCpu([1, H], 'bf16', 1));
    const wa = toGpu(randCpu([N, H], 'bf16', 2, 0.02));
    const wo = toGpu(randCpu([H, N], 'bf16', 3, 0.02));
    const nw = toGpu(randCpu([N], 'bf16', 4));
    const out = Tensor.empty(b, [1, H], 'bf16');
    const step = () => {
      const y = b.ops.linear(x, wa, null);
      const ready = b.ops.prefetchWeight(wo, 1);
      const n = b.ops.rmsNorm(y, nw, 1e-5);
      ready?.();
      const o = b.ops.linear(n, wo, null);
      out.copy_(o);
      for (const t of [y, n, o]) t.dispose();
      return ready;
    };
    const bits = () => Array.from(out.toFloat64Array());
    const results: Partial<Record<PrefetchMode, { eager: number[]; graph: number[]; joined: boolean }>> = {};
    withTuning(LINEAR_TUNING, { gemvMaxRows: 1 }, () => {
      for (const mode of ['off', 'chain', 'fork'] as const) {
        withTuning(PREFETCH_TUNING, { mode }, () => {
          out.fill_(0);
          const ready = step();
          const eager = bits();
          out.fill_(0);
          b.synchronize();
          const g = b.runtime.capture(() => void step(), { poolBytes: 64 << 20 });
          g.replay();
          b.synchronize();
          results[mode] = { eager, graph: bits(), joined: ready !== null };
          g.destroy();
        });
      }
    });
    for (const t of [x, wa, wo, nw, out]) t.dispose();
    const off = results.off!;
    expect(off.eager.some((v) => v !== 0)).toBe(true);
    expect(off.graph).toEqual(off.eager);
    for (const mode of ['chain', 'fork'] as const) {
      expect(results[mode]!.eager, `${mode} eager`).toEqual(off.eager);
      expect(results[mode]!.graph, `${mode} graph`).toEqual(off.eager);
    }
    expect([off.joined, results.chain!.joined, results.fork!.joined]).toEqual([false, false, true]);
  });

  it('does nothing where the linear would not take a GEMV (rows above gemvMaxRows)', G, () => {
    const b = gpu();
    const w = toGpu(randCpu([256, 512], 'bf16', 5));
    withTuning(LINEAR_TUNING, { gemvMaxRows: 1 }, () =>
      withTuning(PREFETCH_TUNING, { mode: 'fork' }, () => {
        expect(b.ops.prefetchWeight(w, 2)).toBeNull();
        const ready = b.ops.prefetchWeight(w, 1);
        expect(ready).not.toBeNull();
        ready!();
        ready!(); // a second call is a no-op
        b.synchronize();
      }));
    w.dispose();
  });
});
