/**
 * The sampler with sampler.multiCta off (fk_sample, the shipped path) and on (fk_ms_*): token for token vs
 * the CPU backend, run-to-run determinism, and timing lines `kernel-speed: sample <case> [old|new] <us> = <GB/s> (<% of copy>)`.
 */
import { Rng, Tensor } from '@fastkernels/core';
import { describe, it } from 'vitest';
import { G, graphMs, measureCopy, cpu, expectSameInts, gpu, intsCpu, toGpu, withTuning, printedAfterAll } from '../../../test/spine-helpers.js';
import type { Tuning } from '../../tuning/schema.js';
import { cudaTuning } from '../../tuning/load.js';

const withSampler = <R>(patch: Partial<Tuning['sampler']>, fn: () => R): R => withTuning('sampler', patch, fn);
const PATHS = [['old', { multiCta: false }], ['new', { multiCta: true }]] as const;

interface Row { t: number; k: number; p: number; seed: number }
type Mode = 'greedy' | 'topk' | 'topp' | 'mixed';

function rowsFor(mode: Mode, B: number, V: number, seed: number): Row[] {
  const rng = new Rng(seed);
  const ks = [-1, 0, 1, 2, 7, 40, 1000, V - 1, V, V + 3];
  const ps = [1, 0.95, 0.8, 0.5, 0.1, 0];
  return Array.from({ length: B }, (_, b) => {
    const t = 0.4 + 1.2 * rng.uniform();
    const s = b % 3 === 0 ? -rng.int(1, 2 ** 40) : rng.int(0, 2 ** 50);
    if (mode === 'greedy') return { t: 0, k: 0, p: 1, seed: s };
    if (mode === 'topk') return { t, k: ks[b % ks.length]!, p: 1, seed: s };
    if (mode === 'topp') return { t, k: 0, p: ps[b % ps.length]!, seed: s };
    return { t: b % 7 === 0 ? 0 : t, k: ks[b % ks.length]!, p: ps[Math.floor(b / ks.length) % ps.length]!, seed: s };
  });
}

function inputs(B: number, V: number, rows: Row[], seed: number, quantize = false) {
  const rng = new Rng(seed);
  const v = rng.fillNormal(B * V, 2).map((x) => (quantize ? Math.round(x * 4) / 4 : Math.fround(x)));
  return [
    Tensor.fromArray(cpu(), v, [B, V], 'f32'),
    Tensor.fromArray(cpu(), rows.map((r) => r.t), [B], 'f32'),
    intsCpu(rows.map((r) => r.k), [B], 'i32'),
    Tensor.fromArray(cpu(), rows.map((r) => r.p), [B], 'f32'),
    intsCpu(rows.map((r) => r.seed), [B], 'i64'),
  ] as const;
}

/** expectSameInts, then the drawn tokens are released (the tests below leave no device tensor to the garbage collector). */
function expectDrawn(got: Tensor, want: Tensor, label: string): void {
  try {
    expectSameInts(got, want, label);
  } finally {
    got.dispose();
  }
}
const release = (dev: readonly Tensor[]) => {
  for (const t of dev) t.dispose();
};

