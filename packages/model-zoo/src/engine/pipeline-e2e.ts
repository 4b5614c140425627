/**
 * End-to-end evaluation of a text-to-image pipeline (runner 'pipeline', FLUX.1): the baseline registry's pipeline and a
 * candidate registry's (its kernels overriding tasks) run the same requests (prompts, sizes, seeds) one after the other
 * (one pipeline in memory at a time). Correctness: the candidate's packed latents after every denoising step against
 * the baseline's (max |diff| over the step's max |baseline|, within a tolerance) and each final 8-bit image's PSNR
 * against the baseline's. Speed: images/s of each timed pass over the requests and each denoising step's latency, with
 * 95% intervals, and the candidate's speedups with bootstrap intervals. Warm-up passes come first (kernels compiled,
 * the transformer step's CUDA graph captured where the backend has graphs). The baseline loads twice — once for its
 * latents, once timed after the candidate — so the two timed sides are each a later load in the process.
 */
import { Rng, type Backend, type DType, type ModuleRegistry } from '@fastkernels/core';
import { loadPipelineModel } from '../models/load-pipeline.js';
import type { GraphRuntime } from './device-io.js';
import type { GeneratedImage, ImageRequest } from './pipeline-model.js';

export interface PipelineE2eOptions {
  readonly dir: string;
  readonly backend: Backend;
  readonly dtype?: DType;
  /** Seed of the random weights of components without safetensors (the same on both sides). */
  readonly initSeed?: number;
  readonly requests: readonly ImageRequest[];
  /** Untimed passes over the requests before the timed ones (default 1). */
  readonly warmups?: number;
  /** Timed passes over the requests (default 3). */
  readonly repeats?: number;
  /** A step passes when max |cand - base| <= atol + rtol * max |base| (default: f32 1e-4 / 1e-3, else 2e-2 / 2e-2). */
  readonly latentTolerance?: { readonly atol: number; readonly rtol: number };
  /** Least PSNR (dB) of a final image against the baseline's (default: f32 40, else 25). */
  readonly minPsnr?: number;
  /** The transformer step's graphs (default: where the backend has them). */
  readonly graphs?: boolean | GraphRuntime;
  readonly log?: (line: string) => void;
}

/** A mean with its 95% interval (normal approximation over the samples). */
export interface Estimate {
  readonly mean: number;
  readonly ci95: readonly [number, number];
  readonly n: number;
}

export interface PipelineSideResult {
  /** One value per timed pass: requests / the pass's wall seconds. */
  readonly imagesPerS: Estimate;
  /** Every timed denoising step's milliseconds (synchronised). */
  readonly stepMs: Estimate;
}

export interface PipelineCorrectness {
  /** [request][step]: max |cand - base| / max |base| of the packed latents after that step. */
  readonly stepErrors: readonly (readonly number[])[];
  readonly maxStepError: number;
  /** Per request: the final image's PSNR against the baseline's (Infinity where equal). */
  readonly psnr: readonly number[];
  readonly passed: boolean;
  /** Why it failed (the first step or image out of tolerance). */
  readonly reason?: string;
}

export interface PipelineE2eResult {
  readonly baseline: PipelineSideResult;
  readonly candidate: PipelineSideResult;
  /** candidate / baseline images/s and baseline / candidate step latency, each with a bootstrap 95% interval. */
  readonly speedup: { readonly imagesPerS: Estimate; readonly stepLatency: Estimate };
  readonly correctness: PipelineCorrectness;
}

/** What one side's first pass leaves for the comparison: per request, each step's latents and the image. */
interface Trace {
  readonly latents: Float64Array[][];
  readonly images: GeneratedImage[];
}

interface SideRun {
  readonly trace: Trace;
  readonly passSeconds: number[];
  readonly stepMs: number[];
}

export function estimate(values: readonly number[]): Estimate {
  const n = values.length;
  const mean = values.reduce((a, b) => a + b, 0) / Math.max(1, n);
  const sd = n > 1 ? Math.sqrt(values.reduce((a, v) => a + (v - mean) ** 2, 0) / (n - 1)) : 0;
  const half = (1.96 * sd) / Math.sqrt(Math.max(1, n));
  return { mean, ci95: [mean - half, mean + half], n };
}

/** The ratio of means num / den with a seeded percentile-bootstrap 95% interval (each sample set resampled on its own). */
export function ratioEstimate(num: readonly number[], den: readonly number[], resamples = 2000, seed = 1): Estimate {
  const mean = (v: readonly number[]) => v.reduce((a, b) => a + b, 0) / v.length;
  const rng = new Rng(seed);
  const draw = (v: readonly number[]) => {
    let s = 0;
    for (let i = 0; i < v.length; i++) s += v[rng.int(0, v.length)]!;
    return s / v.length;
  };
  const ratios = Array.from({ length: resamples }, () => draw(num) / draw(den)).sort((a, b) => a - b);
  return { mean: mean(num) / mean(den), ci95: [ratios[Math.floor(0.025 * resamples)]!, ratios[Math.ceil(0.975 * resamples) - 1]!], n: Math.min(num.length, den.length) };
}

