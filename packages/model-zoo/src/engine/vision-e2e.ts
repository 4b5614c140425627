/**
 * End-to-end evaluation of a vision model (runner 'vision': YOLOv10, ConvNeXt-V2): the baseline registry's model and a
 * candidate registry's (its kernels overriding tasks) run the same seeded image batches (uniform noise in [0, 1) at the
 * model's input size) through the vision runner, one model in memory at a time, at each batch size asked for.
 * Correctness, per batch size: the raw head output of its first batch (detectors [B, 4 + nc, anchors], classifiers
 * logits [B, classes]) within a tolerance of the baseline's, and, for every image, the same top-k detections (classes
 * in order, boxes within the tolerance in pixels) or the same top-5 classes, from the runner's full path (upload,
 * forward — a CUDA-graph replay where the backend has graphs — and read-back). Speed, per batch size: images/s of each
 * timed pass over the images and each batch's latency (the forward on the device, synchronised: the runner's
 * forwardInPlace), with 95% intervals, and the candidate's speedups with bootstrap intervals.
 */
import { Rng, Tensor, setCaptureBlocker, withContext, type Backend, type DType, type ModuleClass, type ModuleRegistry } from '@fastkernels/core';
import { loadVisionModel } from '../models/load-model.js';
import type { GraphRuntime } from './device-io.js';
import { estimate, ratioEstimate, type Estimate } from './pipeline-e2e.js';
import { VisionRunner, topK, type VisionResult } from './vision-runner.js';

export interface VisionE2eOptions {
  readonly dir: string;
  readonly backend: Backend;
  readonly dtype?: DType;
  /** Seed of the random weights of a folder without safetensors (the same on both sides). */
  readonly initSeed?: number;
  /** Batch sizes to run at (each gets its runner and, where graphs are, its CUDA graph). */
  readonly batchSizes: readonly number[];
  /** Images in one timed pass (run `batch` at a time, a last partial batch at its own size). */
  readonly images: number;
  /** Seed of the first image (then +1 each; default 0). */
  readonly seed?: number;
  /** Untimed passes before the timed ones (default 1; the first also captures the graphs). */
  readonly warmups?: number;
  /** Timed passes (default 3). */
  readonly repeats?: number;
  /** A head output passes when max |cand - base| <= atol + rtol * max |base| (default: f32 1e-4 / 1e-3, else 2e-2 / 2e-2). */
  readonly tolerance?: { readonly atol: number; readonly rtol: number };
  /** true: graphs where the backend has them (default); false: eager; a GraphRuntime: that one on both sides (tests). */
  readonly graphs?: boolean | GraphRuntime;
  /** The candidate set behind the candidate registry: a class marked not capturable turns graphs off on both sides. */
  readonly candidateSet?: readonly { readonly taskId: string; readonly cls: ModuleClass }[];
  readonly log?: (line: string) => void;
}

export interface VisionSideResult {
  /** One value per timed pass: images / the pass's wall seconds. */
  readonly imagesPerS: Estimate;
  /** Every timed batch's milliseconds (the forward on the device, synchronised; no upload or read-back). */
  readonly batchMs: Estimate;
}

export interface VisionBatchSizeResult {
  readonly batch: number;
  readonly baseline: VisionSideResult;
  readonly candidate: VisionSideResult;
  /** candidate / baseline images/s and baseline / candidate batch latency, each with a bootstrap 95% interval. */
  readonly speedup: { readonly imagesPerS: Estimate; readonly batchLatency: Estimate };
}

export interface VisionCorrectness {
  /** Per batch size: max |cand - base| / max |base| of its first batch's raw head output. */
  readonly headErrors: readonly number[];
  readonly maxHeadError: number;
  /** Images (over all batch sizes) whose top-k detections / top-5 classes equal the baseline's. */
  readonly topKAgree: number;
  readonly topKTotal: number;
  readonly passed: boolean;
  /** Why it failed (the first batch out of tolerance, naming its batch size and images). */
  readonly reason?: string;
}

export interface VisionE2eResult {
  readonly kind: 'detections' | 'logits';
  /** The raw head output's shape at the first batch size. */
  readonly headShape: readonly number[];
  readonly imageSize: number;
  readonly images: number;
  /** Whether the runners replayed graphs. */
  readonly usedGraphs: boolean;
  readonly bySize: readonly VisionBatchSizeResult[];
  readonly correctness: VisionCorrectness;
  /** Present when a candidate class cannot be captured: graphs were off on both sides, and why. */
  readonly graphs?: false;
  readonly graphsReason?: string;
}

/** What one side's first load leaves for the comparison, per batch size. */
interface Trace {
  readonly head: Float32Array[];
  readonly headShape: number[][];
  readonly results: VisionResult[][];
}

