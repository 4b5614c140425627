/**
 * The vision runner (runner kind 'vision', growth.md §3): a batched forward at the model's fixed input size.
 *
 * - Load time: the model's fuse() (ultralytics: Conv + BN folded, RepVGGDW merged) when it has one.
 * - Each batch size gets a static input buffer [b, 3, S, S] and static outputs; a forward uploads the images into the
 *   buffer and runs the model's detect() (detectors: boxes, scores, classes after the NMS-free top-k) or forward()
 *   (classifiers: logits), its results copied into the static outputs.
 * - On a backend with CUDA graphs (device-io's GraphRuntime) that body is captured once per batch size, after one eager
 *   warm-up run (kernels compiled, lazy state made outside capture), into one graph pool all sizes share (graphs replay
 *   one at a time and copy their results out, as the decode graphs do); later batches of that size replay it. On the
 *   CPU the body runs eagerly (tests pass EmulatedGraphRuntime to run the capture / replay path).
 * - channelsLast (default on where graphs are, i.e. CUDA): the input buffer is NHWC memory viewed as NCHW, so cuDNN
 *   takes its channels-last path from the first conv on and every conv output stays channels-last (PyTorch's rule).
 *   The conv weights are laid out channels-last once, after fuse() (torch's model.to(memory_format=channels_last)):
 *   cuDNN's channels-last path takes the filter packed so, and the conv ops repacked a contiguous one every call.
 */
import { DTYPE_INFO, Tensor, UserError, withContext, type ExecutionContext } from '@fastkernels/core';
import { convWeightsToChannelsLast } from '../layers/conv.js';
import { encodeValues } from '../weights/encode.js';
import { stepIoFor, type CapturedGraph, type GraphRuntime } from './device-io.js';
import type { VisionModel } from './vision-model.js';

export interface VisionRunnerOptions {
  /** Most images in one forward (default 32); more run in several forwards, a last partial one at its own size. */
  readonly maxBatch?: number;
  /** Call the model's fuse() at construction (default true). */
  readonly fuse?: boolean;
  /** Input buffers channels-last (default: where the backend has graphs). */
  readonly channelsLast?: boolean;
  /** true: graphs where the backend has them (default); false: eager; a GraphRuntime: that one (tests). */
  readonly graphs?: boolean | GraphRuntime;
  /**
   * Graph pool bytes (default: what the warm-up's capture needs as the allocator measures it, scaled to maxBatch, with
   * 25% headroom, at least 256 MiB; twice the warm-up's live peak where the runtime cannot measure). Given here, the
   * pool is never grown: a capture that outgrows it throws a UserError.
   */
  readonly graphPoolBytes?: number;
}

/** One image's result: detections in input pixels (x1 y1 x2 y2), best first; or a classifier's logits. */
export type VisionResult =
  | { readonly kind: 'detections'; readonly boxes: Float64Array; readonly scores: Float64Array; readonly classes: Int32Array }
  | { readonly kind: 'logits'; readonly logits: Float64Array };

export interface VisionRunnerStats {
  images: number;
  forwards: number;
  graphReplays: number;
  eagerForwards: number;
  captures: number;
  /** Milliseconds in forwards (upload, run, read back), captures excluded. */
  forwardMs: number;
  captureMs: number;
}

interface Bucket {
  readonly batch: number;
  readonly input: Tensor;
  /** Storage order of the input: [b, 3, S, S] or [b, S, S, 3] (channels-last). */
  readonly base: Tensor;
  outputs: Tensor[] | null;
  graph: CapturedGraph | null;
}

export class VisionRunner {
  readonly stats: VisionRunnerStats = { images: 0, forwards: 0, graphReplays: 0, eagerForwards: 0, captures: 0, forwardMs: 0, captureMs: 0 };
  readonly maxBatch: number;
  readonly channelsLast: boolean;
  readonly imageSize: number;
  private readonly graphRt: GraphRuntime | null;
  private readonly buckets = new Map<number, Bucket>();
  private pool: unknown = null;
  /** The current pool's bytes, and the last one's (a replacement is at least twice that). */
  private poolSize = 0;
  private lastPoolSize = 0;
  private readonly io;

  constructor(
    readonly model: VisionModel,
    readonly ctx: ExecutionContext,
    private readonly options: VisionRunnerOptions = {},
  ) {
    this.maxBatch = options.maxBatch ?? 32;
    if (!Number.isInteger(this.maxBatch) || this.maxBatch < 1) throw new RangeError(`VisionRunner: maxBatch must be a positive integer, got ${this.maxBatch}`);
    this.io = stepIoFor(ctx.backend);
    this.graphRt = options.graphs === false ? null : typeof options.graphs === 'object' ? options.graphs : this.io.graphs;
    this.channelsLast = options.channelsLast ?? this.io.graphs !== null;
    this.imageSize = model.imageSize;
    if (options.fuse !== false && model.fuse) withContext(ctx, () => model.fuse!());
    if (this.channelsLast) withContext(ctx, () => convWeightsToChannelsLast(model));
  }

