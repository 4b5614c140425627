/**
 * `fastkernels capture` on a vision folder (runner 'vision': YOLOv10, ConvNeXt-V2): one batch of seeded noise images
 * (--seed) at each of --batch-sizes through the vision runner eagerly, with every registry-built module instrumented
 * (model-zoo's captureVision), written as OUT/index.json (+ values.safetensors) for `fastkernels bench --captures`.
 */
import type { Backend, DType, ModuleRegistry } from '@fastkernels/core';
import { captureVision } from '@fastkernels/model-zoo';
import { intFlag } from '../flags.js';
import type { Io } from '../io.js';
import { batchSizesFlag } from './e2e-vision.js';

export interface VisionCaptureArgs {
  model: string;
  out: string;
  batchSizes?: string;
  seed?: number;
  json?: boolean;
}

export function runVisionCapture(argv: VisionCaptureArgs, io: Io, backend: Backend, baseline: ModuleRegistry, dtype?: DType): void {
  const batchSizes = batchSizesFlag(argv.batchSizes);
  const seed = intFlag('seed', argv.seed ?? 0, 0, Number.MAX_SAFE_INTEGER);
  const t0 = performance.now();
  const r = captureVision({ baseline, dir: argv.model, backend, batchSizes, seed, outDir: argv.out, model: argv.model, ...(dtype ? { dtype } : {}) });
  const tasks = Object.entries(r.index.tasks);
  if (argv.json) {
    io.out(JSON.stringify({ index: r.path, model: argv.model, workload: r.index.workload, tasks: Object.fromEntries(tasks.map(([k, t]) => [k, { init: t.init.length, shapes: t.forward.length, calls: t.forward.reduce((a, f) => a + f.count, 0) }])) }, null, 2) + '\n');
    return;
  }
  io.out(`captured ${r.images} image${r.images === 1 ? '' : 's'} at ${r.imageSize}x${r.imageSize} (batch sizes ${batchSizes.join(', ')}) in ${((performance.now() - t0) / 1000).toFixed(1)} s: ${tasks.length} tasks\n`);
  for (const [id, t] of tasks) io.out(`  ${id.padEnd(30)} ${String(t.init.length).padStart(3)} init  ${String(t.forward.length).padStart(5)} shapes  ${String(t.forward.reduce((a, f) => a + f.count, 0)).padStart(7)} calls\n`);
  io.out(`wrote ${r.path}\n`);
}
