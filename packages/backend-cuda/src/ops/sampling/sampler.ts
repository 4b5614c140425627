/**
 * The sampler on the CUDA backend (kernels/sampler.cu): Ops.sample's exact algorithm (greedy / temperature /
 * top-k / top-p / seeded exponential race over core's counterUniform), one block per row. logits [B, V] are read
 * as f32 (other float dtypes are converted, exactly for bf16/f16); temperature f32, topK i32, topP f32, seeds i64
 * (converted when given otherwise). Returns ids [B] (i64).
 * Differences from the CPU backend: a temperature that is negative or NaN samples greedily here (the CPU backend
 * throws; checking would need a host sync); float32 arithmetic may pick differently only at near-ties.
 *
 * Two paths, chosen per call by chooseSamplerPath: one 512-thread CTA per row (fk_sample), or the multi-CTA path
 * of sampler.cu (fk_ms_*): each row split over C CTAs, 8 kernels in sequence, scratch from the allocator.
 * Both draw the same tokens; the kernels cannot see how many rows draw without a host sync, so the caller's
 * SampleHint (rows with temperature > 0, known on the host) picks: multi-CTA when many rows draw, one CTA per row
 * otherwise; without a hint the tuning's sampler.unhinted decides; sampler.multiCta forces the multi-CTA path.
 */
import { Tensor, formatShape, type SampleHint } from '@fastkernels/core';
import { cudaTuning } from '../../tuning/load.js';
import type { SamplerTuning } from '../../tuning/schema.js';
import type { SpineContext } from '../launch/context.js';
import { asDType, disposeAll, ptr, rowsOf, spineKernel } from '../launch/common.js';

const THREADS = 512;

// The knobs are the tuning's sampler section (tuning/*.json, docs/tuning.md). A call without a hint (nothing known about
// its rows) takes one CTA a row: a trade, since the multi-CTA path wins for drawing rows and loses for greedy ones by its
// launches; the engine and the L1/sampler task pass the hint.

export interface SamplerPlan {
  /** CTAs per row. */
  ctas: number;
  /** Logits per CTA (a multiple of 64; the last CTA takes the rest). */
  chunk: number;
  threads: number;
}

/** Launch plan of the multi-CTA sampler: pure function of the shape and the SM count (unit-tested without a GPU). */
export function planSampler(B: number, V: number, multiprocessors: number, tuning: SamplerTuning = cudaTuning().sampler): SamplerPlan {
  const want = Math.max(1, Math.round((tuning.multiCtaCtasPerSm * multiprocessors) / Math.max(1, B)));
  const most = Math.max(1, Math.ceil(V / Math.max(64, tuning.multiCtaMinPerCta)));
  const c0 = Math.min(want, most, 65535);
  const chunk = Math.ceil(Math.ceil(V / c0) / 64) * 64;
  return { ctas: Math.ceil(V / chunk), chunk, threads: tuning.multiCtaThreads };
}

/** Scratch of the multi-CTA path, in 8-byte words: histograms (2 x 2048 per row), partials (C per row), row states (16 per row: FkRowState). */
export function samplerScratchWords(B: number, ctas: number): { hist: number; part: number; state: number; total: number } {
  const hist = B * 4096;
  const part = B * ctas;
  const state = B * 16;
  return { hist, part, state, total: hist + part + state };
}

export type SamplerPath = 'single' | 'multi' | 'greedy-split';

/**
 * Which sampler path runs a [B, V] call (pure; unit-tested without a GPU). tuning.multiCta forces 'multi' (grid y
 * limit permitting: B <= 65535). With a hint, 'multi' only when the host says at least tuning.multiCtaMinSampledRows
 * rows draw (temperature > 0), else 'single' (or the greedy split for small all-greedy calls); without one (undefined),
 * tuning.unhinted. Greedy rows inside the multi-CTA path are finished by fk_ms_hist's stage 0. V is not used yet (the threshold
 * was measured at V = 128256 only); it is in the signature for a vocabulary-dependent rule.
 */
export function chooseSamplerPath(B: number, V: number, sampledRows: number | undefined, tuning: SamplerTuning = cudaTuning().sampler): SamplerPath {
  if (B > 65535) return 'single';
  if (tuning.multiCta) return 'multi';
  if (sampledRows === undefined) return tuning.unhinted;
  if (sampledRows === 0 && B <= tuning.greedySplitMaxRows) return 'greedy-split';
  if (!(sampledRows >= tuning.multiCtaMinSampledRows)) return 'single';
  return 'multi';
}