interface SideRun {
  readonly trace: Trace;
  readonly imageSize: number;
  readonly usedGraphs: boolean;
  /** Per batch size: each timed pass's seconds, each timed batch's milliseconds. */
  readonly passSeconds: number[][];
  readonly batchMs: number[][];
}

/** The seeded noise images of a run: `n` planar [3, S, S] images in [0, 1), image i from seed + i. */
export function visionNoiseImages(n: number, size: number, seed = 0): Float32Array[] {
  return Array.from({ length: n }, (_, i) => Float32Array.from(new Rng(seed + i).fillUniform(3 * size * size, 0, 1)));
}

function chunks<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/** One load of a side: the trace, and when `timed` the warm-up and timed passes, at every batch size. */
function runSide(registry: ModuleRegistry, o: VisionE2eOptions, graphs: boolean | GraphRuntime, timed: boolean): SideRun {
  const loaded = loadVisionModel(o.dir, { backend: o.backend, registry, ...(o.dtype ? { dtype: o.dtype } : {}), ...(o.initSeed !== undefined ? { initSeed: o.initSeed } : {}) });
  const S = loaded.model.imageSize;
  const images = visionNoiseImages(o.images, S, o.seed ?? 0);
  const trace: Trace = { head: [], headShape: [], results: [] };
  const passSeconds: number[][] = [];
  const batchMs: number[][] = [];
  let usedGraphs = false;
  try {
    for (const b of o.batchSizes) {
      const runner = new VisionRunner(loaded.model, loaded.ctx, { maxBatch: b, graphs, fuse: trace.head.length === 0 });
      usedGraphs = runner.usesGraphs;
      try {
        const batches = chunks(images, b);
        // the raw head output of the first batch, eagerly (the runner's graph copies out only what detect() gives)
        const first = batches[0]!;
        const values = new Float32Array(first.length * 3 * S * S);
        first.forEach((im, n) => values.set(im, n * im.length));
        const x = Tensor.fromArray(o.backend, values, [first.length, 3, S, S], loaded.ctx.dtype, { device: loaded.ctx.device });
        const head = withContext(loaded.ctx, () => loaded.model.forward(x));
        trace.head.push(Float32Array.from(head.toFloat64Array()));
        trace.headShape.push([...head.shape]);
        head.dispose();
        x.dispose();
        trace.results.push(batches.flatMap((batch) => runner.run(batch)));
        if (!timed) continue;
        // timed: the model's forward on the device (a graph replay where graphs are), synchronised after each batch, as
        // the vision speed suite times it; the host's upload encoding and read-back (the same code on both sides, and
        // on the GPU slower than the forward) stay out. The run() above left each batch size's buffer filled.
        const { backend, device } = loaded.ctx;
        const forward = (n: number) => {
          runner.forwardInPlace(n);
          backend.synchronize(device);
        };
        for (let w = 1; w < (o.warmups ?? 1); w++) for (const batch of batches) forward(batch.length);
        const passes: number[] = [];
        const ms: number[] = [];
        for (let k = 0; k < (o.repeats ?? 3); k++) {
          const t0 = performance.now();
          for (const batch of batches) {
            const t1 = performance.now();
            forward(batch.length);
            ms.push(performance.now() - t1);
          }
          passes.push((performance.now() - t0) / 1000);
        }
        passSeconds.push(passes);
        batchMs.push(ms);
      } finally {
        runner.dispose();
      }
    }
    return { trace, imageSize: S, usedGraphs, passSeconds, batchMs };
  } finally {
    loaded.model.dispose();
  }
}

/** max |c - b| (Infinity on NaN) and max |b|. */
function maxDiff(b: ArrayLike<number>, c: ArrayLike<number>): { diff: number; scale: number } {
  let diff = 0;
  let scale = 0;
  for (let i = 0; i < b.length; i++) {
    const d = Math.abs(c[i]! - b[i]!);
    diff = Number.isNaN(d) ? Infinity : Math.max(diff, d);
    scale = Math.max(scale, Math.abs(b[i]!));
  }
  return { diff, scale };
}

function compare(base: Trace, cand: Trace, o: VisionE2eOptions, imageSize: number): VisionCorrectness {
  const tol = o.tolerance ?? ((o.dtype ?? 'bf16') === 'f32' ? { atol: 1e-4, rtol: 1e-3 } : { atol: 2e-2, rtol: 2e-2 });
  let reason: string | undefined;
  const headErrors = o.batchSizes.map((b, k) => {
    const { diff, scale } = maxDiff(base.head[k]!, cand.head[k]!);
    if (diff > tol.atol + tol.rtol * scale) reason ??= `batch size ${b}, batch 0 (images 0-${Math.min(b, o.images) - 1}): head output max |diff| ${diff.toExponential(2)} > ${tol.atol} + ${tol.rtol} x ${scale.toPrecision(3)}`;
    return diff / Math.max(scale, Number.MIN_VALUE);
  });
  let agree = 0;
  let total = 0;
  o.batchSizes.forEach((b, k) => {
    base.results[k]!.forEach((r, i) => {
      const why = topKMismatch(r, cand.results[k]![i]!, tol, imageSize);
      total++;
      if (!why) agree++;
      else reason ??= `batch size ${b}, batch ${Math.floor(i / b)} (image ${i}): ${why}`;
    });
  });
  return { headErrors, maxHeadError: Math.max(0, ...headErrors), topKAgree: agree, topKTotal: total, passed: reason === undefined, ...(reason ? { reason } : {}) };
}

