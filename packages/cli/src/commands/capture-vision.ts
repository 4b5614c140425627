/**
 * `fastkernels capture` on a vision folder (runner 'vision': YOLOv10, ConvNeXt-V2): one batch of seeded noise images
 * (--seed) at each of --batch-sizes through the vision runner eagerly, with every registry-built module instrumented
 * (model-zoo's captureVision), written as OUT/index.json (+ values.safetensors) for `fastkernels bench --captures`.
 */
import type { Backend, DType, ModuleRegistry } from '@fastkernels/core';
import { captureVision } from '@fastkernels/model-zoo';
import type { Argv } from 'yargs';
import type { Io } from '../io.js';
import { printCaptureSummary, type CaptureCommonArgs } from './capture-common.js';
import { seedFlag } from './e2e-common.js';
import { batchSizesFlag } from './e2e-vision.js';

export interface VisionCaptureArgs extends CaptureCommonArgs {
  batchSizes?: string;
}

/** The vision folders' capture flag with its help (one batch at each size; e2e times batches of each: e2e-vision.ts). */
export function visionCaptureFlags<T>(y: Argv<T>) {
  return y.option('batch-sizes', { type: 'string', describe: 'vision folders (YOLOv10, ConvNeXt-V2): one batch of seeded noise images (--seed) at each size, comma-separated [default: 1,32]' });
}

export function runVisionCapture(argv: VisionCaptureArgs, io: Io, backend: Backend, baseline: ModuleRegistry, dtype?: DType): void {
  const batchSizes = batchSizesFlag(argv.batchSizes);
  const seed = seedFlag(argv.seed);
  const startedAt = performance.now();
  const r = captureVision({ baseline, dir: argv.model, backend, batchSizes, seed, outDir: argv.out, model: argv.model, ...(dtype ? { dtype } : {}) });
  const what = `${r.images} image${r.images === 1 ? '' : 's'} at ${r.imageSize}x${r.imageSize} (batch sizes ${batchSizes.join(', ')})`;
  printCaptureSummary(io, argv, r, { model: argv.model, workload: r.index.workload, what, startedAt });
}