describe('sample, old and new (multi-CTA) paths: token for token equal to the CPU backend', () => {
  for (const V of [1000, 32000, 128256]) {
    for (const B of [1, 7, 32, 64]) {
      for (const mode of ['greedy', 'topk', 'topp', 'mixed'] as Mode[]) {
        if (V === 128256 && B === 64 && mode !== 'mixed' && mode !== 'greedy') continue; // CPU reference time
        it(`V=${V} B=${B} ${mode}`, G, () => {
          const host = inputs(B, V, rowsFor(mode, B, V, B * 7 + V), V + B);
          const want = cpu().ops.sample(...host);
          const dev = host.map(toGpu) as unknown as typeof host;
          for (const [name, patch] of PATHS) {
            const got = withSampler(patch, () => gpu().ops.sample(...dev));
            expectSameInts(got, want, `${name} V=${V} B=${B} ${mode}`);
            if (name === 'new') expectDrawn(withSampler(patch, () => gpu().ops.sample(...dev)), got, `${name} run-to-run`);
            got.dispose();
          }
          release(dev);
        });
      }
    }
  }

  it('ties (quantized logits), unaligned rows (V=1001), NaN/-inf rows, few CTAs forced (min per CTA 64)', G, () => {
    for (const [B, V, q] of [[36, 300, true], [20, 1001, false], [9, 4097, true]] as const) {
      const host = inputs(B, V, rowsFor('mixed', B, V, V), V, q);
      const want = cpu().ops.sample(...host);
      const dev = host.map(toGpu) as unknown as typeof host;
      for (const [name, patch] of [...PATHS, ['new-small-slices', { multiCta: true, multiCtaMinPerCta: 64 }] as const]) {
        expectDrawn(withSampler(patch, () => gpu().ops.sample(...dev)), want, `${name} B=${B} V=${V}`);
      }
      release(dev);
    }
    const [B, V] = [6, 128];
    const l = new Rng(7).fillNormal(B * V, 2).map((x) => Math.fround(x));
    for (let i = 0; i < V; i += 5) l[i] = NaN;
    for (let i = V; i < 2 * V; i++) l[i] = -Infinity;
    for (let i = 2 * V; i < 3 * V; i++) l[i] = NaN;
    l[3 * V + 17] = Infinity;
    for (let i = 4 * V + 3; i < 5 * V; i++) l[i] = -Infinity;
    const rows = [{ t: 1, k: 10, p: 0.9, seed: 1 }, { t: 1, k: 5, p: 0.5, seed: 3 }, { t: 1, k: 0, p: 1, seed: 4 }, { t: 1, k: 0, p: 1, seed: 5 }, { t: 1, k: 50, p: 1, seed: 7 }, { t: 0.01, k: 0, p: 0.999, seed: 10 }];
    const host = [
      Tensor.fromArray(cpu(), l, [B, V], 'f32'),
      Tensor.fromArray(cpu(), rows.map((r) => r.t), [B], 'f32'),
      intsCpu(rows.map((r) => r.k), [B], 'i32'),
      Tensor.fromArray(cpu(), rows.map((r) => r.p), [B], 'f32'),
      intsCpu(rows.map((r) => r.seed), [B], 'i64'),
    ] as const;
    const want = cpu().ops.sample(...host);
    const dev = host.map(toGpu) as unknown as typeof host;
    for (const [name, patch] of PATHS) expectDrawn(withSampler(patch, () => gpu().ops.sample(...dev)), want, `${name} special values`);
    release(dev);
  });
});

describe('the per-call choice (SampleHint, multiCta off, the route switched on at 8 drawing rows)', () => {
  it('a hint of B drawing rows (the multi-CTA path) and of 1 (one CTA per row) both draw the CPU tokens', G, () => {
    const ROUTE = { multiCta: false, multiCtaMinSampledRows: 8 };
    for (const [B, V] of [[8, 32000], [32, 4097]] as const) {
      const host = inputs(B, V, rowsFor('mixed', B, V, V + 1), V + 2);
      const want = cpu().ops.sample(...host);
      const dev = host.map(toGpu) as unknown as typeof host;
      for (const [sampledRows, path] of [[B, 'multi'], [1, 'single']] as const) {
        withSampler(ROUTE, () => {
          const took = gpu().ops.samplePath(B, V, { sampledRows });
          if (took !== path) throw new Error(`hint ${sampledRows} B=${B}: path ${took}, expected ${path}`);
          expectDrawn(gpu().ops.sample(...dev, { sampledRows }), want, `hint ${sampledRows} (${path}) B=${B} V=${V}`);
        });
      }
      release(dev);
    }
  });
});