/** Why one image's result differs from the baseline's (top-k detections: classes in order and boxes; logits: top-5). */
function topKMismatch(b: VisionResult, c: VisionResult, tol: { atol: number; rtol: number }, imageSize: number): string | undefined {
  if (b.kind === 'detections' && c.kind === 'detections') {
    const at = b.classes.findIndex((v, i) => v !== c.classes[i]);
    if (at >= 0) return `top-k detection ${at} is class ${c.classes[at]}, the baseline's ${b.classes[at]}`;
    const { diff } = maxDiff(b.boxes, c.boxes);
    const most = (tol.atol + tol.rtol) * imageSize;
    return diff > most ? `top-k boxes max |diff| ${diff.toExponential(2)} px > ${most.toPrecision(3)} px` : undefined;
  }
  if (b.kind === 'logits' && c.kind === 'logits') {
    const k = Math.min(5, b.logits.length);
    const bi = topK(b.logits, k).map((t) => t.index);
    const ci = topK(c.logits, k).map((t) => t.index);
    return bi.every((v, i) => v === ci[i]) ? undefined : `top-${k} classes [${ci.join(', ')}], the baseline's [${bi.join(', ')}]`;
  }
  return `result kind ${c.kind}, the baseline's ${b.kind}`;
}

/** Whether `graphs` would capture on this backend. */
function wantsGraphs(graphs: boolean | GraphRuntime, backend: Backend): boolean {
  return typeof graphs === 'object' || (graphs && backend.capabilities.graphs);
}

export function visionE2e(baseline: ModuleRegistry, candidate: ModuleRegistry, o: VisionE2eOptions): VisionE2eResult {
  if (!o.batchSizes.length) throw new RangeError('visionE2e: no batch sizes');
  if (!(Number.isInteger(o.images) && o.images >= 1)) throw new RangeError(`visionE2e: images must be a positive integer, got ${o.images}`);
  const log = o.log ?? (() => {});
  // as the LLM and pipeline e2e: a candidate that cannot be recorded into a CUDA graph (a PyTorch worker's) turns the
  // graphs off on both sides, so the comparison stays like with like (a replay would not call it)
  const requested = o.graphs ?? true;
  const graphsReason = wantsGraphs(requested, o.backend) ? setCaptureBlocker(o.candidateSet ?? []) : undefined;
  if (graphsReason) log(`CUDA graphs off on both sides (every batch runs eagerly, baseline included): ${graphsReason}`);
  const graphs = graphsReason ? false : requested;
  // baseline, candidate, baseline again: the timed baseline is the second load, so neither timed side is the process's
  // first model (JIT and allocator warm-up make a first load's passes slower than an identical later one's)
  log(`baseline (outputs): ${o.images} image${o.images === 1 ? '' : 's'} at batch sizes ${o.batchSizes.join(', ')}`);
  const traced = runSide(baseline, o, graphs, false);
  log(`candidate: ${o.warmups ?? 1} warm-up and ${o.repeats ?? 3} timed passes per batch size`);
  const cand = runSide(candidate, o, graphs, true);
  log('baseline (timed)');
  const base = runSide(baseline, o, graphs, true);
  const imageSize = traced.imageSize;
  const rate = (s: SideRun, k: number) => s.passSeconds[k]!.map((t) => o.images / t);
  const side = (s: SideRun, k: number): VisionSideResult => ({ imagesPerS: estimate(rate(s, k)), batchMs: estimate(s.batchMs[k]!) });
  const head = traced.trace.headShape[0]!;
  return {
    kind: traced.trace.results[0]![0]!.kind,
    headShape: head,
    imageSize,
    images: o.images,
    usedGraphs: cand.usedGraphs,
    bySize: o.batchSizes.map((batch, k) => ({
      batch,
      baseline: side(base, k),
      candidate: side(cand, k),
      speedup: { imagesPerS: ratioEstimate(rate(cand, k), rate(base, k)), batchLatency: ratioEstimate(base.batchMs[k]!, cand.batchMs[k]!) },
    })),
    correctness: compare(traced.trace, cand.trace, o, imageSize),
    ...(graphsReason ? { graphs: false as const, graphsReason } : {}),
  };
}