export function sample(ctx: SpineContext, logits: Tensor, temperature: Tensor, topK: Tensor, topP: Tensor, seeds: Tensor, hint?: SampleHint): Tensor {
  const op = 'sample';
  if (logits.rank !== 2) throw new RangeError(`${op}: logits ${formatShape(logits.shape)} must be [B, V]`);
  if (logits.dtype !== 'f32' && logits.dtype !== 'bf16' && logits.dtype !== 'f16' && logits.dtype !== 'f64') throw new TypeError(`${op}: logits have dtype ${logits.dtype}; expected a float dtype`);
  const [B, V] = logits.shape as [number, number];
  for (const [name, t] of [['temperature', temperature], ['topK', topK], ['topP', topP], ['seeds', seeds]] as const) {
    if (t.numel !== B) throw new RangeError(`${op}: ${name} ${formatShape(t.shape)} must have ${B} entries (one per row)`);
  }
  if (V === 0) throw new RangeError(`${op}: logits ${formatShape(logits.shape)} have an empty vocabulary`);
  const out = Tensor.empty(logits.backend, [B], 'i64', { device: logits.device });
  if (B === 0) return out;
  const temps: Tensor[] = [];
  try {
    const l = rowsOf(logits.dtype === 'f32' ? logits : asDType(logits, 'f32', temps), temps);
    const temp = asDType(temperature, 'f32', temps);
    const k = asDType(topK, 'i32', temps);
    const p = asDType(topP, 'f32', temps);
    const s = asDType(seeds, 'i64', temps);
    const vec4 = ptr(l.t) % 16 === 0 && (B === 1 || l.rowStride % 4 === 0) ? 1 : 0;
    const path = chooseSamplerPath(B, V, hint?.sampledRows);
    if (path !== 'single') {
      multiCta(ctx, out, l.t, l.rowStride, B, V, vec4, temp, k, p, s, temps, path === 'greedy-split');
      return out;
    }
    const kern = spineKernel(ctx, 'sampler.cu', 'fk_sample', { FK_VEC4: vec4 });
    kern.launch(B, THREADS, 0, [out, l.t, l.rowStride, V, temp, k, p, s]);
    return out;
  } finally {
    disposeAll(temps);
  }
}

/**
 * The multi-CTA path: fk_ms_max, 3 x fk_ms_hist top-k (the first also sets up each row's state and writes the greedy
 * rows' tokens), 3 x fk_ms_hist top-p (each row's last CTA of a pass selects its bin, and of the last pass finds the cut
 * in a tie), fk_ms_race (each row's last CTA writes its token): 8 launches.
 * `greedyOnly` (the greedy split: the hint said no row draws): fk_ms_max and fk_ms_init, which write every greedy row's token, then
 * fk_sample built to leave greedy rows alone (FK_SKIP_GREEDY), so a row that does draw despite the hint still gets its
 * token (a wrong hint costs speed only, as Ops.sample promises); with a right hint its CTAs exit at once.
 */
function multiCta(ctx: SpineContext, out: Tensor, l: Tensor, ls: number, B: number, V: number, vec4: number, temp: Tensor, k: Tensor, p: Tensor, s: Tensor, temps: Tensor[],
                  greedyOnly = false): void {
  const plan = planSampler(B, V, ctx.multiprocessors);
  const C = plan.ctas;
  const words = samplerScratchWords(B, C);
  const scratch = Tensor.empty(out.backend, [words.total], 'i64', { device: out.device });
  temps.push(scratch);
  const hist = ptr(scratch);
  const part = hist + words.hist * 8;
  const state = part + words.part * 8;
  const defs = { FK_VEC4: vec4, FK_MT: plan.threads };
  const kn = (entry: string) => spineKernel(ctx, 'sampler.cu', entry, defs);
  const grid: [number, number] = [C, B];
  kn('fk_ms_max').launch(grid, plan.threads, 0, [l, ls, V, plan.chunk, part, hist, state]);
  if (greedyOnly) {
    kn('fk_ms_init').launch(B, 32, 0, [out, l, ls, V, C, part, state, temp, k, p]);
    spineKernel(ctx, 'sampler.cu', 'fk_sample', { FK_VEC4: vec4, FK_SKIP_GREEDY: 1 }).launch(B, THREADS, 0, [out, l, ls, V, temp, k, p, s]);
    return;
  }
  const histK = kn('fk_ms_hist');
  for (let stage = 0; stage < 6; stage++) histK.launch(grid, plan.threads, 0, [out, l, ls, V, plan.chunk, part, state, hist, temp, k, p, stage]);
  kn('fk_ms_race').launch(grid, plan.threads, 0, [out, l, ls, V, plan.chunk, state, s, part]);
}