  /** Whether forwards replay CUDA graphs (else they run eagerly). */
  get usesGraphs(): boolean {
    return this.graphRt !== null;
  }

  /** Run every image (planar [3, S, S] values each) through the model, maxBatch at a time; one result per image. */
  run(images: readonly Float32Array[]): VisionResult[] {
    const S = this.imageSize;
    for (const [i, im] of images.entries()) if (im.length !== 3 * S * S) throw new RangeError(`VisionRunner: image ${i} has ${im.length} values, expected 3 x ${S} x ${S}`);
    const out: VisionResult[] = [];
    for (let i = 0; i < images.length; i += this.maxBatch) out.push(...this.forward(images.slice(i, i + this.maxBatch)));
    return out;
  }

  /**
   * One forward of `batch` images on whatever that batch size's input buffer holds, the results left in its static
   * outputs on the device: run()'s device work without the upload and the read-back (captured first where graphs are,
   * as run() does). What the vision speed suite times as the model's latency.
   */
  forwardInPlace(batch: number): void {
    if (!Number.isInteger(batch) || batch < 1 || batch > this.maxBatch) throw new RangeError(`VisionRunner: batch must be an integer in [1, ${this.maxBatch}], got ${batch}`);
    this.execute(this.bucket(batch));
  }

  private forward(images: readonly Float32Array[]): VisionResult[] {
    const b = images.length;
    const bucket = this.bucket(b);
    this.upload(bucket, images);
    if (this.graphRt && !bucket.graph) this.capture(bucket); // outside forwardMs
    const t0 = performance.now();
    this.execute(bucket);
    const results = this.read(bucket);
    this.stats.forwardMs += performance.now() - t0;
    this.stats.forwards++;
    this.stats.images += b;
    return results;
  }

  /** The bucket's forward: its graph replayed (captured on first use where graphs are), else the body run eagerly. */
  private execute(bucket: Bucket): void {
    if (this.graphRt && !bucket.graph) this.capture(bucket);
    if (bucket.graph) {
      bucket.graph.replay();
      this.stats.graphReplays++;
    } else {
      this.body(bucket);
      this.stats.eagerForwards++;
    }
  }

  private bucket(b: number): Bucket {
    let bucket = this.buckets.get(b);
    if (bucket) return bucket;
    const S = this.imageSize;
    const { backend, device, dtype } = this.ctx;
    const base = Tensor.empty(backend, this.channelsLast ? [b, S, S, 3] : [b, 3, S, S], dtype, { device });
    const input = this.channelsLast ? base.permute([0, 3, 1, 2]) : base;
    bucket = { batch: b, input, base, outputs: null, graph: null };
    this.buckets.set(b, bucket);
    return bucket;
  }

  /** Images into the bucket's input buffer, in its storage order, in the model dtype. */
  private upload(bucket: Bucket, images: readonly Float32Array[]): void {
    const S = this.imageSize;
    const plane = S * S;
    const values = new Float64Array(bucket.batch * 3 * plane);
    images.forEach((im, n) => {
      const at = n * 3 * plane;
      if (!this.channelsLast) for (let i = 0; i < 3 * plane; i++) values[at + i] = im[i]!;
      else for (let p = 0; p < plane; p++) for (let c = 0; c < 3; c++) values[at + p * 3 + c] = im[c * plane + p]!;
    });
    const bytes = encodeValues(values, this.ctx.dtype);
    this.io.upload(bucket.base, bytes, bytes.byteLength);
  }

  /** The forward over the bucket's input, its results copied into the bucket's static outputs (made on first use). */
  private body(bucket: Bucket): void {
    withContext(this.ctx, () => {
      const results = this.model.detect ? (({ boxes, scores, classes }) => [boxes, scores, classes])(this.model.detect(bucket.input)) : [this.model.forward(bucket.input)];
      try {
        bucket.outputs ??= results.map((t) => Tensor.empty(t.backend, t.shape, t.dtype, { device: t.device }));
        results.forEach((t, i) => bucket.outputs![i]!.copy_(t));
      } finally {
        for (const t of results) t.dispose();
      }
    });
  }

  /**
   * Warm up eagerly (static outputs made, kernels compiled, the pool's need measured), then capture the body into the
   * shared pool. A pool the capture outgrows (sized from another batch, or a runtime that cannot measure) is replaced
   * by one twice as large, every graph in it captured again on its next use; one the caller sized, or still too small
   * after that, ends in a UserError that says what to change.
   */
  private capture(bucket: Bucket): void {
    const rt = this.graphRt!;
    const t0 = performance.now();
    const need = this.warmUp(rt, bucket);
    this.ctx.backend.synchronize(this.ctx.device);
    const fixed = this.options.graphPoolBytes;
    for (let attempt = 0; ; attempt++) {
      if (!this.pool) {
        const scaled = need * (this.maxBatch / bucket.batch);
        this.poolSize = fixed ?? Math.max(Math.ceil(POOL_MARGIN * scaled), MIN_POOL_BYTES, 2 * this.lastPoolSize);
        this.pool = rt.createPool(this.poolSize);
        this.lastPoolSize = this.poolSize;
      }
      try {
        bucket.graph = rt.capture(() => this.body(bucket), this.pool);
        break;
      } catch (e) {
        if (!isPoolExhausted(e)) throw e;
        const size = this.poolSize;
        this.dropGraphs();
        if (fixed !== undefined || attempt >= MAX_POOL_GROWTHS) throw poolTooSmall(bucket.batch, size, need, fixed !== undefined, e);
      }
    }
    this.stats.captures++;
    this.stats.captureMs += performance.now() - t0;
  }