describe('the greedy split (sampler.greedySplitMaxRows): fk_ms_max + fk_ms_init + fk_sample skipping greedy rows', () => {
  it('all-greedy rows under a hint of 0 drawing rows draw the CPU tokens; a wrong hint (rows that draw) still does', G, () => {
    for (const [B, V, mode] of [[1, 128256, 'greedy'], [4, 32000, 'greedy'], [3, 1001, 'greedy'], [4, 4097, 'mixed'], [2, 32000, 'topp']] as const) {
      const host = inputs(B, V, rowsFor(mode, B, V, V + B), V + 3 * B, mode === 'greedy' && V === 1001);
      const want = cpu().ops.sample(...host);
      const dev = host.map(toGpu) as unknown as typeof host;
      withSampler({ multiCta: false, greedySplitMaxRows: 4 }, () => {
        const took = gpu().ops.samplePath(B, V, { sampledRows: 0 });
        if (took !== 'greedy-split') throw new Error(`B=${B}: path ${took}, expected greedy-split`);
        expectDrawn(gpu().ops.sample(...dev, { sampledRows: 0 }), want, `greedy split B=${B} V=${V} ${mode}${mode === 'greedy' ? '' : ' (wrong hint)'}`);
      });
      release(dev);
    }
  });
  it('NaN / inf rows under the greedy split', G, () => {
    const [B, V] = [4, 128];
    const l = new Rng(9).fillNormal(B * V, 2).map((x) => Math.fround(x));
    for (let i = 0; i < V; i++) l[i] = NaN;
    l[V + 5] = Infinity;
    for (let i = 2 * V; i < 3 * V; i++) l[i] = -Infinity;
    const host = [
      Tensor.fromArray(cpu(), l, [B, V], 'f32'),
      Tensor.fromArray(cpu(), [0, 0, 0, 0], [B], 'f32'),
      intsCpu([0, 0, 0, 0], [B], 'i32'),
      Tensor.fromArray(cpu(), [1, 1, 1, 1], [B], 'f32'),
      intsCpu([1, 2, 3, 4], [B], 'i64'),
    ] as const;
    const want = cpu().ops.sample(...host);
    const dev = host.map(toGpu) as unknown as typeof host;
    withSampler({ multiCta: false, greedySplitMaxRows: 4 }, () => expectDrawn(gpu().ops.sample(...dev, { sampledRows: 0 }), want, 'greedy split, special values'));
    release(dev);
  });
});

describe('sampler speed, old vs new (printed, not asserted)', () => {
  const lines = printedAfterAll();
  it('B32 x 128256 mixed, B64 x 128256 greedy, B1 x 128256 mixed', G, () => {
    const b = gpu();
    const n = 64 * 1024 * 1024;
    const { ms: copyMs, gbs: copyGBs } = measureCopy(n);
    lines.push(`kernel-speed: copy ${copyMs.toFixed(3)} ms = ${copyGBs.toFixed(0)} GB/s`);
    // B 2..16 mixed: where the multi-CTA path starts to win (sampler.multiCtaMinSampledRows)
    for (const [label, B, mode] of [['B32xV128256 mixed', 32, 'mixed'], ['B64xV128256 greedy', 64, 'greedy'], ['B1xV128256 mixed', 1, 'mixed'], ['B32xV128256 topp', 32, 'topp'], ['B2xV128256 mixed', 2, 'mixed'], ['B4xV128256 mixed', 4, 'mixed'], ['B8xV128256 mixed', 8, 'mixed'], ['B16xV128256 mixed', 16, 'mixed']] as const) {
      const V = 128256;
      const rows = rowsFor(mode, B, V, 3);
      const drawing = rows.filter((r) => r.t > 0).length;
      const dev = inputs(B, V, rows, 4).map(toGpu) as unknown as ReturnType<typeof inputs>;
      const bytes = B * V * 4;
      for (const [name, patch] of PATHS) {
        // in a CUDA graph, as the engine's decode step runs it (the multi-CTA path is 8 launches: eager timing is host-bound)
        const ms = withSampler(patch, () => graphMs(() => b.ops.sample(...dev).dispose(), 4));
        const gbs = bytes / ms / 1e6;
        lines.push(`kernel-speed: sample ${label} (${drawing} drawing) [${name}] ${(ms * 1e3).toFixed(1)} us = ${gbs.toFixed(0)} GB/s (${((gbs / copyGBs) * 100).toFixed(0)}% of copy; in a CUDA graph)`);
      }
      for (const t of dev) t.dispose();
    }
    // all greedy at B 1 and 4: one CTA per row against the greedy split (the hint says no row draws)
    for (const B of [1, 4]) {
      const V = 128256;
      const dev = inputs(B, V, rowsFor('greedy', B, V, 5), 6).map(toGpu) as unknown as ReturnType<typeof inputs>;
      for (const [name, patch] of [['single', { multiCta: false, greedySplitMaxRows: 0 }], ['greedy-split', { multiCta: false, greedySplitMaxRows: 4 }]] as const) {
        const ms = withSampler(patch, () => graphMs(() => b.ops.sample(...dev, { sampledRows: 0 }).dispose(), 4));
        const gbs = (B * V * 4) / ms / 1e6;
        lines.push(`kernel-speed: sample B${B}xV${V} greedy, hint 0 drawing [${name}] ${(ms * 1e3).toFixed(1)} us = ${gbs.toFixed(0)} GB/s (${((gbs / copyGBs) * 100).toFixed(0)}% of copy; in a CUDA graph)`);
      }
      for (const t of dev) t.dispose();
    }
  });
});
