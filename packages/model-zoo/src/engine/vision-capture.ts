/**
 * `fastkernels capture` for a vision folder (runner 'vision': YOLOv10, ConvNeXt-V2): the model loaded from the
 * instrumented registry (CaptureRecorder), fused as the vision runner fuses it, seeded noise images run through the
 * runner eagerly at each batch size (a graph replay calls no forward, so only eager forwards are seen), and every
 * registry-built module's init arguments and forward shapes written as the CaptureIndex `fastkernels bench --captures`
 * reads: the L1-L3 tasks at the model's input size and each batch size.
 */
import type { Backend, CaptureIndex, DType, ModuleRegistry } from '@fastkernels/core';
import { loadVisionModel } from '../models/load-model.js';
import { CaptureRecorder } from './capture.js';
import { visionNoiseImages } from './vision-e2e.js';
import { VisionRunner } from './vision-runner.js';

export interface VisionCaptureOptions {
  readonly baseline: ModuleRegistry;
  readonly dir: string;
  readonly backend: Backend;
  readonly dtype?: DType;
  /** Seed of the random weights of a folder without safetensors. */
  readonly initSeed?: number;
  /** One batch of each size is run (graphs off). */
  readonly batchSizes: readonly number[];
  /** Seed of the first noise image (then +1 each; default 0). */
  readonly seed?: number;
  readonly outDir: string;
  /** The model's name in the index (default: the folder). */
  readonly model?: string;
}

export interface VisionCaptureResult {
  readonly path: string;
  readonly index: CaptureIndex;
  readonly images: number;
  readonly imageSize: number;
}

/** The index's workload name: `images:SxS:bs=1,8` (input size and the batch sizes run). */
export function visionWorkloadName(imageSize: number, batchSizes: readonly number[]): string {
  return `images:${imageSize}x${imageSize}:bs=${batchSizes.join(',')}`;
}

export function captureVision(o: VisionCaptureOptions): VisionCaptureResult {
  if (!o.batchSizes.length) throw new RangeError('captureVision: no batch sizes');
  const recorder = new CaptureRecorder(o.baseline);
  // random weights are calibrated at load by a forward over noise (BatchNorm statistics): not a forward to record
  recorder.paused = true;
  const loaded = loadVisionModel(o.dir, { backend: o.backend, registry: recorder.registry, ...(o.dtype ? { dtype: o.dtype } : {}), ...(o.initSeed !== undefined ? { initSeed: o.initSeed } : {}) });
  recorder.paused = false;
  const S = loaded.model.imageSize;
  let images = 0;
  try {
    o.batchSizes.forEach((b, k) => {
      const runner = new VisionRunner(loaded.model, loaded.ctx, { maxBatch: b, graphs: false, fuse: k === 0 });
      try {
        runner.run(visionNoiseImages(b, S, o.seed ?? 0));
        images += b;
      } finally {
        runner.dispose();
      }
    });
  } finally {
    loaded.model.dispose();
  }
  const model = o.model ?? o.dir;
  const workload = visionWorkloadName(S, o.batchSizes);
  const path = recorder.write(o.outDir, model, workload);
  return { path, index: recorder.index(model, workload), images, imageSize: S };
}