/** PSNR (dB) of two 8-bit images of one size; Infinity where they are equal. */
export function psnr8(a: Uint8Array, b: Uint8Array): number {
  if (a.length !== b.length) throw new RangeError(`psnr8: ${a.length} vs ${b.length} values`);
  let se = 0;
  for (let i = 0; i < a.length; i++) se += (a[i]! - b[i]!) ** 2;
  return se === 0 ? Infinity : 10 * Math.log10((255 * 255) / (se / a.length));
}

/** One load of a side: its trace (the first pass) and, when `timed`, the warm-up and timed passes. */
function runSide(registry: ModuleRegistry, o: PipelineE2eOptions, timed: boolean): SideRun {
  const loaded = loadPipelineModel(o.dir, { backend: o.backend, registry, ...(o.dtype ? { dtype: o.dtype } : {}), ...(o.initSeed !== undefined ? { initSeed: o.initSeed } : {}) });
  const graphs = o.graphs ?? true;
  try {
    const trace: Trace = { latents: [], images: [] };
    for (const req of o.requests) {
      const steps: Float64Array[] = [];
      const r = loaded.model.generateImage({ ...req, graphs }, (_i, _n, x) => steps.push(x.toFloat64Array()));
      trace.latents.push(steps);
      trace.images.push(r.images[0]!);
    }
    if (!timed) return { trace, passSeconds: [], stepMs: [] };
    for (let w = 1; w < (o.warmups ?? 1); w++) for (const req of o.requests) loaded.model.generateImage({ ...req, graphs });
    const passSeconds: number[] = [];
    const stepMs: number[] = [];
    for (let k = 0; k < (o.repeats ?? 3); k++) {
      const t0 = performance.now();
      for (const req of o.requests) stepMs.push(...loaded.model.generateImage({ ...req, graphs }).timings.stepMs);
      passSeconds.push((performance.now() - t0) / 1000);
    }
    return { trace, passSeconds, stepMs };
  } finally {
    loaded.model.dispose();
  }
}

function compare(base: Trace, cand: Trace, o: PipelineE2eOptions): PipelineCorrectness {
  const f32 = (o.dtype ?? 'bf16') === 'f32';
  const tol = o.latentTolerance ?? (f32 ? { atol: 1e-4, rtol: 1e-3 } : { atol: 2e-2, rtol: 2e-2 });
  const minPsnr = o.minPsnr ?? (f32 ? 40 : 25);
  let reason: string | undefined;
  const stepErrors = base.latents.map((steps, r) =>
    steps.map((b, s) => {
      const c = cand.latents[r]![s]!;
      let diff = 0;
      let scale = 0;
      for (let i = 0; i < b.length; i++) {
        const d = Math.abs(c[i]! - b[i]!);
        diff = Number.isNaN(d) ? Infinity : Math.max(diff, d);
        scale = Math.max(scale, Math.abs(b[i]!));
      }
      if (diff > tol.atol + tol.rtol * scale) reason ??= `request ${r} step ${s + 1}: latents max |diff| ${diff.toExponential(2)} > ${tol.atol} + ${tol.rtol} x ${scale.toPrecision(3)}`;
      return diff / Math.max(scale, Number.MIN_VALUE);
    }),
  );
  const psnr = base.images.map((b, r) => psnr8(b.rgb, cand.images[r]!.rgb));
  psnr.forEach((p, r) => {
    if (p < minPsnr) reason ??= `request ${r}: image PSNR ${p.toFixed(1)} dB < ${minPsnr} dB`;
  });
  return { stepErrors, maxStepError: Math.max(0, ...stepErrors.flat()), psnr, passed: reason === undefined, ...(reason ? { reason } : {}) };
}

export function pipelineE2e(baseline: ModuleRegistry, candidate: ModuleRegistry, o: PipelineE2eOptions): PipelineE2eResult {
  if (!o.requests.length) throw new RangeError('pipelineE2e: no requests');
  const log = o.log ?? (() => {});
  // baseline, candidate, baseline again: the timed baseline is the second load, so neither timed side is the process's
  // first pipeline (on the CPU the first one ran 1.5x slower than an identical second one: JIT and allocator warm-up)
  log(`baseline (latents): ${o.requests.length} request${o.requests.length === 1 ? '' : 's'}`);
  const traced = runSide(baseline, o, false);
  log(`candidate: ${o.warmups ?? 1} warm-up and ${o.repeats ?? 3} timed passes`);
  const cand = runSide(candidate, o, true);
  log('baseline (timed)');
  const base = { ...runSide(baseline, o, true), trace: traced.trace };
  const rate = (s: SideRun) => s.passSeconds.map((t) => o.requests.length / t);
  return {
    baseline: { imagesPerS: estimate(rate(base)), stepMs: estimate(base.stepMs) },
    candidate: { imagesPerS: estimate(rate(cand)), stepMs: estimate(cand.stepMs) },
    speedup: { imagesPerS: ratioEstimate(rate(cand), rate(base)), stepLatency: ratioEstimate(base.stepMs, cand.stepMs) },
    correctness: compare(base.trace, cand.trace, o),
  };
}