  /**
   * The eager warm-up run; returns the pool bytes its capture should take: measured by the allocator where the
   * runtime can (a capture reuses only blocks of a freed block's exact class, so the need is the sum over classes of
   * the most blocks alive at once, which can be several times the live peak in a conv net: YOLOv10n at batch 32
   * outgrew 2x its peak), else twice the live peak.
   */
  private warmUp(rt: GraphRuntime, bucket: Bucket): number {
    if (rt.measurePoolBytes) return rt.measurePoolBytes(() => this.body(bucket));
    const mem = this.io.memoryInfo();
    mem?.resetPeak();
    const before = mem?.allocatedBytes ?? 0;
    this.body(bucket);
    return mem ? 2 * Math.max(0, mem.peakBytes - before) : 0;
  }

  /** Every bucket's graph and the pool they share (the next use of each bucket captures again). */
  private dropGraphs(): void {
    for (const b of this.buckets.values()) {
      b.graph?.destroy();
      b.graph = null;
    }
    if (this.pool && this.graphRt) this.graphRt.destroyPool(this.pool);
    this.pool = null;
  }

  private read(bucket: Bucket): VisionResult[] {
    const outs = bucket.outputs!;
    const host = outs.map((t) => t.toFloat64Array());
    const b = bucket.batch;
    if (this.model.detect) {
      const [boxes, scores, classes] = host as [Float64Array, Float64Array, Float64Array];
      const K = outs[1]!.shape[1]!;
      return Array.from({ length: b }, (_, n) => ({
        kind: 'detections' as const,
        boxes: boxes.slice(n * K * 4, (n + 1) * K * 4),
        scores: scores.slice(n * K, (n + 1) * K),
        classes: Int32Array.from(classes.subarray(n * K, (n + 1) * K)),
      }));
    }
    const L = outs[0]!.shape[1]!;
    return Array.from({ length: b }, (_, n) => ({ kind: 'logits' as const, logits: host[0]!.slice(n * L, (n + 1) * L) }));
  }

  /** Bytes of the static buffers (inputs and outputs) held. */
  get staticBytes(): number {
    let n = 0;
    for (const b of this.buckets.values()) for (const t of [b.base, ...(b.outputs ?? [])]) n += t.numel * DTYPE_INFO[t.dtype].itemsize;
    return n;
  }

  /** Release graphs, the pool and every static buffer (the model stays). */
  dispose(): void {
    for (const b of this.buckets.values()) {
      b.graph?.destroy();
      if (b.input !== b.base) b.input.dispose();
      b.base.dispose();
      for (const t of b.outputs ?? []) t.dispose();
    }
    this.buckets.clear();
    if (this.pool && this.graphRt) this.graphRt.destroyPool(this.pool);
    this.pool = null;
  }
}

/** Headroom over the measured (and batch-scaled) need: other batch sizes share the pool and scale only roughly. */
const POOL_MARGIN = 1.25;
const MIN_POOL_BYTES = 256 * 2 ** 20;
/** Times a pool that a capture outgrew is doubled before giving up. */
const MAX_POOL_GROWTHS = 2;

function isPoolExhausted(e: unknown): boolean {
  return /graph pool exhausted/.test(String((e as Error)?.message ?? e));
}

function fmtMiB(bytes: number): string {
  return `${(bytes / 2 ** 20).toFixed(0)} MiB`;
}

/** The user-facing end of a pool that stays too small: what ran out and what to change. */
function poolTooSmall(batch: number, size: number, need: number, fixed: boolean, cause: unknown): UserError {
  const what = `the CUDA graph of a batch of ${batch} needs more graph pool than the ${fmtMiB(size)} ${fixed ? 'given (graphPoolBytes)' : `reserved after ${MAX_POOL_GROWTHS} doublings`}` +
    ` (warm-up measured ${fmtMiB(need)}): ${(cause as Error)?.message ?? String(cause)}`;
  const fix = fixed ? 'pass a larger graphPoolBytes to the vision runner, or leave it out to have it measured' : 'run a smaller batch, or without CUDA graphs (eagerly), and report the model and batch: the measured need should have fit';
  return new UserError(what, { fix });
}

/** Softmax of logits and the k best (index, probability), best first (ties: lower index first). */
export function topK(logits: Float64Array, k: number): { index: number; score: number }[] {
  const max = Math.max(...logits);
  const e = logits.map((v) => Math.exp(v - max));
  const sum = e.reduce((a, b) => a + b, 0);
  return [...e.keys()]
    .sort((a, b) => e[b]! - e[a]! || a - b)
    .slice(0, k)
    .map((index) => ({ index, score: e[index]! / sum }));
}
